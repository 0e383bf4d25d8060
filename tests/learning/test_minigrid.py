"""PPO with the CNN encoder on MiniGrid-Empty-5x5-v0 (Dict observations: image + direction), built by the
experiment layer from examples/configs/ppo_minigrid_empty.yaml.

Threshold: MiniGrid pays ``1 - 0.9 * steps / max_steps`` on reaching the goal (max_steps = 100 here). The
agent always starts in the same cell and direction, so the shortest route takes 5 steps (return 0.955);
a test return of 0.9 allows at most 11 steps, i.e. a policy that goes straight to the goal with at most
three wasted turns. The untrained policy scores 0 (its greedy action loops until the time limit).

* CI: seed 0 within 10 epochs (20,480 env steps; measured: 0.955 at epoch 8, about 10 s on 2 cores).
* ``slow``: seeds 0-4 within the file's 15 epochs (30,720 env steps); all five must solve it. Measured:
  every seed reached 0.955 at epoch 5 or 7 (10,240 or 14,336 env steps).

Every run prints a ``RESULT`` line (best test return, epoch, env steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.extras import need

pytestmark = pytest.mark.integration
need("minigrid", "minigrid")

from tshtrain.config import build_run, load_experiment  # noqa: E402
from tshtrain.trainer import InfoStats, StopReason  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "configs" / "ppo_minigrid_empty.yaml"
THRESHOLD = 0.9


def _train(seed: int, max_epochs: int, output_dir: Path) -> InfoStats:
    experiment = load_experiment(
        str(CONFIG),
        [
            f"seed={seed}",
            f"trainer.max_epochs={max_epochs}",
            "trainer.show_progress=false",
            "trainer.verbose=false",
            "loggers=[]",
            "checkpoint.enabled=false",
        ],
    )
    assert experiment.trainer["stop_score"] == THRESHOLD
    run = build_run(experiment, output_dir)
    try:
        info = run.trainer.run()
    finally:
        run.close()
    print(
        f"RESULT ppo_minigrid_empty seed={seed} best_reward={info.best_reward} best_epoch={info.best_epoch} "
        f"env_steps={info.train_step} stop={info.stop_reason}"
    )
    return info


def _solved(info: InfoStats) -> bool:
    return info.stop_reason is StopReason.STOP_FN and (info.best_reward or 0.0) >= THRESHOLD


@pytest.mark.learning
def test_ppo_cnn_solves_minigrid_empty_seed_0(tmp_path: Path) -> None:
    info = _train(0, 10, tmp_path / "run")
    assert _solved(info), info


@pytest.mark.learning
@pytest.mark.slow
def test_ppo_cnn_solves_minigrid_empty_on_five_seeds(tmp_path: Path) -> None:
    results = {seed: _train(seed, 15, tmp_path / f"run-{seed}") for seed in range(5)}
    failed = {
        seed: (info.best_reward, info.train_step) for seed, info in results.items() if not _solved(info)
    }
    assert not failed, failed
