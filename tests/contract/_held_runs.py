"""Child processes that stop at a chosen point of a run and wait there to be killed.

A test that kills a run "after its second checkpoint" or "while it writes a checkpoint" must not race the
child: on a busy machine the child may finish before the parent looks, or the parent may look only after
the write is done. So the child holds still at the point (it touches a marker file, then sleeps until
killed) and the parent waits for the marker: an event, not a time.

    python -m tests.contract._held_runs MARKER after:N cli ARGS...     # tshtrain ARGS, held after the
                                                                       # N-th periodic checkpoint
    python -m tests.contract._held_runs MARKER during:N runs RUN_DIR   # _checkpoint_runs.off_policy,
                                                                       # held inside the N-th periodic write
    python -m tests.contract._held_runs MARKER after:N ranks ARGS...   # tshtrain ARGS (train --nproc K):
                                                                       # every rank held after its N-th
                                                                       # periodic checkpoint

A held rank (``RANK`` set) writes ``MARKER.rankR`` holding ``PID PARENT_PID`` (its parent: torchrun).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tshtrain import atomic
from tshtrain.checkpoint import CheckpointManager

REPO = Path(__file__).resolve().parents[2]
GUARD_SECONDS = 900.0
"""a last resort against a hung child, far above any run's duration on a loaded machine"""


def install_hold(marker: Path, point: str) -> None:
    """Hold the process at ``point`` (``after:N`` or ``during:N``) of its periodic checkpoints."""
    when, _, count_text = point.partition(":")
    assert when in ("after", "during"), point
    count = int(count_text)
    state = {"completed": 0, "writing": False}
    periodic, fsync_tree = CheckpointManager.periodic, atomic.fsync_tree

    def hold() -> None:
        if "RANK" in os.environ:  # a rank: say who it is and who launched it, written whole
            atomic.atomic_write_bytes(marker, f"{os.getpid()} {os.getppid()}".encode())
        else:
            marker.touch()
        while True:
            time.sleep(3600)

    def held_periodic(self: CheckpointManager, target: Any, *, epoch_closed: bool) -> Path | None:
        state["writing"] = True
        try:
            path = periodic(self, target, epoch_closed=epoch_closed)
        finally:
            state["writing"] = False
        if path is not None:
            state["completed"] += 1
            if when == "after" and state["completed"] == count:
                hold()
        return path

    def held_fsync_tree(root: Path) -> None:
        if when == "during" and state["writing"] and state["completed"] + 1 == count:
            hold()  # the temporary directory is complete but not yet renamed: a kill now is mid-write
        fsync_tree(root)

    CheckpointManager.periodic = held_periodic  # type: ignore[method-assign]
    atomic.fsync_tree = held_fsync_tree


def start(marker: Path, point: str, *args: str) -> subprocess.Popen[bytes]:
    """Start a held child (see the module docstring for ``args``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.contract._held_runs", str(marker), point, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_then_kill(child: subprocess.Popen[bytes], marker: Path) -> None:
    """Wait until the child holds (its marker exists), then SIGKILL it and reap it."""
    deadline = time.monotonic() + GUARD_SECONDS
    try:
        while not marker.exists():
            if child.poll() is not None:
                err = child.stderr.read().decode(errors="replace") if child.stderr else ""
                raise AssertionError(f"the child exited ({child.returncode}) before holding:\n{err}")
            assert time.monotonic() < deadline, f"the child did not hold within {GUARD_SECONDS:.0f} s"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stderr:
            child.stderr.close()


def rank_marker(marker: Path, rank: int) -> Path:
    """Where rank ``rank`` of a ``ranks`` child says it holds."""
    return marker.with_name(f"{marker.name}.rank{rank}")


def wait_for_ranks(child: subprocess.Popen[bytes], marker: Path, nproc: int) -> list[tuple[int, int]]:
    """Wait until every rank of a ``ranks`` child holds; each rank's (pid, torchrun's pid)."""
    deadline = time.monotonic() + GUARD_SECONDS
    markers = [rank_marker(marker, rank) for rank in range(nproc)]
    while not all(path.exists() for path in markers):
        if child.poll() is not None:
            err = child.stderr.read().decode(errors="replace") if child.stderr else ""
            raise AssertionError(f"the child exited ({child.returncode}) before its ranks held:\n{err}")
        assert time.monotonic() < deadline, f"the ranks did not hold within {GUARD_SECONDS:.0f} s"
        time.sleep(0.02)
    pids = [path.read_text().split() for path in markers]
    return [(int(pid), int(parent)) for pid, parent in pids]


def _hold_ranks(marker: str, point: str) -> None:
    """Make ``tshtrain train --nproc K`` start its ranks as held children of this module."""
    from tshtrain.cli import launch

    run_torchrun = launch.run_torchrun

    def held_run_torchrun(command: list[str], *, debug: bool, resume: str) -> int:
        at = len(command) - 1 - command[::-1].index("tshtrain.cli")
        assert command[at - 1] == "-m", command
        held = [*command[:at], "tests.contract._held_runs", marker, point, "cli", *command[at + 1 :]]
        return run_torchrun(held, debug=debug, resume=resume)

    launch.run_torchrun = held_run_torchrun  # type: ignore[assignment]


def _main(argv: list[str]) -> None:
    marker, point, target, *args = argv
    if "RANK" in os.environ:
        marker = str(rank_marker(Path(marker), int(os.environ["RANK"])))
    if target == "ranks":
        _hold_ranks(marker, point)
        target = "cli"
    else:
        install_hold(Path(marker), point)
    if target == "cli":
        from tshtrain.cli import main

        sys.exit(main(args))
    elif target == "runs":
        from tests.contract import _checkpoint_runs as runs

        runs.off_policy(Path(args[0])).run()
    else:
        raise SystemExit(f"unknown target {target!r}: cli or runs")


if __name__ == "__main__":
    _main(sys.argv[1:])
