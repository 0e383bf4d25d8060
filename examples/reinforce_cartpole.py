"""REINFORCE on CartPole-v1, built from params objects (the Tianshou way).

Run: python examples/reinforce_cartpole.py [--seed 0] [--max-epochs 20] [--logdir runs/reinforce]
"""

from __future__ import annotations

import argparse

import torch

from tshtrain.algorithm import CategoricalPolicy, Reinforce, ReinforceParams, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams


def train(seed: int = 0, max_epochs: int = 20, epoch_num_steps: int = 10_000, verbose: bool = True) -> InfoStats:
    """Train until the mean test return reaches 195 (CartPole-v0's 'solved') or max_epochs end."""
    torch.manual_seed(seed)  # network initialisation
    train_envs = make_vector_env("CartPole-v1", 8)
    test_envs = make_vector_env("CartPole-v1", 8)
    policy = CategoricalPolicy(mlp(4, 2, (64, 64)), train_envs.single_action_space, seed=seed)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(lr=1e-3, gamma=0.99), seed=seed)
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, train_envs, VectorReplayBuffer(20_000, 8), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_episodes=16,
        batch_size=None,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= 195,
        verbose=verbose,
    )
    try:
        return OnPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=20)
    args = parser.parse_args()
    info = train(seed=args.seed, max_epochs=args.max_epochs)
    print(f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
          f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}")


if __name__ == "__main__":
    main()
