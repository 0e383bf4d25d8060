"""Build an algorithm, with its policy and networks, from an experiment's algorithm section.

One builder per algorithm; each takes a :class:`BuildContext` (spaces, the validated params object, the
network and exploration sections, the seed) and returns the algorithm. The networks are the MLPs of
:mod:`tshtrain.algorithm`; a user who wants other networks writes Python (see examples/).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from tshtrain.algorithm import (
    A2C,
    DDPG,
    DQN,
    PPO,
    SAC,
    TD3,
    BehaviorCloning,
    CategoricalPolicy,
    DeterministicActorPolicy,
    DiscreteQEnsemble,
    DiscreteSAC,
    EpsilonSchedule,
    GaussianPolicy,
    QEnsemble,
    QValuePolicy,
    Reinforce,
    RunningObsNormalizer,
    TanhGaussianPolicy,
    dueling_mlp,
    flat_dim,
    mlp,
    num_actions,
)
from tshtrain.algorithm.algos.cql import CQL
from tshtrain.algorithm.algos.discrete_cql import DiscreteCQL
from tshtrain.algorithm.algos.td3_bc import TD3BC
from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.continuous import box_dim
from tshtrain.config.models import (
    ActorCriticNetwork,
    ActorCriticsNetwork,
    EpsilonGreedy,
    GaussianNoise,
    MlpNetwork,
    QNetwork,
    Section,
    TD3BCNetwork,
)
from tshtrain.errors import UnsupportedSpaceError

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}


@dataclass(frozen=True, kw_only=True)
class BuildContext:
    """What a builder needs: the env's spaces and the validated sections of the experiment."""

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    params: Any
    """the algorithm's params object (e.g. a PPOParams)"""
    network: Section
    exploration: Section
    seed: int

    @property
    def obs_dim(self) -> int:
        return flat_dim(self.observation_space)


def _hidden(network: MlpNetwork) -> tuple[int, ...]:
    return tuple(network.hidden_sizes)


def _critic_hidden(network: ActorCriticNetwork | ActorCriticsNetwork) -> tuple[int, ...]:
    return tuple(network.critic_hidden_sizes or network.hidden_sizes)


class NormalizedQCritic(nn.Module):
    """``critic(obs, act)`` of Q critics that see normalised observations (TD3+BC)."""

    def __init__(self, normalizer: RunningObsNormalizer, critic: nn.Module):
        super().__init__()
        self.normalizer = normalizer
        self.critic = critic

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.critic(self.normalizer(obs), act)
        return out


def _maybe_normalized(net: nn.Module, normalizer: RunningObsNormalizer | None) -> nn.Module:
    return net if normalizer is None else nn.Sequential(normalizer, net)


def _actor_policy(
    ctx: BuildContext,
    network: ActorCriticNetwork | MlpNetwork,
    normalizer: RunningObsNormalizer | None,
) -> CategoricalPolicy | GaussianPolicy:
    """A categorical policy for Discrete actions, a Gaussian one for Box actions."""
    activation = ACTIVATIONS[network.activation]
    space = ctx.action_space
    if isinstance(space, gym.spaces.Discrete):
        actor = mlp(ctx.obs_dim, num_actions(space), _hidden(network), activation)
        return CategoricalPolicy(_maybe_normalized(actor, normalizer), space, seed=ctx.seed)
    if isinstance(space, gym.spaces.Box):
        actor = mlp(ctx.obs_dim, box_dim(space), _hidden(network), activation)
        init_log_std = network.init_log_std if isinstance(network, ActorCriticNetwork) else 0.0
        return GaussianPolicy(
            _maybe_normalized(actor, normalizer), space, init_log_std=init_log_std, seed=ctx.seed
        )
    raise UnsupportedSpaceError(f"a Discrete or Box action space is needed, got {space!r}.")


def build_actor_critic(ctx: BuildContext, kind: type[A2C] | type[PPO]) -> A2C | PPO:
    network = ctx.network
    assert isinstance(network, ActorCriticNetwork)
    normalizer = RunningObsNormalizer(ctx.obs_dim) if network.normalize_obs else None
    policy = _actor_policy(ctx, network, normalizer)
    critic = mlp(ctx.obs_dim, 1, _critic_hidden(network), ACTIVATIONS[network.activation])
    return kind(
        policy=policy,
        critic=_maybe_normalized(critic, normalizer),
        params=ctx.params,
        obs_normalizer=normalizer,
        seed=ctx.seed,
    )


def build_ppo(ctx: BuildContext) -> Algorithm[Any]:
    return build_actor_critic(ctx, PPO)


def build_a2c(ctx: BuildContext) -> Algorithm[Any]:
    return build_actor_critic(ctx, A2C)


def build_reinforce(ctx: BuildContext) -> Algorithm[Any]:
    assert isinstance(ctx.network, MlpNetwork)
    space = ctx.action_space
    actor = mlp(ctx.obs_dim, num_actions(space), _hidden(ctx.network), ACTIVATIONS[ctx.network.activation])
    return Reinforce(policy=CategoricalPolicy(actor, space, seed=ctx.seed), params=ctx.params, seed=ctx.seed)


def _q_policy(ctx: BuildContext) -> QValuePolicy:
    network = ctx.network
    assert isinstance(network, QNetwork)
    space, activation = ctx.action_space, ACTIVATIONS[network.activation]
    if network.dueling:
        q_net: nn.Module = dueling_mlp(
            ctx.obs_dim, num_actions(space), _hidden(network), activation=activation
        )
    else:
        q_net = mlp(ctx.obs_dim, num_actions(space), _hidden(network), activation)
    exploration = ctx.exploration
    eps = (
        EpsilonSchedule(
            start=exploration.eps_start,
            end=exploration.eps_end,
            num_env_steps=exploration.eps_decay_env_steps,
        )
        if isinstance(exploration, EpsilonGreedy)
        else EpsilonSchedule(start=0.0, end=0.0, num_env_steps=1)
    )
    return QValuePolicy(q_net, space, eps_schedule=eps, seed=ctx.seed)


def build_dqn(ctx: BuildContext) -> Algorithm[Any]:
    return DQN(policy=_q_policy(ctx), params=ctx.params)


def build_discrete_cql(ctx: BuildContext) -> Algorithm[Any]:
    return DiscreteCQL(policy=_q_policy(ctx), params=ctx.params)


def build_bc(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, MlpNetwork)
    space, activation = ctx.action_space, ACTIVATIONS[network.activation]
    if isinstance(space, gym.spaces.Box):
        actor = mlp(ctx.obs_dim, box_dim(space), _hidden(network), activation)
        return BehaviorCloning(
            policy=DeterministicActorPolicy(actor, space, seed=ctx.seed), params=ctx.params
        )
    actor = mlp(ctx.obs_dim, num_actions(space), _hidden(network), activation)
    return BehaviorCloning(policy=CategoricalPolicy(actor, space, seed=ctx.seed), params=ctx.params)


def _q_ensemble(ctx: BuildContext) -> QEnsemble:
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    return QEnsemble(
        ctx.obs_dim,
        box_dim(ctx.action_space),
        _critic_hidden(network),
        num_critics=network.num_critics,
        activation=ACTIVATIONS[network.activation],
    )


def _deterministic_policy(
    ctx: BuildContext, normalizer: RunningObsNormalizer | None = None
) -> DeterministicActorPolicy:
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    space = ctx.action_space
    actor = mlp(ctx.obs_dim, box_dim(space), _hidden(network), ACTIVATIONS[network.activation])
    noise_std = ctx.exploration.noise_std if isinstance(ctx.exploration, GaussianNoise) else 0.0
    return DeterministicActorPolicy(
        _maybe_normalized(actor, normalizer), space, noise_std=noise_std, seed=ctx.seed
    )


def _tanh_gaussian_policy(ctx: BuildContext) -> TanhGaussianPolicy:
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    space = ctx.action_space
    actor = mlp(ctx.obs_dim, 2 * box_dim(space), _hidden(network), ACTIVATIONS[network.activation])
    return TanhGaussianPolicy(actor, space, seed=ctx.seed)


def build_ddpg(ctx: BuildContext) -> Algorithm[Any]:
    return DDPG(policy=_deterministic_policy(ctx), critic=_q_ensemble(ctx), params=ctx.params)


def build_td3(ctx: BuildContext) -> Algorithm[Any]:
    return TD3(policy=_deterministic_policy(ctx), critic=_q_ensemble(ctx), params=ctx.params, seed=ctx.seed)


def build_td3_bc(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, TD3BCNetwork)
    normalizer = RunningObsNormalizer(ctx.obs_dim) if network.normalize_obs else None
    critic: nn.Module = _q_ensemble(ctx)
    if normalizer is not None:
        critic = NormalizedQCritic(normalizer, critic)
    return TD3BC(
        policy=_deterministic_policy(ctx, normalizer),
        critic=critic,
        obs_normalizer=normalizer,
        params=ctx.params,
        seed=ctx.seed,
    )


def build_sac(ctx: BuildContext) -> Algorithm[Any]:
    return SAC(policy=_tanh_gaussian_policy(ctx), critic=_q_ensemble(ctx), params=ctx.params)


def build_cql(ctx: BuildContext) -> Algorithm[Any]:
    return CQL(policy=_tanh_gaussian_policy(ctx), critic=_q_ensemble(ctx), params=ctx.params)


def build_discrete_sac(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    space, activation = ctx.action_space, ACTIVATIONS[network.activation]
    actor = mlp(ctx.obs_dim, num_actions(space), _hidden(network), activation)
    critic = DiscreteQEnsemble(
        ctx.obs_dim,
        num_actions(space),
        _critic_hidden(network),
        num_critics=network.num_critics,
        activation=activation,
    )
    return DiscreteSAC(
        policy=CategoricalPolicy(actor, space, seed=ctx.seed), critic=critic, params=ctx.params
    )


def layer_sizes(sizes: Sequence[int]) -> list[int]:
    """Plain ints for writing back to a file."""
    return [int(s) for s in sizes]
