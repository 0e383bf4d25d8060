"""The Logger protocol the trainer writes to, the no-op default and an in-memory logger.

The trainer decides *when* to log (interval gating, see :class:`LogIntervals`) and on which step axis:

=========  ==================  ==================================================
scope      step axis           what
=========  ==================  ==================================================
training   env_step            statistics of each collection step
test       env_step            statistics of each test step
update     gradient_step       statistics of each gradient step (off-policy, offline) or
                               update step (on-policy), with an ``env_step`` scalar
info       epoch               counters (``env_step`` among them), best score, timing and
                               throughput at the end of an epoch
=========  ==================  ==================================================

A logger only writes what it is given. The writers (TensorBoard, CSV, W&B, MLflow, several at once)
live in their own modules; see ``docs/logging.md``.

**Resuming** (``TrainerParams.resume_from_log``): the resume point is the last ``info`` record, i.e.
the end of the last logged epoch. ``restore_counters`` returns the counters of that record and, for
loggers that can, drops the records written after it (a crash inside an epoch leaves some), so that the
resumed run continues every curve with no duplicated and no missing points. It also returns the last
step written per scope, with which the trainer continues its interval gating exactly where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol, final, runtime_checkable

from tshtrain.constraints import PositiveInt, validate_fields
from tshtrain.counters import Counters


class LogScope(StrEnum):
    """The scopes a trainer logs under (see the module docstring)."""

    TRAINING = "training"
    TEST = "test"
    UPDATE = "update"
    INFO = "info"

    @property
    def step_axis(self) -> str:
        """The counter a scope's steps count: ``env_step``, ``gradient_step`` or ``epoch``."""
        return _STEP_AXIS[self]


_STEP_AXIS = {
    LogScope.TRAINING: "env_step",
    LogScope.TEST: "env_step",
    LogScope.UPDATE: "gradient_step",
    LogScope.INFO: "epoch",
}


OFF_POLICY_LOG_INTERVAL = 10
"""N, the default ``training_interval`` (env steps) and ``update_interval`` (gradient steps) of the
off-policy and offline trainers: a default SAC-Pendulum run (3000 gradient steps to its stop score)
logs 300 points per loss. Runs of millions of steps may want 100 or 1000 (smaller files)."""


@dataclass(frozen=True, kw_only=True)
class LogIntervals:
    """Minimum distance between two logged points, per scope, on that scope's step axis.

    The first record of a scope is always written; after that a record is written when its step is at
    least the interval past the last *written* step of that scope.

    ``training_interval`` and ``update_interval`` left None take the trainer's default for its family
    (:func:`family_log_intervals`): on-policy every collection step and every update step; off-policy
    and offline every :data:`OFF_POLICY_LOG_INTERVAL` env steps and gradient steps.
    """

    training_interval: PositiveInt | None = None
    """env steps between two logged collection steps; None: the trainer's default (on-policy: 1, every
    collection step; off-policy and offline: :data:`OFF_POLICY_LOG_INTERVAL`)"""
    test_interval: PositiveInt = 1
    """env steps between two logged test steps (1: every test step)"""
    update_interval: PositiveInt | None = None
    """gradient steps between two logged gradient steps (off-policy and offline: each gradient step is a
    candidate; on-policy: each update step, at the gradient_step it ends on); None: the trainer's
    default (on-policy: 1, every update step; off-policy and offline: :data:`OFF_POLICY_LOG_INTERVAL`)"""
    info_interval: PositiveInt = 1
    """epochs between two logged info records (these are also the points a run can resume from)"""

    def __post_init__(self) -> None:
        validate_fields(self)

    def of(self, scope: LogScope) -> int | None:
        """The interval of ``scope`` (None: the trainer's default)."""
        return {
            LogScope.TRAINING: self.training_interval,
            LogScope.TEST: self.test_interval,
            LogScope.UPDATE: self.update_interval,
            LogScope.INFO: self.info_interval,
        }[scope]

    def resolved(self, defaults: LogIntervals) -> dict[LogScope, int]:
        """The interval of every scope, the ones left None taken from ``defaults``.

        Raises:
            ValueError: a scope is None here and in ``defaults``.
        """
        resolved: dict[LogScope, int] = {}
        for scope in LogScope:
            value = self.of(scope)
            value = defaults.of(scope) if value is None else value
            if value is None:
                raise ValueError(f"LogIntervals: no {scope}_interval here nor in the defaults {defaults}.")
            resolved[scope] = value
        return resolved


def family_log_intervals(on_policy: bool) -> LogIntervals:
    """The trainer's default intervals (see :class:`LogIntervals`): on-policy every collection step and
    every update step; off-policy and offline every :data:`OFF_POLICY_LOG_INTERVAL` env steps and
    gradient steps. Test and info: every test step and every epoch."""
    every = 1 if on_policy else OFF_POLICY_LOG_INTERVAL
    return LogIntervals(training_interval=every, update_interval=every)


@dataclass(frozen=True, kw_only=True)
class LogResumePoint:
    """Where a logger's own records of an earlier run end (for ``resume_from_log``): the counters of its
    last ``info`` record (the end of an epoch) and the last step it wrote per scope."""

    counters: Counters
    """the counters of the last ``info`` record (``training_step`` is not logged: 0)"""
    last_logged: Mapping[LogScope, int] = field(default_factory=dict)
    """the last step written per scope (scopes never written are absent); the trainer's interval
    gating continues from these"""

    def limit(self, scope: LogScope) -> int:
        """The last step of ``scope`` that belongs to the resume point (later records are dropped)."""
        value: int = getattr(self.counters, scope.step_axis)
        return value


def counters_from_info(step: int, data: Mapping[str, float]) -> LogResumePoint:
    """The resume point of an ``info`` record (``InfoStats.as_scalars()`` at epoch ``step``)."""

    def count(name: str) -> int:
        return round(data.get(name, 0.0))

    return LogResumePoint(
        counters=Counters(
            epoch=step,
            env_step=count("env_step"),
            gradient_step=count("gradient_step"),
            env_episode=count("train_episode"),
            update_step=count("update_step"),
            test_env_step=count("test_step"),
            test_episode=count("test_episode"),
        )
    )


@runtime_checkable
class Logger(Protocol):
    """What the trainer needs from a logger."""

    @property
    def intervals(self) -> LogIntervals:
        """How often the trainer should write each scope."""
        ...

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        """Record scalars ``data`` under ``scope`` at ``step`` (the scope's step axis)."""
        ...

    def restore_counters(self) -> LogResumePoint | None:
        """Where this logger's records of an earlier run end: its last ``info`` record (None if none).

        A logger that can also drops its records past that point (see the module docstring)."""
        ...

    def close(self) -> None:
        """Flush and release files; called once when training ends (calling it again does nothing)."""
        ...


@final
class NoOpLogger:
    """Writes nothing (the default when params.logger is None)."""

    def __init__(self, intervals: LogIntervals | None = None):
        self._intervals = intervals or LogIntervals()

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        del scope, step, data

    def restore_counters(self) -> LogResumePoint | None:
        return None

    def close(self) -> None:
        pass


@runtime_checkable
class RewindableLogger(Protocol):
    """A logger that can drop what it wrote after given steps (to resume from a checkpoint)."""

    def discard_after(self, limits: Mapping[LogScope, int]) -> None:
        """Drop the records of each scope past ``limits[scope]``; scopes not listed: all records."""
        ...


@final
class MemoryLogger:
    """Keeps every record in memory: ``records[scope]`` is a list of (step, data). Handy in tests.

    ``restore_counters`` behaves as the file writers' does: it drops records past the last info record.
    """

    def __init__(self, intervals: LogIntervals | None = None):
        self._intervals = intervals or LogIntervals(training_interval=1, update_interval=1)
        self.records: dict[LogScope, list[tuple[int, dict[str, float]]]] = {s: [] for s in LogScope}
        self.closed = False

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        self.records[scope].append((step, dict(data)))

    def discard_after(self, limits: Mapping[LogScope, int]) -> None:
        """Drop the records past ``limits[scope]`` (scopes not listed: all)."""
        for scope in LogScope:
            limit = limits.get(scope, -1)
            self.records[scope] = [(s, d) for s, d in self.records[scope] if s <= limit]

    def restore_counters(self) -> LogResumePoint | None:
        info = self.records[LogScope.INFO]
        if not info:
            self.records = {s: [] for s in LogScope}
            return None
        restored = counters_from_info(*info[-1])
        last: dict[LogScope, int] = {}
        for scope in LogScope:
            kept = [(s, d) for s, d in self.records[scope] if s <= restored.limit(scope)]
            self.records[scope] = kept
            if kept:
                last[scope] = kept[-1][0]
        return replace(restored, last_logged=last)

    def close(self) -> None:
        self.closed = True
