"""PPO on Pendulum-v1 (Box actions): a Gaussian policy with a state-independent log-std and running
observation normalisation, with rl-zoo's hyperparameters (without gSDE).

Run: python examples/ppo_pendulum.py [--seed 0] [--max-env-steps 300000]
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn

from tshtrain.algorithm import PPO, GaussianPolicy, PPOParams, RunningObsNormalizer, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

NUM_ENVS = 4
COLLECTION_STEP_NUM_ENV_STEPS = 4096  # 1024 env steps per env
EPOCH_NUM_STEPS = 16_384  # 4 training steps, then a test step


def train(
    seed: int = 0, max_env_steps: int = 300_000, stop_at: float = -250.0, verbose: bool = True
) -> tuple[PPO, InfoStats]:
    """Train until the mean test return over 10 episodes reaches ``stop_at`` or ``max_env_steps``
    (rounded down to whole epochs) are used up."""
    torch.manual_seed(seed)  # network initialisation
    train_envs = make_vector_env("Pendulum-v1", NUM_ENVS)
    test_envs = make_vector_env("Pendulum-v1", NUM_ENVS)
    normalizer = RunningObsNormalizer(3)
    policy = GaussianPolicy(
        nn.Sequential(normalizer, mlp(3, 1, (64, 64))),
        train_envs.single_action_space,
        init_log_std=math.log(0.5),  # std 1 in the env's units (the Box is [-2, 2])
        seed=seed,
    )
    critic = nn.Sequential(normalizer, mlp(3, 1, (64, 64)))
    params = PPOParams(lr=1e-3, clip_range=0.2, gamma=0.9, gae_lambda=0.95, ent_coef=0.0)
    algorithm = PPO(policy=policy, critic=critic, params=params, obs_normalizer=normalizer, seed=seed)
    trainer_params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, train_envs, VectorReplayBuffer(COLLECTION_STEP_NUM_ENV_STEPS, NUM_ENVS), seed=seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_env_steps // EPOCH_NUM_STEPS,
        epoch_num_steps=EPOCH_NUM_STEPS,
        collection_step_num_env_steps=COLLECTION_STEP_NUM_ENV_STEPS,
        batch_size=64,
        update_step_num_repetitions=10,
        test_step_num_episodes=10,
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
    parser.add_argument("--max-env-steps", type=int, default=300_000)
    args = parser.parse_args()
    _, info = train(seed=args.seed, max_env_steps=args.max_env_steps)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s, stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
