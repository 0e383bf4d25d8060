"""The Logger protocol the trainer writes to, and the no-op default.

The trainer decides *when* to log (interval gating, see :class:`LogIntervals`) and on which step axis:

=========  ==================  ==================================================
scope      step axis           what
=========  ==================  ==================================================
training   env_step            statistics of each collection step
test       env_step            statistics of each test step
update     gradient_step       statistics of each update step (TrainingStats)
info       epoch               counters, best score, timing at the end of an epoch
=========  ==================  ==================================================

A logger only writes what it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, final, runtime_checkable

from tshtrain.errors import ConfigurationError


class LogScope(StrEnum):
    """The scopes a trainer logs under (see the module docstring)."""

    TRAINING = "training"
    TEST = "test"
    UPDATE = "update"
    INFO = "info"


@dataclass(frozen=True, kw_only=True)
class LogIntervals:
    """Minimum distance between two logged points, per scope, on that scope's step axis."""

    training_interval: int = 1000
    """env steps between two logged collection steps"""
    test_interval: int = 1
    """env steps between two logged test steps (1: every test step)"""
    update_interval: int = 1000
    """gradient steps between two logged update steps"""
    info_interval: int = 1
    """epochs between two logged info records"""

    def __post_init__(self) -> None:
        for name in ("training_interval", "test_interval", "update_interval", "info_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"LogIntervals.{name} must be an int >= 1, got {value!r}.")

    def of(self, scope: LogScope) -> int:
        """The interval of ``scope``."""
        return {
            LogScope.TRAINING: self.training_interval,
            LogScope.TEST: self.test_interval,
            LogScope.UPDATE: self.update_interval,
            LogScope.INFO: self.info_interval,
        }[scope]


@dataclass(frozen=True, kw_only=True)
class RestoredCounters:
    """Counters a logger read back from its own records (for ``resume_from_log``)."""

    epoch: int
    env_step: int
    gradient_step: int


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

    def restore_counters(self) -> RestoredCounters | None:
        """The counters of the last record this logger wrote in an earlier run (None if none)."""
        ...

    def close(self) -> None:
        """Flush and release files; called once when training ends."""
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

    def restore_counters(self) -> RestoredCounters | None:
        return None

    def close(self) -> None:
        pass


@final
class MemoryLogger:
    """Keeps every record in memory: ``records[scope]`` is a list of (step, data). Handy in tests."""

    def __init__(self, intervals: LogIntervals | None = None):
        self._intervals = intervals or LogIntervals(training_interval=1, update_interval=1)
        self.records: dict[LogScope, list[tuple[int, dict[str, float]]]] = {s: [] for s in LogScope}
        self.closed = False

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        self.records[scope].append((step, dict(data)))

    def restore_counters(self) -> RestoredCounters | None:
        info = self.records[LogScope.INFO]
        if not info:
            return None
        step, data = info[-1]
        return RestoredCounters(
            epoch=step, env_step=int(data.get("env_step", 0)), gradient_step=int(data.get("gradient_step", 0))
        )

    def close(self) -> None:
        self.closed = True
