"""SAC on MuJoCo Hopper-v5: a documented benchmark, not a test (MuJoCo is no tshtrain dependency).

Goal (issue 4): a mean test return >= 2500 within 300k env steps. Results and the learning curve are in
``docs/mujoco.md``.

Setup (a separate venv, CPU torch first):

    python3 -m venv /work/mujoco-venv
    /work/mujoco-venv/bin/pip install torch==2.13.0
    /work/mujoco-venv/bin/pip install -e . mujoco imageio matplotlib

Run (one seed at a time; a run of 300k env steps needs about two hours of one CPU core):

    /work/mujoco-venv/bin/python benchmarks/sac_hopper.py --seed 0 --log-dir runs/sac_hopper/seed0
    /work/mujoco-venv/bin/tshtrain plot runs/sac_hopper -o docs/img/sac_hopper.png

Env-step accounting: the ``--prefill-env-steps`` uniformly random steps count towards ``--env-steps``,
and the ``env_step`` column of ``training.csv`` / ``test.csv`` is the total including them (the trainer
itself counts from the end of the prefill; ``info.csv`` keeps the trainer's own counters). A test step
(``--test-num-episodes`` deterministic episodes on their own envs) runs every ``--test-interval`` env
steps, the first one right after the prefill.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import final

import gymnasium as gym
import torch
from harness import Clock
from torch import nn

from tshtrain.algorithm import SAC, QEnsemble, SACParams, TanhGaussianPolicy, mlp
from tshtrain.data import Collector, ReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.logger import CsvLogger, LogIntervals, LogScope, read_csv_log
from tshtrain.logger.base import LogResumePoint
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams

ENV_ID = "Hopper-v5"
TARGET_RETURN = 2500.0
"""the issue's goal for the mean test return"""
HIDDEN_SIZES = (256, 256)
"""hidden layers of the actor and of each of the two critics (ReLU)"""
LEARNING_RATE = 3e-4
"""Adam learning rate of the actor, the critics and log(alpha)"""
BATCH_SIZE = 256
BUFFER_SIZE = 1_000_000
GAMMA = 0.99
TAU = 0.005


@final
class EnvStepShiftLogger:
    """Passes records to a logger, adding the prefill to the ``env_step`` axis (training and test
    scopes) so that curves start at the true env step. Does not support resuming."""

    def __init__(self, inner: CsvLogger, shift_env_steps: int):
        self.inner = inner
        self.shift_env_steps = shift_env_steps

    @property
    def intervals(self) -> LogIntervals:
        return self.inner.intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        on_env_axis = scope in (LogScope.TRAINING, LogScope.TEST)
        self.inner.write(scope, step + self.shift_env_steps if on_env_axis else step, data)

    def restore_counters(self) -> LogResumePoint | None:
        return None

    def close(self) -> None:
        self.inner.close()


def build(seed: int, prefill_env_steps: int, test_num_episodes: int) -> tuple[SAC, Collector, Collector]:
    """SAC, its training collector (buffer prefilled with random steps) and its test collector."""
    torch.manual_seed(seed)
    train_envs = make_vector_env(ENV_ID, 1)
    test_envs = make_vector_env(ENV_ID, test_num_episodes)
    obs_space, act_space = train_envs.single_observation_space, train_envs.single_action_space
    assert isinstance(obs_space, gym.spaces.Box) and isinstance(act_space, gym.spaces.Box)
    obs_dim, act_dim = math.prod(obs_space.shape), math.prod(act_space.shape)
    policy = TanhGaussianPolicy(mlp(obs_dim, 2 * act_dim, HIDDEN_SIZES, nn.ReLU), act_space, seed=seed)
    critic = QEnsemble(obs_dim, act_dim, HIDDEN_SIZES, num_critics=2, activation=nn.ReLU)
    params = SACParams(
        actor_lr=LEARNING_RATE,
        critic_lr=LEARNING_RATE,
        alpha_lr=LEARNING_RATE,
        gamma=GAMMA,
        tau=TAU,
        alpha=1.0,
        auto_alpha=True,  # target entropy -act_dim
    )
    algorithm = SAC(policy=policy, critic=critic, params=params)
    buffer = ReplayBuffer(BUFFER_SIZE, seed=seed)
    training_collector = Collector(policy, train_envs, buffer, seed=seed)
    training_collector.collect(n_step=prefill_env_steps, random=True)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    return algorithm, training_collector, test_collector


def summarize(
    log_dir: Path, wall_time_s: float, cpu_time_s: float, num_env_steps: int
) -> dict[str, float | int | None]:
    """Best and final mean test return, the first env step reaching TARGET_RETURN, timing (the CPU time
    of this process tells how long the run takes on a machine it has to itself)."""
    curve = [(step, scalars["returns/mean"]) for step, scalars in read_csv_log(log_dir)[LogScope.TEST]]
    best_step, best_return = max(curve, key=lambda point: point[1])
    reached = [step for step, value in curve if value >= TARGET_RETURN]
    return {
        "num_env_steps": num_env_steps,
        "best_return": best_return,
        "best_return_env_step": best_step,
        "final_return": curve[-1][1],
        "final_env_step": curve[-1][0],
        "first_env_step_at_target": reached[0] if reached else None,
        "wall_time_s": wall_time_s,
        "env_steps_per_s": num_env_steps / wall_time_s,
        "cpu_time_s": cpu_time_s,
        "env_steps_per_cpu_s": num_env_steps / cpu_time_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=300_000, help="total env steps, prefill included")
    parser.add_argument("--log-dir", type=Path, default=None, help="default: runs/sac_hopper/seed<SEED>")
    parser.add_argument("--prefill-env-steps", type=int, default=5000, help="uniformly random steps first")
    parser.add_argument("--test-interval", type=int, default=5000, help="env steps between test steps")
    parser.add_argument("--test-num-episodes", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    log_dir: Path = args.log_dir or Path("runs/sac_hopper") / f"seed{args.seed}"
    if (log_dir / "test.csv").exists():
        parser.error(f"{log_dir} already holds a run (test.csv); pass a fresh --log-dir.")
    training_env_steps = args.env_steps - args.prefill_env_steps
    if training_env_steps < args.test_interval or training_env_steps % args.test_interval:
        parser.error(
            f"--env-steps minus --prefill-env-steps ({training_env_steps}) must be a positive multiple of "
            f"--test-interval ({args.test_interval})."
        )

    clock = Clock()
    algorithm, training_collector, test_collector = build(
        args.seed, args.prefill_env_steps, args.test_num_episodes
    )
    logger = EnvStepShiftLogger(CsvLogger(log_dir), shift_env_steps=args.prefill_env_steps)
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=training_env_steps // args.test_interval,
        epoch_num_steps=args.test_interval,
        collection_step_num_env_steps=1,
        update_step_num_gradient_steps_per_sample=1.0,  # one gradient step per env step
        batch_size=BATCH_SIZE,
        test_step_num_episodes=args.test_num_episodes,
        logger=logger,
        verbose=True,
        show_progress=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()  # resets the envs, keeps the prefilled buffer
    wall_time_s, cpu_time_s = clock.wall(), clock.cpu()
    training_collector.env.close()
    test_collector.env.close()

    num_env_steps = info.train_step + args.prefill_env_steps
    summary = {"seed": args.seed, **summarize(log_dir, wall_time_s, cpu_time_s, num_env_steps)}
    (log_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
