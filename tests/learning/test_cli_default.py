"""The default experiment of ``tshtrain train`` (PPO on CartPole-v1) solves CartPole: best test return
>= 475, the promise of the README's first command. Seed 0 runs in CI (about 8k env steps, 20 s)."""

from __future__ import annotations

import json
from pathlib import Path

from tshtrain.cli import main


def test_default_experiment_solves_cartpole(tmp_path: Path) -> None:
    assert main(["train", "--set", "trainer.show_progress=false", "-o", str(tmp_path)]) == 0
    info = json.loads((tmp_path / "info_stats.json").read_text())
    assert info["best_reward"] >= 475.0
    assert info["stop_reason"] == "stop_fn"
    assert info["train_step"] <= 100_000
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
