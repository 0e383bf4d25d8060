"""Value decomposition: QMIX (or VDN) on MPE2 ``simple_spread`` (3 cooperative agents, discrete actions).

The three agents share one Q-network, which reads the agent's own observation and its one-hot id
(``agent_id=True``). The team's value is a mix of the agents' chosen values: a monotonic mixing network
over the env's global state for QMIX (``global_state=True``, the ``state`` key), their sum for VDN
(``--mixer vdn``). One TD loss on the team reward trains the agent network and the mixer together; the
agents act alone (greedy on their own Q-values) at test time.

The same experiment as a file: ``tshtrain train examples/configs/qmix_simple_spread.yaml`` (or
``vdn_simple_spread.yaml``). Results per seed: docs/multi_agent.md, "Learning results".

Run: python examples/multi_agent/qmix_spread.py [--mixer qmix|vdn] [--env-steps 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from tshtrain.algorithm import QMixer, QValuePolicy, SumMixer, ValueDecomposition, ValueDecompositionParams
from tshtrain.algorithm.blocks.agent_nets import agent_q_network
from tshtrain.algorithm.blocks.mixers import Mixer
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import STATE_KEY, MultiAgentVectorEnv, make_pettingzoo_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

ENV_ID = "mpe2.simple_spread_v3"
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}
NUM_TRAINING_ENVS = 8
NUM_TEST_ENVS = 8
ENV_STEPS = 100_000
EPOCH_NUM_STEPS = 20_000
COLLECTION_STEP_NUM_ENV_STEPS = 80
"""10 vector steps of the 8 envs between two updates"""
GRADIENT_STEPS_PER_ENV_STEP = 0.125
"""10 gradient steps per training step"""
BATCH_SIZE = 128
"""joint transitions (of the 3 agents each) per gradient step"""
EPS_DECAY_ENV_STEPS = 30_000
PARAMS = ValueDecompositionParams(lr=5e-4, gamma=0.9, target_update_freq=200, n_step=1)


def make_env(num_envs: int) -> MultiAgentVectorEnv:
    """``num_envs`` copies of simple_spread; each agent column sees obs, agent_id and the global state."""
    return make_pettingzoo_vector_env(ENV_ID, num_envs, kwargs=ENV_KWARGS, global_state=True, agent_id=True)


def make_mixer(kind: str, num_agents: int, state_dim: int) -> Mixer:
    if kind == "vdn":
        return SumMixer()
    return QMixer(num_agents=num_agents, state_dim=state_dim, embed_dim=32, hypernet_hidden_dim=64)


def train(
    *,
    mixer: str = "qmix",
    seed: int = 0,
    env_steps: int = ENV_STEPS,
    test_episodes: int = 32,
    verbose: bool = True,
) -> tuple[ValueDecomposition, InfoStats]:
    """Train for about ``env_steps`` env steps (whole epochs, at least one)."""
    torch.manual_seed(seed)
    train_envs, test_envs = make_env(NUM_TRAINING_ENVS), make_env(NUM_TEST_ENVS)
    # one column's spaces: Dict(agent_id=(3,), obs=(18,), state=(54,)) and Discrete(5)
    space = train_envs.single_observation_space
    assert isinstance(space, gym.spaces.Dict)
    num_agents = train_envs.columns.num_agents
    q_net = agent_q_network(space, train_envs.single_action_space, hidden_sizes=(64, 64))  # obs + agent_id
    # the shared policy acts for every agent: it counts num_agents actions per env step
    eps = EpsilonSchedule(start=1.0, end=0.05, num_env_steps=EPS_DECAY_ENV_STEPS * num_agents)
    policy = QValuePolicy(q_net, train_envs.single_action_space, eps_schedule=eps, seed=seed)
    state_dim = int(np.prod(space[STATE_KEY].shape or ()))  # the global state, what QMIX's mixer reads
    algorithm = ValueDecomposition(
        train_envs.columns, policy, mixer=make_mixer(mixer, num_agents, state_dim), params=PARAMS
    )
    epoch_num_steps = min(EPOCH_NUM_STEPS, env_steps)
    # the whole run fits: one row per agent and env step
    buffer = VectorReplayBuffer(env_steps * num_agents, buffer_num=train_envs.num_columns, seed=seed)
    params = OffPolicyTrainerParams(
        training_collector=MultiAgentCollector(
            algorithm.policy, train_envs, buffer, exploration_noise=True, seed=seed
        ),
        test_collector=MultiAgentCollector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max(1, env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=min(COLLECTION_STEP_NUM_ENV_STEPS, env_steps),
        update_step_num_gradient_steps_per_sample=GRADIENT_STEPS_PER_ENV_STEP,
        batch_size=BATCH_SIZE,
        test_step_num_episodes=test_episodes,
        # test returns: each agent's episode return averaged over the agents (the default reduction)
        verbose=verbose,
        show_progress=False,
    )
    try:
        return algorithm, OffPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def main(argv: Sequence[str] | None = None) -> InfoStats:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mixer", choices=["qmix", "vdn"], default="qmix")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=ENV_STEPS, help="training budget in env steps")
    parser.add_argument("--test-episodes", type=int, default=32, help="episodes per test step")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _, info = train(
        mixer=args.mixer,
        seed=args.seed,
        env_steps=args.env_steps,
        test_episodes=args.test_episodes,
        verbose=not args.quiet,
    )
    print(
        f"best mean test return (per agent) {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
    return info


if __name__ == "__main__":
    main()
