"""What the trainer logs, and when: interval gating and the records of each scope.

======== ============== =====================================================================
scope    step axis      record
======== ============== =====================================================================
training env_step       ``CollectStats.as_scalars()`` of the collection step (counts,
                        ``collect_time``, ``collect_speed`` in env steps/s, ``returns/*`` and
                        ``lens/*`` mean/std/min/max of the episodes it finished, ``env_info/*``),
                        plus ``returns_window/*`` and ``lens_window/*`` over the last
                        :data:`EPISODE_WINDOW` training episodes
test     env_step       the same for the test step, plus ``score`` (windows over test episodes)
update   gradient_step  ``env_step`` (the env steps collected so far, to line losses up with
                        returns), ``TrainingStats.as_scalars()`` (every float field: losses,
                        entropy, KL, clip fraction, Q values, learning rates, gradient norms, ... as
                        the algorithm reports them), plus ``update_time`` (seconds of the update
                        step) and ``gradient_speed`` (its gradient steps per second). Off-policy,
                        each gradient step is its own record at its own gradient_step.
info     epoch          ``InfoStats.as_scalars()``: counters, best result, ``timing/*`` (with
                        ``timing/env_speed``, env steps per second over the run), plus
                        ``timing/epoch_env_speed`` (env steps per second of the epoch's wall time)
======== ============== =====================================================================
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

import numpy as np
import torch

from tshtrain.data.stats import CollectStats, SequenceSummaryStats
from tshtrain.errors import ConfigurationError, LoggerError
from tshtrain.logger.base import Logger, LogIntervals, LogScope

EPISODE_WINDOW = 100
"""episodes in the rolling window of the ``returns_window/*`` and ``lens_window/*`` scalars"""


class EpisodeWindow:
    """Returns and lengths of the last ``size`` finished episodes."""

    def __init__(self, size: int = EPISODE_WINDOW):
        self.size = size
        self._returns = np.zeros(0, dtype=np.float64)
        self._lens = np.zeros(0, dtype=np.float64)

    def add(self, stat: CollectStats) -> None:
        """Add the episodes a collection step finished (multi-agent returns averaged over agents)."""
        if not stat.n_collected_episodes:
            return
        returns = stat.returns if stat.returns.ndim <= 1 else stat.returns.mean(axis=-1)
        self._returns = np.concatenate([self._returns, returns])[-self.size :]
        self._lens = np.concatenate([self._lens, stat.lens.astype(np.float64)])[-self.size :]

    def state_dict(self) -> dict[str, Any]:
        """The window's episodes (for checkpoints)."""
        return {
            "returns": torch.from_numpy(self._returns.copy()),
            "lens": torch.from_numpy(self._lens.copy()),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._returns = state["returns"].numpy().copy()
        self._lens = state["lens"].numpy().copy()

    def as_scalars(self) -> dict[str, float]:
        """``returns_window/{mean,std,min,max}`` and ``lens_window/...`` (empty before any episode)."""
        if not len(self._returns):
            return {}
        return {
            **SequenceSummaryStats.from_sequence(self._returns).as_scalars("returns_window"),
            **SequenceSummaryStats.from_sequence(self._lens).as_scalars("lens_window"),
        }


class LogPositions(Protocol):
    """Where the last record of each scope was written (the run state keeps it)."""

    last_logged: dict[LogScope, int | None]


class LogGate:
    """Interval gating: which records are written, and the writing itself.

    The first record of a scope is always written; after that a record is written when its step is at
    least the scope's interval past the last *written* step of that scope (``positions.last_logged``,
    which the gate advances). The intervals are the logger's, those it leaves None taken from
    ``defaults`` (the trainer family's, :func:`~tshtrain.logger.base.family_log_intervals`).
    """

    def __init__(self, logger: Logger, positions: LogPositions, defaults: LogIntervals):
        self.logger = logger
        self._positions = positions
        self.intervals = logger.intervals.resolved(defaults)
        """the interval of every scope (the logger's, or the default)"""

    @property
    def last_logged(self) -> dict[LogScope, int | None]:
        """The last step written per scope (None: never)."""
        return self._positions.last_logged

    def due(self, scope: LogScope, step: int) -> bool:
        """Would a record of ``scope`` at ``step`` be written?"""
        last = self.last_logged[scope]
        return last is None or step - last >= self.intervals[scope]

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        """Write a record that is :meth:`due`.

        Raises:
            LoggerError: the logger failed (the original error is chained).
        """
        try:
            self.logger.write(scope, step, data)
        except LoggerError:
            raise
        except Exception as error:
            raise LoggerError(
                f"{type(self.logger).__name__} failed to write the {scope} record at {scope.step_axis} "
                f"{step}: {type(error).__name__}: {error}. Training stopped; checkpoints written so far "
                f"are intact, and the run can be resumed with resume_from_log=True."
            ) from error
        self.last_logged[scope] = step


def merge_scalar(target: dict[str, float], key: str, value: object, source: str) -> None:
    """Add one logged scalar, refusing non-numbers and names already taken."""
    if key in target:
        raise ConfigurationError(
            f"{source} logs {key!r}, which another hook or the trainer's own record already logs; rename it."
        )
    target[key] = as_float(key, value, source)


def as_float(key: str, value: object, source: str) -> float:
    """A logged value as a float (0-dim tensors and numpy scalars too); TypeError for non-numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)  # type: ignore[arg-type]  # 0-dim tensors and numpy scalars
        except (TypeError, ValueError):
            raise TypeError(f"{source} logs {key!r} = {value!r}; logged values must be numbers.") from None
    return float(value)


class ScalarSink:
    """Scalars logged into one record; a name logged again replaces the earlier value."""

    def __init__(self, progress: dict[str, float]):
        self.scalars: dict[str, float] = {}
        self._progress = progress

    def add(self, scalars: Mapping[str, float], progress: Collection[str], source: str) -> None:
        for key, value in scalars.items():
            self.scalars.pop(key, None)
            self.scalars[key] = as_float(key, value, source)
            if key in progress:
                self._progress[key] = self.scalars[key]


def mean_scalars(records: list[dict[str, float]]) -> dict[str, float]:
    """Per-name means over the records that contain each name."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for record in records:
        for key, value in record.items():
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    return {key: total / counts[key] for key, total in sums.items()}


class NoRecord:
    """The sink of points at which nothing is recorded: ``ctx.log`` there is an error, not a silent
    drop."""

    def __init__(self, point: str):
        self._point = point

    def add(self, scalars: Mapping[str, float], progress: Collection[str], source: str) -> None:
        del progress
        raise RuntimeError(
            f"{source} logs {sorted(scalars)[:5]} at {self._point}, where no record is written; log from "
            f"a training-step point (the training record), a test-step point (the test record) or inside "
            f"an update (the update record)."
        )


def update_timing(num_gradient_steps: int, seconds: float) -> dict[str, float]:
    """``update_time`` and ``gradient_speed`` (gradient steps per second) of an update step."""
    return {"update_time": seconds, "gradient_speed": num_gradient_steps / seconds if seconds > 0 else 0.0}
