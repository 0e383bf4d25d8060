"""``tshtrain train --nproc 2``: the launcher runs 2 local gloo ranks through ``torch.distributed.run``
(loopback only) and the run directory holds what one process would write, once, plus rank 1's own
checkpoints under ``checkpoints/rank1/``; ``--resume`` with ``--nproc 2`` continues it, and resuming it
in one process is refused.

Tiny budget (PPO CartPole, 2 envs per rank, 2 epochs); the learning result of 2 ranks is checked in
tests/learning/test_distributed_learning.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tshtrain.checkpoint import read_algorithm_state
from tshtrain.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY_PPO_PER_RANK = [
    "--set", "env.num_training_envs=2",
    "--set", "env.num_test_envs=2",
    "--set", "trainer.max_epochs=2",
    "--set", "trainer.epoch_num_steps=256",
    "--set", "trainer.collection_step_num_env_steps=128",
    "--set", "trainer.batch_size=64",
    "--set", "trainer.test_step_num_episodes=2",
    "--set", "trainer.update_step_num_repetitions=1",
    "--set", "trainer.show_progress=false",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip
LAUNCH_GUARD_SECONDS = 900  # a hang guard, far above a launch on a loaded machine
"""how long a launch may take before the test calls it hung (not a speed assertion)"""


def _tshtrain(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "tshtrain.cli", "train", "--nproc", "2", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=LAUNCH_GUARD_SECONDS,
        check=False,
    )


def _collector_obs(checkpoint: Path) -> torch.Tensor:
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    obs: torch.Tensor = state["collectors"]["training"]["obs"]
    return obs


def _policy_weights(checkpoint: Path) -> dict[str, np.ndarray]:
    _, state = read_algorithm_state(checkpoint)
    policy: dict[str, torch.Tensor] = state["policy"]
    return {name: tensor.numpy() for name, tensor in policy.items()}


def _manifest(checkpoint: Path) -> dict[str, object]:
    info: dict[str, object] = json.loads((checkpoint / "manifest.json").read_text())["info"]
    return info


def test_nproc_2_writes_rank_0_outputs_once_and_a_checkpoint_per_rank(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = _tshtrain(*TINY_PPO_PER_RANK, "-o", str(run_dir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"results in {run_dir}" in done.stdout
    assert done.stdout.count("Training finished") == 1  # the summary is rank 0's only

    # rank 0's outputs, written once: 2 epochs x (2 ranks x 128 env steps) rounded up to 256 per epoch
    info = json.loads((run_dir / "info_stats.json").read_text())
    assert info["train_step"] == 2 * 256 and info["stop_reason"] == "max_epochs"
    assert (run_dir / "config.yaml").is_file()
    assert len((run_dir / "csv" / "test.csv").read_text().splitlines()) == 1 + 3  # header, epochs 0-2
    checkpoints = run_dir / "checkpoints"
    assert {p.name for p in checkpoints.iterdir()} == {
        "best",
        "final",
        "periodic-000001-000000000256",
        "periodic-000002-000000000512",
        "rank1",
    }
    # rank 1: its own complete checkpoints (no best/: save_best is rank 0's), same names
    rank1 = checkpoints / "rank1"
    assert {p.name for p in rank1.iterdir()} == {
        "final",
        "periodic-000001-000000000256",
        "periodic-000002-000000000512",
    }
    assert not list(run_dir.glob("rank1/**/info_stats.json")) and not (rank1 / "csv").exists()
    for rank, checkpoint in ((0, checkpoints / "final"), (1, rank1 / "final")):
        manifest = _manifest(checkpoint)
        assert manifest["world_size"] == 2 and manifest["rank"] == rank
        assert manifest["counters"] == {"epoch": 2, "env_step": 512, "gradient_step": 4, "update_step": 2}
    # replicated weights, per-rank data: rank 1's envs were seeded differently, so its collector stands
    # at other observations (each rank's on-policy buffer is empty after its update: nothing stored)
    w0, w1 = _policy_weights(checkpoints / "final"), _policy_weights(rank1 / "final")
    for name, weight in w0.items():
        np.testing.assert_array_equal(weight, w1[name])
    obs0, obs1 = (_collector_obs(checkpoint) for checkpoint in (checkpoints / "final", rank1 / "final"))
    assert obs0.shape == obs1.shape == (2, 4) and not torch.equal(obs0, obs1)
    for checkpoint in (checkpoints / "final", rank1 / "final"):
        buffer_manifest = json.loads((checkpoint / "buffers" / "training" / "manifest.json").read_text())
        assert buffer_manifest["length"] == [0, 0]

    # resume with the same number of ranks continues both ranks' checkpoints
    resumed = _tshtrain("--resume", str(run_dir), "--extend", "1")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert json.loads((run_dir / "info_stats.json").read_text())["train_step"] == 3 * 256
    assert (checkpoints / "periodic-000003-000000000768").is_dir()
    assert (rank1 / "periodic-000003-000000000768").is_dir()
    assert _manifest(rank1 / "final")["counters"] == {
        "epoch": 3,
        "env_step": 768,
        "gradient_step": 6,
        "update_step": 3,
    }


def test_resuming_a_two_rank_run_in_one_process_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    done = _tshtrain(*TINY_PPO_PER_RANK, "--set", "trainer.max_epochs=1", "-o", str(run_dir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert main(["train", "--resume", str(run_dir), "--extend", "1"]) != 0
    err = capsys.readouterr().err
    assert "saved by world_size 2" in err and "same number of ranks" in err, err
