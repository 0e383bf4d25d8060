"""Discrete CQL on CartPole-v1 from a dataset of a trained DQN agent: half greedy episodes, half with
epsilon-greedy noise (epsilon 0.3), so that the dataset holds good and imperfect behaviour.

The DQN agent comes from ``examples/dqn_cartpole_475.py``; the dataset is cached with ``save_buffer``.

The hyperparameters of the CQL agent are those of discrete CQL's default experiment
(tshtrain/config/algos/offline.py; print them with ``tshtrain config discrete_cql``); the budget is this
script's own.

Run: python examples/discrete_cql_cartpole.py [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from dqn_cartpole_475 import train as train_dqn

from tshtrain.algorithm import DiscreteCQL, DiscreteCQLParams, EpsilonSchedule, QValuePolicy, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer, load_buffer, save_buffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

EXPERIMENT = default_experiment("discrete_cql")
"""the settings of this example: env, hyperparameters, networks and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])

DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "tshtrain_datasets"
"""where datasets are cached unless a directory is given"""


def cartpole_dataset(
    seed: int = 0, num_env_steps: int = 20_000, cache_dir: str | Path | None = None, *, sample_seed: int = 0
) -> tuple[BaseReplayBuffer, float]:
    """The dataset of DQN seed ``seed`` (made and cached on first use) and the DQN agent's mean test
    return over 10 episodes."""
    directory = Path(cache_dir or DEFAULT_CACHE_DIR) / f"dqn_cartpole_seed{seed}_{num_env_steps}"
    scores_file = directory / "scores.json"
    if not scores_file.exists():
        expert, _ = train_dqn(seed=seed, verbose=False)
        envs = make_vector_env("CartPole-v1", 8)
        dataset = VectorReplayBuffer(num_env_steps, 8, seed=seed)
        half = num_env_steps // 2
        # one collector (a new one would reset the buffer): greedy steps first, then epsilon 0.3
        expert.policy.eps_schedule = EpsilonSchedule(start=0.0, end=0.0, num_env_steps=0)
        collector = Collector(expert.policy, envs, dataset, exploration_noise=True, seed=seed + 1)
        collector.collect(n_step=half)
        expert.policy.eps_schedule = EpsilonSchedule(start=0.3, end=0.3, num_env_steps=0)
        collector.collect(n_step=half)
        test = Collector(expert.policy, envs, seed=seed + 3).collect(n_episode=10, deterministic=True)
        save_buffer(dataset, directory / "buffer")
        scores_file.write_text(json.dumps({"expert_return": float(test.returns_stat.mean)}))
        envs.close()
    expert_return = float(json.loads(scores_file.read_text())["expert_return"])
    return load_buffer(directory / "buffer", seed=sample_seed), expert_return


def run(
    seed: int = 0, num_epochs: int = 10, cache_dir: str | Path | None = None, verbose: bool = True
) -> tuple[float, float]:
    """Train discrete CQL for ``num_epochs`` epochs of 1000 gradient steps (batch 64) on the dataset of DQN
    seed 0; returns (mean return over 10 test episodes of the final policy, the DQN agent's)."""
    dataset, expert_return = cartpole_dataset(0, cache_dir=cache_dir, sample_seed=seed)
    torch.manual_seed(seed)
    envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    policy = QValuePolicy(mlp(4, 2, HIDDEN_SIZES, nn.ReLU), envs.single_action_space, seed=seed)
    params = DiscreteCQLParams(
        lr=HPARAMS["lr"],
        gamma=HPARAMS["gamma"],
        target_update_freq=HPARAMS["target_update_freq"],
        cql_weight=HPARAMS["cql_weight"],
    )
    algorithm = DiscreteCQL(policy=policy, params=params)
    trainer_params = OfflineTrainerParams(
        buffer=dataset,
        max_epochs=num_epochs,
        epoch_num_steps=TRAINER["epoch_num_steps"],
        batch_size=TRAINER["batch_size"],
        show_progress=False,
        verbose=verbose,
    )
    OfflineTrainer(algorithm, trainer_params).run()
    stats = Collector(policy, envs, seed=seed + 2000).collect(n_episode=10, deterministic=True)
    envs.close()
    return float(stats.returns_stat.mean), expert_return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--cache-dir", type=str, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ret, expert = run(args.seed, args.epochs, args.cache_dir)
    print(f"discrete CQL return {ret:.1f} (DQN agent: {expert:.1f})")


if __name__ == "__main__":
    main()
