"""SIGKILL a checkpointed run at random moments (also while it writes a checkpoint or its logs), resume it
from its newest complete checkpoint, and get bit-identical weights, counters and logs every time.

The child is ``tests.contract._checkpoint_runs`` (DQN on CartPole, CSV logs, a checkpoint per epoch and
per new best), whose checkpoint writes are slowed to 0.5 s so that random kills often land inside them.
The first kill lands inside a write by construction (the child holds there until killed); the others at
moments drawn from a seeded generator.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.contract import _checkpoint_runs as runs
from tests.contract import _held_runs as held
from tshtrain.trainer import Trainer
from tshtrain.checkpoint import CheckpointManager, CheckpointParams

REPO = Path(__file__).resolve().parents[2]


def _weights(trainer: Trainer[Any, Any]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in trainer.algorithm.state_dict()["policy"].items() if isinstance(v, torch.Tensor)}


def _csv(directory: Path) -> dict[str, list[dict[str, str]]]:
    """The CSV logs without their wall-clock columns (``*time*``, ``*speed*``), which no two runs share."""
    logs = {}
    for path in sorted((directory / "log").glob("*.csv")):
        with path.open(newline="") as file:
            rows = list(csv.DictReader(file))
        logs[path.name] = [{k: v for k, v in r.items() if "time" not in k and "speed" not in k} for r in rows]
    return logs


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, torch.Tensor], Any, dict[str, str]]:
    directory = tmp_path_factory.mktemp("reference")
    trainer = runs.off_policy(directory)
    info = trainer.run()
    return (
        _weights(trainer),
        (info.gradient_step, info.train_step, info.train_episode, info.best_reward),
        _csv(directory),
    )


def _kill_at(directory: Path, delay: float | None) -> bool:
    """Start the child, wait for its first complete periodic checkpoint, SIGKILL it ``delay`` s later (None:
    inside the write of its second periodic checkpoint, where the child holds until killed); True if the
    kill landed inside a checkpoint write (a hidden temporary directory was left)."""
    checkpoints = directory / "checkpoints"
    if delay is None:
        marker = directory.parent / f"{directory.name}.held"
        held.wait_then_kill(held.start(marker, "during:2", "runs", str(directory)), marker)
        return bool(list(checkpoints.glob(".*.tmp-*")))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.contract._checkpoint_runs", str(directory)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + held.GUARD_SECONDS  # a hang guard, not a speed check
        while not list(checkpoints.glob("periodic-*/manifest.json")):
            assert child.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within the hang guard"
            time.sleep(0.02)
        time.sleep(delay)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    return bool(list(checkpoints.glob(".*.tmp-*")))


def _kill_and_resume(tmp_path: Path, reference: Any, delays: list[float | None]) -> int:
    weights_ref, info_ref, logs_ref = reference
    mid_write = 0
    for i, delay in enumerate(delays):
        directory = tmp_path / f"kill-{i}"
        mid_write += _kill_at(directory, delay)
        latest = CheckpointManager(CheckpointParams(directory=directory / "checkpoints")).latest()
        assert latest is not None, f"kill {i} at {delay}: no complete periodic checkpoint"
        resumed = runs.off_policy(directory)
        resumed.load_checkpoint(latest)  # our own run, signed with our key: its envs too, no flag
        info = resumed.run() if not resumed.done else resumed.info_stats()
        weights = _weights(resumed)
        assert weights.keys() == weights_ref.keys(), f"kill {i}"
        assert all(torch.equal(weights[k], weights_ref[k]) for k in weights), f"kill {i} at {delay}"
        assert (info.gradient_step, info.train_step, info.train_episode, info.best_reward) == info_ref
        assert _csv(directory) == logs_ref, f"kill {i} at {delay}: the logs differ"
    return mid_write


def _delays(count: int) -> list[float | None]:
    """The first kill lands inside a checkpoint write by construction (None: the child holds there); the
    others at seeded random moments after the first checkpoint, wherever the run happens to be then."""
    return [None, *(float(d) for d in np.random.default_rng(2026).uniform(0.0, 4.0, size=count - 1))]


def test_three_kills_resume_bit_identically(tmp_path: Path, reference: Any) -> None:
    assert _kill_and_resume(tmp_path, reference, _delays(3)) >= 1


@pytest.mark.slow
def test_ten_kills_resume_bit_identically(tmp_path: Path, reference: Any) -> None:
    assert _kill_and_resume(tmp_path, reference, _delays(10)) >= 1
