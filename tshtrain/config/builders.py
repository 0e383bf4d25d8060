"""The parts the algorithms' builders share: :class:`BuildContext` and the networks and policies built
from an experiment's network and exploration sections.

Each algorithm's builder sits next to its spec and default experiment in its family's module of
:mod:`tshtrain.config.algos`; it takes a :class:`BuildContext` (spaces, the validated params object, the
network and exploration sections, the seed) and returns the algorithm. The networks are the MLPs of
:mod:`tshtrain.algorithm`; a user who wants other networks writes Python (see examples/).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from tshtrain.algorithm import (
    CategoricalPolicy,
    DeterministicActorPolicy,
    EpsilonSchedule,
    GaussianPolicy,
    QEnsemble,
    QValuePolicy,
    RunningObsNormalizer,
    TanhGaussianPolicy,
    dueling_mlp,
    flat_dim,
    mlp,
    num_actions,
)
from tshtrain.algorithm.blocks.continuous import box_dim
from tshtrain.algorithm.blocks.encoders import CnnSpec, Encoder, is_image_space, obs_encoder
from tshtrain.algorithm.blocks.masking import ActionMasked, has_action_mask, without_action_mask
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.nets import FastTanh
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.config.models import (
    ActorCriticNetwork,
    ActorCriticsNetwork,
    CnnEncoderConfig,
    EpsilonGreedy,
    GaussianNoise,
    MlpNetwork,
    QNetwork,
)
from tshtrain.config.sections import Section
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "fast_tanh": FastTanh,
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
    agents: tuple[str, ...] = ()
    """the multi-agent env's agents, in column order, for team algorithms (``AlgorithmSpec.team``); ()
    otherwise"""

    @property
    def obs_dim(self) -> int:
        return flat_dim(self.observation_space)

    @property
    def mlp_network(self) -> MlpNetwork:
        """The network section (every algorithm's network model extends :class:`MlpNetwork`)."""
        assert isinstance(self.network, MlpNetwork)
        return self.network


def widths(network: MlpNetwork) -> tuple[int, ...]:
    return tuple(network.hidden_sizes)


def critic_widths(network: ActorCriticNetwork | ActorCriticsNetwork) -> tuple[int, ...]:
    return tuple(network.critic_hidden_sizes or network.hidden_sizes)


def _maybe_normalized(net: nn.Module, normalizer: RunningObsNormalizer | None) -> nn.Module:
    return net if normalizer is None else nn.Sequential(normalizer, net)


def uses_encoder(ctx: BuildContext) -> bool:
    """Whether the networks need an observation encoder: not for flat (one-axis, non-image) Box
    observations with ``encoder: auto``, which go to the MLP as they are (a Box of several axes, such as
    a board, is flattened by its encoder)."""
    space = ctx.observation_space
    plain_box = isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and not is_image_space(space)
    return not (plain_box and ctx.mlp_network.encoder == "auto")


def _has_image(space: gym.Space[Any]) -> bool:
    if isinstance(space, gym.spaces.Dict):
        return any(is_image_space(sub) for sub in space.spaces.values())
    return is_image_space(space)


def _encoder(ctx: BuildContext) -> Encoder:
    """A fresh encoder of the observation space, as ``algorithm.network.encoder`` says."""
    config = ctx.mlp_network.encoder
    cnn: CnnSpec | None = None
    if isinstance(config, CnnEncoderConfig):
        if not _has_image(ctx.observation_space):
            raise ConfigurationError(
                f"algorithm.network.encoder: type cnn needs image observations (a uint8 Box of shape "
                f"(H, W, C) or (C, H, W), alone or as a key of a Dict), but the observation space is "
                f"{ctx.observation_space}; use encoder: auto."
            )
        cnn = CnnSpec(
            channels=tuple(config.channels),
            kernel_sizes=tuple(config.kernel_sizes),
            strides=tuple(config.strides),
            features=config.features,
        )
    try:
        return obs_encoder(ctx.observation_space, cnn=cnn)
    except ConfigurationError as error:
        raise ConfigurationError(f"algorithm.network.encoder: {error}") from None


def obs_network(
    ctx: BuildContext,
    output_dim: int,
    hidden_sizes: tuple[int, ...],
    normalizer: RunningObsNormalizer | None = None,
) -> nn.Module:
    """An MLP of ``hidden_sizes`` to ``output_dim`` outputs on the observations: on the flat
    observation (behind the normaliser, if any), or on the features of a fresh encoder."""
    activation = ACTIVATIONS[ctx.mlp_network.activation]
    if not uses_encoder(ctx):
        return _maybe_normalized(mlp(ctx.obs_dim, output_dim, hidden_sizes, activation), normalizer)
    if normalizer is not None:
        raise ConfigurationError(
            f"algorithm.network.normalize_obs: the running normaliser takes flat Box observations, but the "
            f"observation space is {ctx.observation_space}; set normalize_obs: false."
        )
    encoder = _encoder(ctx)
    return nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, hidden_sizes, activation))


def masked(ctx: BuildContext, build: Callable[[BuildContext], nn.Module]) -> nn.Module:
    """The network of ``build`` for action values or logits: observations with an ``action_mask`` key
    get ``build``'s network on the space without the mask, wrapped in :class:`ActionMasked` (illegal
    actions are never chosen); other observations get ``build``'s network as it is."""
    space = ctx.observation_space
    if not has_action_mask(space):
        return build(ctx)
    net = build(dataclasses.replace(ctx, observation_space=without_action_mask(space)))
    return ActionMasked.for_space(net, space)


def require_flat_observations(ctx: BuildContext, name: str) -> None:
    """The off-policy Box-action and discrete SAC networks take flat Box observations only."""
    if isinstance(ctx.mlp_network.encoder, CnnEncoderConfig):
        raise ConfigurationError(
            f"algorithm.network.encoder: {name}'s networks take flat Box observations; encoder type cnn is "
            f"for ppo, a2c, npg, trpo, reinforce, dqn, discrete_cql and bc. Use encoder: auto."
        )


def actor_policy(
    ctx: BuildContext,
    network: ActorCriticNetwork | MlpNetwork,
    normalizer: RunningObsNormalizer | None,
) -> ActorPolicy:
    """A categorical policy for Discrete actions, a Gaussian one for Box actions, a multi-categorical one
    for MultiDiscrete actions and a Bernoulli one for MultiBinary actions."""
    space, hidden = ctx.action_space, widths(network)
    if isinstance(space, gym.spaces.Discrete):
        actor = masked(ctx, lambda c: obs_network(c, num_actions(space), hidden, normalizer))
        return CategoricalPolicy(actor, space, seed=ctx.seed)
    if isinstance(space, gym.spaces.Box):
        init_log_std = network.init_log_std if isinstance(network, ActorCriticNetwork) else 0.0
        actor = obs_network(ctx, box_dim(space), hidden, normalizer)
        return GaussianPolicy(actor, space, init_log_std=init_log_std, seed=ctx.seed)
    if isinstance(space, gym.spaces.MultiDiscrete):
        actor = obs_network(ctx, int(space.nvec.sum()), hidden, normalizer)
        return MultiCategoricalPolicy(actor, space, seed=ctx.seed)
    if isinstance(space, gym.spaces.MultiBinary):
        actor = obs_network(ctx, int(np.prod(space.shape or ())), hidden, normalizer)
        return BernoulliPolicy(actor, space, seed=ctx.seed)
    raise UnsupportedSpaceError(
        f"a Discrete, Box, MultiDiscrete or MultiBinary action space is needed, got {space!r}."
    )


def q_policy(ctx: BuildContext) -> QValuePolicy:
    assert isinstance(ctx.network, QNetwork)
    return epsilon_greedy(ctx, masked(ctx, _q_network))


def epsilon_greedy(ctx: BuildContext, q_net: nn.Module) -> QValuePolicy:
    """A :class:`QValuePolicy` over ``q_net`` with the exploration section's epsilon schedule."""
    space = ctx.action_space
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


def _q_network(ctx: BuildContext) -> nn.Module:
    """The Q network (dueling or not) of the algorithm's network section on the observation space."""
    network = ctx.network
    assert isinstance(network, QNetwork)
    space, activation = ctx.action_space, ACTIVATIONS[network.activation]
    if not network.dueling:
        return obs_network(ctx, num_actions(space), widths(network))
    if uses_encoder(ctx):
        encoder = _encoder(ctx)
        head = dueling_mlp(encoder.output_dim, num_actions(space), widths(network), activation=activation)
        return nn.Sequential(encoder, head)
    return dueling_mlp(ctx.obs_dim, num_actions(space), widths(network), activation=activation)


def q_ensemble(ctx: BuildContext) -> QEnsemble:
    require_flat_observations(ctx, "this algorithm")
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    return QEnsemble(
        ctx.obs_dim,
        box_dim(ctx.action_space),
        critic_widths(network),
        num_critics=network.num_critics,
        activation=ACTIVATIONS[network.activation],
    )


def deterministic_policy(
    ctx: BuildContext, normalizer: RunningObsNormalizer | None = None
) -> DeterministicActorPolicy:
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    space = ctx.action_space
    actor = mlp(ctx.obs_dim, box_dim(space), widths(network), ACTIVATIONS[network.activation])
    noise_std = ctx.exploration.noise_std if isinstance(ctx.exploration, GaussianNoise) else 0.0
    return DeterministicActorPolicy(
        _maybe_normalized(actor, normalizer), space, noise_std=noise_std, seed=ctx.seed
    )


def tanh_gaussian_policy(ctx: BuildContext) -> TanhGaussianPolicy:
    network = ctx.network
    assert isinstance(network, ActorCriticsNetwork)
    space = ctx.action_space
    actor = mlp(ctx.obs_dim, 2 * box_dim(space), widths(network), ACTIVATIONS[network.activation])
    return TanhGaussianPolicy(actor, space, seed=ctx.seed)
