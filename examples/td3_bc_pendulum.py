"""TD3+BC on Pendulum-v1 from the mixed-quality SAC dataset of ``cql_pendulum.py`` (made and cached on
first use). Observations are standardised by the dataset's statistics (``TD3BC.process_buffer``).

The hyperparameters are those of TD3+BC's default experiment (tshtrain/config/algos/offline.py; print them
with ``tshtrain config td3_bc``); the budget (``--epochs``) is this script's own.

Run: python examples/td3_bc_pendulum.py [--seed 0] [--cache-dir /tmp/tshtrain_datasets]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from cql_pendulum import evaluate, pendulum_dataset

from tshtrain.algorithm import (
    TD3BC,
    DeterministicActorPolicy,
    QEnsemble,
    RunningObsNormalizer,
    TD3BCParams,
    mlp,
)
from tshtrain.config import default_experiment
from tshtrain.env import make_vector_env
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

EXPERIMENT = default_experiment("td3_bc")
"""the settings of this example: env, hyperparameters, networks and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])


def run(
    seed: int = 0, num_epochs: int = 8, cache_dir: str | Path | None = None, verbose: bool = True
) -> tuple[float, float]:
    """Train TD3+BC for ``num_epochs`` epochs of 1000 gradient steps (batch 256) on the dataset of SAC
    seed 0; returns (mean return over 10 test episodes of the final policy, its normalised score)."""
    data = pendulum_dataset(0, cache_dir=cache_dir, sample_seed=seed)
    torch.manual_seed(seed)
    space = make_vector_env(EXPERIMENT.env.id, 1).single_action_space
    normalizer = RunningObsNormalizer(3)
    actor = nn.Sequential(normalizer, mlp(3, 1, HIDDEN_SIZES, nn.ReLU))
    policy = DeterministicActorPolicy(actor, space, seed=seed)

    class NormalisedCritic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.normalizer = normalizer
            self.q = QEnsemble(3, 1, HIDDEN_SIZES, num_critics=EXPERIMENT.algorithm.network["num_critics"])

        def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.q(self.normalizer(obs), act)
            return out

    algorithm = TD3BC(
        policy=policy,
        critic=NormalisedCritic(),
        obs_normalizer=normalizer,
        params=TD3BCParams(alpha=HPARAMS["alpha"]),
        seed=seed,
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
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--cache-dir", type=str, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ret, score = run(args.seed, args.epochs, args.cache_dir)
    print(f"TD3+BC return {ret:.1f}, normalised score {score:.2f}")


if __name__ == "__main__":
    main()
