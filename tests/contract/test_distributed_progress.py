"""``tshtrain train --nproc 2`` on a terminal shows rank 0's progress bars although the ranks' stderr is a
pipe to the launcher (which reads torchrun's lines): the launcher tells the ranks its stderr is a terminal
(``TSHTRAIN_TERMINAL_COLUMNS``) and passes the bars' ``\\r`` redraws through unchanged (issue 30)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.contract._held_runs import GUARD_SECONDS
from tests.security.conftest import cli_env
from tshtrain.logger import console as progress

TINY = [
    "train", "--nproc", "2",
    "--set", "env.num_training_envs=1",
    "--set", "env.num_test_envs=1",
    "--set", "trainer.max_epochs=1",
    "--set", "trainer.epoch_num_steps=64",
    "--set", "trainer.collection_step_num_env_steps=32",
    "--set", "trainer.batch_size=32",
    "--set", "trainer.test_step_num_episodes=1",
    "--set", "trainer.update_step_num_repetitions=1",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip


def test_the_launcher_variable_makes_a_pipe_count_as_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    read, write = os.pipe()
    with os.fdopen(read) as pipe_in, os.fdopen(write, "w") as pipe_out:
        monkeypatch.delenv(progress.TERMINAL_ENV, raising=False)
        assert progress.terminal_width(pipe_out) is None
        monkeypatch.setenv(progress.TERMINAL_ENV, "123")
        assert progress.terminal_width(pipe_out) == 123
        monkeypatch.setattr(sys, "stderr", pipe_out)
        assert progress.stderr_is_terminal()
        monkeypatch.setenv(progress.TERMINAL_ENV, "no")
        assert not progress.stderr_is_terminal()
        assert pipe_in.readable()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pty and torchrun ranks: Linux")
def test_nproc_2_on_a_terminal_shows_rank_0s_bar(tmp_path: Path) -> None:
    env = cli_env()
    env.pop(progress.TERMINAL_ENV, None)
    primary, secondary = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "tshtrain.cli", *TINY, "-o", str(tmp_path / "run")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    seen = bytearray()
    try:
        while True:  # until every writer of the terminal is gone (EIO): an event
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(primary)
        returncode = child.wait(timeout=GUARD_SECONDS)  # a hang guard only
    text = seen.decode(errors="replace")
    assert returncode == 0, text
    assert "Epoch 1/1" in text and "env_step/s" in text, text
    assert re.search("\r(?!\n)", text), text  # redrawn in place ("\r"), not a new line per redraw
    assert "tshtrain train: error" not in text
