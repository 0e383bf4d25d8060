"""TensorboardLogger: real TensorBoard event files, written with ``torch.utils.tensorboard``.

Every scalar becomes the tag ``<scope>/<name>`` (e.g. ``test/returns/mean``, ``update/loss``,
``info/timing/total_time``) at the scope's step (env_step, gradient_step or epoch). TensorFlow is not
needed: ``torch.utils.tensorboard.SummaryWriter`` writes the files and the ``tensorboard`` package
reads them back.

* **Flush policy.** SummaryWriter queues events and writes them from a background thread when
  ``max_queue`` events are pending or every ``flush_secs`` seconds. On top of that this logger flushes
  after each ``info`` record (the end of an epoch, the resume point) and on ``close``. A hard kill loses
  at most the events after the last flush, which lie past the resume point anyway.
* **Hyperparameters.** ``hparams={...}`` (flat: see :func:`~tshtrain.logger.hparams.flatten_hparams`)
  are written once, when the logger is created, as the hparams plugin's experiment and session
  summaries in the same event files, so TensorBoard's HPARAMS tab lists the run with its values and the
  metrics :data:`~tshtrain.logger.hparams.HPARAM_METRICS`. :func:`read_tensorboard_hparams` reads them
  back.
* **Resume.** ``restore_counters`` reads the event files with tensorboard's ``EventAccumulator``, takes
  the counters of the last ``info`` record, and rewrites (atomically, file by file) any event file that
  holds scalars past that point without them, so that TensorBoard shows each curve once. New events go
  to a new event file in the same directory.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import final

from tshtrain.atomic import atomic_write_bytes
from tshtrain.logger._files import prepare_log_dir
from tshtrain.logger.base import LogIntervals, LogResumePoint, LogScope, counters_from_info
from tshtrain.logger.hparams import HPARAM_METRICS, HParamValue

Record = tuple[int, dict[str, float]]
"""(step, scalars) of one logged record"""


_SCOPE_NAMES = frozenset(scope.value for scope in LogScope)


def _event_files(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.iterdir() if p.is_file() and "tfevents" in p.name)


def read_tensorboard_scalars(log_dir: str | os.PathLike[str]) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag in the event files directly in ``log_dir``: (step, value) pairs sorted by step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})  # 0: keep every point
    accumulator.Reload()
    return {
        tag: sorted((int(event.step), float(event.value)) for event in accumulator.Scalars(tag))
        for tag in accumulator.Tags()["scalars"]
    }


def read_tensorboard_hparams(log_dir: str | os.PathLike[str]) -> dict[str, HParamValue]:
    """The hyperparameters of the event files directly in ``log_dir`` (empty if none were written), read
    as TensorBoard's hparams plugin reads them: the session-start summary's values."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    try:
        content = accumulator.PluginTagToContent(metadata.PLUGIN_NAME)
    except KeyError:  # no hparams plugin data in these files
        return {}
    found: dict[str, HParamValue] = {}
    for tag, raw in content.items():
        if tag != metadata.SESSION_START_INFO_TAG:
            continue
        for name, value in metadata.parse_session_start_info_plugin_data(raw).hparams.items():
            kind = value.WhichOneof("kind")
            found[name] = value.number_value if kind == "number_value" else getattr(value, kind)
    return found


def read_tensorboard_log(log_dir: str | os.PathLike[str]) -> dict[LogScope, list[Record]]:
    """The records of a TensorboardLogger directory, per scope: the scalars of each step grouped."""
    by_scope: dict[LogScope, dict[int, dict[str, float]]] = {scope: {} for scope in LogScope}
    for tag, points in read_tensorboard_scalars(log_dir).items():
        prefix, _, name = tag.partition("/")
        if prefix not in _SCOPE_NAMES or not name:
            continue
        steps = by_scope[LogScope(prefix)]
        for step, value in points:
            steps.setdefault(step, {})[name] = value
    return {scope: sorted(steps.items()) for scope, steps in by_scope.items()}


def _drop_past(path: Path, limits: Mapping[LogScope, int]) -> None:
    """Rewrite the event file ``path`` without the scalar values past their scope's limit."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    prefixes = {f"{scope}/": limit for scope, limit in limits.items()}
    kept: list[bytes] = []
    changed = False
    for raw in RawEventFileLoader(str(path)).Load():
        event = event_pb2.Event.FromString(raw)
        values = [v for v in event.summary.value if not _past(v.tag, event.step, prefixes)]
        if len(values) == len(event.summary.value):
            kept.append(raw)
            continue
        changed = True
        if values:  # an event left without values is dropped
            del event.summary.value[:]
            event.summary.value.extend(values)
            kept.append(event.SerializeToString())
    if changed:
        buffer = io.BytesIO()
        writer = RecordWriter(buffer)
        for raw in kept:
            writer.write(raw)
        atomic_write_bytes(path, buffer.getvalue())


def _past(tag: str, step: int, prefixes: Mapping[str, int]) -> bool:
    for prefix, limit in prefixes.items():
        if tag.startswith(prefix):
            return step > limit
    return False


@final
class TensorboardLogger:
    """Writes TensorBoard event files to ``log_dir`` (see the module docstring)."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        intervals: LogIntervals | None = None,
        hparams: Mapping[str, HParamValue] | None = None,
        flush_secs: float = 10.0,
        max_queue: int = 100,
    ):
        """Args:
        log_dir: the directory of the event files (created if needed); point TensorBoard at it or at
            a parent directory.
        intervals: how often the trainer writes each scope; None: ``LogIntervals()`` (the trainer's
            defaults for its family).
        hparams: hyperparameters for TensorBoard's HPARAMS tab, a flat mapping (e.g.
            ``flatten_hparams(experiment_data(experiment))``); None: none.
        flush_secs: the writer thread flushes at least this often (besides after each info record and
            on close).
        max_queue: events queued before a write forces a flush.

        Raises:
            ConfigurationError: ``log_dir`` cannot be created or written.
        """
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = prepare_log_dir(log_dir, "TensorboardLogger")
        self._intervals = intervals or LogIntervals()
        self._writer = SummaryWriter(str(self.log_dir), max_queue=max_queue, flush_secs=flush_secs)
        if hparams:
            self._write_hparams(hparams)

    def _write_hparams(self, hparams: Mapping[str, HParamValue]) -> None:
        """The hparams plugin's three summaries (experiment, session start, session end), written into
        this log directory (``SummaryWriter.add_hparams`` would start a sub-run of its own)."""
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        # torch leaves both untyped; the public add_* methods take no raw summary
        summaries = hparams_summaries(dict(hparams), dict.fromkeys(HPARAM_METRICS, 0.0))  # type: ignore[no-untyped-call]
        file_writer = self._writer._get_file_writer()  # type: ignore[no-untyped-call]
        for summary in summaries:
            file_writer.add_summary(summary)
        self._writer.flush()

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        for name, value in data.items():
            self._writer.add_scalar(f"{scope}/{name}", float(value), global_step=step)
        if scope is LogScope.INFO:
            self._writer.flush()

    def flush(self) -> None:
        """Write the queued events to disk."""
        self._writer.flush()

    def restore_counters(self) -> LogResumePoint | None:
        # close the open event file: it may be rewritten below, and writing on needs a fresh one
        self._writer.close()
        records = read_tensorboard_log(self.log_dir)
        info = records[LogScope.INFO]
        restored = counters_from_info(*info[-1]) if info else None
        limits = {scope: restored.limit(scope) if restored is not None else -1 for scope in LogScope}
        if any(step > limits[scope] for scope in LogScope for step, _ in records[scope]):
            for path in _event_files(self.log_dir):
                _drop_past(path, limits)
        if restored is None:
            return None
        last = {
            scope: max(kept)
            for scope in LogScope
            if (kept := [step for step, _ in records[scope] if step <= limits[scope]])
        }
        return replace(restored, last_logged=last)

    def discard_after(self, limits: Mapping[LogScope, int]) -> None:
        """Drop the scalars past ``limits[scope]`` (scopes not listed: all); used when a run resumes
        from a checkpoint, so that curves continue without duplicated points."""
        self._writer.close()  # the next write opens a fresh event file
        full = {scope: limits.get(scope, -1) for scope in LogScope}
        for path in _event_files(self.log_dir):
            _drop_past(path, full)

    def close(self) -> None:
        self._writer.close()

    def records(self, scope: LogScope) -> list[Record]:
        """What the event files hold for ``scope`` (flushes first)."""
        self._writer.flush()
        return read_tensorboard_log(self.log_dir)[scope]
