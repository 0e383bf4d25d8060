"""The on-policy algorithms of experiment files (PPO, A2C, REINFORCE, NPG, TRPO): for each, its builder
and its spec with its default experiment, in ``SPECS``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from tshtrain.algorithm import (
    A2C,
    PPO,
    A2CParams,
    PPOParams,
    Reinforce,
    ReinforceParams,
    RunningObsNormalizer,
)
from tshtrain.algorithm.algos.npg import NPG, NPGParams
from tshtrain.algorithm.algos.trpo import TRPO, TRPOParams
from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.masking import has_action_mask
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.config.builders import (
    ACTIVATIONS,
    BuildContext,
    actor_policy,
    critic_widths,
    obs_network,
    widths,
)
from tshtrain.config.defaults import cartpole_env
from tshtrain.config.models import ActorCriticNetwork, MlpNetwork, NoExploration, TrustRegionNetwork
from tshtrain.config.spec import AlgorithmSpec, Family
from tshtrain.errors import ConfigurationError


def _actor_critic(
    ctx: BuildContext, kind: type[A2C] | type[PPO] | type[NPG] | type[TRPO]
) -> A2C | PPO | NPG | TRPO:
    network = ctx.network
    assert isinstance(network, ActorCriticNetwork)
    if network.normalize_obs and has_action_mask(ctx.observation_space):
        raise ConfigurationError(
            f"algorithm.network.normalize_obs: the running normaliser takes flat Box observations, but the "
            f"observation space is {ctx.observation_space} (with action masks); set normalize_obs: false."
        )
    if network.centralised_critic:
        policy, critic = _centralised_actor_critic(ctx, network)
        return kind(policy=policy, critic=critic, params=ctx.params, seed=ctx.seed)
    normalizer = RunningObsNormalizer(ctx.obs_dim) if network.normalize_obs else None
    policy = actor_policy(ctx, network, normalizer)
    critic = obs_network(ctx, 1, critic_widths(network), normalizer)
    return kind(policy=policy, critic=critic, params=ctx.params, obs_normalizer=normalizer, seed=ctx.seed)


def _centralised_actor_critic(
    ctx: BuildContext, network: ActorCriticNetwork
) -> tuple[ActorPolicy, nn.Module]:
    """MAPPO's actor (``obs`` + ``agent_id``) and centralised critic (``state`` + ``agent_id``)."""
    from tshtrain.algorithm.blocks.agent_nets import mappo_actor_critic

    space = ctx.observation_space
    if has_action_mask(space):
        raise ConfigurationError(
            f"algorithm.network.centralised_critic: the observations carry action masks ({space}); the "
            f"centralised-critic networks do not mask actions yet: use centralised_critic: false."
        )
    if network.normalize_obs:
        raise ConfigurationError(
            "algorithm.network.normalize_obs: not available with centralised_critic: true (Dict "
            "observations); set normalize_obs: false."
        )
    if network.encoder != "auto":
        raise ConfigurationError(
            "algorithm.network.encoder: centralised_critic: true builds its own encoders of the obs, state "
            "and agent_id keys; use encoder: auto."
        )
    return mappo_actor_critic(
        space,
        ctx.action_space,
        hidden_sizes=widths(network),
        critic_hidden_sizes=critic_widths(network),
        activation=ACTIVATIONS[network.activation],
        centralised_critic=True,
        critic_per_world=network.critic_per_world,
        init_log_std=network.init_log_std,
        seed=ctx.seed,
    )


def build_ppo(ctx: BuildContext) -> Algorithm[Any]:
    return _actor_critic(ctx, PPO)


def build_a2c(ctx: BuildContext) -> Algorithm[Any]:
    return _actor_critic(ctx, A2C)


def _trust_region(ctx: BuildContext, kind: type[NPG] | type[TRPO]) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, TrustRegionNetwork)
    algorithm = _actor_critic(ctx, kind)
    if network.orthogonal_init:
        for module in (algorithm.policy, algorithm.critic):
            for layer in module.modules():
                if isinstance(layer, nn.Linear):
                    nn.init.orthogonal_(layer.weight)
                    if layer.bias is not None:
                        nn.init.zeros_(layer.bias)
    return algorithm


def build_npg(ctx: BuildContext) -> Algorithm[Any]:
    return _trust_region(ctx, NPG)


def build_trpo(ctx: BuildContext) -> Algorithm[Any]:
    return _trust_region(ctx, TRPO)


def build_reinforce(ctx: BuildContext) -> Algorithm[Any]:
    assert isinstance(ctx.network, MlpNetwork)
    policy = actor_policy(ctx, ctx.network, None)
    return Reinforce(policy=policy, params=ctx.params, seed=ctx.seed)


def _trust_region_cartpole(params: Mapping[str, Any]) -> dict[str, Any]:
    """NPG / TRPO with the setup of Tianshou's NPG / TRPO tests and of
    tests/learning/test_learning_npg_trpo.py: 64-64 tanh actor and critic, 16 training envs, 2048 env
    steps per collection step, one mini-batch of the whole rollout, 2 repetitions, up to 9 epochs of
    10,240 env steps (about 100k), stop at 475; every linear layer initialised orthogonally (the
    network's ``orthogonal_init``, on by default)."""
    return {
        "env": cartpole_env(16, 10),
        "algorithm": {"params": dict(params), "network": {"hidden_sizes": [64, 64], "activation": "tanh"}},
        "trainer": {
            "max_epochs": 9,
            "epoch_num_steps": 10_240,
            "collection_step_num_env_steps": 2048,
            "batch_size": None,
            "update_step_num_repetitions": 2,
            "test_step_num_episodes": 10,
            "stop_score": 475.0,
        },
    }


SPECS = (
    AlgorithmSpec(
        name="ppo",
        summary="PPO: clipped surrogate, GAE, value and entropy terms (Discrete or Box actions)",
        family=Family.ON_POLICY,
        params_cls=PPOParams,
        network_model=ActorCriticNetwork,
        exploration_model=NoExploration,
        build=build_ppo,
        example="examples/ppo_cartpole.py",
        example_config="examples/configs/ppo_cartpole.yaml",
        defaults={
            "env": cartpole_env(),
            "algorithm": {
                "params": {
                    "lr": 1e-3,
                    "lr_schedule": "linear",
                    "clip_range": 0.2,
                    "clip_schedule": "linear",
                    "gamma": 0.98,
                    "gae_lambda": 0.8,
                    "ent_coef": 0.0,
                },
                "network": {"hidden_sizes": [64, 64], "activation": "tanh"},
            },
            "trainer": {
                "max_epochs": 25,
                "epoch_num_steps": 4096,
                "collection_step_num_env_steps": 256,
                "batch_size": 256,
                "update_step_num_repetitions": 20,
                "test_step_num_episodes": 10,
                "stop_score": 475.0,
            },
        },
    ),
    AlgorithmSpec(
        name="a2c",
        summary="A2C: synchronous advantage actor-critic with GAE (Discrete or Box actions)",
        family=Family.ON_POLICY,
        params_cls=A2CParams,
        network_model=ActorCriticNetwork,
        exploration_model=NoExploration,
        build=build_a2c,
        example="examples/a2c_cartpole.py",
        example_config="examples/configs/a2c_cartpole.yaml",
        defaults={
            "env": cartpole_env(),
            "algorithm": {
                "params": {
                    "lr": 1e-3,
                    "lr_schedule": "linear",
                    "gamma": 0.99,
                    "gae_lambda": 1.0,  # n-step returns: with 5 steps per env, lambda matters little
                    "ent_coef": 0.0,
                    "advantage_normalization": False,
                }
            },
            "trainer": {
                "max_epochs": 20,
                "epoch_num_steps": 10_000,
                "collection_step_num_env_steps": 40,
                "batch_size": None,
                "update_step_num_repetitions": 1,
                "test_step_num_episodes": 10,
                "stop_score": 475.0,
            },
        },
    ),
    AlgorithmSpec(
        name="reinforce",
        summary="REINFORCE: Monte-Carlo policy gradient (Discrete actions)",
        family=Family.ON_POLICY,
        params_cls=ReinforceParams,
        network_model=MlpNetwork,
        exploration_model=NoExploration,
        build=build_reinforce,
        example="examples/reinforce_cartpole.py",
        example_config="examples/configs/reinforce_cartpole.yaml",
        defaults={
            "env": cartpole_env(),
            "algorithm": {"params": {"lr": 1e-3, "gamma": 0.99}},
            "trainer": {
                "max_epochs": 20,
                "epoch_num_steps": 10_000,
                "collection_step_num_env_steps": None,
                "collection_step_num_episodes": 16,
                "batch_size": None,
                "test_step_num_episodes": 10,
                "stop_score": 195.0,
            },
            "buffer": {"size": 20_000},
        },
    ),
    AlgorithmSpec(
        name="npg",
        summary="NPG: natural policy gradient, fixed-size natural steps, GAE (Discrete or Box actions)",
        family=Family.ON_POLICY,
        params_cls=NPGParams,
        network_model=TrustRegionNetwork,
        exploration_model=NoExploration,
        build=build_npg,
        example=None,
        example_config="examples/configs/npg_cartpole.yaml",
        defaults=_trust_region_cartpole({"gamma": 0.99}),
    ),
    AlgorithmSpec(
        name="trpo",
        summary="TRPO: natural gradient with a KL trust region and a line search, GAE (Discrete or Box)",
        family=Family.ON_POLICY,
        params_cls=TRPOParams,
        network_model=TrustRegionNetwork,
        exploration_model=NoExploration,
        build=build_trpo,
        example=None,
        example_config="examples/configs/trpo_cartpole.yaml",
        defaults=_trust_region_cartpole({"gamma": 0.99, "max_kl": 0.005}),
    ),
)
"""the on-policy algorithms, in the order ``tshtrain list`` shows them"""
