"""DQN + ICM and PPO + ICM on CartPole-v1: curiosity as an intrinsic reward around any algorithm.

The ICM module is the one of Tianshou's ``test_dqn_icm.py`` / ``test_ppo_icm.py`` (a ReLU MLP feature net,
one-hidden-layer forward and inverse models; ``lr_scale=1``, ``reward_scale=0.01``,
``forward_loss_weight=0.2``); the inner algorithms are those of ``dqn_cartpole.py`` and
``ppo_cartpole.py``.

Run: python examples/icm_cartpole.py [--algorithm dqn|ppo] [--seed 0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import (
    DQN,
    PPO,
    CategoricalPolicy,
    DQNParams,
    EpsilonSchedule,
    ICMModule,
    ICMOffPolicy,
    ICMOnPolicy,
    ICMParams,
    PPOParams,
    QValuePolicy,
    mlp,
)
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import (
    InfoStats,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
)

ICM_PARAMS = ICMParams(lr=1e-3, lr_scale=1.0, reward_scale=0.01, forward_loss_weight=0.2)
"""Tianshou's ICM test settings"""


def train_dqn(
    seed: int = 0,
    max_epochs: int = 10,
    stop_at: float = 195.0,
    icm: ICMParams = ICM_PARAMS,
    verbose: bool = True,
) -> tuple[ICMOffPolicy[QValuePolicy], InfoStats]:
    """DQN + ICM until the mean test return over 10 episodes reaches ``stop_at`` or max_epochs end."""
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env("CartPole-v1", 8), make_vector_env("CartPole-v1", 8)
    policy = QValuePolicy(
        mlp(4, 2, (128, 128), nn.ReLU),
        train_envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=10_000),
        seed=seed,
    )
    dqn = DQN(policy=policy, params=DQNParams(lr=1e-3, gamma=0.99, target_update_freq=200))
    module = ICMModule.from_mlp(4, train_envs.single_action_space, hidden_sizes=(128, 128))
    algorithm = ICMOffPolicy(dqn, module, icm)
    training = Collector(
        policy, train_envs, VectorReplayBuffer(20_000, 8, seed=seed), exploration_noise=True, seed=seed
    )
    training.collect(n_step=1000, random=True)
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=5000,
        collection_step_num_env_steps=16,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=64,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= stop_at,
        verbose=verbose,
    )
    try:
        return algorithm, OffPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def train_ppo(
    seed: int = 0,
    max_epochs: int = 10,
    stop_at: float = 195.0,
    icm: ICMParams = ICM_PARAMS,
    verbose: bool = True,
) -> tuple[ICMOnPolicy[ActorPolicy], InfoStats]:
    """PPO + ICM until the mean test return over 10 episodes reaches ``stop_at`` or max_epochs end."""
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env("CartPole-v1", 8), make_vector_env("CartPole-v1", 8)
    policy = CategoricalPolicy(mlp(4, 2, (64, 64)), train_envs.single_action_space, seed=seed)
    ppo = PPO(policy=policy, critic=mlp(4, 1, (64, 64)), params=PPOParams(lr=1e-3, gamma=0.98), seed=seed)
    module = ICMModule.from_mlp(4, train_envs.single_action_space, hidden_sizes=(64, 64))
    algorithm = ICMOnPolicy(ppo, module, icm)
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, train_envs, VectorReplayBuffer(256 * 8, 8), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=4096,
        collection_step_num_env_steps=256 * 8,
        batch_size=256,
        update_step_num_repetitions=10,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= stop_at,
        verbose=verbose,
    )
    try:
        return algorithm, OnPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--algorithm", choices=("dqn", "ppo"), default="dqn")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train = train_dqn if args.algorithm == "dqn" else train_ppo
    _, info = train(seed=args.seed)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
