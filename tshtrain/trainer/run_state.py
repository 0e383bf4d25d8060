"""The state of a run as data, :class:`RunState` (counters, best result, stop, timing, episode windows,
logger position, open epoch): the trainer changes it, everything else reads it (``InfoStats`` is a view
of it); a load parses and checks the whole state before it changes anything."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tshtrain.algorithm.base import TrainingStats
from tshtrain.checkpoint.run_values import (
    BadValueError,
    checked_best,
    checked_count,
    checked_flag,
    checked_seconds,
    collect_stats_state,
    restore_collect_stats,
    restore_training_stats,
    training_stats_state,
)
from tshtrain.counters import Counters
from tshtrain.data.stats import CollectStats
from tshtrain.logger.base import LogScope
from tshtrain.logger.records import EpisodeWindow
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
        """the counters now (epoch, env_step, update_step, gradient_step, ...; :class:`Counters`)"""
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
            self.done, self.stop_reason, self.stop_detail = True, reason, detail

    def reopen(self) -> None:
        """Undo :meth:`finish`: the run goes on (an ended run extended to a larger budget)."""
        self.done, self.stop_reason, self.stop_detail = False, None, None

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
            test_step=c.test_env_step,
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
                "collect": [collect_stats_state(s) for s in epoch.collect],
                "training": [training_stats_state(s) for s in epoch.training],
            },
            "is_reset": self.is_reset,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; raises ``ValueError`` (nothing changed) for a state that does not
        parse or holds a value no run writes (a negative counter or time, a best score of inf or NaN),
        naming the key (``run.best.score``), the value and what is allowed."""
        vars(self).update(vars(self._parse(state)))

    def check_state_dict(self, state: Mapping[str, Any]) -> None:
        """Raise what :meth:`load_state_dict` would raise; changes nothing."""
        self._parse(state)

    @staticmethod
    def _parse(state: Mapping[str, Any]) -> RunState:
        parsed = RunState()
        try:
            parsed.counters = Counters.from_state_dict(dict(state["counters"]))
            parsed.best = BestResult(**checked_best(state["best"], [f.name for f in fields(BestResult)]))
            parsed.done = checked_flag(state["done"], "run.done")
            parsed.stop_reason = None if state["stop_reason"] is None else StopReason(state["stop_reason"])
            parsed.stop_detail = None if state["stop_detail"] is None else str(state["stop_detail"])[:10_000]
            timing = {str(k): checked_seconds(v, f"run.timing.{k}") for k, v in dict(state["timing"]).items()}
            if set(timing) != set(_TIMERS):
                raise ValueError(f"timers {sorted(timing)}, expected {sorted(_TIMERS)}")
            parsed.timing = timing
            parsed.start_time = time.perf_counter() - checked_seconds(state["elapsed"], "run.elapsed")
            parsed.last_logged.update(
                {
                    LogScope(k): checked_count(v, f"run.last_logged.{k}", optional=True)
                    for k, v in dict(state["last_logged"]).items()
                }
            )
            for key, window in dict(state["windows"]).items():
                parsed.windows[LogScope(key)].load_state_dict(window)
            epoch = state["epoch"]
            if epoch is not None:
                parsed.epoch = OpenEpoch(
                    progress=checked_count(epoch["progress"], "run.epoch.progress"),
                    collect=[restore_collect_stats(s) for s in epoch["collect"]],
                    training=[restore_training_stats(s) for s in epoch["training"]],
                )
            parsed.is_reset = checked_flag(state["is_reset"], "run.is_reset")
        except BadValueError as error:
            raise ValueError(str(error)) from None
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"the run state does not parse: {type(error).__name__}: {error}") from None
        return parsed
