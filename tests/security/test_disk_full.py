"""A run that cannot write (disk full, ``ulimit -f``, a quota) ends in one line that says so and what a
command-line user does next: no torch traceback, no Python-only advice (issue 30, item 6)."""

from __future__ import annotations

import errno
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.security.conftest import TINY, assert_one_line_error, cli_env
from tshtrain.cli import main
from tshtrain.logger.base import LogScope
from tshtrain.logger.csv import CsvLogger

FILE_SIZE_LIMIT = 20_000
"""bytes: the config and the CSV logs fit, the first checkpoint's weights do not"""


def _limited() -> None:  # runs in the child before exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def test_a_file_size_limit_ends_in_one_line_with_cli_advice(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "tshtrain.cli", "train", *TINY, "-o", str(run)],
        env=cli_env(),
        preexec_fn=_limited,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    line = assert_one_line_error(
        result.stderr, "train", f"could not write the run's files in {run}", "ulimit -f", "free some space"
    )
    assert "resume_from_log" not in line
    assert "the final checkpoint could not be written" in line  # named, its traceback held back


def test_debug_prints_the_tracebacks(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tshtrain.cli", "train", "--debug", *TINY, "-o", str(tmp_path / "run")],
        env=cli_env(),
        preexec_fn=_limited,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip("\n").split("\n")[-1].startswith("tshtrain train: error: OSError: could not")


def test_a_full_disk_under_the_logger_points_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CSV logger's second test record hits ENOSPC after the first periodic checkpoint."""
    original = CsvLogger.write
    written: list[int] = []

    def full_disk(self: CsvLogger, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        if scope is LogScope.TEST:
            written.append(step)
            if len(written) > 2:  # the initial test step and epoch 1's are written
                raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "csv"))
        original(self, scope, step, data)

    monkeypatch.setattr(CsvLogger, "write", full_disk)
    run = tmp_path / "run"
    args = ["train", *TINY, "--set", "trainer.max_epochs=3", "--set", "checkpoint.every_num_epochs=1"]
    assert main([*args, "-o", str(run)]) == 1
    line = assert_one_line_error(
        capsys.readouterr().err, "train", "[Errno 28] No space left on device", f"tshtrain train --resume {run}"
    )
    assert "resume_from_log" not in line
    assert "checkpoints written before are intact (the last: periodic-" in line
