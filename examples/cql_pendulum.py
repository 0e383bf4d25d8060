"""CQL on Pendulum-v1 from a mixed-quality dataset: the replay buffer of a SAC run.

The dataset is the buffer of ``examples/sac_pendulum.py`` after ``num_epochs`` epochs of 1000 env steps:
the random prefill, the mediocre episodes of early training and the good ones of the end. It is saved
with :func:`tshtrain.data.save_buffer` (and shared with ``td3_bc_pendulum.py``) together with the
reference returns of the normalised score

    score = (R - R_random) / (R_expert - R_random),

``R_expert`` the SAC agent's final test return and ``R_random`` a uniformly random policy's, both the mean
over 10 test episodes.

The hyperparameters of the CQL agent are those of CQL's default experiment (tshtrain/config/algos/offline.py;
print them with ``tshtrain config cql``); the SAC run that makes the dataset uses SAC's
(``sac_pendulum.py``); the budget (``--epochs``) is this script's own.

Run: python examples/cql_pendulum.py [--seed 0] [--cache-dir /tmp/tshtrain_datasets]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from sac_pendulum import TRAINER as SAC_TRAINER
from sac_pendulum import build

from tshtrain.algorithm import CQL, CQLParams, QEnsemble, TanhGaussianPolicy, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, load_buffer, save_buffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams, OffPolicyTrainer, OffPolicyTrainerParams

EXPERIMENT = default_experiment("cql")
"""the settings of this example: env, hyperparameters, networks and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])

DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "tshtrain_datasets"
"""where datasets are cached unless a directory is given"""


@dataclass(frozen=True)
class PendulumDataset:
    """A saved SAC replay buffer and the reference returns of the normalised score."""

    buffer: BaseReplayBuffer
    expert_return: float
    """the SAC agent's mean return over 10 deterministic test episodes at the end of its run"""
    random_return: float
    """a uniformly random policy's mean return over 10 test episodes"""

    def normalised_score(self, ret: float) -> float:
        """``(ret - R_random) / (R_expert - R_random)``."""
        return (ret - self.random_return) / (self.expert_return - self.random_return)


def pendulum_dataset(
    seed: int = 0, num_epochs: int = 11, cache_dir: str | Path | None = None, *, sample_seed: int = 0
) -> PendulumDataset:
    """Load the dataset of ``seed`` from ``cache_dir`` or make it (a SAC run of ``num_epochs`` * 1000 env
    steps after the 1000 random prefill steps; a minute or two on one CPU thread) and cache it."""
    directory = Path(cache_dir or DEFAULT_CACHE_DIR) / f"sac_pendulum_seed{seed}_epochs{num_epochs}"
    scores_file = directory / "scores.json"
    if not scores_file.exists():
        algorithm, training_collector, test_collector = build(seed)
        sac_ratio = SAC_TRAINER["update_step_num_gradient_steps_per_sample"]
        params = OffPolicyTrainerParams(
            training_collector=training_collector,
            test_collector=test_collector,
            max_epochs=num_epochs,
            epoch_num_steps=SAC_TRAINER["epoch_num_steps"],
            collection_step_num_env_steps=SAC_TRAINER["collection_step_num_env_steps"],
            update_step_num_gradient_steps_per_sample=sac_ratio,
            batch_size=SAC_TRAINER["batch_size"],
            test_step_num_episodes=SAC_TRAINER["test_step_num_episodes"],
            show_progress=False,
            verbose=False,
        )
        OffPolicyTrainer(algorithm, params).run()
        expert = test_collector.collect(n_episode=10, deterministic=True).returns_stat.mean
        rand = test_collector.collect(n_episode=10, random=True).returns_stat.mean
        assert training_collector.buffer is not None
        save_buffer(training_collector.buffer, directory / "buffer")
        scores = {"expert_return": float(expert), "random_return": float(rand)}
        scores_file.write_text(json.dumps(scores))
        training_collector.env.close()
        test_collector.env.close()
    scores = json.loads(scores_file.read_text())
    return PendulumDataset(
        buffer=load_buffer(directory / "buffer", seed=sample_seed),
        expert_return=scores["expert_return"],
        random_return=scores["random_return"],
    )


def evaluate(policy: Any, seed: int, num_episodes: int = 10) -> float:
    """Mean return of ``policy`` over ``num_episodes`` deterministic test episodes on Pendulum-v1."""
    envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    stats = Collector(policy, envs, seed=seed + 2000).collect(n_episode=num_episodes, deterministic=True)
    envs.close()
    return float(stats.returns_stat.mean)


def run(
    seed: int = 0, num_epochs: int = 5, cache_dir: str | Path | None = None, verbose: bool = True
) -> tuple[float, float]:
    """Train CQL for ``num_epochs`` epochs of 1000 gradient steps (batch 256) on the dataset of SAC seed 0;
    returns (mean return over 10 test episodes of the final policy, its normalised score)."""
    data = pendulum_dataset(0, cache_dir=cache_dir, sample_seed=seed)
    torch.manual_seed(seed)
    space = make_vector_env(EXPERIMENT.env.id, 1).single_action_space
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN_SIZES, nn.ReLU), space, seed=seed)
    critic = QEnsemble(3, 1, HIDDEN_SIZES, num_critics=EXPERIMENT.algorithm.network["num_critics"])
    algorithm = CQL(
        policy=policy,
        critic=critic,
        params=CQLParams(
            actor_lr=HPARAMS["actor_lr"],
            critic_lr=HPARAMS["critic_lr"],
            cql_weight=HPARAMS["cql_weight"],
            num_sampled_actions=HPARAMS["num_sampled_actions"],
        ),
    )
    params = OfflineTrainerParams(
        buffer=data.buffer,
        max_epochs=num_epochs,
        epoch_num_steps=TRAINER["epoch_num_steps"],
        batch_size=TRAINER["batch_size"],
        show_progress=False,
        verbose=verbose,
    )
    OfflineTrainer(algorithm, params).run()
    ret = evaluate(policy, seed)
    return ret, data.normalised_score(ret)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--cache-dir", type=str, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ret, score = run(args.seed, args.epochs, args.cache_dir)
    print(f"CQL return {ret:.1f}, normalised score {score:.2f}")


if __name__ == "__main__":
    main()
