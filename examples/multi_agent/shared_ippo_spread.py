"""Parameter sharing: IPPO on MPE2 ``simple_spread`` (3 agents, PettingZoo parallel env).

One PPO learner acts for every agent (:func:`~tshtrain.algorithm.shared_learner`): its rollout holds the
transitions of all ``3 * E`` columns. The env appends each agent's one-hot id (``agent_id=True``), so the
shared network can still tell the agents apart. The critic sees what the actor sees (IPPO); MAPPO would
add ``global_state=True`` and ``centralised_critic=True`` (see ``mappo_vmas.py``).

The same experiment as a file: ``tshtrain train examples/configs/ippo_simple_spread.yaml``.

Run: python examples/multi_agent/shared_ippo_spread.py [--env-steps 800000] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from tshtrain.algorithm import PPO, MultiAgentOnPolicy, PPOParams, shared_learner
from tshtrain.algorithm.blocks.agent_nets import mappo_actor_critic
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import make_pettingzoo_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

ENV_ID = "mpe2.simple_spread_v3"
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}
NUM_TRAINING_ENVS = 16
NUM_TEST_ENVS = 8
COLLECTION_STEP_NUM_ENV_STEPS = 1600
"""env steps per rollout (100 per env; each env step stores one transition per agent: 4800 rows)"""
EPOCH_NUM_STEPS = 16_000


def train(
    *, seed: int = 0, env_steps: int = 800_000, test_episodes: int = 16, verbose: bool = True
) -> tuple[MultiAgentOnPolicy, InfoStats]:
    """Train for about ``env_steps`` env steps (whole epochs, at least one)."""
    torch.manual_seed(seed)
    train_envs = make_pettingzoo_vector_env(ENV_ID, NUM_TRAINING_ENVS, kwargs=ENV_KWARGS, agent_id=True)
    test_envs = make_pettingzoo_vector_env(ENV_ID, NUM_TEST_ENVS, kwargs=ENV_KWARGS, agent_id=True)
    # one column's spaces: Dict(agent_id=(3,), obs=(18,)) and Discrete(5), the same for every agent
    policy, critic = mappo_actor_critic(
        train_envs.single_observation_space,
        train_envs.single_action_space,
        centralised_critic=False,  # IPPO: the critic sees obs + agent_id, like the actor
        seed=seed,
    )
    ppo = PPO(
        policy=policy,
        critic=critic,
        params=PPOParams(lr=3e-4, gamma=0.99, gae_lambda=0.95, ent_coef=0.01, max_grad_norm=0.5),
        seed=seed,
    )
    algorithm = MultiAgentOnPolicy(shared_learner(train_envs.columns, ppo))
    per_step = min(COLLECTION_STEP_NUM_ENV_STEPS, env_steps)
    rows = -(-per_step // NUM_TRAINING_ENVS) * train_envs.num_columns  # one rollout of every column
    epoch_num_steps = min(EPOCH_NUM_STEPS, env_steps)
    buffer = VectorReplayBuffer(rows, buffer_num=train_envs.num_columns)  # A * E columns
    params = OnPolicyTrainerParams(
        training_collector=MultiAgentCollector(algorithm.policy, train_envs, buffer, seed=seed),
        test_collector=MultiAgentCollector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max(1, env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=per_step,  # env steps, not agent transitions
        batch_size=800,
        update_step_num_repetitions=10,
        test_step_num_episodes=test_episodes,
        # the agents share one reward in simple_spread; the mean over agents (the default) scores it
        verbose=verbose,
        show_progress=False,
    )
    try:
        return algorithm, OnPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main(argv: Sequence[str] | None = None) -> InfoStats:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=800_000, help="training budget in env steps")
    parser.add_argument("--test-episodes", type=int, default=16, help="episodes per test step")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _, info = train(
        seed=args.seed, env_steps=args.env_steps, test_episodes=args.test_episodes, verbose=not args.quiet
    )
    print(
        f"best mean test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
    return info


if __name__ == "__main__":
    main()
