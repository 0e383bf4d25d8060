"""Behaviour cloning on CartPole-v1 from a dataset collected by a trained DQN agent.

The hyperparameters of the behaviour cloning agent are those of BC's default experiment
(tshtrain/config/algos/offline.py; print them with ``tshtrain config bc``); the dataset is this script's own.

Run: python examples/bc_cartpole.py [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from dqn_cartpole import train as train_dqn

from tshtrain.algorithm import BCParams, BehaviorCloning, CategoricalPolicy, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

EXPERIMENT = default_experiment("bc")
"""the settings of this example: env, hyperparameters, networks and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])


def run(seed: int = 0, dataset_size: int = 10_000, verbose: bool = True) -> tuple[float, float]:
    """Returns (mean test return of the DQN expert, mean test return of the BC agent), 20 episodes each."""
    expert, _ = train_dqn(seed=seed, max_epochs=10, verbose=verbose)
    envs = make_vector_env("CartPole-v1", 8)
    dataset = VectorReplayBuffer(dataset_size, 8, seed=seed)
    Collector(expert.policy, envs, dataset, seed=seed + 1).collect(n_step=dataset_size, deterministic=True)
    expert_return = Collector(expert.policy, envs, seed=seed + 2).collect(n_episode=20, deterministic=True)

    torch.manual_seed(seed)
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN_SIZES), envs.single_action_space, seed=seed)
    algorithm = BehaviorCloning(policy=policy, params=BCParams(lr=HPARAMS["lr"]))
    params = OfflineTrainerParams(
        buffer=dataset,
        test_collector=Collector(
            policy, make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs), seed=seed + 2
        ),
        max_epochs=TRAINER["max_epochs"],
        epoch_num_steps=TRAINER["epoch_num_steps"],
        batch_size=TRAINER["batch_size"],
        test_step_num_episodes=TRAINER["test_step_num_episodes"],
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
