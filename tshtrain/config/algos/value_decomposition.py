"""The value-decomposition algorithms of experiment files (VDN, QMIX; cooperative teams with Discrete
actions, off-policy): team algorithms (``AlgorithmSpec.team``), one
:class:`~tshtrain.algorithm.value_decomposition.ValueDecomposition` over every agent of a multi-agent
env, built with ``agents.layout: shared``. Their default experiment is MPE2 simple_spread, the settings
of the results in docs/multi_agent.md (tests/learning/test_value_decomposition_spread_learning.py's
``SETUP``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from tshtrain.algorithm import QValuePolicy
from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.agent_nets import agent_q_network
from tshtrain.algorithm.blocks.mixers import Mixer, QMixer, SumMixer
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.algorithm.value_decomposition import ValueDecomposition, ValueDecompositionParams
from tshtrain.config.builders import ACTIVATIONS, BuildContext, widths
from tshtrain.config.models import EpsilonGreedy, QMixNetwork, TeamQNetwork
from tshtrain.config.spec import AlgorithmSpec, Family
from tshtrain.env.multi_agent import STATE_KEY
from tshtrain.errors import ConfigurationError


def _team_policy(ctx: BuildContext, name: str) -> QValuePolicy:
    """The Q-value policy every agent shares; epsilon decays over ``eps_decay_env_steps`` env steps (the
    shared policy counts one action per agent and env step)."""
    if not ctx.agents:
        raise ConfigurationError(
            f"{name} trains the agents of a multi-agent env as one team; give the file a multi-agent env "
            f"(env.type: pettingzoo, e.g. mpe2.simple_spread_v3) and agents: {{layout: shared}}."
        )
    network = ctx.network
    assert isinstance(network, TeamQNetwork)
    if network.encoder != "auto":
        raise ConfigurationError(
            f"algorithm.network.encoder: {name}'s agent network is an MLP on the flat obs (+ agent_id); "
            f"use encoder: auto."
        )
    q_net = agent_q_network(
        ctx.observation_space,
        ctx.action_space,
        hidden_sizes=widths(network),
        activation=ACTIVATIONS[network.activation],
    )
    exploration = ctx.exploration
    eps = (
        EpsilonSchedule(
            start=exploration.eps_start,
            end=exploration.eps_end,
            num_env_steps=exploration.eps_decay_env_steps * len(ctx.agents),
        )
        if isinstance(exploration, EpsilonGreedy)
        else EpsilonSchedule(start=0.0, end=0.0, num_env_steps=1)
    )
    return QValuePolicy(q_net, ctx.action_space, eps_schedule=eps, seed=ctx.seed)


def _build(ctx: BuildContext, name: str, mixer: Mixer) -> Algorithm[Any]:
    policy = _team_policy(ctx, name)
    params = ctx.params
    assert isinstance(params, ValueDecompositionParams)
    return ValueDecomposition(ctx.agents, policy, mixer=mixer, params=params)


def build_vdn(ctx: BuildContext) -> Algorithm[Any]:
    return _build(ctx, "vdn", SumMixer())


def build_qmix(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, QMixNetwork)
    space = ctx.observation_space
    state = space.spaces.get(STATE_KEY) if isinstance(space, gym.spaces.Dict) else None
    if state is None or state.shape is None or len(state.shape) != 1:
        raise ConfigurationError(
            f"qmix's mixing network reads the env's global state (a flat {STATE_KEY!r} key of the "
            f"observations), but the observation space is {space}; set env.global_state: true."
        )
    mixer = QMixer(
        num_agents=max(1, len(ctx.agents)),
        state_dim=int(state.shape[0]),
        embed_dim=network.mixer_embed_dim,
        hypernet_hidden_dim=network.mixer_hypernet_hidden_dim,
    )
    return _build(ctx, "qmix", mixer)


def _simple_spread(network: dict[str, Any]) -> dict[str, Any]:
    """The default experiment of both: MPE2 simple_spread (3 agents, 25-step episodes, discrete
    actions), 8 envs, 100k env steps (5 epochs of 20k), 10 vector steps of the 8 envs per training step
    and one gradient step of 128 joint transitions per 8 env steps, the whole run in the buffer (300k
    agent transitions), epsilon 1 to 0.05 over the first 30k env steps, gamma 0.9, hard target copies
    every 200 gradient steps; greedy tests of 32 episodes."""
    return {
        "env": {
            "type": "pettingzoo",
            "id": "mpe2.simple_spread_v3",
            "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": False},
            "num_training_envs": 8,
            "num_test_envs": 8,
            "agent_id": True,
            "global_state": True,
        },
        "agents": {"layout": "shared"},
        "algorithm": {
            "params": {
                "lr": 5e-4,
                "lr_schedule": "constant",
                "gamma": 0.9,
                "target_update_freq": 200,
                "n_step": 1,
                "is_double": True,
                "team_reward": "mean",
                "max_grad_norm": 10.0,
            },
            "network": network,
            "exploration": {"eps_start": 1.0, "eps_end": 0.05, "eps_decay_env_steps": 30_000},
        },
        "trainer": {
            "max_epochs": 5,
            "epoch_num_steps": 20_000,
            "collection_step_num_env_steps": 80,
            "update_step_num_gradient_steps_per_sample": 0.125,
            "batch_size": 128,
            "test_step_num_episodes": 32,
            "stop_score": None,
        },
        "buffer": {"size": 300_000},
    }


SPECS = (
    AlgorithmSpec(
        name="vdn",
        summary="VDN: value decomposition, the team's Q is the sum of the agents' Qs (cooperative "
        "multi-agent envs, Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=ValueDecompositionParams,
        network_model=TeamQNetwork,
        exploration_model=EpsilonGreedy,
        build=build_vdn,
        example=None,
        example_config="examples/configs/vdn_simple_spread.yaml",
        defaults=_simple_spread({"hidden_sizes": [64, 64], "activation": "relu"}),
        team=True,
    ),
    AlgorithmSpec(
        name="qmix",
        summary="QMIX: value decomposition, a monotonic mixing network over the global state "
        "(cooperative multi-agent envs, Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=ValueDecompositionParams,
        network_model=QMixNetwork,
        exploration_model=EpsilonGreedy,
        build=build_qmix,
        example=None,
        example_config="examples/configs/qmix_simple_spread.yaml",
        defaults=_simple_spread(
            {
                "hidden_sizes": [64, 64],
                "activation": "relu",
                "mixer_embed_dim": 32,
                "mixer_hypernet_hidden_dim": 64,
            }
        ),
        team=True,
    ),
)
