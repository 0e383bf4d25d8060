"""Values of a saved run state, checked as they are read (``RunState.load_state_dict``), and the
statistics records an open epoch holds, as plain values and tensors (loadable with ``weights_only``).

A value no run writes (a negative counter or time, a best score of inf or NaN) raises
:class:`BadValueError` naming the key (``run.best.score``), the value and what is allowed. A
statistics record names its class; the class must be a ``TrainingStats`` class the program has
defined (nothing named in a file is imported).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import torch

from tshtrain.algorithm.base import TrainingStats
from tshtrain.data.stats import CollectStats
from tshtrain.errors import short_repr


class BadValueError(ValueError):
    """A value of the saved run state that no run writes (its message names the key)."""


def checked_best(state: Any, fields: Collection[str]) -> dict[str, Any]:
    """The saved best result (``run.best``): a mapping of exactly ``fields`` (score, reward, reward_std,
    epoch) with finite numbers or None, and an epoch >= 0 or None."""
    if not isinstance(state, Mapping) or set(state) != set(fields):
        raise BadValueError(
            f"run.best is {short_repr(state)}; allowed: a mapping of score, reward, reward_std and epoch"
        )
    return {
        "score": checked_score(state["score"], "run.best.score"),
        "reward": checked_score(state["reward"], "run.best.reward"),
        "reward_std": checked_score(state["reward_std"], "run.best.reward_std"),
        "epoch": checked_count(state["epoch"], "run.best.epoch", optional=True),
    }


def checked_score(value: Any, key: str) -> float | None:
    """None, or a finite number (a best score of inf would never be beaten, NaN never compared)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise BadValueError(f"{key} is {short_repr(value)}; allowed: a finite number or None")
    return float(value)


def checked_seconds(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value) or value < 0:
        raise BadValueError(f"{key} is {short_repr(value)}; allowed: a finite number >= 0 (seconds)")
    return float(value)


def checked_count(value: Any, key: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadValueError(
            f"{key} is {short_repr(value)}; allowed: an int >= 0" + (" or None" if optional else "")
        )
    return value


def checked_flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise BadValueError(f"{key} is {short_repr(value)}; allowed: True or False")
    return value


def _finite(value: int | float) -> bool:
    return abs(value) < 2**63 if isinstance(value, int) else math.isfinite(value)


# ---------------------------------------------------------------------------- statistics records
def collect_stats_state(stat: CollectStats) -> dict[str, Any]:
    return {
        "n_collected_steps": stat.n_collected_steps,
        "n_collected_episodes": stat.n_collected_episodes,
        "returns": torch.from_numpy(np.array(stat.returns)),
        "lens": torch.from_numpy(np.array(stat.lens)),
        "collect_time": stat.collect_time,
        "env_info": dict(stat.env_info),
        "env_info_counts": dict(stat.env_info_counts),
    }


def restore_collect_stats(state: Mapping[str, Any]) -> CollectStats:
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


def training_stats_state(stat: TrainingStats) -> dict[str, Any]:
    return {
        "class": _class_name(type(stat)),
        "fields": {f.name: _stats_field_state(getattr(stat, f.name)) for f in fields(stat)},
    }


def _stats_field_state(value: Any) -> Any:
    """A field as plain data: records nested by name (multi-agent stats) become their states too, so
    that the checkpoint stays loadable with ``weights_only=True``."""
    if isinstance(value, Mapping) and value and all(isinstance(v, TrainingStats) for v in value.values()):
        return {_NESTED_STATS: {str(k): training_stats_state(v) for k, v in value.items()}}
    return value


def _restore_stats_field(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {_NESTED_STATS}:
        return {k: restore_training_stats(v) for k, v in value[_NESTED_STATS].items()}
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


def restore_training_stats(state: Mapping[str, Any]) -> TrainingStats:
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
