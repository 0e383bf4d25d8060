"""Build an algorithm, with its policy and networks, from an experiment's algorithm section.

One builder per algorithm; each takes a :class:`BuildContext` (spaces, the validated params object, the
network and exploration sections, the seed) and returns the algorithm. The networks are the MLPs of
:mod:`tshtrain.algorithm`; a user who wants other networks writes Python (see examples/).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
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
from tshtrain.algorithm.algos.bcq import BCQ, BCQPolicy, Perturbation
from tshtrain.algorithm.algos.c51 import C51
from tshtrain.algorithm.algos.cql import CQL
from tshtrain.algorithm.algos.discrete_cql import DiscreteCQL
from tshtrain.algorithm.algos.discrete_crr import DiscreteCRR
from tshtrain.algorithm.algos.iql import IQL
from tshtrain.algorithm.algos.iqn import IQN, IQNSampling
from tshtrain.algorithm.algos.npg import NPG
from tshtrain.algorithm.algos.qrdqn import QRDQN
from tshtrain.algorithm.algos.rainbow import Rainbow
from tshtrain.algorithm.algos.redq import REDQ
from tshtrain.algorithm.algos.td3_bc import TD3BC
from tshtrain.algorithm.algos.trpo import TRPO
from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.continuous import box_dim
from tshtrain.algorithm.blocks.distributional import categorical_mlp, iqn_mlp, quantile_mlp
from tshtrain.algorithm.blocks.encoders import CnnSpec, Encoder, is_image_space, obs_encoder
from tshtrain.algorithm.blocks.masking import ActionMasked, has_action_mask, without_action_mask
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.noisy import NoisyQPolicy
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.algorithm.blocks.vae import ConditionalVAE
from tshtrain.config.models import (
    ActorCriticNetwork,
    ActorCriticsNetwork,
    BCQNetwork,
    CategoricalQNetwork,
    CnnEncoderConfig,
    DiscreteCRRNetwork,
    EpsilonGreedy,
    GaussianNoise,
    ImplicitQuantileQNetwork,
    IQLNetwork,
    MlpNetwork,
    QNetwork,
    QuantileQNetwork,
    RainbowQNetwork,
    REDQNetwork,
    Section,
    TD3BCNetwork,
    TrustRegionNetwork,
)
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

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

    @property
    def mlp_network(self) -> MlpNetwork:
        """The network section (every algorithm's network model extends :class:`MlpNetwork`)."""
        assert isinstance(self.network, MlpNetwork)
        return self.network


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


def _uses_encoder(ctx: BuildContext) -> bool:
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


def _network(
    ctx: BuildContext,
    output_dim: int,
    hidden_sizes: tuple[int, ...],
    normalizer: RunningObsNormalizer | None = None,
) -> nn.Module:
    """An MLP of ``hidden_sizes`` to ``output_dim`` outputs on the observations: on the flat
    observation (behind the normaliser, if any), or on the features of a fresh encoder."""
    activation = ACTIVATIONS[ctx.mlp_network.activation]
    if not _uses_encoder(ctx):
        return _maybe_normalized(mlp(ctx.obs_dim, output_dim, hidden_sizes, activation), normalizer)
    if normalizer is not None:
        raise ConfigurationError(
            f"algorithm.network.normalize_obs: the running normaliser takes flat Box observations, but the "
            f"observation space is {ctx.observation_space}; set normalize_obs: false."
        )
    encoder = _encoder(ctx)
    return nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, hidden_sizes, activation))


def _masked(ctx: BuildContext, build: Callable[[BuildContext], nn.Module]) -> nn.Module:
    """The network of ``build`` for action values or logits: observations with an ``action_mask`` key
    get ``build``'s network on the space without the mask, wrapped in :class:`ActionMasked` (illegal
    actions are never chosen); other observations get ``build``'s network as it is."""
    space = ctx.observation_space
    if not has_action_mask(space):
        return build(ctx)
    net = build(dataclasses.replace(ctx, observation_space=without_action_mask(space)))
    return ActionMasked.for_space(net, space)


def _require_flat_observations(ctx: BuildContext, name: str) -> None:
    """The off-policy Box-action and discrete SAC networks take flat Box observations only."""
    if isinstance(ctx.mlp_network.encoder, CnnEncoderConfig):
        raise ConfigurationError(
            f"algorithm.network.encoder: {name}'s networks take flat Box observations; encoder type cnn is "
            f"for ppo, a2c, npg, trpo, reinforce, dqn, discrete_cql and bc. Use encoder: auto."
        )


def _actor_policy(
    ctx: BuildContext,
    network: ActorCriticNetwork | MlpNetwork,
    normalizer: RunningObsNormalizer | None,
) -> ActorPolicy:
    """A categorical policy for Discrete actions, a Gaussian one for Box actions, a multi-categorical one
    for MultiDiscrete actions and a Bernoulli one for MultiBinary actions."""
    space, hidden = ctx.action_space, _hidden(network)
    if isinstance(space, gym.spaces.Discrete):
        actor = _masked(ctx, lambda c: _network(c, num_actions(space), hidden, normalizer))
        return CategoricalPolicy(actor, space, seed=ctx.seed)
    if isinstance(space, gym.spaces.Box):
        init_log_std = network.init_log_std if isinstance(network, ActorCriticNetwork) else 0.0
        actor = _network(ctx, box_dim(space), hidden, normalizer)
        return GaussianPolicy(actor, space, init_log_std=init_log_std, seed=ctx.seed)
    if isinstance(space, gym.spaces.MultiDiscrete):
        actor = _network(ctx, int(space.nvec.sum()), hidden, normalizer)
        return MultiCategoricalPolicy(actor, space, seed=ctx.seed)
    if isinstance(space, gym.spaces.MultiBinary):
        actor = _network(ctx, int(np.prod(space.shape or ())), hidden, normalizer)
        return BernoulliPolicy(actor, space, seed=ctx.seed)
    raise UnsupportedSpaceError(
        f"a Discrete, Box, MultiDiscrete or MultiBinary action space is needed, got {space!r}."
    )


def build_actor_critic(
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
    policy = _actor_policy(ctx, network, normalizer)
    critic = _network(ctx, 1, _critic_hidden(network), normalizer)
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
        hidden_sizes=_hidden(network),
        critic_hidden_sizes=_critic_hidden(network),
        activation=ACTIVATIONS[network.activation],
        centralised_critic=True,
        critic_per_world=network.critic_per_world,
        init_log_std=network.init_log_std,
        seed=ctx.seed,
    )


def build_ppo(ctx: BuildContext) -> Algorithm[Any]:
    return build_actor_critic(ctx, PPO)


def build_a2c(ctx: BuildContext) -> Algorithm[Any]:
    return build_actor_critic(ctx, A2C)


def _trust_region(ctx: BuildContext, kind: type[NPG] | type[TRPO]) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, TrustRegionNetwork)
    algorithm = build_actor_critic(ctx, kind)
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
    policy = _actor_policy(ctx, ctx.network, None)
    return Reinforce(policy=policy, params=ctx.params, seed=ctx.seed)


def _q_policy(ctx: BuildContext) -> QValuePolicy:
    assert isinstance(ctx.network, QNetwork)
    return _epsilon_greedy(ctx, _masked(ctx, _q_network))


def _epsilon_greedy(ctx: BuildContext, q_net: nn.Module) -> QValuePolicy:
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
        return _network(ctx, num_actions(space), _hidden(network))
    if _uses_encoder(ctx):
        encoder = _encoder(ctx)
        head = dueling_mlp(encoder.output_dim, num_actions(space), _hidden(network), activation=activation)
        return nn.Sequential(encoder, head)
    return dueling_mlp(ctx.obs_dim, num_actions(space), _hidden(network), activation=activation)


def build_dqn(ctx: BuildContext) -> Algorithm[Any]:
    return DQN(policy=_q_policy(ctx), params=ctx.params)


def _distributional_input_dim(ctx: BuildContext, name: str) -> int:
    """The observation size of a distributional Q network: flat Box observations and Discrete actions
    only (these networks have no encoder and no action masking)."""
    space = ctx.observation_space
    if _uses_encoder(ctx) or has_action_mask(space):
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
        _hidden(network),
        num_atoms=network.num_atoms,
        v_min=network.v_min,
        v_max=network.v_max,
        dueling=network.dueling,
        noisy_sigma0=noisy_sigma0,
    )


def build_c51(ctx: BuildContext) -> Algorithm[Any]:
    return C51(policy=_epsilon_greedy(ctx, _categorical_net(ctx, "c51")), params=ctx.params)


def build_rainbow(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, RainbowQNetwork)
    q_policy = _epsilon_greedy(ctx, _categorical_net(ctx, "rainbow", network.noisy_sigma0))
    policy = NoisyQPolicy(q_policy, seed=ctx.seed)
    return Rainbow(policy=policy, params=ctx.params, seed=ctx.seed)


def build_qrdqn(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, QuantileQNetwork)
    net = quantile_mlp(
        _distributional_input_dim(ctx, "qrdqn"),
        num_actions(ctx.action_space),
        _hidden(network),
        num_quantiles=network.num_quantiles,
    )
    return QRDQN(policy=_epsilon_greedy(ctx, net), params=ctx.params)


def build_iqn(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, ImplicitQuantileQNetwork)
    net = iqn_mlp(
        _distributional_input_dim(ctx, "iqn"),
        num_actions(ctx.action_space),
        _hidden(network),
        num_cosines=network.num_cosines,
        num_policy_quantiles=network.num_policy_quantiles,
    )
    sampling = IQNSampling(num_online_taus=network.num_online_taus, num_target_taus=network.num_target_taus)
    return IQN(policy=_epsilon_greedy(ctx, net), params=ctx.params, sampling=sampling, seed=ctx.seed)


def build_discrete_cql(ctx: BuildContext) -> Algorithm[Any]:
    return DiscreteCQL(policy=_q_policy(ctx), params=ctx.params)


def build_bc(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, MlpNetwork)
    space = ctx.action_space
    if isinstance(space, gym.spaces.Box):
        actor = _network(ctx, box_dim(space), _hidden(network))
        return BehaviorCloning(
            policy=DeterministicActorPolicy(actor, space, seed=ctx.seed), params=ctx.params
        )
    actor = _masked(ctx, lambda c: _network(c, num_actions(space), _hidden(network)))
    return BehaviorCloning(policy=CategoricalPolicy(actor, space, seed=ctx.seed), params=ctx.params)


def _q_ensemble(ctx: BuildContext) -> QEnsemble:
    _require_flat_observations(ctx, "this algorithm")
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
    _require_flat_observations(ctx, "discrete_sac")
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


def build_redq(ctx: BuildContext) -> Algorithm[Any]:
    assert isinstance(ctx.network, REDQNetwork)
    return REDQ(policy=_tanh_gaussian_policy(ctx), critic=_q_ensemble(ctx), params=ctx.params, seed=ctx.seed)


def build_iql(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, IQLNetwork)
    value_hidden = tuple(network.value_hidden_sizes or _critic_hidden(network))
    value = mlp(ctx.obs_dim, 1, value_hidden, ACTIVATIONS[network.activation])
    return IQL(policy=_tanh_gaussian_policy(ctx), critic=_q_ensemble(ctx), value=value, params=ctx.params)


def build_bcq(ctx: BuildContext) -> Algorithm[Any]:
    network = ctx.network
    assert isinstance(network, BCQNetwork)
    obs_dim, act_dim = ctx.obs_dim, box_dim(ctx.action_space)
    activation = ACTIVATIONS[network.activation]
    perturbation_net = mlp(obs_dim + act_dim, act_dim, _hidden(network), activation)
    vae = ConditionalVAE(
        obs_dim,
        act_dim,
        tuple(network.vae_hidden_sizes),
        latent_dim=network.latent_dim,
        activation=activation,
    )
    policy = BCQPolicy(
        perturbation=Perturbation(perturbation_net, phi=network.phi),
        vae=vae,
        critic=_q_ensemble(ctx),
        action_space=ctx.action_space,
        num_forward_sampled_actions=network.num_forward_sampled_actions,
        seed=ctx.seed,
    )
    return BCQ(policy=policy, params=ctx.params, seed=ctx.seed)


def build_discrete_crr(ctx: BuildContext) -> Algorithm[Any]:
    _require_flat_observations(ctx, "discrete_crr")
    network = ctx.network
    assert isinstance(network, DiscreteCRRNetwork)
    space = ctx.action_space
    if not isinstance(space, gym.spaces.Discrete):
        raise UnsupportedSpaceError(f"discrete_crr needs a Discrete action space, got {space!r}.")
    activation = ACTIVATIONS[network.activation]
    actor = mlp(ctx.obs_dim, num_actions(space), _hidden(network), activation)
    critic = mlp(
        ctx.obs_dim, num_actions(space), tuple(network.critic_hidden_sizes or _hidden(network)), activation
    )
    return DiscreteCRR(
        policy=CategoricalPolicy(actor, space, seed=ctx.seed), critic=critic, params=ctx.params
    )


def layer_sizes(sizes: Sequence[int]) -> list[int]:
    """Plain ints for writing back to a file."""
    return [int(s) for s in sizes]
