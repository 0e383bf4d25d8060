"""PPO with the Nature CNN on Atari Breakout learns within a small budget (slow tier).

Built by the experiment layer from examples/configs/ppo_atari_breakout.yaml (rl-zoo's Atari PPO settings:
8 envs x 128 steps, 4 epochs of 4 mini-batches, lr 2.5e-4 and clip 0.1 decayed linearly over the budget),
cut to BUDGET_ENV_STEPS env steps (4 frames each) so that it runs in about 20 minutes on 2 CPU cores with
one torch thread. Episodes are whole games (5 lives, unclipped rewards) capped at MAX_FRAMES emulator
frames, which a policy at this stage never reaches in training but which bounds the (deterministic)
test episodes of a policy that has not learnt to press FIRE yet.

Measure: the mean training return of the episodes finished in each epoch (8,192 env steps). A uniformly
random policy scores about 1.3 on Breakout; the first epoch of the untrained (near-uniform) policy is
at that level. The test asserts that the last epoch's mean is at least THRESHOLD and at least
MIN_GAIN above the first epoch's.

Every run prints the curve (``CURVE``) and a ``RESULT`` line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

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
THRESHOLD = 3.0
MIN_GAIN = 1.0


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
    first, last = epochs[0][2], epochs[-1][2]
    print(f"RESULT ppo_atari_breakout seed=0 first={first:.2f} last={last:.2f} env_steps={epochs[-1][1]}")
    assert len(epochs) == NUM_EPOCHS, epochs
    assert last >= THRESHOLD and last - first >= MIN_GAIN, epochs
