"""DDPG on Pendulum-v1: one critic, Gaussian exploration noise of std 0.1 (in the policy's [-1, 1]
action space).

The hyperparameters are those of DDPG's default experiment (tshtrain/config/algos/actor_critic.py;
print them with ``tshtrain config ddpg``); the budget (``--max-epochs``) is this script's own.

Run: python examples/ddpg_pendulum.py [--seed 0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import DDPG, DDPGParams, DeterministicActorPolicy, QEnsemble, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, ReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

EXPERIMENT = default_experiment("ddpg")
"""the settings of this example: env, hyperparameters, networks, buffer and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
NETWORK = EXPERIMENT.algorithm.network
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(NETWORK["hidden_sizes"])
PREFILL_ENV_STEPS = EXPERIMENT.buffer.prefill_env_steps
"""uniformly random env steps collected before training (not counted by the trainer)"""


def build(seed: int = 0) -> tuple[DDPG, Collector, Collector]:
    """The algorithm and its training and test collectors (the buffer prefilled with random steps)."""
    torch.manual_seed(seed)
    train_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_training_envs)
    test_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    obs_dim, act_dim = 3, 1
    policy = DeterministicActorPolicy(
        mlp(obs_dim, act_dim, HIDDEN_SIZES, nn.ReLU),
        train_envs.single_action_space,
        noise_std=EXPERIMENT.algorithm.exploration["noise_std"],
        seed=seed,
    )
    critic = QEnsemble(obs_dim, act_dim, HIDDEN_SIZES, num_critics=NETWORK["num_critics"])
    params = DDPGParams(
        actor_lr=HPARAMS["actor_lr"],
        critic_lr=HPARAMS["critic_lr"],
        gamma=HPARAMS["gamma"],
        tau=HPARAMS["tau"],
    )
    algorithm = DDPG(policy=policy, critic=critic, params=params)
    buffer = ReplayBuffer(EXPERIMENT.buffer.size, seed=seed)
    training_collector = Collector(policy, train_envs, buffer, exploration_noise=True, seed=seed)
    training_collector.collect(n_step=PREFILL_ENV_STEPS, random=True)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    return algorithm, training_collector, test_collector


def train(
    seed: int = 0,
    max_epochs: int = TRAINER["max_epochs"],
    stop_at: float = TRAINER["stop_score"],
    verbose: bool = True,
) -> tuple[DDPG, InfoStats]:
    """Train with one gradient step per env step until the mean test return over 10 episodes reaches
    ``stop_at`` or ``max_epochs`` epochs of 1000 env steps end."""
    algorithm, training_collector, test_collector = build(seed)
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=TRAINER["epoch_num_steps"],
        collection_step_num_env_steps=TRAINER["collection_step_num_env_steps"],
        update_step_num_gradient_steps_per_sample=TRAINER["update_step_num_gradient_steps_per_sample"],
        batch_size=TRAINER["batch_size"],
        test_step_num_episodes=TRAINER["test_step_num_episodes"],
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
    parser.add_argument("--max-epochs", type=int, default=TRAINER["max_epochs"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    _, info = train(seed=args.seed, max_epochs=args.max_epochs)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step + PREFILL_ENV_STEPS} env steps (with prefill), {info.timing.total_time:.1f} s, "
        f"stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
