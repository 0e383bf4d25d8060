"""A2C on CartPole-v1: 8 envs, 5 env steps per env per collection step, one Adam step per rollout.

The hyperparameters are those of A2C's default experiment (tshtrain/config/algos/on_policy.py; print them with
``tshtrain config a2c``); the budget (``--max-env-steps``) is this script's own.

Run: python examples/a2c_cartpole.py [--seed 0] [--max-env-steps 200000]
"""

from __future__ import annotations

import argparse

import torch

from tshtrain.algorithm import A2C, A2CParams, CategoricalPolicy, LinearSchedule, mlp, num_update_steps_for
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

EXPERIMENT = default_experiment("a2c")
"""the settings of this example: env, hyperparameters, networks and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])
NUM_ENVS = EXPERIMENT.env.num_training_envs
COLLECTION_STEP_NUM_ENV_STEPS = TRAINER["collection_step_num_env_steps"]  # a few env steps per env
EPOCH_NUM_STEPS = TRAINER["epoch_num_steps"]


def train(
    seed: int = 0,
    max_env_steps: int = 200_000,
    stop_at: float = TRAINER["stop_score"],
    verbose: bool = True,
) -> tuple[A2C, InfoStats]:
    """Train until the mean test return over 10 episodes reaches ``stop_at`` or ``max_env_steps``
    (rounded down to whole epochs) are used up."""
    torch.manual_seed(seed)  # network initialisation
    train_envs = make_vector_env(EXPERIMENT.env.id, NUM_ENVS)
    test_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    max_epochs = max_env_steps // EPOCH_NUM_STEPS
    num_updates = num_update_steps_for(
        num_env_steps=max_epochs * EPOCH_NUM_STEPS,
        collection_step_num_env_steps=COLLECTION_STEP_NUM_ENV_STEPS,
        num_envs=NUM_ENVS,
    )
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN_SIZES), train_envs.single_action_space, seed=seed)
    params = A2CParams(
        lr=HPARAMS["lr"],
        lr_schedule=LinearSchedule(num_update_steps=num_updates),
        gamma=HPARAMS["gamma"],
        gae_lambda=HPARAMS["gae_lambda"],  # 1: n-step returns (with 5 steps per env, lambda matters little)
        ent_coef=HPARAMS["ent_coef"],
        advantage_normalization=HPARAMS["advantage_normalization"],
    )
    algorithm = A2C(policy=policy, critic=mlp(4, 1, HIDDEN_SIZES), params=params, seed=seed)
    trainer_params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, train_envs, VectorReplayBuffer(COLLECTION_STEP_NUM_ENV_STEPS, NUM_ENVS), seed=seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=EPOCH_NUM_STEPS,
        collection_step_num_env_steps=COLLECTION_STEP_NUM_ENV_STEPS,
        batch_size=TRAINER["batch_size"],  # None: the whole rollout in one batch
        update_step_num_repetitions=TRAINER["update_step_num_repetitions"],
        test_step_num_episodes=TRAINER["test_step_num_episodes"],
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
    parser.add_argument("--max-env-steps", type=int, default=200_000)
    args = parser.parse_args()
    _, info = train(seed=args.seed, max_env_steps=args.max_env_steps)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
