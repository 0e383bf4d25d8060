"""The Logger protocol and logger implementations."""

from tshtrain.logger.base import Logger, LogIntervals, LogScope, MemoryLogger, NoOpLogger, RestoredCounters

__all__ = ["LogIntervals", "LogScope", "Logger", "MemoryLogger", "NoOpLogger", "RestoredCounters"]
