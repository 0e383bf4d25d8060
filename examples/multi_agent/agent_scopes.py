"""Agent scopes (skrl's ``agents_scope``): two independent PPO agents over one CartPole vector env.

The vector env has 8 sub-envs; ``agents_scope=[4, 4]`` gives sub-envs 0-3 to ``agent_0`` and 4-7 to
``agent_1``. Each agent has its own networks, optimiser and slice of the rollout buffer, its own stats
(logged as ``agent_0/...``, ``agent_1/...``) and its own entry in checkpoints. One ordinary
:class:`~tshtrain.trainer.OnPolicyTrainer` trains both: ``update_mode="sequential"`` updates the agents
one after the other in each training step (skrl's Sequential trainer), ``"parallel"`` runs each
agent's update in its own process (see docs/multi_agent_scopes.md).

The same experiment as a file: ``tshtrain train examples/configs/ppo_cartpole_scopes.yaml``.

Run: python examples/multi_agent/agent_scopes.py [--env-steps 100000] [--update-mode sequential]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from tshtrain.algorithm import PPO, CategoricalPolicy, MultiAgentOnPolicy, PPOParams, mlp, scoped_learners
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

AGENTS_SCOPE = (4, 4)
"""sub-envs per agent, in order"""
NUM_ENVS = sum(AGENTS_SCOPE)
COLLECTION_STEP_NUM_ENV_STEPS = 2048
EPOCH_NUM_STEPS = 10_000


def ppo_agent(seed: int) -> PPO:
    """One CartPole PPO agent (its own networks and optimiser)."""
    policy = CategoricalPolicy(
        mlp(4, 2, (64, 64)), make_vector_env("CartPole-v1", 1).single_action_space, seed=seed
    )
    return PPO(policy=policy, critic=mlp(4, 1, (64, 64)), params=PPOParams(lr=3e-4), seed=seed)


def train(
    *, seed: int = 0, env_steps: int = 100_000, update_mode: str = "sequential", verbose: bool = True
) -> tuple[MultiAgentOnPolicy, InfoStats]:
    """Train both agents side by side for about ``env_steps`` env steps (of all 8 sub-envs together)."""
    torch.manual_seed(seed)
    train_envs = make_vector_env("CartPole-v1", NUM_ENVS)
    test_envs = make_vector_env("CartPole-v1", NUM_ENVS)  # the same scopes: test envs 0-3 and 4-7
    members = [ppo_agent(seed + k) for k in range(len(AGENTS_SCOPE))]
    algorithm = MultiAgentOnPolicy(
        scoped_learners(AGENTS_SCOPE, members),  # learners agent_0 (envs 0-3), agent_1 (envs 4-7)
        num_units=NUM_ENVS,
        update_mode="parallel" if update_mode == "parallel" else "sequential",
    )
    per_step = min(COLLECTION_STEP_NUM_ENV_STEPS, env_steps)
    epoch_num_steps = min(EPOCH_NUM_STEPS, env_steps)
    params = OnPolicyTrainerParams(
        training_collector=Collector(
            algorithm.policy, train_envs, VectorReplayBuffer(per_step, buffer_num=NUM_ENVS), seed=seed
        ),
        test_collector=Collector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max(1, env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=per_step,
        batch_size=64,
        update_step_num_repetitions=10,
        test_step_num_episodes=NUM_ENVS,
        verbose=verbose,
        show_progress=False,
    )
    try:
        return algorithm, OnPolicyTrainer(algorithm, params).run()
    finally:
        algorithm.close()  # stops the worker processes of update_mode="parallel"
        train_envs.close()
        test_envs.close()


def main(argv: Sequence[str] | None = None) -> InfoStats:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=100_000, help="training budget in env steps")
    parser.add_argument("--update-mode", choices=["sequential", "parallel"], default="sequential")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _, info = train(
        seed=args.seed, env_steps=args.env_steps, update_mode=args.update_mode, verbose=not args.quiet
    )
    print(
        f"best mean test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
    return info


if __name__ == "__main__":
    main()
