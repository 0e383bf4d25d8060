"""The off-policy actor-critic algorithms of experiment files (DDPG, TD3, SAC, REDQ, discrete SAC): for
each, its builder and its spec with its default experiment, in ``SPECS``."""

from __future__ import annotations

from typing import Any

from tshtrain.algorithm import (
    DDPG,
    SAC,
    TD3,
    CategoricalPolicy,
    DDPGParams,
    DiscreteQEnsemble,
    DiscreteSAC,
    DiscreteSACParams,
    SACParams,
    TD3Params,
    mlp,
    num_actions,
)
from tshtrain.algorithm.algos.redq import REDQ, REDQParams
from tshtrain.algorithm.base import Algorithm
from tshtrain.config.builders import (
    ACTIVATIONS,
    BuildContext,
    critic_widths,
    deterministic_policy,
    q_ensemble,
    require_flat_observations,
    tanh_gaussian_policy,
    widths,
)
from tshtrain.config.defaults import SAC_EXAMPLE_RUN, cartpole_env, pendulum_env, saves_dataset
from tshtrain.config.models import ActorCriticsNetwork, GaussianNoise, NoExploration, REDQNetwork
from tshtrain.config.spec import AlgorithmSpec, Family


def build_ddpg(ctx: BuildContext) -> Algorithm[Any]:
    return DDPG(policy=deterministic_policy(ctx), critic=q_ensemble(ctx), params=ctx.params)


def build_td3(ctx: BuildContext) -> Algorithm[Any]:
    return TD3(policy=deterministic_policy(ctx), critic=q_ensemble(ctx), params=ctx.params, seed=ctx.seed)


def build_sac(ctx: BuildContext) -> Algorithm[Any]:
    return SAC(policy=tanh_gaussian_policy(ctx), critic=q_ensemble(ctx), params=ctx.params)


def build_discrete_sac(ctx: BuildContext) -> Algorithm[Any]:
    require_flat_observations(ctx, "discrete_sac")
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    space, activation = ctx.action_space, ACTIVATIONS[network.activation]
    actor = mlp(ctx.obs_dim, num_actions(space), widths(network), activation)
    critic = DiscreteQEnsemble(
        ctx.obs_dim,
        num_actions(space),
        critic_widths(network),
        num_critics=network.num_critics,
        activation=activation,
    )
    return DiscreteSAC(
        policy=CategoricalPolicy(actor, space, seed=ctx.seed), critic=critic, params=ctx.params
    )


def build_redq(ctx: BuildContext) -> Algorithm[Any]:
    assert isinstance(ctx.network, REDQNetwork)
    return REDQ(policy=tanh_gaussian_policy(ctx), critic=q_ensemble(ctx), params=ctx.params, seed=ctx.seed)


_PENDULUM_TRAINER: dict[str, Any] = {
    "max_epochs": 19,
    "epoch_num_steps": 1000,
    "collection_step_num_env_steps": 1,
    "update_step_num_gradient_steps_per_sample": 1.0,
    "batch_size": 256,
    "test_step_num_episodes": 10,
    "stop_score": -200.0,
}
"""the trainer of the DDPG / TD3 / SAC Pendulum examples"""
_PENDULUM_BUFFER: dict[str, Any] = {"size": 20_000, "prefill_env_steps": 1000}


SPECS = (
    AlgorithmSpec(
        name="ddpg",
        summary="DDPG: deterministic actor, one Q critic, Gaussian exploration noise (Box actions)",
        family=Family.OFF_POLICY,
        params_cls=DDPGParams,
        network_model=ActorCriticsNetwork,
        exploration_model=GaussianNoise,
        build=build_ddpg,
        example="examples/ddpg_pendulum.py",
        example_config="examples/configs/ddpg_pendulum.yaml",
        defaults={
            "env": pendulum_env(),
            "algorithm": {
                "params": {"actor_lr": 1e-3, "critic_lr": 1e-3},
                "network": {"hidden_sizes": [256, 256], "num_critics": 1},
            },
            "trainer": _PENDULUM_TRAINER,
            "buffer": _PENDULUM_BUFFER,
        },
    ),
    AlgorithmSpec(
        name="td3",
        summary="TD3: twin critics, target policy smoothing, delayed actor updates (Box actions)",
        family=Family.OFF_POLICY,
        params_cls=TD3Params,
        network_model=ActorCriticsNetwork,
        exploration_model=GaussianNoise,
        build=build_td3,
        example="examples/td3_pendulum.py",
        example_config="examples/configs/td3_pendulum.yaml",
        defaults={
            "env": pendulum_env(),
            "algorithm": {
                "params": {"actor_lr": 1e-3, "critic_lr": 1e-3},
                "network": {"hidden_sizes": [256, 256]},
            },
            "trainer": _PENDULUM_TRAINER,
            "buffer": _PENDULUM_BUFFER,
        },
    ),
    AlgorithmSpec(
        name="sac",
        summary="SAC: squashed Gaussian actor, twin critics, automatic entropy tuning (Box actions)",
        family=Family.OFF_POLICY,
        params_cls=SACParams,
        network_model=ActorCriticsNetwork,
        exploration_model=NoExploration,
        build=build_sac,
        example="examples/sac_pendulum.py",
        example_config="examples/configs/sac_pendulum.yaml",
        example_extras=saves_dataset(SAC_EXAMPLE_RUN),
        defaults={
            "env": pendulum_env(),
            "algorithm": {
                "params": {"actor_lr": 1e-3, "critic_lr": 1e-3, "alpha_lr": 1e-3},
                "network": {"hidden_sizes": [256, 256]},
            },
            "trainer": _PENDULUM_TRAINER,
            "buffer": _PENDULUM_BUFFER,
        },
    ),
    AlgorithmSpec(
        name="redq",
        summary="REDQ: SAC with an ensemble of N critics and a random target subset (Box actions)",
        family=Family.OFF_POLICY,
        params_cls=REDQParams,
        network_model=REDQNetwork,
        exploration_model=NoExploration,
        build=build_redq,
        example=None,
        example_config="examples/configs/redq_pendulum.yaml",
        defaults={  # tests/learning/test_learning_redq_iql.py (Tianshou's test_redq.py with 4 critics)
            "env": {"id": "Pendulum-v1", "num_training_envs": 8, "num_test_envs": 10},
            "algorithm": {
                "params": {
                    "actor_lr": 1e-4,
                    "critic_lr": 1e-3,
                    "alpha": 0.2,
                    "subset_size": 2,
                    "actor_delay": 3,
                },
                "network": {"hidden_sizes": [64, 64], "num_critics": 4},
            },
            "trainer": {
                "max_epochs": 5,
                "epoch_num_steps": 5000,
                "collection_step_num_env_steps": 8,
                "update_step_num_gradient_steps_per_sample": 3.0,
                "batch_size": 64,
                "test_step_num_episodes": 10,
                "stop_score": -250.0,
            },
            "buffer": {"size": 20_000, "prefill_env_steps": 1000},
        },
    ),
    AlgorithmSpec(
        name="discrete_sac",
        summary="Discrete SAC: categorical actor, twin Q critics over all actions (Discrete actions)",
        family=Family.OFF_POLICY,
        params_cls=DiscreteSACParams,
        network_model=ActorCriticsNetwork,
        exploration_model=NoExploration,
        build=build_discrete_sac,
        example="examples/discrete_sac_cartpole.py",
        example_config="examples/configs/discrete_sac_cartpole.yaml",
        defaults={
            "env": cartpole_env(10, 10),
            "algorithm": {
                "params": {
                    "actor_lr": 1e-4,
                    "critic_lr": 1e-3,
                    "gamma": 0.95,
                    "alpha": 0.05,
                    "auto_alpha": False,
                    "n_step": 3,
                },
                "network": {"hidden_sizes": [64, 64]},
            },
            "trainer": {
                "max_epochs": 5,
                "epoch_num_steps": 10_000,
                "collection_step_num_env_steps": 10,
                "update_step_num_gradient_steps_per_sample": 0.1,
                "batch_size": 64,
                "test_step_num_episodes": 10,
                "stop_score": 180.0,
            },
            "buffer": {"size": 20_000},
        },
    ),
)
"""the off-policy actor-critic algorithms, in the order ``tshtrain list`` shows them"""
