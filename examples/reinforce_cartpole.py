"""REINFORCE on CartPole-v1, built from params objects (the Tianshou way).

The hyperparameters are those of REINFORCE's default experiment (tshtrain/config/algos/on_policy.py;
print them with ``tshtrain config reinforce``).

Run: python examples/reinforce_cartpole.py [--seed 0] [--max-epochs 20] [--logdir runs/reinforce]
"""

from __future__ import annotations

import argparse

import torch

from tshtrain.algorithm import CategoricalPolicy, Reinforce, ReinforceParams, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

EXPERIMENT = default_experiment("reinforce")
"""the settings of this example: env, hyperparameters, networks and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])
NUM_ENVS = EXPERIMENT.env.num_training_envs


def train(
    seed: int = 0,
    max_epochs: int = TRAINER["max_epochs"],
    epoch_num_steps: int = TRAINER["epoch_num_steps"],
    verbose: bool = True,
) -> InfoStats:
    """Train until the mean test return reaches the stop score (195, CartPole-v0's 'solved') or max_epochs
    end."""
    torch.manual_seed(seed)  # network initialisation
    train_envs = make_vector_env(EXPERIMENT.env.id, NUM_ENVS)
    test_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN_SIZES), train_envs.single_action_space, seed=seed)
    params = ReinforceParams(lr=HPARAMS["lr"], gamma=HPARAMS["gamma"])
    algorithm = Reinforce(policy=policy, params=params, seed=seed)
    buffer = VectorReplayBuffer(EXPERIMENT.buffer.size, NUM_ENVS)
    trainer_params = OnPolicyTrainerParams(
        training_collector=Collector(policy, train_envs, buffer, seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_episodes=TRAINER["collection_step_num_episodes"],
        batch_size=TRAINER["batch_size"],
        test_step_num_episodes=TRAINER["test_step_num_episodes"],
        stop_fn=lambda score: score >= TRAINER["stop_score"],
        verbose=verbose,
    )
    try:
        return OnPolicyTrainer(algorithm, trainer_params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=TRAINER["max_epochs"])
    args = parser.parse_args()
    torch.set_num_threads(1)  # small networks: one thread is fastest (56 s -> 6 s on 2 cores)
    info = train(seed=args.seed, max_epochs=args.max_epochs)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
