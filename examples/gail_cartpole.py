"""GAIL on CartPole-v1: imitate a hand-written controller from its transitions, never seeing a reward.

The expert pushes the cart towards the side the pole falls to (``push right iff angle + angular
velocity > 0``), which balances the pole for all 500 steps. Its transitions (a few thousand env steps)
go into a ReplayBuffer; GAIL trains PPO on the discriminator's rewards ``-log(1 - D(o, a))``. The test
returns are CartPole's own.

Run: python examples/gail_cartpole.py [--seed 0] [--max-env-steps 30000]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch

from tshtrain.algorithm import GAIL, CategoricalPolicy, GAILParams, Policy, PPOParams, mlp
from tshtrain.data import Collector, ObsTensor, ReplayBuffer, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

NUM_ENVS = 8
COLLECTION_STEP_NUM_ENV_STEPS = 512
EPOCH_NUM_STEPS = 2048
EXPERT_NUM_ENV_STEPS = 4000
STOP_SCORE = 195.0
"""Tianshou's CartPole threshold"""


class CartPoleExpert(Policy):
    """Push right (1) iff pole angle + angular velocity > 0, else left (0)."""

    def __init__(self, action_space: gym.Space[np.int64]):
        super().__init__(action_space=action_space)

    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)
        return (obs[:, 2] + obs[:, 3] > 0).long()


def expert_data(seed: int, num_env_steps: int = EXPERT_NUM_ENV_STEPS) -> tuple[ReplayBuffer, float]:
    """The expert's transitions (``num_env_steps`` of them) and its mean return over 10 episodes."""
    envs = make_vector_env("CartPole-v1", 1)
    try:
        expert = CartPoleExpert(envs.single_action_space)
        buffer = ReplayBuffer(num_env_steps, seed=seed)
        Collector(expert, envs, buffer, seed=seed + 2000).collect(n_step=num_env_steps)
        test = Collector(expert, envs, seed=seed + 3000).collect(n_episode=10, reset_before_collect=True)
        return buffer, float(np.mean(test.returns))
    finally:
        envs.close()


def train(
    seed: int = 0, max_env_steps: int = 30_000, stop_at: float = STOP_SCORE, verbose: bool = True
) -> tuple[GAIL, InfoStats]:
    """Train until the mean test return over 10 episodes reaches ``stop_at`` or ``max_env_steps``
    (rounded down to whole epochs) are used up."""
    expert_buffer, _ = expert_data(seed)
    torch.manual_seed(seed)  # network initialisation
    train_envs = make_vector_env("CartPole-v1", NUM_ENVS)
    test_envs = make_vector_env("CartPole-v1", 10)
    policy = CategoricalPolicy(mlp(4, 2, (64, 64)), train_envs.single_action_space, seed=seed)
    params = GAILParams(
        ppo=PPOParams(lr=1e-3, gamma=0.98, gae_lambda=0.8, ent_coef=0.0),
        disc_lr=1e-3,
        disc_update_num=4,
    )
    algorithm = GAIL(
        policy=policy,
        critic=mlp(4, 1, (64, 64)),
        expert_buffer=expert_buffer,
        discriminator=mlp(4 + 2, 1, (64, 64)),
        params=params,
        seed=seed,
    )
    trainer_params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, train_envs, VectorReplayBuffer(COLLECTION_STEP_NUM_ENV_STEPS, NUM_ENVS), seed=seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max(max_env_steps // EPOCH_NUM_STEPS, 1),
        epoch_num_steps=EPOCH_NUM_STEPS,
        collection_step_num_env_steps=COLLECTION_STEP_NUM_ENV_STEPS,
        batch_size=128,
        update_step_num_repetitions=10,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= stop_at,
        verbose=verbose,
    )
    try:
        return algorithm, OnPolicyTrainer(algorithm, trainer_params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-env-steps", type=int, default=30_000)
    args = parser.parse_args()
    _, expert_return = expert_data(args.seed)
    print(f"expert mean return {expert_return:.1f}")
    _, info = train(seed=args.seed, max_env_steps=args.max_env_steps)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
