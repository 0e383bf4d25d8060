"""PPO with the Nature CNN on Atari Breakout learns within a small budget (slow tier).

Built by the experiment layer from examples/configs/ppo_atari_breakout.yaml (rl-zoo's Atari PPO settings:
8 envs x 128 steps, 4 epochs of 4 mini-batches, lr 2.5e-4 and clip 0.1 decayed linearly over the budget),
cut to BUDGET_ENV_STEPS = 98,304 env steps (393,216 frames, 12 epochs of 8,192) with one torch thread.
Measured on the project's 2-core machine (shared): 15 min wall clock, 10.3 min CPU.

Setting: as the example, but with ``terminal_on_life_loss: true`` (an episode is one life: losing the ball
ends it, the DQN paper's "episodic life"). With whole games (the example's setting) the same budget showed
no learning: the mean training return per epoch stayed between 1.1 and 2.0 over 65,536 env steps (seed 0:
1.69, 1.43, 1.12, 2.00, 1.92, 1.55, 1.35, 1.63), Breakout needs more env steps than a slow test can take
for that. Episodes are capped at MAX_FRAMES emulator frames, which bounds the (deterministic) test
episodes of a policy that has not learnt to press FIRE yet.

Measure: the mean training return (per life, unclipped) of the episodes finished in each epoch. A random
policy scores about 0.3 per life. Measured for seed 0, epochs 1-12: 0.31, 0.36, 0.30, 0.42, 0.32, 0.53,
0.42, 0.65, 0.51, 0.50, 0.49, 0.51 (197 episodes in epoch 1, 178 in epoch 12: lives last longer). The test
asserts that the mean of the last three epochs (measured 0.50) is at least THRESHOLD and at least
MIN_GAIN above the mean of the first three (measured 0.32). With about 180 episodes per epoch the mean of
three epochs has a standard error of about 0.03, so THRESHOLD is 4 standard errors above the random level.

Every run prints the curve (``CURVE``) and a ``RESULT`` line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

pytestmark = pytest.mark.integration
need("ale_py", "atari")
need("cv2", "atari")

from typing_extensions import override

from tshtrain.config import build_run, load_experiment
from tshtrain.env.atari import atari_wrappers
from tshtrain.trainer.callbacks import Callback, RunContext
from tshtrain.trainer.stats import EpochStats

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "configs" / "ppo_atari_breakout.yaml"
EPOCH_ENV_STEPS = 8192
NUM_EPOCHS = 12
BUDGET_ENV_STEPS = EPOCH_ENV_STEPS * NUM_EPOCHS
"""98,304 env steps = 393,216 frames"""
MAX_FRAMES = 8000
THRESHOLD = 0.42
MIN_GAIN = 0.1
WINDOW = 3
"""epochs averaged at either end of the curve"""


class _TrainingReturns(Callback):
    """The training returns of each epoch."""

    def __init__(self) -> None:
        self.epochs: list[tuple[int, int, float, int]] = []  # (epoch, env steps, mean return, episodes)

    @override
    def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
        collected = stats.train_collect_stat
        returns = collected.returns if collected is not None else np.zeros(0)
        mean = float(np.mean(returns)) if len(returns) else float("nan")
        self.epochs.append((stats.epoch, ctx.counters.env_step, mean, len(returns)))
        print(
            f"CURVE ppo_atari_breakout epoch={stats.epoch} env_steps={ctx.counters.env_step} "
            f"mean_training_return={mean:.2f} episodes={len(returns)}",
            flush=True,
        )


def train_breakout(seed: int, output_dir: Path) -> list[tuple[int, int, float, int]]:
    """One PPO run of the budget; the per-epoch training returns."""
    experiment = load_experiment(
        str(CONFIG),
        [
            f"seed={seed}",
            f"trainer.max_epochs={NUM_EPOCHS}",
            f"trainer.epoch_num_steps={EPOCH_ENV_STEPS}",
            "trainer.test_step_num_episodes=1",
            "env.num_test_envs=1",
            f"env.kwargs.max_num_frames_per_episode={MAX_FRAMES}",
            f"env.wrappers={json.dumps(atari_wrappers(terminal_on_life_loss=True))}",
            "torch_threads=1",
            "trainer.show_progress=false",
            "trainer.verbose=false",
            "loggers=[]",
            "checkpoint.enabled=false",
        ],
    )
    run = build_run(experiment, output_dir)
    curve = _TrainingReturns()
    run.trainer.callbacks.add(curve, "learning-curve")
    try:
        run.trainer.run()
    finally:
        run.close()
    return curve.epochs


@pytest.mark.learning
@pytest.mark.slow
def test_ppo_breakout_training_return_rises(tmp_path: Path) -> None:
    epochs = train_breakout(0, tmp_path / "run")
    assert len(epochs) == NUM_EPOCHS, epochs
    first = float(np.mean([mean for _, _, mean, _ in epochs[:WINDOW]]))
    last = float(np.mean([mean for _, _, mean, _ in epochs[-WINDOW:]]))
    print(f"RESULT ppo_atari_breakout seed=0 first={first:.2f} last={last:.2f} env_steps={epochs[-1][1]}")
    assert last >= THRESHOLD and last - first >= MIN_GAIN, epochs
