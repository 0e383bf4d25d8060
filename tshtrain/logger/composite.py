"""CompositeLogger: several writers at once (e.g. CSV + TensorBoard + W&B)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import final

from tshtrain.errors import ConfigurationError, LoggerError
from tshtrain.logger.base import (
    Logger,
    LogIntervals,
    LogResumePoint,
    LogScope,
    RewindableLogger,
)

log = logging.getLogger(__name__)


def _name(logger: Logger) -> str:
    return type(logger).__name__


@final
class CompositeLogger:
    """Hands every record to each of its writers.

    * **Intervals.** The trainer gates records with the composite's intervals: ``intervals`` if given,
      else the writers' own, which must then be equal.
    * **Failures.** If a writer fails, the composite closes every writer (best effort, so that the
      others' files are complete up to this record) and raises :class:`LoggerError` naming the writer.
    * **Resume.** ``restore_counters`` asks every writer; those that keep no records return None and are
      ignored; the others must agree, else ``ConfigurationError`` says which writers disagree (one of
      their directories is from another run, or a hard kill cut one short: remove it and resume).
    """

    def __init__(self, loggers: Sequence[Logger], *, intervals: LogIntervals | None = None):
        """Args:
        loggers: the writers, in the order they are written to.
        intervals: the intervals for all writers; None: the writers' own (they must agree).

        Raises:
            ConfigurationError: no writers, a writer that is not a Logger, or differing intervals.
        """
        if not loggers:
            raise ConfigurationError("CompositeLogger needs at least one logger, got none.")
        for logger in loggers:
            if not isinstance(logger, Logger):
                raise ConfigurationError(
                    f"CompositeLogger: {type(logger).__name__} does not implement tshtrain.logger.Logger "
                    f"(intervals, write, restore_counters, close)."
                )
        if intervals is None:
            differing = {_name(lg): lg.intervals for lg in loggers if lg.intervals != loggers[0].intervals}
            if differing:
                raise ConfigurationError(
                    f"CompositeLogger: the loggers' intervals differ ({_name(loggers[0])}: "
                    f"{loggers[0].intervals}, {differing}); give the same intervals to every logger or "
                    f"pass intervals=... to the CompositeLogger."
                )
            intervals = loggers[0].intervals
        self.loggers = tuple(loggers)
        self._intervals = intervals

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        for logger in self.loggers:
            try:
                logger.write(scope, step, data)
            except Exception as error:
                self._close_quietly()
                raise LoggerError(
                    f"CompositeLogger: {_name(logger)} failed to write the {scope} record at step {step}: "
                    f"{type(error).__name__}: {error}. All loggers were closed."
                ) from error

    def restore_counters(self) -> LogResumePoint | None:
        found = [(lg, counters) for lg in self.loggers if (counters := lg.restore_counters()) is not None]
        if not found:
            return None
        first_logger, first = found[0]
        for logger, counters in found[1:]:
            if _position(counters) != _position(first):
                raise ConfigurationError(
                    f"CompositeLogger: cannot resume, the loggers' records end at different points: "
                    f"{_name(first_logger)} at {_position(first)}, {_name(logger)} at "
                    f"{_position(counters)}. Remove the log directory of the one you do not trust, or "
                    f"resume with a single logger."
                )
        return first

    def discard_after(self, limits: Mapping[LogScope, int]) -> None:
        """Forward to every writer that can discard records (see :class:`RewindableLogger`)."""
        for logger in self.loggers:
            if isinstance(logger, RewindableLogger):
                logger.discard_after(limits)

    def close(self) -> None:
        """Close every writer; if some fail, raise the first failure after all were tried."""
        errors: list[tuple[Logger, Exception]] = []
        for logger in self.loggers:
            try:
                logger.close()
            except Exception as error:
                errors.append((logger, error))
        if errors:
            failed, first_error = errors[0]
            raise LoggerError(
                f"CompositeLogger: {_name(failed)} failed to close: {first_error}"
            ) from first_error

    def _close_quietly(self) -> None:
        for logger in self.loggers:
            try:
                logger.close()
            except Exception:
                log.exception("CompositeLogger: %s failed to close", _name(logger))


def _position(point: LogResumePoint) -> tuple[int, int, int]:
    c = point.counters
    return c.epoch, c.env_step, c.gradient_step
