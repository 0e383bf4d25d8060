"""``tshtrain train --nproc N``: a failed data-parallel run ends in one line naming the rank and the
cause, whether a rank failed, a rank was killed or torchrun itself was (issue 30, item 8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.security.conftest import assert_one_line_error, cli_env
from tshtrain.cli.launch import RankOutcome, summarize

RESUME = "tshtrain train --resume runs/x --nproc 2"
KILLED_RANK_BLOCK = """W0101 00:00:00.000000 111 elastic/api.py:900] Sending closing signal SIGTERM
Traceback (most recent call last):
  File "/x/torch/distributed/run.py", line 1, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
tshtrain.cli FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-01-01_00:00:00
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 333)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 333
============================================================
"""


def _outcome(text: str) -> tuple[RankOutcome, list[str]]:
    outcome = RankOutcome()
    shown = [line for line in text.splitlines(keepends=True) if outcome.feed(line)]
    return outcome, shown


def test_a_killed_rank_is_one_line_naming_it_and_the_signal() -> None:
    stderr = "rank output that passes\n" + KILLED_RANK_BLOCK
    stderr += (
        "tshtrain train: error: DistributedRunError: rank 0 stops: rank 1: the rendezvous store is gone\n"
    )
    outcome, shown = _outcome(stderr)
    assert shown == ["rank output that passes\n"]
    assert (
        summarize(outcome, 1, 111, RESUME)
        == "rank 1 (pid 333) was killed by SIGKILL (signal 9); the other ranks were stopped"
    )


def test_a_killed_launcher_is_one_line_with_the_resume_command() -> None:
    outcome, _ = _outcome("")
    line = summarize(outcome, -9, 111, RESUME)
    assert line == (
        "the torchrun launcher (pid 111) was killed by SIGKILL (signal 9), so the run stopped; continue it "
        f"from its last checkpoint with: {RESUME}"
    )


def test_failing_ranks_give_the_first_cause_once() -> None:
    lines = [
        "tshtrain train: error: DistributedRunError: rank 2 stops: rank 0 failed: CheckpointError: x\n",
        "tshtrain train: error: CheckpointError: runs/x/checkpoints/periodic-1: written by 2 ranks, not 3\n",
        "tshtrain train: error: CheckpointError: runs/x/checkpoints/periodic-1: written by 2 ranks, not 3\n",
    ]
    block = KILLED_RANK_BLOCK.replace("-9 (pid: 333)", "1 (pid: 333)").replace(
        "rank      : 1", "rank      : 0"
    )
    outcome, shown = _outcome("".join(lines) + block)
    assert shown == []
    assert summarize(outcome, 1, 111, RESUME) == (
        "rank 0: CheckpointError: runs/x/checkpoints/periodic-1: written by 2 ranks, not 3"
    )


def test_a_rank_error_through_torchrun_is_one_line(tmp_path: Path) -> None:
    """Both ranks refuse the experiment (the launcher does not read it with -o): one line, no block."""
    args = ["train", "--nproc", "2", "--set", "seed=-1", "--set", "env.num_training_envs=1"]
    result = subprocess.run(
        [sys.executable, "-m", "tshtrain.cli", *args, "-o", str(tmp_path / "run")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 1
    line = assert_one_line_error(result.stderr, "train", "seed: Input should be greater than or equal to 0")
    assert line.startswith("tshtrain train: error: rank "), line


def test_two_ranks_error_lines_met_on_one_line_are_two_lines() -> None:
    outcome, shown = _outcome(
        "tshtrain train: error: CheckpointError: a: saved by world_size 2, this is 3"
        "tshtrain train: error: CheckpointError: b: saved by world_size 2, this is 3\n"
    )
    assert shown == []
    assert outcome.error_lines == [
        "CheckpointError: a: saved by world_size 2, this is 3",
        "CheckpointError: b: saved by world_size 2, this is 3",
    ]
