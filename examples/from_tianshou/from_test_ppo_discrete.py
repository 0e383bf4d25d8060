"""Tianshou's test/discrete/test_ppo_discrete.py, ported: PPO on CartPole-v1 to a best mean test return
of 195.

The script's settings, kept: one 64-64 ReLU trunk shared by the actor (a linear layer to the logits) and
the critic (a linear layer to the value), every linear layer initialised orthogonally with zero biases,
Adam with lr 3e-4, gamma 0.99, GAE lambda 0.95, clip range 0.2, value coefficient 0.5, no entropy bonus,
gradient norm clipped at 0.5, no advantage normalisation, no return scaling, no advantage recomputation,
no dual clip and no value clip; 20 training envs, 10 epochs of 50000 env steps, 2000 env steps per
training step, 10 repetitions of minibatches of 64, 100 test episodes, ``test_in_training`` and the
threshold 195 on the best test return (``stop_fn_on_best_score=True``). Tianshou's seed default is 1626.

Every PPO field is set explicitly: tshtrain's defaults differ from these in ``advantage_normalization``
(True in tshtrain) and from Tianshou's class defaults in more (docs/migrating-from-tianshou.md).

Run: python examples/from_tianshou/from_test_ppo_discrete.py [--seed 1626] [--budget-scale 1.0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

TASK = "CartPole-v1"
REWARD_THRESHOLD = 195.0
"""Tianshou's threshold for this test (on the best mean test return)"""
NUM_TRAINING_ENVS = 20
NUM_TEST_ENVS = 100
COLLECTION_STEP_NUM_ENV_STEPS = 2000
EPOCH_NUM_STEPS = 50000


def shared_actor_critic(hidden_sizes: tuple[int, ...] = (64, 64)) -> tuple[nn.Module, nn.Module]:
    """Tianshou's ``DiscreteActor(net)`` and ``DiscreteCritic(net)`` on one ``Net``: the same trunk
    module (ReLU after every hidden layer) under two linear heads, orthogonally initialised."""
    trunk = nn.Sequential(mlp(4, hidden_sizes[-1], hidden_sizes[:-1], nn.ReLU), nn.ReLU())
    actor = nn.Sequential(trunk, nn.Linear(hidden_sizes[-1], 2))
    critic = nn.Sequential(trunk, nn.Linear(hidden_sizes[-1], 1))
    for module in (*actor.modules(), *critic.modules()):
        if isinstance(module, nn.Linear):
            nn.init.orthogonal_(module.weight)
            nn.init.zeros_(module.bias)
    return actor, critic


def main(
    seed: int = 1626, budget_scale: float = 1.0, *, max_epochs: int = 10, verbose: bool = False
) -> InfoStats:
    """Train the port; ``budget_scale`` multiplies the env steps per epoch and per training step and the
    test episodes (1.0: the script's). Returns the trainer's statistics (``best_reward`` is what the
    script asserts >= 195)."""
    num_test_envs = max(1, round(NUM_TEST_ENVS * budget_scale))
    collection = max(NUM_TRAINING_ENVS, round(COLLECTION_STEP_NUM_ENV_STEPS * budget_scale))
    torch.manual_seed(seed)
    train_envs = make_vector_env(TASK, NUM_TRAINING_ENVS)
    test_envs = make_vector_env(TASK, num_test_envs)
    actor, critic = shared_actor_critic()
    policy = CategoricalPolicy(actor, train_envs.single_action_space, deterministic_eval=True, seed=seed)
    params = PPOParams(
        lr=3e-4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        vf_coef=0.5,
        ent_coef=0.0,
        max_grad_norm=0.5,
        advantage_normalization=False,
        return_scaling=False,
        recompute_advantage=False,
        dual_clip=None,
        value_clip_range=None,
    )
    algorithm = PPO(policy=policy, critic=critic, params=params, seed=seed)
    trainer_params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, train_envs, VectorReplayBuffer(collection, NUM_TRAINING_ENVS), seed=seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed),
        max_epochs=max_epochs,
        epoch_num_steps=max(collection, round(EPOCH_NUM_STEPS * budget_scale)),
        collection_step_num_env_steps=collection,
        update_step_num_repetitions=10,
        batch_size=64,
        test_step_num_episodes=num_test_envs,
        stop_fn=lambda score: score >= REWARD_THRESHOLD,
        stop_fn_on_best_score=True,
        test_in_training=True,
        show_progress=False,
        verbose=verbose,
    )
    try:
        return OnPolicyTrainer(algorithm, trainer_params).run()
    finally:
        train_envs.close()
        test_envs.close()


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1626)
    parser.add_argument("--budget-scale", type=float, default=1.0)
    args = parser.parse_args()
    info = main(args.seed, args.budget_scale, verbose=True)
    print(f"seed {args.seed}: best test return {info.best_reward:.1f} (threshold {REWARD_THRESHOLD})")


if __name__ == "__main__":
    _cli()
