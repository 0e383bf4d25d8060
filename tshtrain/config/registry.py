"""The algorithms an experiment file can name, with their params classes, builders and defaults.

Each :class:`AlgorithmSpec` carries a complete default experiment (``tshtrain config NAME`` prints it):
the settings of the matching ``examples/`` script, which reach the results in docs/algorithms.md.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tshtrain.algorithm import (
    A2CParams,
    BCParams,
    DDPGParams,
    DiscreteSACParams,
    DQNParams,
    PPOParams,
    ReinforceParams,
    SACParams,
    TD3Params,
)
from tshtrain.algorithm.algos.cql import CQLParams
from tshtrain.algorithm.algos.discrete_cql import DiscreteCQLParams
from tshtrain.algorithm.algos.td3_bc import TD3BCParams
from tshtrain.algorithm.base import Algorithm
from tshtrain.config import builders
from tshtrain.config.files import ExperimentError
from tshtrain.config.models import (
    ActorCriticNetwork,
    ActorCriticsNetwork,
    EpsilonGreedy,
    GaussianNoise,
    MlpNetwork,
    NoExploration,
    QNetwork,
    Section,
)


class Family(StrEnum):
    """Which trainer runs an algorithm."""

    ON_POLICY = "on-policy"
    OFF_POLICY = "off-policy"
    OFFLINE = "offline"


@dataclass(frozen=True, kw_only=True)
class AlgorithmSpec:
    """What the experiment files and the command line know of one algorithm."""

    name: str
    summary: str
    family: Family
    params_cls: type
    network_model: type[MlpNetwork]
    exploration_model: type[Section]
    build: Callable[[builders.BuildContext], Algorithm[Any]]
    defaults: Mapping[str, Any]
    """the default experiment (every section but ``algorithm.name``, which is ``name``)"""
    example: str
    """the example script that builds the same run from params objects"""


def _cartpole(num_training_envs: int = 8, num_test_envs: int = 8) -> dict[str, Any]:
    return {"id": "CartPole-v1", "num_training_envs": num_training_envs, "num_test_envs": num_test_envs}


def _pendulum() -> dict[str, Any]:
    return {"id": "Pendulum-v1", "num_training_envs": 1, "num_test_envs": 10}


_PENDULUM_OFF_POLICY_TRAINER: dict[str, Any] = {
    "max_epochs": 19,
    "epoch_num_steps": 1000,
    "collection_step_num_env_steps": 1,
    "update_step_num_gradient_steps_per_sample": 1.0,
    "batch_size": 256,
    "test_step_num_episodes": 10,
    "stop_score": -200.0,
}
_PENDULUM_BUFFER: dict[str, Any] = {"size": 20_000, "prefill_env_steps": 1000}
_OFFLINE_TRAINER: dict[str, Any] = {
    "max_epochs": 5,
    "epoch_num_steps": 1000,
    "batch_size": 256,
    "test_step_num_episodes": 10,
}

SPECS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        AlgorithmSpec(
            name="ppo",
            summary="PPO: clipped surrogate, GAE, value and entropy terms (Discrete or Box actions)",
            family=Family.ON_POLICY,
            params_cls=PPOParams,
            network_model=ActorCriticNetwork,
            exploration_model=NoExploration,
            build=builders.build_ppo,
            example="examples/ppo_cartpole.py",
            defaults={
                "env": _cartpole(),
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
            build=builders.build_a2c,
            example="examples/a2c_cartpole.py",
            defaults={
                "env": _cartpole(),
                "algorithm": {
                    "params": {
                        "lr": 1e-3,
                        "lr_schedule": "linear",
                        "gamma": 0.99,
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
            build=builders.build_reinforce,
            example="examples/reinforce_cartpole.py",
            defaults={
                "env": _cartpole(),
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
            name="dqn",
            summary="DQN: double Q, dueling heads, n-step returns, prioritized replay (Discrete actions)",
            family=Family.OFF_POLICY,
            params_cls=DQNParams,
            network_model=QNetwork,
            exploration_model=EpsilonGreedy,
            build=builders.build_dqn,
            example="examples/dqn_cartpole_475.py",
            defaults={
                "env": _cartpole(1, 10),
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
            name="ddpg",
            summary="DDPG: deterministic actor, one Q critic, Gaussian exploration noise (Box actions)",
            family=Family.OFF_POLICY,
            params_cls=DDPGParams,
            network_model=ActorCriticsNetwork,
            exploration_model=GaussianNoise,
            build=builders.build_ddpg,
            example="examples/ddpg_pendulum.py",
            defaults={
                "env": _pendulum(),
                "algorithm": {
                    "params": {"actor_lr": 1e-3, "critic_lr": 1e-3},
                    "network": {"hidden_sizes": [256, 256], "num_critics": 1},
                },
                "trainer": _PENDULUM_OFF_POLICY_TRAINER,
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
            build=builders.build_td3,
            example="examples/td3_pendulum.py",
            defaults={
                "env": _pendulum(),
                "algorithm": {
                    "params": {"actor_lr": 1e-3, "critic_lr": 1e-3},
                    "network": {"hidden_sizes": [256, 256]},
                },
                "trainer": _PENDULUM_OFF_POLICY_TRAINER,
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
            build=builders.build_sac,
            example="examples/sac_pendulum.py",
            defaults={
                "env": _pendulum(),
                "algorithm": {
                    "params": {"actor_lr": 1e-3, "critic_lr": 1e-3, "alpha_lr": 1e-3},
                    "network": {"hidden_sizes": [256, 256]},
                },
                "trainer": _PENDULUM_OFF_POLICY_TRAINER,
                "buffer": _PENDULUM_BUFFER,
            },
        ),
        AlgorithmSpec(
            name="discrete_sac",
            summary="Discrete SAC: categorical actor, twin Q critics over all actions (Discrete actions)",
            family=Family.OFF_POLICY,
            params_cls=DiscreteSACParams,
            network_model=ActorCriticsNetwork,
            exploration_model=NoExploration,
            build=builders.build_discrete_sac,
            example="examples/discrete_sac_cartpole.py",
            defaults={
                "env": _cartpole(10, 10),
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
        AlgorithmSpec(
            name="bc",
            summary="Behavior cloning: supervised imitation of a dataset's actions (offline)",
            family=Family.OFFLINE,
            params_cls=BCParams,
            network_model=MlpNetwork,
            exploration_model=NoExploration,
            build=builders.build_bc,
            example="examples/bc_cartpole.py",
            defaults={
                "env": _cartpole(),
                "algorithm": {"params": {"lr": 1e-3}},
                "trainer": {
                    "max_epochs": 3,
                    "epoch_num_steps": 1000,
                    "batch_size": 64,
                    "test_step_num_episodes": 20,
                },
                "dataset": {"path": "runs/dqn-cartpole/buffer"},
            },
        ),
        AlgorithmSpec(
            name="cql",
            summary="CQL: conservative Q-learning on SAC (offline, Box actions)",
            family=Family.OFFLINE,
            params_cls=CQLParams,
            network_model=ActorCriticsNetwork,
            exploration_model=NoExploration,
            build=builders.build_cql,
            example="examples/cql_pendulum.py",
            defaults={
                "env": _pendulum(),
                "algorithm": {
                    "params": {
                        "actor_lr": 1e-4,
                        "critic_lr": 3e-4,
                        "cql_weight": 5.0,
                        "num_sampled_actions": 5,
                    },
                    "network": {"hidden_sizes": [256, 256]},
                },
                "trainer": _OFFLINE_TRAINER,
                "dataset": {"path": "runs/sac-pendulum/buffer"},
            },
        ),
        AlgorithmSpec(
            name="td3_bc",
            summary="TD3+BC: TD3 plus a behavior-cloning term, normalised obs (offline, Box actions)",
            family=Family.OFFLINE,
            params_cls=TD3BCParams,
            network_model=ActorCriticsNetwork,
            exploration_model=NoExploration,
            build=builders.build_td3_bc,
            example="examples/td3_bc_pendulum.py",
            defaults={
                "env": _pendulum(),
                "algorithm": {"params": {"alpha": 2.5}, "network": {"hidden_sizes": [256, 256]}},
                "trainer": _OFFLINE_TRAINER,
                "dataset": {"path": "runs/sac-pendulum/buffer"},
            },
        ),
        AlgorithmSpec(
            name="discrete_cql",
            summary="Discrete CQL: QR-free conservative DQN (offline, Discrete actions)",
            family=Family.OFFLINE,
            params_cls=DiscreteCQLParams,
            network_model=QNetwork,
            exploration_model=NoExploration,
            build=builders.build_discrete_cql,
            example="examples/discrete_cql_cartpole.py",
            defaults={
                "env": _cartpole(8, 10),
                "algorithm": {
                    "params": {"lr": 1e-3, "target_update_freq": 200, "cql_weight": 1.0},
                    "network": {"hidden_sizes": [128, 128]},
                },
                "trainer": {**_OFFLINE_TRAINER, "batch_size": 64},
                "dataset": {"path": "runs/dqn-cartpole/buffer"},
            },
        ),
    )
}
"""every algorithm by its experiment-file name"""

DEFAULT_ALGORITHM = "ppo"
"""what ``tshtrain train`` runs without an experiment file"""


def get_spec(name: object, where: str = "algorithm.name") -> AlgorithmSpec:
    """The spec of ``name``; an :class:`ExperimentError` with a did-you-mean suggestion otherwise."""
    if isinstance(name, str) and name in SPECS:
        return SPECS[name]
    allowed = ", ".join(SPECS)
    hint = did_you_mean(str(name), SPECS)
    raise ExperimentError(f"{where}: unknown algorithm {name!r}{hint}; allowed: {allowed}.")


def did_you_mean(word: str, choices: Any) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
