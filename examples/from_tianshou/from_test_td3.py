"""Tianshou's test/continuous/test_td3.py, ported: TD3 on Pendulum-v1 to a best mean test return of -250.

The script's settings, kept: a 128-128 ReLU actor (Tianshou's ``Net`` + ``ContinuousActorDeterministic``,
tanh-bounded) and twin 128-128 ReLU critics on the concatenated observation and action, Adam with lr 1e-4
(actor) and 1e-3 (critics), gamma 0.99, tau 0.005, 3-step returns, Gaussian exploration noise of 0.1,
target policy noise 0.2 clipped at 0.5, actor updates every 2 critic updates; a 20000-transition buffer
over 8 training envs, 5 epochs of 20000 env steps, 8 env steps and 1 gradient step (0.125 per env step)
of batch 128 per training step, 100 test episodes and the threshold -250 on the best test return
(``stop_fn_on_best_score=True``). Tianshou's seed default is 1.

Noise units: Tianshou's actor outputs ``max_action * tanh(.)`` and its policy clips that to [-1, 1]
before scaling to the env's range, so the script's sigma 0.1 acts in the [-1, 1] scale, which is the
scale of tshtrain's ``noise_std`` (docs/migrating-from-tianshou.md).

Run: python examples/from_tianshou/from_test_td3.py [--seed 1] [--budget-scale 1.0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import TD3, DeterministicActorPolicy, QEnsemble, TD3Params, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

TASK = "Pendulum-v1"
REWARD_THRESHOLD = -250.0
"""Tianshou's threshold for this test (on the best mean test return)"""
NUM_TRAINING_ENVS = 8
NUM_TEST_ENVS = 100
EPOCH_NUM_STEPS = 20000


def main(
    seed: int = 1, budget_scale: float = 1.0, *, max_epochs: int = 5, verbose: bool = False
) -> InfoStats:
    """Train the port; ``budget_scale`` multiplies the env steps per epoch and the test episodes (1.0: the
    script's). Returns the trainer's statistics (``best_reward`` is what the script asserts >= -250)."""
    num_test_envs = max(1, round(NUM_TEST_ENVS * budget_scale))
    torch.manual_seed(seed)
    train_envs = make_vector_env(TASK, NUM_TRAINING_ENVS)
    test_envs = make_vector_env(TASK, num_test_envs)
    policy = DeterministicActorPolicy(
        mlp(3, 1, (128, 128), nn.ReLU), train_envs.single_action_space, noise_std=0.1, seed=seed
    )
    params = TD3Params(
        actor_lr=1e-4,
        critic_lr=1e-3,
        gamma=0.99,
        tau=0.005,
        policy_noise=0.2,
        noise_clip=0.5,
        policy_delay=2,
        n_step=3,
    )
    algorithm = TD3(policy=policy, critic=QEnsemble(3, 1, (128, 128)), params=params, seed=seed)
    trainer_params = OffPolicyTrainerParams(
        training_collector=Collector(
            policy,
            train_envs,
            VectorReplayBuffer(20000, NUM_TRAINING_ENVS, seed=seed),
            exploration_noise=True,
            seed=seed,
        ),
        test_collector=Collector(policy, test_envs, seed=seed),
        max_epochs=max_epochs,
        epoch_num_steps=max(8 * NUM_TRAINING_ENVS, round(EPOCH_NUM_STEPS * budget_scale)),
        collection_step_num_env_steps=8,
        update_step_num_gradient_steps_per_sample=0.125,
        batch_size=128,
        test_step_num_episodes=num_test_envs,
        stop_fn=lambda score: score >= REWARD_THRESHOLD,
        stop_fn_on_best_score=True,
        show_progress=False,
        verbose=verbose,
    )
    try:
        return OffPolicyTrainer(algorithm, trainer_params).run()
    finally:
        train_envs.close()
        test_envs.close()


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget-scale", type=float, default=1.0)
    args = parser.parse_args()
    info = main(args.seed, args.budget_scale, verbose=True)
    print(f"seed {args.seed}: best test return {info.best_reward:.1f} (threshold {REWARD_THRESHOLD})")


if __name__ == "__main__":
    _cli()
