"""The Q-learning algorithms of experiment files (DQN and the distributional C51, QR-DQN, IQN, Rainbow;
Discrete actions, off-policy): for each, its builder and its spec with its default experiment, in
``SPECS``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from torch import nn

from tshtrain.algorithm import DQN, C51Params, DQNParams, QuantileParams, num_actions
from tshtrain.algorithm.algos.c51 import C51
from tshtrain.algorithm.algos.iqn import IQN, IQNSampling
from tshtrain.algorithm.algos.qrdqn import QRDQN
from tshtrain.algorithm.algos.rainbow import Rainbow
from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.distributional import categorical_mlp, iqn_mlp, quantile_mlp
from tshtrain.algorithm.blocks.masking import has_action_mask
from tshtrain.algorithm.blocks.noisy import NoisyQPolicy
from tshtrain.config.builders import BuildContext, epsilon_greedy, q_policy, uses_encoder, widths
from tshtrain.config.defaults import DQN_EXAMPLE_RUN, cartpole_env, saves_dataset
from tshtrain.config.models import (
    CategoricalQNetwork,
    EpsilonGreedy,
    ImplicitQuantileQNetwork,
    QNetwork,
    QuantileQNetwork,
    RainbowQNetwork,
)
from tshtrain.config.spec import AlgorithmSpec, Family
from tshtrain.errors import UnsupportedSpaceError


def build_dqn(ctx: BuildContext) -> Algorithm[Any]:
    return DQN(policy=q_policy(ctx), params=ctx.params)


def _distributional_input_dim(ctx: BuildContext, name: str) -> int:
    """The observation size of a distributional Q network: flat Box observations and Discrete actions
    only (these networks have no encoder and no action masking)."""
    space = ctx.observation_space
    if uses_encoder(ctx) or has_action_mask(space):
        raise UnsupportedSpaceError(
            f"algorithm.name: {name}'s network takes flat Box observations (one axis, not an image, no "
            f"action mask) with encoder: auto, but the observation space is {space}; use dqn for others."
        )
    if not isinstance(ctx.action_space, gym.spaces.Discrete):
        raise UnsupportedSpaceError(f"{name} needs a Discrete action space, got {ctx.action_space!r}.")
    return ctx.obs_dim


def _categorical_net(ctx: BuildContext, name: str, noisy_sigma0: float | None = None) -> nn.Module:
    network = ctx.network
    assert isinstance(network, CategoricalQNetwork)
    return categorical_mlp(
        _distributional_input_dim(ctx, name),
        num_actions(ctx.action_space),
        widths(network),
        num_atoms=network.num_atoms,
        v_min=network.v_min,
        v_max=network.v_max,
        dueling=network.dueling,
        noisy_sigma0=noisy_sigma0,
    )


def build_c51(ctx: BuildContext) -> Algorithm[Any]:
    return C51(policy=epsilon_greedy(ctx, _categorical_net(ctx, "c51")), params=ctx.params)


def build_rainbow(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, RainbowQNetwork)
    greedy = epsilon_greedy(ctx, _categorical_net(ctx, "rainbow", network.noisy_sigma0))
    policy = NoisyQPolicy(greedy, seed=ctx.seed)
    return Rainbow(policy=policy, params=ctx.params, seed=ctx.seed)


def build_qrdqn(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, QuantileQNetwork)
    net = quantile_mlp(
        _distributional_input_dim(ctx, "qrdqn"),
        num_actions(ctx.action_space),
        widths(network),
        num_quantiles=network.num_quantiles,
    )
    return QRDQN(policy=epsilon_greedy(ctx, net), params=ctx.params)


def build_iqn(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, ImplicitQuantileQNetwork)
    net = iqn_mlp(
        _distributional_input_dim(ctx, "iqn"),
        num_actions(ctx.action_space),
        widths(network),
        num_cosines=network.num_cosines,
        num_policy_quantiles=network.num_policy_quantiles,
    )
    sampling = IQNSampling(num_online_taus=network.num_online_taus, num_target_taus=network.num_target_taus)
    return IQN(policy=epsilon_greedy(ctx, net), params=ctx.params, sampling=sampling, seed=ctx.seed)


def _distributional_cartpole() -> dict[str, Any]:
    """The C51 / QR-DQN / IQN / Rainbow setup of Tianshou's tests (test/discrete/test_c51.py, ...) and of
    tests/learning/test_learning_distributional.py: four ReLU layers of 128, gamma 0.9, 3-step returns,
    target copies every 320 gradient steps, epsilon 0.1 to 0.01 over 50k env steps, 8 env steps and one
    gradient step of 64 per training step, up to 10 epochs of 8000 env steps, stop at 195. Rainbow's
    dueling noisy network is the ``rainbow`` network's default; its prioritized replay is
    ``buffer.prioritized: true`` (off here, as in Tianshou's test and the learning test). The prefill is
    512 random env steps (the learning test collects them with the policy)."""
    return {
        "env": cartpole_env(8, 10),
        "algorithm": {
            "params": {"gamma": 0.9, "n_step": 3, "target_update_freq": 320},
            "network": {"hidden_sizes": [128, 128, 128, 128]},
            "exploration": {"eps_start": 0.1, "eps_end": 0.01, "eps_decay_env_steps": 50_000},
        },
        "trainer": {
            "max_epochs": 10,
            "epoch_num_steps": 8000,
            "collection_step_num_env_steps": 8,
            "update_step_num_gradient_steps_per_sample": 0.125,
            "batch_size": 64,
            "test_step_num_episodes": 10,
            "stop_score": 195.0,
        },
        "buffer": {"size": 20_000, "prefill_env_steps": 512},
    }


SPECS = (
    AlgorithmSpec(
        name="dqn",
        summary="DQN: double Q, dueling heads, n-step returns, prioritized replay (Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=DQNParams,
        network_model=QNetwork,
        exploration_model=EpsilonGreedy,
        build=build_dqn,
        example="examples/dqn_cartpole_475.py",
        example_config="examples/configs/dqn_cartpole.yaml",
        example_extras=saves_dataset(DQN_EXAMPLE_RUN),
        defaults={
            "env": cartpole_env(1, 10),
            "algorithm": {
                "params": {
                    "lr": 2.3e-3,
                    "gamma": 0.99,
                    "target_update_freq": 128,
                    "is_double": False,
                    "max_grad_norm": 10.0,
                },
                "network": {"hidden_sizes": [256, 256]},
                "exploration": {"eps_start": 1.0, "eps_end": 0.04, "eps_decay_env_steps": 8000},
            },
            "trainer": {
                "max_epochs": 38,
                "epoch_num_steps": 2560,
                "collection_step_num_env_steps": 256,
                "update_step_num_gradient_steps_per_sample": 0.5,
                "batch_size": 64,
                "test_step_num_episodes": 10,
                "stop_score": 475.0,
            },
            "buffer": {"size": 100_000, "prefill_env_steps": 1000},
        },
    ),
    AlgorithmSpec(
        name="c51",
        summary="C51: categorical return distribution, double Q, n-step returns (Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=C51Params,
        network_model=CategoricalQNetwork,
        exploration_model=EpsilonGreedy,
        build=build_c51,
        example="examples/c51_cartpole.py",
        example_config="examples/configs/c51_cartpole.yaml",
        defaults=_distributional_cartpole(),
    ),
    AlgorithmSpec(
        name="qrdqn",
        summary="QR-DQN: fixed-fraction return quantiles, quantile Huber loss (Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=QuantileParams,
        network_model=QuantileQNetwork,
        exploration_model=EpsilonGreedy,
        build=build_qrdqn,
        example="examples/qrdqn_cartpole.py",
        example_config="examples/configs/qrdqn_cartpole.yaml",
        defaults=_distributional_cartpole(),
    ),
    AlgorithmSpec(
        name="iqn",
        summary="IQN: implicit quantile network, sampled fractions (Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=QuantileParams,
        network_model=ImplicitQuantileQNetwork,
        exploration_model=EpsilonGreedy,
        build=build_iqn,
        example="examples/iqn_cartpole.py",
        example_config="examples/configs/iqn_cartpole.yaml",
        defaults=_distributional_cartpole(),
    ),
    AlgorithmSpec(
        name="rainbow",
        summary="Rainbow: C51 + dueling + n-step + prioritized replay + noisy nets (Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=C51Params,
        network_model=RainbowQNetwork,
        exploration_model=EpsilonGreedy,
        build=build_rainbow,
        example="examples/rainbow_cartpole.py",
        example_config="examples/configs/rainbow_cartpole.yaml",
        defaults=_distributional_cartpole(),
    ),
)
"""the Q-learning algorithms, in the order ``tshtrain list`` shows them"""
