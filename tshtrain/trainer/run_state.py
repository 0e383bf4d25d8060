"""The state of a run as data: counters, best result, stop, timing, episode windows, logger position
and the open epoch, in one :class:`RunState` with ``state_dict()`` / ``load_state_dict()``.

The trainer changes it; everything else reads it (``InfoStats`` is a view of it). A load parses and
checks the whole state before it changes anything.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import torch

from tshtrain.algorithm.base import TrainingStats
from tshtrain.counters import Counters
from tshtrain.data.stats import CollectStats
from tshtrain.errors import short_repr
from tshtrain.logger.base import LogScope
from tshtrain.trainer.records import EpisodeWindow
from tshtrain.trainer.stats import InfoStats, StopReason, TimingStats


@dataclass(frozen=True, kw_only=True)
class BestResult:
    """The best test step so far."""

    score: float | None = None
    """its score (None before any test step)"""
    reward: float | None = None
    """its mean return"""
    reward_std: float | None = None
    """the std of its returns"""
    epoch: int | None = None
    """its epoch (0: the initial test step)"""


@dataclass
class OpenEpoch:
    """The epoch being run: its progress and the statistics of its training steps."""

    progress: int = 0
    """env steps (online) or training steps (offline) done in this epoch"""
    collect: list[CollectStats] = field(default_factory=list)
    """its collection steps"""
    training: list[TrainingStats] = field(default_factory=list)
    """its update records (off-policy: one per gradient step)"""


_TIMERS = ("collect", "update", "test", "train")


class RunState:
    """Everything the trainer knows about the run so far (see the module docstring)."""

    def __init__(self) -> None:
        self.counters = Counters()
        """epoch, env_step, env_episode, update_step, gradient_step, test_step, test_episode,
        training_step"""
        self.best = BestResult()
        self.done = False
        """True once training has ended (see stop_reason)"""
        self.stop_reason: StopReason | None = None
        self.stop_detail: str | None = None
        """who stopped training and why (stops by callbacks, hooks, events, ``request_stop``)"""
        self.timing = dict.fromkeys(_TIMERS, 0.0)
        """seconds in collection, update and test steps, and in training steps overall"""
        self.start_time = time.perf_counter()
        self.windows = {LogScope.TRAINING: EpisodeWindow(), LogScope.TEST: EpisodeWindow()}
        """the last finished training and test episodes (``returns_window/*`` scalars)"""
        self.last_logged: dict[LogScope, int | None] = dict.fromkeys(LogScope)
        """the last step written per log scope (interval gating continues from these)"""
        self.epoch: OpenEpoch | None = None
        """the open epoch (None between epochs)"""
        self.is_reset = False
        """True once ``reset()`` ran (or a checkpoint was loaded)"""

    def reset(self) -> None:
        """Back to the state of a run that has not started (in place: holders keep this object)."""
        vars(self).update(vars(RunState()))

    def finish(self, reason: StopReason, detail: str | None = None) -> None:
        """End training (the first reason given wins)."""
        if not self.done:
            self.done = True
            self.stop_reason = reason
            self.stop_detail = detail

    def reopen(self) -> None:
        """Undo :meth:`finish`: the run goes on (an ended run extended to a larger budget)."""
        self.done = False
        self.stop_reason = None
        self.stop_detail = None

    def info_stats(self) -> InfoStats:
        """Counters, best result and timing so far, under Tianshou's names."""
        c, t = self.counters, self.timing
        total_time = time.perf_counter() - self.start_time
        return InfoStats(
            update_step=c.update_step,
            gradient_step=c.gradient_step,
            best_score=self.best.score,
            best_reward=self.best.reward,
            best_reward_std=self.best.reward_std,
            best_epoch=self.best.epoch,
            train_step=c.env_step,
            train_episode=c.env_episode,
            test_step=c.test_step,
            test_episode=c.test_episode,
            timing=TimingStats(
                total_time=total_time,
                train_time=t["train"],
                train_time_collect=t["collect"],
                train_time_update=t["update"],
                test_time=t["test"],
                env_speed=c.env_step / total_time if total_time > 0 else 0.0,
            ),
            stop_reason=self.stop_reason,
            stop_detail=self.stop_detail,
        )

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The state as plain values and tensors."""
        epoch = self.epoch
        return {
            "counters": self.counters.state_dict(),
            "best": asdict(self.best),
            "done": self.done,
            "stop_reason": None if self.stop_reason is None else str(self.stop_reason),
            "stop_detail": self.stop_detail,
            "timing": dict(self.timing),
            "elapsed": time.perf_counter() - self.start_time,
            "last_logged": {str(k): v for k, v in self.last_logged.items()},
            "windows": {str(k): w.state_dict() for k, w in self.windows.items()},
            "epoch": None
            if epoch is None
            else {
                "progress": epoch.progress,
                "collect": [_collect_stats_state(s) for s in epoch.collect],
                "training": [_training_stats_state(s) for s in epoch.training],
            },
            "is_reset": self.is_reset,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; raises ``ValueError`` (nothing changed) for a state that does not
        parse or holds a value no run writes (a negative counter or time, a best score of inf or NaN),
        naming the key (``run.best.score``), the value and what is allowed."""
        parsed = RunState()
        try:
            parsed.counters = Counters.from_state_dict(dict(state["counters"]))
            parsed.best = _parse_best(state["best"])
            parsed.done = _flag(state["done"], "run.done")
            parsed.stop_reason = None if state["stop_reason"] is None else StopReason(state["stop_reason"])
            parsed.stop_detail = None if state["stop_detail"] is None else str(state["stop_detail"])[:10_000]
            timing = {str(k): _seconds(v, f"run.timing.{k}") for k, v in dict(state["timing"]).items()}
            if set(timing) != set(_TIMERS):
                raise ValueError(f"timers {sorted(timing)}, expected {sorted(_TIMERS)}")
            parsed.timing = timing
            parsed.start_time = time.perf_counter() - _seconds(state["elapsed"], "run.elapsed")
            parsed.last_logged.update(
                {
                    LogScope(k): _count(v, f"run.last_logged.{k}", optional=True)
                    for k, v in dict(state["last_logged"]).items()
                }
            )
            for key, window in dict(state["windows"]).items():
                parsed.windows[LogScope(key)].load_state_dict(window)
            epoch = state["epoch"]
            if epoch is not None:
                parsed.epoch = OpenEpoch(
                    progress=_count(epoch["progress"], "run.epoch.progress"),
                    collect=[_restore_collect_stats(s) for s in epoch["collect"]],
                    training=[_restore_training_stats(s) for s in epoch["training"]],
                )
            parsed.is_reset = _flag(state["is_reset"], "run.is_reset")
        except _BadValueError as error:
            raise ValueError(str(error)) from None
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"the run state does not parse: {type(error).__name__}: {error}") from None
        vars(self).update(vars(parsed))


# ---------------------------------------------------------------------------- checked values
class _BadValueError(ValueError):
    """A value of the saved run state that no run writes (its message names the key)."""


def _parse_best(state: Any) -> BestResult:
    if not isinstance(state, Mapping) or set(state) != {f.name for f in fields(BestResult)}:
        raise _BadValueError(
            f"run.best is {short_repr(state)}; allowed: a mapping of score, reward, reward_std and epoch"
        )
    return BestResult(
        score=_score(state["score"], "run.best.score"),
        reward=_score(state["reward"], "run.best.reward"),
        reward_std=_score(state["reward_std"], "run.best.reward_std"),
        epoch=_count(state["epoch"], "run.best.epoch", optional=True),
    )


def _score(value: Any, key: str) -> float | None:
    """None, or a finite number (a best score of inf would never be beaten, NaN never compared)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise _BadValueError(f"{key} is {short_repr(value)}; allowed: a finite number or None")
    return float(value)


def _seconds(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value) or value < 0:
        raise _BadValueError(f"{key} is {short_repr(value)}; allowed: a finite number >= 0 (seconds)")
    return float(value)


def _count(value: Any, key: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _BadValueError(
            f"{key} is {short_repr(value)}; allowed: an int >= 0" + (" or None" if optional else "")
        )
    return value


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise _BadValueError(f"{key} is {short_repr(value)}; allowed: True or False")
    return value


def _finite(value: int | float) -> bool:
    return abs(value) < 2**63 if isinstance(value, int) else math.isfinite(value)


# ---------------------------------------------------------------------------- statistics records
def _collect_stats_state(stat: CollectStats) -> dict[str, Any]:
    return {
        "n_collected_steps": stat.n_collected_steps,
        "n_collected_episodes": stat.n_collected_episodes,
        "returns": torch.from_numpy(np.array(stat.returns)),
        "lens": torch.from_numpy(np.array(stat.lens)),
        "collect_time": stat.collect_time,
        "env_info": dict(stat.env_info),
        "env_info_counts": dict(stat.env_info_counts),
    }


def _restore_collect_stats(state: Mapping[str, Any]) -> CollectStats:
    return CollectStats(
        n_collected_steps=int(state["n_collected_steps"]),
        n_collected_episodes=int(state["n_collected_episodes"]),
        returns=state["returns"].numpy(),
        lens=state["lens"].numpy(),
        collect_time=float(state["collect_time"]),
        env_info=dict(state["env_info"]),
        env_info_counts=dict(state["env_info_counts"]),
    )


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_NESTED_STATS = "__training_stats__"
"""marks a field holding TrainingStats records by name (a multi-agent record's ``per_learner``)"""


def _training_stats_state(stat: TrainingStats) -> dict[str, Any]:
    return {
        "class": _class_name(type(stat)),
        "fields": {f.name: _stats_field_state(getattr(stat, f.name)) for f in fields(stat)},
    }


def _stats_field_state(value: Any) -> Any:
    """A field as plain data: records nested by name (multi-agent stats) become their states too, so
    that the checkpoint stays loadable with ``weights_only=True``."""
    if isinstance(value, Mapping) and value and all(isinstance(v, TrainingStats) for v in value.values()):
        return {_NESTED_STATS: {str(k): _training_stats_state(v) for k, v in value.items()}}
    return value


def _restore_stats_field(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {_NESTED_STATS}:
        return {k: _restore_training_stats(v) for k, v in value[_NESTED_STATS].items()}
    return value


def _known_stats_classes() -> dict[str, type[TrainingStats]]:
    """Every TrainingStats class defined so far (imported by the program, never by a checkpoint)."""
    found: dict[str, type[TrainingStats]] = {}
    pending: list[type[TrainingStats]] = [TrainingStats]
    while pending:
        cls = pending.pop()
        found[_class_name(cls)] = cls
        pending.extend(cls.__subclasses__())
    return found


def _restore_training_stats(state: Mapping[str, Any]) -> TrainingStats:
    """A statistics record; its class must be one the program has defined (nothing is imported)."""
    name = str(state["class"])[:200]
    cls = _known_stats_classes().get(name)
    if cls is None:
        raise ValueError(
            f"statistics class {name!r} is not a TrainingStats class of this program; build the same "
            f"algorithm as the run that saved it"
        )
    stat: TrainingStats = cls(**{k: _restore_stats_field(v) for k, v in state["fields"].items()})
    return stat
