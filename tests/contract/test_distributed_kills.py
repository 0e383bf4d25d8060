"""``tshtrain train --nproc 2`` with real processes (2 gloo ranks on 127.0.0.1, a tiny PPO run): a rank
killed with SIGKILL, the torchrun launcher killed, and a 2-rank run resumed with ``--nproc 3`` each end
in one line (issue 30, item 8); a killed torchrun takes its ranks with it (``PR_SET_PDEATHSIG``).

Every rank holds after its first periodic checkpoint until killed (tests/contract/_held_runs.py), and the
test waits for events only: the ranks' markers, the launcher's exit, the ranks' pids disappearing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.contract import _held_runs
from tests.security.conftest import assert_one_line_error, cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

TINY = [
    "train", "--nproc", "2",
    "--set", "env.num_training_envs=1",
    "--set", "env.num_test_envs=1",
    "--set", "trainer.max_epochs=3",
    "--set", "trainer.epoch_num_steps=64",
    "--set", "trainer.collection_step_num_env_steps=32",
    "--set", "trainer.batch_size=32",
    "--set", "trainer.test_step_num_episodes=1",
    "--set", "trainer.update_step_num_repetitions=1",
    "--set", "trainer.show_progress=false",
    "--set", "trainer.verbose=false",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip


def _start_held(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[tuple[int, int]], Path]:
    marker, run_dir = tmp_path / "held", tmp_path / "run"
    child = _held_runs.start(marker, "after:1", "ranks", *TINY, "-o", str(run_dir))
    try:
        ranks = _held_runs.wait_for_ranks(child, marker, 2)
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child, ranks, run_dir


def _stderr_after_exit(child: subprocess.Popen[bytes]) -> str:
    _, err = child.communicate(timeout=_held_runs.GUARD_SECONDS)  # a hang guard only
    return err.decode(errors="replace")


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody has reaped yet has stopped running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_killed_rank_is_one_line_and_a_resume_on_3_ranks_is_one_line(tmp_path: Path) -> None:
    child, ranks, run_dir = _start_held(tmp_path)
    pid = ranks[1][0]
    os.kill(pid, signal.SIGKILL)
    stderr = _stderr_after_exit(child)
    assert child.returncode == 1, stderr
    assert_one_line_error(stderr, "train", f"rank 1 (pid {pid}) was killed by SIGKILL")

    # the run's checkpoints were written by 2 ranks: 3 ranks cannot continue them
    resumed = cli("train", "--resume", str(run_dir), "--nproc", "3")
    assert resumed.returncode == 1, resumed.stderr
    line = assert_one_line_error(resumed.stderr, "train", "saved by world_size 2, this is 3")
    assert line.count("error:") == 1, line


def test_a_killed_launcher_is_one_line_and_takes_its_ranks_with_it(tmp_path: Path) -> None:
    child, ranks, _ = _start_held(tmp_path)
    launcher = ranks[0][1]
    assert ranks[1][1] == launcher  # both ranks are torchrun's children
    os.kill(launcher, signal.SIGKILL)
    stderr = _stderr_after_exit(child)  # ends only when the ranks closed the stderr pipe they share
    assert child.returncode == 1, stderr
    assert_one_line_error(stderr, "train", f"the torchrun launcher (pid {launcher}) was killed by SIGKILL")
    deadline = time.monotonic() + _held_runs.GUARD_SECONDS  # a hang guard only
    while any(_alive(pid) for pid, _ in ranks):
        assert time.monotonic() < deadline, "the ranks outlived their launcher"
        time.sleep(0.02)
