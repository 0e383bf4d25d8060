"""Unit tests of the file writers (CSV, TensorBoard), the composite logger and the in-memory logger:
what they write, how they read it back, resuming (truncation past the last info record), flushing and
failures."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tshtrain.counters import Counters
from tshtrain.errors import ConfigurationError
from tshtrain.logger import (
    CompositeLogger,
    CsvLogger,
    Logger,
    LoggerError,
    LogIntervals,
    LogResumePoint,
    LogScope,
    MemoryLogger,
    TensorboardLogger,
    read_csv_log,
    read_tensorboard_log,
)
from tshtrain.logger.tensorboard import read_tensorboard_scalars

FileLogger = Callable[[Path], Any]
FILE_LOGGERS: dict[str, tuple[FileLogger, Callable[[Path], dict[LogScope, list[Any]]]]] = {
    "csv": (CsvLogger, read_csv_log),
    "tensorboard": (TensorboardLogger, read_tensorboard_log),
}


def _write_two_epochs_and_a_crashed_third(logger: Any) -> None:
    """Records of epochs 1 and 2 (info at env_step 20 / 40, gradient_step 10 / 20), then some of epoch
    3 that a crash cut short (no info record)."""
    logger.write(LogScope.TEST, 0, {"returns/mean": 1.0, "score": 1.0})
    for epoch in (1, 2, 3):
        for env_step in (epoch * 20 - 10, epoch * 20):
            logger.write(LogScope.TRAINING, env_step, {"n_collected_steps": 10.0})
            logger.write(LogScope.UPDATE, env_step // 2, {"loss": env_step / 100})
        if epoch < 3:
            logger.write(LogScope.TEST, epoch * 20, {"returns/mean": 1.0 + epoch, "score": 1.0 + epoch})
            info = {"env_step": 20.0 * epoch, "gradient_step": 10.0 * epoch, "update_step": 2.0 * epoch}
            logger.write(LogScope.INFO, epoch, {**info, "train_episode": 3.0 * epoch, "test_episode": epoch})


def _steps(records: Mapping[LogScope, list[Any]]) -> dict[str, list[int]]:
    return {str(scope): [step for step, _ in records[scope]] for scope in LogScope}


# ====================================================================== scopes, intervals, memory logger


def test_scope_step_axes() -> None:
    assert [s.step_axis for s in LogScope] == ["env_step", "env_step", "gradient_step", "epoch"]


def test_restored_counters_limits_per_scope() -> None:
    counters = LogResumePoint(counters=Counters(epoch=3, env_step=60, gradient_step=30))
    assert [counters.limit(s) for s in LogScope] == [60, 60, 30, 3]


def test_memory_logger_restore_drops_records_past_the_last_info_record() -> None:
    logger = MemoryLogger()
    _write_two_epochs_and_a_crashed_third(logger)
    restored = logger.restore_counters()
    assert restored is not None
    assert (restored.counters.epoch, restored.counters.env_step, restored.counters.gradient_step) == (
        2,
        40,
        20,
    )
    assert (restored.counters.update_step, restored.counters.env_episode, restored.counters.test_episode) == (
        4,
        6,
        2,
    )
    assert restored.last_logged == {
        LogScope.TRAINING: 40, LogScope.TEST: 40, LogScope.UPDATE: 20, LogScope.INFO: 2
    }  # fmt: skip
    assert _steps(logger.records)["training"] == [10, 20, 30, 40]


def test_memory_logger_without_info_records_restores_nothing_and_starts_afresh() -> None:
    logger = MemoryLogger()
    logger.write(LogScope.TRAINING, 10, {"x": 1.0})
    assert logger.restore_counters() is None
    assert logger.records[LogScope.TRAINING] == []


# ====================================================================== CSV and TensorBoard, alike


@pytest.mark.parametrize("kind", FILE_LOGGERS)
def test_file_logger_round_trip(kind: str, tmp_path: Path) -> None:
    make, read = FILE_LOGGERS[kind]
    logger = make(tmp_path)
    logger.write(LogScope.TRAINING, 8, {"returns/mean": 1.5, "n_collected_steps": 8.0})
    logger.write(LogScope.TRAINING, 16, {"n_collected_steps": 8.0})  # no episode finished: no returns
    logger.write(LogScope.UPDATE, 3, {"loss": 0.25, "lr": 0.125})  # exact in float32 (TensorBoard)
    logger.write(LogScope.INFO, 1, {"env_step": 16.0, "timing/total_time": 0.5})
    logger.close()
    logger.close()  # a second close does nothing
    assert read(tmp_path) == {
        LogScope.TRAINING: [
            (8, {"returns/mean": 1.5, "n_collected_steps": 8.0}),
            (16, {"n_collected_steps": 8.0}),
        ],
        LogScope.TEST: [],
        LogScope.UPDATE: [(3, {"loss": 0.25, "lr": 0.125})],
        LogScope.INFO: [(1, {"env_step": 16.0, "timing/total_time": 0.5})],
    }


@pytest.mark.parametrize("kind", FILE_LOGGERS)
def test_file_logger_restore_truncates_past_the_resume_point(kind: str, tmp_path: Path) -> None:
    make, read = FILE_LOGGERS[kind]
    first = make(tmp_path)
    _write_two_epochs_and_a_crashed_third(first)
    first.close()
    assert _steps(read(tmp_path))["training"] == [10, 20, 30, 40, 50, 60]

    second = make(tmp_path)
    restored = second.restore_counters()
    assert restored is not None
    assert (
        restored.counters.epoch,
        restored.counters.env_step,
        restored.counters.gradient_step,
        restored.counters.update_step,
    ) == (2, 40, 20, 4)
    assert dict(restored.last_logged) == {
        LogScope.TRAINING: 40, LogScope.TEST: 40, LogScope.UPDATE: 20, LogScope.INFO: 2
    }  # fmt: skip
    assert _steps(read(tmp_path)) == {
        "training": [10, 20, 30, 40], "test": [0, 20, 40], "update": [5, 10, 15, 20], "info": [1, 2]
    }  # fmt: skip
    # the resumed run continues the curves
    second.write(LogScope.TRAINING, 50, {"n_collected_steps": 10.0, "returns/mean": 7.0})
    second.write(LogScope.INFO, 3, {"env_step": 60.0, "gradient_step": 30.0})
    second.close()
    records = read(tmp_path)
    assert _steps(records)["training"] == [10, 20, 30, 40, 50]
    assert records[LogScope.TRAINING][-1] == (50, {"n_collected_steps": 10.0, "returns/mean": 7.0})
    assert _steps(records)["info"] == [1, 2, 3]
    # restoring again is idempotent
    third = make(tmp_path)
    again = third.restore_counters()
    third.close()
    assert again is not None and again.counters.epoch == 3 and again.counters.env_step == 60


@pytest.mark.parametrize("kind", FILE_LOGGERS)
def test_file_logger_restore_without_an_info_record_drops_everything(kind: str, tmp_path: Path) -> None:
    make, read = FILE_LOGGERS[kind]
    first = make(tmp_path)
    first.write(LogScope.TEST, 0, {"score": 1.0})
    first.write(LogScope.TRAINING, 10, {"n_collected_steps": 10.0})
    first.close()
    second = make(tmp_path)
    assert second.restore_counters() is None
    second.close()
    assert all(records == [] for records in read(tmp_path).values())


@pytest.mark.parametrize("kind", FILE_LOGGERS)
def test_file_logger_on_an_empty_directory_restores_nothing(kind: str, tmp_path: Path) -> None:
    make, _ = FILE_LOGGERS[kind]
    logger = make(tmp_path / "new")
    assert logger.restore_counters() is None
    logger.close()


@pytest.mark.parametrize("kind", FILE_LOGGERS)
def test_file_logger_fails_at_construction_on_an_unwritable_directory(kind: str, tmp_path: Path) -> None:
    make, _ = FILE_LOGGERS[kind]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigurationError, match=r"cannot write to the log directory .*a-file"):
        make(blocker / "logs")


@pytest.mark.parametrize("kind", FILE_LOGGERS)
def test_file_logger_flushes_after_each_info_record(kind: str, tmp_path: Path) -> None:
    make, read = FILE_LOGGERS[kind]
    logger = make(tmp_path)
    logger.write(LogScope.TRAINING, 10, {"n_collected_steps": 10.0})
    logger.write(LogScope.INFO, 1, {"env_step": 10.0})
    # not closed: what another process reads now is on disk
    assert _steps(read(tmp_path)) == {"training": [10], "test": [], "update": [], "info": [1]}
    logger.close()


# ====================================================================== CSV specifics


def test_csv_files_per_scope_with_the_step_axis_first(tmp_path: Path) -> None:
    logger = CsvLogger(tmp_path)
    logger.write(LogScope.TRAINING, 8, {"a": 1.0, "b": 2.0})
    logger.write(LogScope.UPDATE, 2, {"loss": 0.5})
    logger.write(LogScope.INFO, 1, {"env_step": 8.0})
    logger.close()
    assert (tmp_path / "training.csv").read_text() == "env_step,a,b\n8,1.0,2.0\n"
    assert (tmp_path / "update.csv").read_text() == "gradient_step,loss\n2,0.5\n"
    assert (tmp_path / "info.csv").read_text() == "epoch,env_step\n1,8.0\n"
    assert not (tmp_path / "test.csv").exists()


def test_csv_new_columns_rewrite_the_header_and_keep_the_rows(tmp_path: Path) -> None:
    logger = CsvLogger(tmp_path)
    logger.write(LogScope.TRAINING, 4, {"n": 4.0})
    logger.write(LogScope.TRAINING, 8, {"n": 4.0, "returns/mean": 2.5})
    logger.write(LogScope.TRAINING, 12, {"n": 4.0})
    logger.close()
    assert (tmp_path / "training.csv").read_text() == (
        "env_step,n,returns/mean\n4,4.0,\n8,4.0,2.5\n12,4.0,\n"
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_csv_appends_across_runs_and_widens_the_header_on_resume(tmp_path: Path) -> None:
    first = CsvLogger(tmp_path)
    first.write(LogScope.TEST, 0, {"score": 1.0})
    first.close()
    second = CsvLogger(tmp_path)  # a later run, which logs one more scalar
    second.write(LogScope.TEST, 10, {"score": 2.0, "env_info/success": 0.5})
    second.write(LogScope.TEST, 20, {"score": 3.0})
    second.close()
    assert (tmp_path / "test.csv").read_text() == (
        "env_step,score,env_info/success\n0,1.0,\n10,2.0,0.5\n20,3.0,\n"
    )


def test_csv_drops_a_line_cut_by_a_crash(tmp_path: Path) -> None:
    (tmp_path / "training.csv").write_text("env_step,n\n4,4.0\n8,4.")
    logger = CsvLogger(tmp_path)
    logger.write(LogScope.TRAINING, 8, {"n": 4.0})
    logger.close()
    assert (tmp_path / "training.csv").read_text() == "env_step,n\n4,4.0\n8,4.0\n"


def test_csv_rejects_a_foreign_file(tmp_path: Path) -> None:
    (tmp_path / "update.csv").write_text("env_step,loss\n1,0.5\n")
    with pytest.raises(ValueError, match=r"first column is 'env_step', expected 'gradient_step'"):
        CsvLogger(tmp_path)


def test_csv_flushes_after_flush_secs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tshtrain.logger.csv as csv_module

    now = [100.0]
    monkeypatch.setattr(csv_module.time, "monotonic", lambda: now[0])
    logger = CsvLogger(tmp_path, flush_secs=5.0)
    logger.write(LogScope.TRAINING, 10, {"n": 1.0})
    assert read_csv_log(tmp_path)[LogScope.TRAINING] == []  # still in the file buffer
    now[0] += 5.0
    logger.write(LogScope.TRAINING, 20, {"n": 1.0})
    assert [s for s, _ in read_csv_log(tmp_path)[LogScope.TRAINING]] == [10, 20]
    logger.close()


def test_csv_flush_secs_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_secs must be a finite number > 0, got 0"):
        CsvLogger(tmp_path, flush_secs=0)


# ====================================================================== TensorBoard specifics


def test_tensorboard_writes_event_files_that_tensorboard_reads(tmp_path: Path) -> None:
    logger = TensorboardLogger(tmp_path)
    logger.write(LogScope.TEST, 0, {"returns/mean": 9.5})
    logger.write(LogScope.TEST, 40, {"returns/mean": 20.0})
    logger.write(LogScope.INFO, 1, {"timing/total_time": 1.0})
    logger.close()
    assert [p for p in os.listdir(tmp_path) if "tfevents" in p]
    scalars = read_tensorboard_scalars(tmp_path)
    assert scalars["test/returns/mean"] == [(0, 9.5), (40, 20.0)]
    assert scalars["info/timing/total_time"] == [(1, 1.0)]


def test_tensorboard_restore_rewrites_only_files_with_points_past_the_resume_point(tmp_path: Path) -> None:
    clean = TensorboardLogger(tmp_path)
    clean.write(LogScope.INFO, 1, {"env_step": 10.0})
    clean.close()
    files_before = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    resumed = TensorboardLogger(tmp_path)
    assert resumed.restore_counters() is not None
    resumed.close()
    assert all(p.stat().st_mtime_ns == t for p, t in files_before.items())


# ====================================================================== composite


class _Recording:
    """A logger that records calls and can fail on a given write."""

    def __init__(self, name: str, *, fail_on_write: int | None = None, fail_on_close: bool = False):
        self.name = name
        self.writes: list[tuple[LogScope, int]] = []
        self.closed = 0
        self.fail_on_write = fail_on_write
        self.fail_on_close = fail_on_close
        self.restored: LogResumePoint | None = None

    @property
    def intervals(self) -> LogIntervals:
        return LogIntervals()

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        if self.fail_on_write is not None and len(self.writes) == self.fail_on_write:
            raise OSError(28, "No space left on device")
        self.writes.append((scope, step))

    def restore_counters(self) -> LogResumePoint | None:
        return self.restored

    def close(self) -> None:
        self.closed += 1
        if self.fail_on_close:
            raise OSError("close failed")


def test_composite_writes_to_every_logger(tmp_path: Path) -> None:
    memory = MemoryLogger(LogIntervals())
    composite = CompositeLogger([CsvLogger(tmp_path), memory])
    assert isinstance(composite, Logger)
    composite.write(LogScope.TEST, 0, {"score": 1.0})
    composite.close()
    assert memory.records[LogScope.TEST] == [(0, {"score": 1.0})] and memory.closed
    assert read_csv_log(tmp_path)[LogScope.TEST] == [(0, {"score": 1.0})]


def test_composite_intervals_must_agree_unless_given() -> None:
    a, b = MemoryLogger(LogIntervals()), MemoryLogger(LogIntervals(training_interval=5))
    with pytest.raises(ConfigurationError, match="intervals differ"):
        CompositeLogger([a, b])
    given = LogIntervals(update_interval=3)
    assert CompositeLogger([a, b], intervals=given).intervals is given
    assert CompositeLogger([a]).intervals == LogIntervals()


def test_composite_rejects_no_loggers_and_non_loggers() -> None:
    with pytest.raises(ConfigurationError, match="at least one logger"):
        CompositeLogger([])
    with pytest.raises(ConfigurationError, match="object does not implement"):
        CompositeLogger([object()])  # type: ignore[list-item]  # the error under test


def test_composite_failure_closes_every_logger_and_names_the_failing_one() -> None:
    good, bad, after = _Recording("good"), _Recording("bad", fail_on_write=1), _Recording("after")
    composite = CompositeLogger([good, bad, after])
    composite.write(LogScope.TEST, 0, {})
    with pytest.raises(
        LoggerError, match=r"_Recording failed to write the test record at step 10: OSError"
    ) as info:
        composite.write(LogScope.TEST, 10, {})
    assert isinstance(info.value.__cause__, OSError)
    assert good.closed == bad.closed == after.closed == 1
    assert good.writes == [(LogScope.TEST, 0), (LogScope.TEST, 10)]
    assert after.writes == [(LogScope.TEST, 0)]


def test_composite_close_tries_every_logger() -> None:
    first, second = _Recording("a", fail_on_close=True), _Recording("b")
    with pytest.raises(LoggerError, match="failed to close"):
        CompositeLogger([first, second]).close()
    assert first.closed == second.closed == 1


def test_composite_restore_ignores_loggers_without_records_and_checks_the_others_agree() -> None:
    a, b, c = _Recording("a"), _Recording("b"), _Recording("c")
    assert CompositeLogger([a, b]).restore_counters() is None
    a.restored = LogResumePoint(counters=Counters(epoch=2, env_step=40, gradient_step=20))
    b.restored = LogResumePoint(counters=Counters(epoch=2, env_step=40, gradient_step=20))
    assert CompositeLogger([a, b, c]).restore_counters() == a.restored
    c.restored = LogResumePoint(counters=Counters(epoch=1, env_step=20, gradient_step=10))
    with pytest.raises(
        ConfigurationError, match=r"records end at different points.*\(2, 40, 20\).*\(1, 20, 10\)"
    ):
        CompositeLogger([a, c]).restore_counters()


def test_composite_of_csv_and_tensorboard_resumes_both(tmp_path: Path) -> None:
    def build() -> CompositeLogger:
        return CompositeLogger([CsvLogger(tmp_path / "csv"), TensorboardLogger(tmp_path / "tb")])

    first = build()
    _write_two_epochs_and_a_crashed_third(first)
    first.close()
    second = build()
    restored = second.restore_counters()
    second.close()
    assert restored is not None and restored.counters.epoch == 2
    assert _steps(read_csv_log(tmp_path / "csv")) == _steps(read_tensorboard_log(tmp_path / "tb"))


# ====================================================================== hyperparameters


def test_flatten_hparams_keeps_every_key() -> None:
    from tshtrain.logger import flatten_hparams

    data = {"a": {"b": 1, "c": {"d": True}}, "e": None, "f": [1, 2], "g": {}, "h": "x", "i": 0.5}
    assert flatten_hparams(data) == {
        "a.b": 1, "a.c.d": True, "e": "None", "f": "[1, 2]", "g": "{}", "h": "x", "i": 0.5,
    }  # fmt: skip


def test_tensorboard_hparams_read_back_with_the_plugin_data(tmp_path: Path) -> None:
    from tshtrain.logger import read_tensorboard_hparams

    logger = TensorboardLogger(tmp_path, hparams={"algorithm.params.lr": 0.001, "env.id": "CartPole-v1"})
    logger.write(LogScope.TEST, 0, {"returns/mean": 9.5})
    logger.close()
    assert read_tensorboard_hparams(tmp_path) == {"algorithm.params.lr": 0.001, "env.id": "CartPole-v1"}
    assert read_tensorboard_log(tmp_path)[LogScope.TEST] == [(0, {"returns/mean": 9.5})]
    bare = tmp_path / "bare"
    TensorboardLogger(bare).close()
    assert read_tensorboard_hparams(bare) == {}
