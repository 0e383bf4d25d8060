"""CsvLogger: one CSV file per scope, append-safe across runs.

``LOG_DIR/training.csv``, ``test.csv``, ``update.csv`` and ``info.csv``. The first column is the scope's
step axis (``env_step``, ``gradient_step`` or ``epoch``), then one column per scalar in the order they
first appeared; a record without some scalar leaves its cell empty.

* **Append-safe.** A second run on the same directory appends to the files. The header is read back
  from the file; when a record brings a scalar the header lacks (a new run logs more, or episodes
  finished only now), the file is rewritten once with the wider header, atomically (temporary file +
  rename), and appending goes on. A last line left incomplete by a crash is dropped when the file is
  opened.
* **Flush policy.** Rows go through Python's file buffer; every scope's file is flushed after each
  ``info`` record (the end of an epoch: the resume point), when ``flush_secs`` have passed since the
  last flush, and on ``close``. A hard kill loses at most the rows after the last flush, which lie past
  the resume point anyway.
* **Resume.** ``restore_counters`` reads the last row of ``info.csv`` and drops rows past it from the
  other files (atomic rewrite, only if there are any).
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, final

from tshtrain.atomic import atomic_write_bytes
from tshtrain.logger._files import prepare_log_dir
from tshtrain.logger.base import LogIntervals, LogResumePoint, LogScope, counters_from_info

Record = tuple[int, dict[str, float]]
"""(step, scalars) of one logged record"""


def _format(value: float) -> str:
    return repr(float(value))


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV file; empty lines are skipped."""
    with path.open(newline="", encoding="utf-8") as handle:
        lines = [line for line in csv.reader(handle) if line]
    return (lines[0], lines[1:]) if lines else ([], [])


def _read_records(path: Path) -> list[Record]:
    if not path.exists():
        return []
    columns, rows = _read_table(path)
    records: list[Record] = []
    for row in rows:
        scalars = {name: float(cell) for name, cell in zip(columns[1:], row[1:], strict=False) if cell}
        records.append((round(float(row[0])), scalars))
    return records


def _render(columns: list[str], rows: list[list[str]]) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


class _ScopeFile:
    """The CSV file of one scope: its columns, an append handle opened on first write."""

    def __init__(self, path: Path, step_axis: str):
        self.path = path
        self.step_axis = step_axis
        self.columns: list[str] = [step_axis]
        self._handle: IO[str] | None = None
        self._writer: csv.DictWriter[str] | None = None
        if path.exists():
            columns, rows = _read_table(path)
            if columns:
                if columns[0] != step_axis:
                    raise ValueError(f"{path}: the first column is {columns[0]!r}, expected {step_axis!r}.")
                self.columns = columns
            if path.stat().st_size > 0 and not _ends_with_newline(path):
                self._rewrite(rows[:-1])  # a crash cut the last line

    def _read(self) -> tuple[list[str], list[list[str]]]:
        return _read_table(self.path)

    def _rewrite(self, rows: list[list[str]]) -> None:
        self.close()
        padded = [row + [""] * (len(self.columns) - len(row)) for row in rows]
        atomic_write_bytes(self.path, _render(self.columns, padded))

    def records(self) -> list[Record]:
        """Every row as (step, scalars without empty cells)."""
        self.flush()
        return _read_records(self.path)

    def write(self, step: int, data: Mapping[str, float]) -> None:
        new = [name for name in data if name not in self.columns]
        if new:
            self.close()  # flushes the rows still buffered before the file is read back
            rows = self._read()[1] if self.path.exists() else []
            self.columns.extend(new)
            self._rewrite(rows)
        if self._writer is None:
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            self._handle = self.path.open("a", newline="", encoding="utf-8")
            self._writer = csv.DictWriter(self._handle, self.columns, lineterminator="\n")
            if fresh:
                self._writer.writeheader()
        row = {name: _format(value) for name, value in data.items()}
        row[self.step_axis] = str(step)
        self._writer.writerow(row)

    def truncate(self, limit: int) -> int | None:
        """Drop rows whose step is past ``limit``; return the last step kept (None: none)."""
        self.close()
        if not self.path.exists():
            return None
        _, rows = self._read()
        kept = [row for row in rows if row and round(float(row[0])) <= limit]
        if len(kept) != len(rows):
            self._rewrite(kept)
        return round(float(kept[-1][0])) if kept else None

    def flush(self) -> None:
        if self._handle is not None:
            self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None
        self._writer = None


@final
class CsvLogger:
    """Writes each scope to ``log_dir/<scope>.csv`` (see the module docstring)."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        intervals: LogIntervals | None = None,
        flush_secs: float = 10.0,
    ):
        """Args:
        log_dir: the directory of the CSV files (created if needed).
        intervals: how often the trainer writes each scope; None: ``LogIntervals()`` (the trainer's
            defaults for its family).
        flush_secs: flush when this many seconds have passed since the last flush (besides flushing
            after each info record and on close).

        Raises:
            ConfigurationError: ``log_dir`` cannot be created or written.
            ValueError: an existing file there is not a CsvLogger file of that scope.
        """
        if not flush_secs > 0 or math.isinf(flush_secs):
            raise ValueError(f"CsvLogger.flush_secs must be a finite number > 0, got {flush_secs!r}.")
        self.log_dir = prepare_log_dir(log_dir, "CsvLogger")
        self._intervals = intervals or LogIntervals()
        self._flush_secs = flush_secs
        self._last_flush = time.monotonic()
        self._files = {
            scope: _ScopeFile(self.log_dir / f"{scope}.csv", scope.step_axis) for scope in LogScope
        }

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        self._files[scope].write(step, data)
        if scope is LogScope.INFO or time.monotonic() - self._last_flush >= self._flush_secs:
            self.flush()

    def flush(self) -> None:
        """Flush every scope's file."""
        for file in self._files.values():
            file.flush()
        self._last_flush = time.monotonic()

    def restore_counters(self) -> LogResumePoint | None:
        info = self._files[LogScope.INFO].records()
        restored = counters_from_info(*max(info, key=lambda r: r[0])) if info else None
        last: dict[LogScope, int] = {}
        for scope, file in self._files.items():
            kept = file.truncate(restored.limit(scope) if restored is not None else -1)
            if kept is not None:
                last[scope] = kept
        if restored is None:
            return None
        return replace(restored, last_logged=last)

    def discard_after(self, limits: Mapping[LogScope, int]) -> None:
        """Drop the records past ``limits[scope]`` (scopes not listed: all records); used when a run
        resumes from a checkpoint, so that curves continue without duplicated points."""
        for scope, file in self._files.items():
            file.truncate(limits.get(scope, -1))

    def close(self) -> None:
        for file in self._files.values():
            file.close()

    def records(self, scope: LogScope) -> list[Record]:
        """What the files hold for ``scope`` (flushes first)."""
        return self._files[scope].records()


def read_csv_log(log_dir: str | os.PathLike[str]) -> dict[LogScope, list[Record]]:
    """The records of a CsvLogger directory, per scope (scopes without a file: empty lists)."""
    return {scope: _read_records(Path(log_dir) / f"{scope}.csv") for scope in LogScope}
