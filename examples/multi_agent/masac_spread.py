"""Centralised critics off-policy: MASAC (or MADDPG) on MPE2 ``simple_spread`` with continuous actions.

Three agents, 25-step episodes, actions in [0, 1]^5. One squashed Gaussian actor shared by the agents
reads each agent's own observation and its one-hot id (``agent_id=True``); one centralised twin critic
reads the env's 54-dim global state (``global_state=True``), the id of the agent it values and **all
three agents' actions**. Acting needs only the actor. Each gradient step samples joint transitions (the
3 agents' columns of one env at one buffer row), see docs/multi_agent.md, "MADDPG and MASAC".
``--algorithm maddpg`` trains MADDPG instead (a deterministic actor with Gaussian exploration noise and
one critic).

Run: python examples/multi_agent/masac_spread.py [--env-steps 50000] [--seed 0] [--algorithm masac]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import gymnasium as gym
import torch
from torch import nn

from tshtrain.algorithm import (
    MADDPG,
    MASAC,
    DeterministicActorPolicy,
    MADDPGParams,
    MASACParams,
    TanhGaussianPolicy,
    centralised_critic,
    mlp,
    obs_encoder,
)
from tshtrain.algorithm.blocks.agent_nets import SelectKeys
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import MultiAgentVectorEnv, make_pettingzoo_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

ENV_ID = "mpe2.simple_spread_v3"
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": True}
NUM_TRAINING_ENVS = 8
NUM_TEST_ENVS = 8
COLLECTION_STEP_NUM_ENV_STEPS = 80
GRADIENT_STEPS_PER_ENV_STEP = 0.25
BATCH_SIZE = 256
"""joint transitions per gradient step (3 agent transitions each)"""
BUFFER_NUM_ENV_STEPS = 100_000
PREFILL_NUM_ENV_STEPS = 2_000
"""uniformly random env steps in the buffer before training (not counted by the trainer)"""
HIDDEN_SIZES = (128, 128)
LR = 1e-3
GAMMA = 0.95
TAU = 0.01
NOISE_STD = 0.1
"""MADDPG's exploration noise, in the policy's [-1, 1] action space"""
EPOCH_NUM_STEPS = 10_000


def build(algorithm: str, env: MultiAgentVectorEnv, seed: int) -> MADDPG | MASAC:
    """A shared actor on ``obs`` + ``agent_id`` and a shared critic on ``state`` + agent id + actions."""
    space, act_space = env.single_observation_space, env.single_action_space
    assert isinstance(space, gym.spaces.Dict) and isinstance(act_space, gym.spaces.Box)
    actor_space = gym.spaces.Dict({key: space.spaces[key] for key in ("obs", "agent_id")})
    act_dim = int(act_space.shape[0])

    def actor(output_dim: int) -> nn.Module:
        encoder = obs_encoder(actor_space)
        net = nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, HIDDEN_SIZES))
        return SelectKeys(net, ["obs", "agent_id"])

    columns = env.columns
    critic = centralised_critic(  # Q(state, agent id, u_1, u_2, u_3); twin critics for MASAC
        space,
        act_space,
        columns.num_agents,
        num_critics=2 if algorithm == "masac" else 1,
        hidden_sizes=HIDDEN_SIZES,
    )
    if algorithm == "maddpg":
        policy = DeterministicActorPolicy(actor(act_dim), act_space, noise_std=NOISE_STD, seed=seed)
        params = MADDPGParams(actor_lr=LR, critic_lr=LR, gamma=GAMMA, tau=TAU)
        return MADDPG(columns, policy, critic, params=params)
    sac_policy = TanhGaussianPolicy(actor(2 * act_dim), act_space, seed=seed)
    return MASAC(
        columns, sac_policy, critic, params=MASACParams(actor_lr=LR, critic_lr=LR, gamma=GAMMA, tau=TAU)
    )


def train(
    *,
    algorithm: str = "masac",
    seed: int = 0,
    env_steps: int = 50_000,
    test_episodes: int = 32,
    prefill: int = PREFILL_NUM_ENV_STEPS,
    verbose: bool = True,
) -> tuple[MADDPG | MASAC, InfoStats]:
    """Train for about ``env_steps`` env steps (whole epochs, at least one)."""
    torch.manual_seed(seed)
    train_envs = make_pettingzoo_vector_env(
        ENV_ID, NUM_TRAINING_ENVS, kwargs=ENV_KWARGS, global_state=True, agent_id=True
    )
    test_envs = make_pettingzoo_vector_env(
        ENV_ID, NUM_TEST_ENVS, kwargs=ENV_KWARGS, global_state=True, agent_id=True
    )
    learner = build(algorithm, train_envs, seed)
    rows = -(-BUFFER_NUM_ENV_STEPS // NUM_TRAINING_ENVS) * train_envs.num_columns  # every column
    buffer = VectorReplayBuffer(rows, buffer_num=train_envs.num_columns, seed=seed)  # A * E columns
    collector = MultiAgentCollector(learner.policy, train_envs, buffer, exploration_noise=True, seed=seed)
    collector.collect(n_step=prefill, random=True)
    per_step = min(COLLECTION_STEP_NUM_ENV_STEPS, env_steps)
    epoch_num_steps = min(EPOCH_NUM_STEPS, env_steps)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=MultiAgentCollector(learner.policy, test_envs, seed=seed + 10_000),
        max_epochs=max(1, env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=per_step,  # env steps, not agent transitions
        update_step_num_gradient_steps_per_sample=GRADIENT_STEPS_PER_ENV_STEP,
        batch_size=BATCH_SIZE,
        test_step_num_episodes=test_episodes,
        verbose=verbose,
        show_progress=False,
    )
    try:
        return learner, OffPolicyTrainer(learner, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main(argv: Sequence[str] | None = None) -> InfoStats:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--algorithm", choices=["masac", "maddpg"], default="masac")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=50_000, help="training budget in env steps")
    parser.add_argument("--test-episodes", type=int, default=32, help="episodes per test step")
    parser.add_argument("--prefill", type=int, default=PREFILL_NUM_ENV_STEPS, help="random env steps first")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _, info = train(
        algorithm=args.algorithm,
        seed=args.seed,
        env_steps=args.env_steps,
        test_episodes=args.test_episodes,
        prefill=args.prefill,
        verbose=not args.quiet,
    )
    print(
        f"best mean per-agent test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
    return info


if __name__ == "__main__":
    main()
