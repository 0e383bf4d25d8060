"""Discrete SAC on CartPole-v1, with the hyperparameters of Tianshou's discrete SAC CartPole test:
10 training envs, 10 env steps per collection step and one gradient step per collection step, batch 64,
64-64 networks, actor lr 1e-4, critic lr 1e-3, gamma 0.95, 3-step returns, constant alpha 0.05.

The hyperparameters are those of discrete SAC's default experiment (tshtrain/config/algos/actor_critic.py;
print them with ``tshtrain config discrete_sac``); the budget (``--max-epochs``) is this script's own.

Run: python examples/discrete_sac_cartpole.py [--seed 0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import CategoricalPolicy, DiscreteQEnsemble, DiscreteSAC, DiscreteSACParams, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

EXPERIMENT = default_experiment("discrete_sac")
"""the settings of this example: env, hyperparameters, networks, buffer and trainer"""
HPARAMS = EXPERIMENT.algorithm.params
NETWORK = EXPERIMENT.algorithm.network
TRAINER = EXPERIMENT.trainer
HIDDEN_SIZES = tuple(NETWORK["hidden_sizes"])
PREFILL_ENV_STEPS = EXPERIMENT.buffer.prefill_env_steps
"""no random prefill: the initial policy is close to uniform"""


def build(seed: int = 0) -> tuple[DiscreteSAC, Collector, Collector]:
    """The algorithm and its training and test collectors."""
    torch.manual_seed(seed)
    train_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_training_envs)
    test_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    policy = CategoricalPolicy(
        mlp(4, 2, HIDDEN_SIZES, nn.ReLU), train_envs.single_action_space, deterministic_eval=True, seed=seed
    )
    critic = DiscreteQEnsemble(4, 2, HIDDEN_SIZES)
    params = DiscreteSACParams(
        actor_lr=HPARAMS["actor_lr"],
        critic_lr=HPARAMS["critic_lr"],
        gamma=HPARAMS["gamma"],
        tau=HPARAMS["tau"],
        alpha=HPARAMS["alpha"],
        auto_alpha=HPARAMS["auto_alpha"],
        n_step=HPARAMS["n_step"],
    )
    algorithm = DiscreteSAC(policy=policy, critic=critic, params=params)
    buffer = VectorReplayBuffer(EXPERIMENT.buffer.size, EXPERIMENT.env.num_training_envs, seed=seed)
    training_collector = Collector(policy, train_envs, buffer, seed=seed)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    return algorithm, training_collector, test_collector


def train(
    seed: int = 0,
    max_epochs: int = TRAINER["max_epochs"],
    stop_at: float = TRAINER["stop_score"],
    verbose: bool = True,
) -> tuple[DiscreteSAC, InfoStats]:
    """Train until the mean test return over 10 episodes reaches ``stop_at`` or ``max_epochs`` epochs of
    10,000 env steps end."""
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
    info = OffPolicyTrainer(algorithm, params).run()
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
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, {info.train_step} env steps, "
        f"{info.timing.total_time:.1f} s, stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
