"""The algorithms an experiment file can name, with their params classes, builders and defaults.

Each :class:`AlgorithmSpec` carries a complete default experiment (``tshtrain config NAME`` prints it),
taken from :mod:`tshtrain.config.defaults`, the one place where their settings are written down.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tshtrain.algorithm import (
    A2CParams,
    BCParams,
    C51Params,
    DDPGParams,
    DiscreteSACParams,
    DQNParams,
    PPOParams,
    QuantileParams,
    ReinforceParams,
    SACParams,
    TD3Params,
)
from tshtrain.algorithm.algos.bcq import BCQParams
from tshtrain.algorithm.algos.cql import CQLParams
from tshtrain.algorithm.algos.discrete_cql import DiscreteCQLParams
from tshtrain.algorithm.algos.discrete_crr import DiscreteCRRParams
from tshtrain.algorithm.algos.iql import IQLParams
from tshtrain.algorithm.algos.npg import NPGParams
from tshtrain.algorithm.algos.redq import REDQParams
from tshtrain.algorithm.algos.td3_bc import TD3BCParams
from tshtrain.algorithm.algos.trpo import TRPOParams
from tshtrain.algorithm.base import Algorithm
from tshtrain.config import builders
from tshtrain.config.defaults import DEFAULTS, EXAMPLE_EXTRAS
from tshtrain.config.models import (
    ActorCriticNetwork,
    ActorCriticsNetwork,
    BCQNetwork,
    CategoricalQNetwork,
    DiscreteCRRNetwork,
    EpsilonGreedy,
    GaussianNoise,
    ImplicitQuantileQNetwork,
    IQLNetwork,
    MlpNetwork,
    NoExploration,
    QNetwork,
    QuantileQNetwork,
    RainbowQNetwork,
    REDQNetwork,
    Section,
    TD3BCNetwork,
    TrustRegionNetwork,
)
from tshtrain.errors import ExperimentError


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
    example: str | None
    """the example script that builds the same run from params objects; None: no script yet (the
    example experiment file is the example; the learning test named in ``summary``'s docs page builds
    the same run in Python)"""
    example_config: str
    """the example experiment file generated from ``defaults`` (plus ``example_extras``)"""
    example_extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """what the example experiment file sets beyond the default experiment: the online examples whose
    replay buffers are the offline examples' datasets set ``output_dir`` and ``buffer.save_on_exit``"""


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
            example_config="examples/configs/ppo_cartpole.yaml",
            defaults=DEFAULTS["ppo"],
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
            example_config="examples/configs/a2c_cartpole.yaml",
            defaults=DEFAULTS["a2c"],
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
            example_config="examples/configs/reinforce_cartpole.yaml",
            defaults=DEFAULTS["reinforce"],
        ),
        AlgorithmSpec(
            name="npg",
            summary="NPG: natural policy gradient, fixed-size natural steps, GAE (Discrete or Box actions)",
            family=Family.ON_POLICY,
            params_cls=NPGParams,
            network_model=TrustRegionNetwork,
            exploration_model=NoExploration,
            build=builders.build_npg,
            example=None,
            example_config="examples/configs/npg_cartpole.yaml",
            defaults=DEFAULTS["npg"],
        ),
        AlgorithmSpec(
            name="trpo",
            summary="TRPO: natural gradient with a KL trust region and a line search, GAE (Discrete or Box)",
            family=Family.ON_POLICY,
            params_cls=TRPOParams,
            network_model=TrustRegionNetwork,
            exploration_model=NoExploration,
            build=builders.build_trpo,
            example=None,
            example_config="examples/configs/trpo_cartpole.yaml",
            defaults=DEFAULTS["trpo"],
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
            example_config="examples/configs/dqn_cartpole.yaml",
            example_extras=EXAMPLE_EXTRAS["dqn"],
            defaults=DEFAULTS["dqn"],
        ),
        AlgorithmSpec(
            name="c51",
            summary="C51: categorical return distribution, double Q, n-step returns (Discrete actions)",
            family=Family.OFF_POLICY,
            params_cls=C51Params,
            network_model=CategoricalQNetwork,
            exploration_model=EpsilonGreedy,
            build=builders.build_c51,
            example="examples/c51_cartpole.py",
            example_config="examples/configs/c51_cartpole.yaml",
            defaults=DEFAULTS["c51"],
        ),
        AlgorithmSpec(
            name="qrdqn",
            summary="QR-DQN: fixed-fraction return quantiles, quantile Huber loss (Discrete actions)",
            family=Family.OFF_POLICY,
            params_cls=QuantileParams,
            network_model=QuantileQNetwork,
            exploration_model=EpsilonGreedy,
            build=builders.build_qrdqn,
            example="examples/qrdqn_cartpole.py",
            example_config="examples/configs/qrdqn_cartpole.yaml",
            defaults=DEFAULTS["qrdqn"],
        ),
        AlgorithmSpec(
            name="iqn",
            summary="IQN: implicit quantile network, sampled fractions (Discrete actions)",
            family=Family.OFF_POLICY,
            params_cls=QuantileParams,
            network_model=ImplicitQuantileQNetwork,
            exploration_model=EpsilonGreedy,
            build=builders.build_iqn,
            example="examples/iqn_cartpole.py",
            example_config="examples/configs/iqn_cartpole.yaml",
            defaults=DEFAULTS["iqn"],
        ),
        AlgorithmSpec(
            name="rainbow",
            summary="Rainbow: C51 + dueling + n-step + prioritized replay + noisy nets (Discrete actions)",
            family=Family.OFF_POLICY,
            params_cls=C51Params,
            network_model=RainbowQNetwork,
            exploration_model=EpsilonGreedy,
            build=builders.build_rainbow,
            example="examples/rainbow_cartpole.py",
            example_config="examples/configs/rainbow_cartpole.yaml",
            defaults=DEFAULTS["rainbow"],
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
            example_config="examples/configs/ddpg_pendulum.yaml",
            defaults=DEFAULTS["ddpg"],
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
            example_config="examples/configs/td3_pendulum.yaml",
            defaults=DEFAULTS["td3"],
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
            example_config="examples/configs/sac_pendulum.yaml",
            example_extras=EXAMPLE_EXTRAS["sac"],
            defaults=DEFAULTS["sac"],
        ),
        AlgorithmSpec(
            name="redq",
            summary="REDQ: SAC with an ensemble of N critics and a random target subset (Box actions)",
            family=Family.OFF_POLICY,
            params_cls=REDQParams,
            network_model=REDQNetwork,
            exploration_model=NoExploration,
            build=builders.build_redq,
            example=None,
            example_config="examples/configs/redq_pendulum.yaml",
            defaults=DEFAULTS["redq"],
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
            example_config="examples/configs/discrete_sac_cartpole.yaml",
            defaults=DEFAULTS["discrete_sac"],
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
            example_config="examples/configs/bc_cartpole.yaml",
            defaults=DEFAULTS["bc"],
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
            example_config="examples/configs/cql_pendulum.yaml",
            defaults=DEFAULTS["cql"],
        ),
        AlgorithmSpec(
            name="td3_bc",
            summary="TD3+BC: TD3 plus a behavior-cloning term, normalised obs (offline, Box actions)",
            family=Family.OFFLINE,
            params_cls=TD3BCParams,
            network_model=TD3BCNetwork,
            exploration_model=NoExploration,
            build=builders.build_td3_bc,
            example="examples/td3_bc_pendulum.py",
            example_config="examples/configs/td3_bc_pendulum.yaml",
            defaults=DEFAULTS["td3_bc"],
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
            example_config="examples/configs/discrete_cql_cartpole.yaml",
            defaults=DEFAULTS["discrete_cql"],
        ),
        AlgorithmSpec(
            name="iql",
            summary="IQL: expectile value learning, advantage-weighted actor (offline, Box actions)",
            family=Family.OFFLINE,
            params_cls=IQLParams,
            network_model=IQLNetwork,
            exploration_model=NoExploration,
            build=builders.build_iql,
            example=None,
            example_config="examples/configs/iql_pendulum.yaml",
            defaults=DEFAULTS["iql"],
        ),
        AlgorithmSpec(
            name="bcq",
            summary="BCQ: VAE of the dataset's actions, perturbation network, twin critics (offline, Box)",
            family=Family.OFFLINE,
            params_cls=BCQParams,
            network_model=BCQNetwork,
            exploration_model=NoExploration,
            build=builders.build_bcq,
            example=None,
            example_config="examples/configs/bcq_pendulum.yaml",
            defaults=DEFAULTS["bcq"],
        ),
        AlgorithmSpec(
            name="discrete_crr",
            summary="Discrete CRR: critic-regularised regression of a categorical actor (offline, Discrete)",
            family=Family.OFFLINE,
            params_cls=DiscreteCRRParams,
            network_model=DiscreteCRRNetwork,
            exploration_model=NoExploration,
            build=builders.build_discrete_crr,
            example=None,
            example_config="examples/configs/discrete_crr_cartpole.yaml",
            defaults=DEFAULTS["discrete_crr"],
        ),
    )
}
"""every algorithm by its experiment-file name"""

DEFAULT_ALGORITHM = "ppo"
"""what ``tshtrain train`` runs without an experiment file"""


def offline_names() -> list[str]:
    """The offline algorithms (those that take a ``dataset``), in registry order."""
    return [name for name, spec in SPECS.items() if spec.family is Family.OFFLINE]


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
