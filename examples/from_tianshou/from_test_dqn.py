"""Tianshou's test/discrete/test_dqn.py, ported: DQN on CartPole-v1 to a best mean test return of 195.

The script's settings, kept: a 4 x 128 ReLU Q network (Tianshou's ``Net`` with ``hidden_sizes=[128] * 4``),
Adam with lr 1e-3, gamma 0.9, 3-step returns, a target network copied every 320 gradient steps, double Q,
the squared TD error (Tianshou's DQN has no Huber loss), a 20000-transition buffer over 10 training envs,
prefilled with ``batch_size * num_training_envs`` steps before training, 10 epochs of 10000 env steps,
10 env steps and 1 gradient step (0.1 per env step) of batch 64 per training step, 100 test episodes,
``test_in_training`` and the threshold 195 on the best test return (Tianshou's ``stop_fn`` sees the best
score so far: ``stop_fn_on_best_score=True``). Epsilon: 0.1 in training, annealed from env step 10000 to
0.01 at 50000 by the script's ``training_fn`` (``set_eps_training``), 0.05 at test time
(``eps_inference``); the test collector adds exploration noise, as the script's does.

``--prioritized`` switches to the script's prioritized buffer (alpha 0.6, beta 0.4). Tianshou's seed
default is 1626.

Run: python examples/from_tianshou/from_test_dqn.py [--seed 1626] [--budget-scale 1.0] [--prioritized]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, QValuePolicy, mlp
from tshtrain.data import Collector, PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

TASK = "CartPole-v1"
REWARD_THRESHOLD = 195.0
"""Tianshou's threshold for this test (on the best mean test return)"""
EPS_TRAIN = 0.1
EPS_TEST = 0.05
NUM_TRAINING_ENVS = 10
NUM_TEST_ENVS = 100
BATCH_SIZE = 64
EPOCH_NUM_STEPS = 10000


def eps_training(env_step: int) -> float:
    """The script's ``training_fn`` schedule: ``EPS_TRAIN`` up to env step 10000, then linearly down to a
    tenth of it at 50000."""
    if env_step <= 10000:
        return EPS_TRAIN
    if env_step <= 50000:
        return EPS_TRAIN - (env_step - 10000) / 40000 * (0.9 * EPS_TRAIN)
    return 0.1 * EPS_TRAIN


def main(
    seed: int = 1626,
    budget_scale: float = 1.0,
    *,
    max_epochs: int = 10,
    prioritized: bool = False,
    verbose: bool = False,
) -> InfoStats:
    """Train the port; ``budget_scale`` multiplies the env steps per epoch and the test episodes (1.0: the
    script's). Returns the trainer's statistics (``best_reward`` is what the script asserts >= 195)."""
    num_test_envs = max(1, round(NUM_TEST_ENVS * budget_scale))
    torch.manual_seed(seed)
    train_envs = make_vector_env(TASK, NUM_TRAINING_ENVS)
    test_envs = make_vector_env(TASK, num_test_envs)
    policy = QValuePolicy(
        mlp(4, 2, (128, 128, 128, 128), nn.ReLU),
        train_envs.single_action_space,
        eps_inference=EPS_TEST,
        seed=seed,
    )
    policy.set_eps_training(EPS_TRAIN)
    algorithm = DQN(
        policy=policy,
        params=DQNParams(lr=1e-3, gamma=0.9, n_step=3, target_update_freq=320, huber_loss=False),
    )
    buffer = (
        PrioritizedVectorReplayBuffer(20000, NUM_TRAINING_ENVS, alpha=0.6, beta=0.4, seed=seed)
        if prioritized
        else VectorReplayBuffer(20000, NUM_TRAINING_ENVS, seed=seed)
    )
    training_collector = Collector(policy, train_envs, buffer, exploration_noise=True, seed=seed)
    test_collector = Collector(policy, test_envs, exploration_noise=True, seed=seed)
    # Tianshou collects the prefill outside a training step, so with its test epsilon
    training_collector.collect(n_step=BATCH_SIZE * NUM_TRAINING_ENVS, deterministic=True)

    def training_fn(epoch: int, env_step: int) -> None:
        policy.set_eps_training(eps_training(env_step))

    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=max(10 * NUM_TRAINING_ENVS, round(EPOCH_NUM_STEPS * budget_scale)),
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.1,
        batch_size=BATCH_SIZE,
        test_step_num_episodes=num_test_envs,
        training_fn=training_fn,
        stop_fn=lambda score: score >= REWARD_THRESHOLD,
        stop_fn_on_best_score=True,
        test_in_training=True,
        show_progress=False,
        verbose=verbose,
    )
    try:
        return OffPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1626)
    parser.add_argument("--budget-scale", type=float, default=1.0)
    parser.add_argument("--prioritized", action="store_true")
    args = parser.parse_args()
    info = main(args.seed, args.budget_scale, prioritized=args.prioritized, verbose=True)
    print(f"seed {args.seed}: best test return {info.best_reward:.1f} (threshold {REWARD_THRESHOLD})")


if __name__ == "__main__":
    _cli()
