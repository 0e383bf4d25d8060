"""DQN on CartPole-v1 to a mean test return of 475, with the rl-baselines3-zoo hyperparameters.

rl-zoo's CartPole DQN (Stable-Baselines3), translated to tshtrain's params: lr 2.3e-3, batch 64, buffer
100k, 1000 random env steps before learning, gamma 0.99, 256-256 ReLU network, epsilon from 1.0 to 0.04
over the first 8000 env steps (0.16 of 5e4), and 128 gradient steps after every 256 env steps
(``collection_step_num_env_steps=256``, ``update_step_num_gradient_steps_per_sample=0.5``). SB3 copies
the online network into the target network every 10 env steps, but only during collection, so the
target network is refreshed once per update step of 128 gradient steps: ``target_update_freq=128``.
Like SB3's DQN, no double Q-learning, Huber loss, gradient norm clipped to 10.

The hyperparameters are those of DQN's default experiment (tshtrain/config/algos/q_learning.py;
print them with ``tshtrain config dqn``); the budget (``--max-epochs``) is this script's own.

Run: python examples/dqn_cartpole_475.py [--seed 0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, ReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

EXPERIMENT = default_experiment("dqn")
"""the settings of this example: env, hyperparameters, networks, buffer and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
NETWORK = EXPERIMENT.algorithm.network
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(NETWORK["hidden_sizes"])
EXPLORATION = EXPERIMENT.algorithm.exploration
PREFILL_ENV_STEPS = EXPERIMENT.buffer.prefill_env_steps
"""uniformly random env steps collected before training (not counted by the trainer)"""
EPOCH_ENV_STEPS = TRAINER["epoch_num_steps"]
"""env steps per epoch (10 collection steps of 256), each followed by a test step of 10 episodes"""


def build(
    seed: int = 0, *, n_step: int = HPARAMS["n_step"], is_double: bool = HPARAMS["is_double"]
) -> tuple[DQN, Collector, Collector]:
    """The algorithm and its training and test collectors (the buffer prefilled with random steps)."""
    torch.manual_seed(seed)
    train_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_training_envs)
    test_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    policy = QValuePolicy(
        mlp(4, 2, HIDDEN_SIZES, nn.ReLU),
        train_envs.single_action_space,
        eps_schedule=EpsilonSchedule(
            start=EXPLORATION["eps_start"],
            end=EXPLORATION["eps_end"],
            num_env_steps=EXPLORATION["eps_decay_env_steps"],
        ),
        seed=seed,
    )
    params = DQNParams(
        lr=HPARAMS["lr"],
        gamma=HPARAMS["gamma"],
        target_update_freq=HPARAMS["target_update_freq"],
        is_double=is_double,
        huber_loss=HPARAMS["huber_loss"],
        max_grad_norm=HPARAMS["max_grad_norm"],
        n_step=n_step,
    )
    algorithm = DQN(policy=policy, params=params)
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
) -> tuple[DQN, InfoStats]:
    """Train until the mean test return over 10 episodes reaches ``stop_at`` or ``max_epochs`` epochs of
    2560 env steps end (38 epochs + the prefill: 98,280 env steps)."""
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
