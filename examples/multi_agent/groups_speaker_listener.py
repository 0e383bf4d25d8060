"""Agent groups: MAPPO per group on MPE2 ``simple_speaker_listener`` (PettingZoo parallel env).

The two agents differ in both spaces: the ``speaker`` sees the goal landmark's colour (obs (3,)) and
says one of 3 words, the ``listener`` sees its velocity, the landmarks and the word (obs (11,)) and
moves (5 actions). ``groups="auto"`` puts each in its own group (:mod:`tshtrain.env.groups`), and
:func:`~tshtrain.algorithm.grouped_learners` gives each group its own PPO, built on the group's spaces
(``env.groups[name].observation_space`` / ``.action_space``), with a critic on the global state
(MAPPO). Both are paid the same reward (minus the listener's distance to the goal), so the team scores
well only if the speaker learns to name the goal and the listener to follow the name. (At the default
budget, 320k env steps, seed 0 scores as well as with a silent speaker: the pair has not learned to
communicate yet; docs/multi_agent.md has the numbers.)

``--silent-speaker`` replaces the speaker by a fixed policy that always says word 0: what the listener
can reach without being told the goal (the reference for the docs' results).

Run: python examples/multi_agent/groups_speaker_listener.py [--env-steps 320000] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tshtrain.algorithm import PPO, MultiAgentOnPolicy, PPOParams, ScriptedPolicy, grouped_learners
from tshtrain.algorithm.blocks.agent_nets import mappo_actor_critic
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import make_pettingzoo_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

ENV_ID = "mpe2.simple_speaker_listener_v4"
ENV_KWARGS = {"max_cycles": 25, "continuous_actions": False}
NUM_TRAINING_ENVS = 16
NUM_TEST_ENVS = 8
COLLECTION_STEP_NUM_ENV_STEPS = 1600
"""env steps per rollout (100 per env; each env step stores one transition per agent)"""
EPOCH_NUM_STEPS = 16_000


def _ppo(space: Any, action_space: Any, seed: int) -> PPO:
    policy, critic = mappo_actor_critic(space, action_space, centralised_critic=True, seed=seed)
    params = PPOParams(lr=3e-4, gamma=0.99, gae_lambda=0.95, ent_coef=0.01, max_grad_norm=0.5)
    return PPO(policy=policy, critic=critic, params=params, seed=seed)


def train(
    *,
    seed: int = 0,
    env_steps: int = 320_000,
    test_episodes: int = 16,
    silent_speaker: bool = False,
    verbose: bool = True,
) -> tuple[MultiAgentOnPolicy, InfoStats]:
    """Train for about ``env_steps`` env steps (whole epochs, at least one)."""
    torch.manual_seed(seed)
    make = {"kwargs": ENV_KWARGS, "groups": "auto", "agent_id": True, "global_state": True}
    train_envs = make_pettingzoo_vector_env(ENV_ID, NUM_TRAINING_ENVS, **make)
    test_envs = make_pettingzoo_vector_env(ENV_ID, NUM_TEST_ENVS, **make)
    assert train_envs.groups is not None
    speaker, listener = train_envs.groups["speaker"], train_envs.groups["listener"]
    # speaker: Dict(agent_id=(1,), obs=(3,), state=(14,)) and Discrete(3); listener: obs=(11,), Discrete(5)
    members: dict[str, Any] = {
        "speaker": (
            ScriptedPolicy(speaker.action_space, lambda obs: np.zeros(len(obs["obs"]), np.int64))
            if silent_speaker
            else _ppo(speaker.observation_space, speaker.action_space, seed)
        ),
        "listener": _ppo(listener.observation_space, listener.action_space, seed + 1),
    }
    algorithm = MultiAgentOnPolicy(grouped_learners(train_envs, members))
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
        update_step_num_repetitions=5,
        test_step_num_episodes=test_episodes,
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
    parser.add_argument("--env-steps", type=int, default=320_000, help="training budget in env steps")
    parser.add_argument("--test-episodes", type=int, default=16, help="episodes per test step")
    parser.add_argument("--silent-speaker", action="store_true", help="a speaker that always says word 0")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _, info = train(
        seed=args.seed,
        env_steps=args.env_steps,
        test_episodes=args.test_episodes,
        silent_speaker=args.silent_speaker,
        verbose=not args.quiet,
    )
    print(
        f"best mean test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
    return info


if __name__ == "__main__":
    main()
