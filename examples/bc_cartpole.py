"""Behaviour cloning on CartPole-v1 from a dataset collected by a trained DQN agent.

Run: python examples/bc_cartpole.py [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from dqn_cartpole import train as train_dqn  # noqa: E402

from tshtrain.algorithm import BehaviorCloning, BCParams, CategoricalPolicy, mlp  # noqa: E402
from tshtrain.data import Collector, VectorReplayBuffer  # noqa: E402
from tshtrain.env import make_vector_env  # noqa: E402
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams  # noqa: E402


def run(seed: int = 0, dataset_size: int = 10_000, verbose: bool = True) -> tuple[float, float]:
    """Returns (mean test return of the DQN expert, mean test return of the BC agent), 20 episodes each."""
    expert, _ = train_dqn(seed=seed, max_epochs=10, verbose=verbose)
    envs = make_vector_env("CartPole-v1", 8)
    dataset = VectorReplayBuffer(dataset_size, 8, seed=seed)
    Collector(expert.policy, envs, dataset, seed=seed + 1).collect(n_step=dataset_size, deterministic=True)
    expert_return = Collector(expert.policy, envs, seed=seed + 2).collect(n_episode=20, deterministic=True)

    torch.manual_seed(seed)
    policy = CategoricalPolicy(mlp(4, 2, (64, 64)), envs.single_action_space, seed=seed)
    algorithm = BehaviorCloning(policy=policy, params=BCParams(lr=1e-3))
    params = OfflineTrainerParams(
        buffer=dataset,
        test_collector=Collector(policy, make_vector_env("CartPole-v1", 8), seed=seed + 2),
        max_epochs=3,
        epoch_num_steps=1000,
        batch_size=64,
        test_step_num_episodes=20,
        verbose=verbose,
    )
    OfflineTrainer(algorithm, params).run()
    bc_return = Collector(policy, envs, seed=seed + 2).collect(n_episode=20, deterministic=True)
    return expert_return.returns_stat.mean, bc_return.returns_stat.mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    expert, bc = run(seed=args.seed)
    print(f"expert (DQN) return {expert:.1f}, behaviour cloning return {bc:.1f} ({bc / expert:.0%})")


if __name__ == "__main__":
    main()
