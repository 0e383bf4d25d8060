"""DQN on CartPole-v1, built from params objects.

Run: python examples/dqn_cartpole.py [--seed 0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams


def build(seed: int = 0) -> tuple[DQN, Collector, Collector]:
    """The algorithm and its training and test collectors (the buffer prefilled with random steps)."""
    torch.manual_seed(seed)
    train_envs = make_vector_env("CartPole-v1", 8)
    test_envs = make_vector_env("CartPole-v1", 8)
    policy = QValuePolicy(
        mlp(4, 2, (128, 128), nn.ReLU),
        train_envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=10_000),
        seed=seed,
    )
    algorithm = DQN(policy=policy, params=DQNParams(lr=1e-3, gamma=0.99, target_update_freq=200))
    training_collector = Collector(policy, train_envs, VectorReplayBuffer(20_000, 8, seed=seed), exploration_noise=True,
                                   seed=seed)
    training_collector.collect(n_step=1000, random=True)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    return algorithm, training_collector, test_collector


def train(seed: int = 0, max_epochs: int = 10, stop_at: float = 195.0, verbose: bool = True) -> tuple[DQN, InfoStats]:
    """Train until the mean test return reaches ``stop_at`` or max_epochs end."""
    algorithm, training_collector, test_collector = build(seed)
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=5000,
        collection_step_num_env_steps=16,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=64,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= stop_at,
        verbose=verbose,
    )
    info = OffPolicyTrainer(algorithm, params).run()  # resets envs, keeps the prefilled buffer
    training_collector.env.close()
    test_collector.env.close()
    return algorithm, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    _, info = train(seed=args.seed)
    print(f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
          f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}")


if __name__ == "__main__":
    main()
