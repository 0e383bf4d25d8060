"""ICM: the intrinsic curiosity module (Pathak et al. 2017, arXiv:1705.05363) as a reward wrapper.

An :class:`ICMModule` embeds observations with a feature net phi given by the user, and learns

* a *forward model* ``f(phi(o_t), onehot(a_t)) -> phi(o_{t+1})`` whose prediction error is the
  curiosity signal: ``e_t = 0.5 * ||f(phi(o_t), a_t) - phi(o_{t+1})||^2`` (summed over features);
* an *inverse model* ``g(phi(o_t), phi(o_{t+1})) -> logits(a_t)``, which shapes phi towards what the
  agent's actions control.

The wrappers :class:`ICMOffPolicy` and :class:`ICMOnPolicy` add ``reward_scale * e_t`` to the rewards the
wrapped (inner) algorithm learns from, then take one Adam step of the module on the same transitions,
minimising ``lr_scale * ((1 - w) * inverse_loss + w * forward_loss)`` with ``w = forward_loss_weight``
(cross entropy of the inverse model; mean of ``e_t``). The buffer is never changed: the intrinsic reward
exists only in the batch the inner algorithm sees. Both wrappers present the inner algorithm's policy,
so collectors and trainers treat them like the inner algorithm.

* Off-policy: the inner ``update`` gets update hooks whose ``on_sampled_batch`` first calls the
  trainer's hooks, then adds the intrinsic reward to the sampled batch's ``rew``. The inner algorithm's
  n-step returns are read from the buffer, so ``n_step > 1`` is refused (see ``docs/icm.md``).
* On-policy: the inner ``update`` gets the rollout with increased ``rew`` (padding stays 0).

Discrete action spaces (``gymnasium.spaces.Discrete`` starting at 0) only; anything else raises
:class:`~tshtrain.errors.UnsupportedSpaceError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Self, final

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    Algorithm,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    TPolicy,
    TrainingStats,
    UpdateHooks,
    check_finite_loss,
    generator_states,
    load_generator_states,
    make_adam,
    module_device,
)
from tshtrain.algorithm.blocks.nets import mlp
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.constraints import NonNegativeFloat, PositiveFloat, UnitFloat, validate_fields
from tshtrain.data.batch import (
    AnyRolloutBatch,
    AnyTransitionBatch,
    ObsArray,
    ObsTensor,
    RolloutBatch,
    TransitionBatch,
    array_to_torch,
    obs_to_torch,
)
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

# ---------------------------------------------------------------------------------------- the math


def icm_forward_error(phi_next_pred_NF: torch.Tensor, phi_next_NF: torch.Tensor) -> torch.Tensor:
    """Per-transition forward-model error ``0.5 * sum_f (pred - phi(o'))^2``, shape (N,)."""
    return 0.5 * (phi_next_pred_NF - phi_next_NF).pow(2).sum(dim=-1)


def icm_intrinsic_reward(forward_error_N: torch.Tensor, reward_scale: float) -> torch.Tensor:
    """The curiosity reward ``reward_scale * forward_error`` (no gradient), shape (N,)."""
    return forward_error_N.detach() * reward_scale


class ICMLosses(NamedTuple):
    """The module's losses on one batch (scalar tensors)."""

    loss: torch.Tensor
    """``lr_scale * ((1 - w) * inverse_loss + w * forward_loss)``: what the optimizer minimises"""
    forward_loss: torch.Tensor
    """mean forward-model error"""
    inverse_loss: torch.Tensor
    """mean cross entropy of the inverse model's logits to the taken actions"""


def icm_losses(
    forward_error_N: torch.Tensor,
    act_logits_NA: torch.Tensor,
    act_N: torch.Tensor,
    *,
    forward_loss_weight: float,
    lr_scale: float,
    valid_N: torch.Tensor | None = None,
) -> ICMLosses:
    """The ICM losses, averaged over the transitions where ``valid_N`` is True (all when None)."""
    inverse_N = F.cross_entropy(act_logits_NA, act_N.long(), reduction="none")
    if valid_N is None:
        forward_loss, inverse_loss = forward_error_N.mean(), inverse_N.mean()
    else:
        weight_N = valid_N.to(forward_error_N.dtype)
        count = weight_N.sum().clamp(min=1.0)
        forward_loss = (forward_error_N * weight_N).sum() / count
        inverse_loss = (inverse_N * weight_N).sum() / count
    combined = (1.0 - forward_loss_weight) * inverse_loss + forward_loss_weight * forward_loss
    return ICMLosses(loss=combined * lr_scale, forward_loss=forward_loss, inverse_loss=inverse_loss)


# ---------------------------------------------------------------------------------------- the module


class ICMOutput(NamedTuple):
    """What :meth:`ICMModule.forward` returns for N transitions."""

    forward_error_N: torch.Tensor
    """the forward-model error per transition (:func:`icm_forward_error`)"""
    act_logits_NA: torch.Tensor
    """the inverse model's action logits"""


def discrete_num_actions(owner: str, space: gym.Space[Any]) -> int:
    """The number of actions of a ``Discrete`` space starting at 0, else ``UnsupportedSpaceError``."""
    if not isinstance(space, gym.spaces.Discrete) or int(space.start) != 0:
        raise UnsupportedSpaceError(
            f"{owner}: action space {space!r} is not supported; ICM supports gymnasium.spaces.Discrete "
            f"actions starting at 0 only."
        )
    return int(space.n)


@final
class ICMModule(nn.Module):
    """Feature net (yours), forward model and inverse model of ICM (see the module docstring)."""

    def __init__(
        self,
        feature_net: nn.Module,
        feature_dim: int,
        action_space: gym.Space[Any],
        hidden_sizes: Sequence[int] = (),
        activation: type[nn.Module] = nn.ReLU,
    ):
        """Args:
        feature_net: maps a batch of observations (as the buffer stores them, as tensors) to features
            of shape (N, feature_dim). Do not share it with networks the inner algorithm trains.
        feature_dim: the feature net's output size.
        action_space: the env's single action space; ``Discrete`` (starting at 0) only.
        hidden_sizes: hidden layers of the forward and inverse MLPs (Tianshou's default: none, a single
            linear layer each).
        activation: their activation.

        Raises:
            UnsupportedSpaceError: another action space.
            ConfigurationError: ``feature_dim < 1``.
        """
        super().__init__()
        self.num_actions = discrete_num_actions("ICMModule", action_space)
        if feature_dim < 1:
            raise ConfigurationError(f"ICMModule: feature_dim must be an int >= 1, got {feature_dim}.")
        self.feature_dim = feature_dim
        self.feature_net = feature_net
        self.forward_model = mlp(feature_dim + self.num_actions, feature_dim, hidden_sizes, activation)
        self.inverse_model = mlp(2 * feature_dim, self.num_actions, hidden_sizes, activation)

    @classmethod
    def from_mlp(
        cls, obs_dim: int, action_space: gym.Space[Any], hidden_sizes: Sequence[int] = (64, 64)
    ) -> ICMModule:
        """The module of Tianshou's ICM test scripts: a ReLU MLP feature net with ``hidden_sizes[:-1]``
        hidden layers and ``hidden_sizes[-1]`` features, and models with one hidden layer of that size."""
        if not hidden_sizes:
            raise ConfigurationError("ICMModule.from_mlp: hidden_sizes must name at least one size, got ().")
        feature_dim = int(hidden_sizes[-1])
        feature_net = mlp(obs_dim, feature_dim, tuple(hidden_sizes[:-1]), nn.ReLU)
        return cls(feature_net, feature_dim, action_space, hidden_sizes=(feature_dim,))

    def features(self, obs: ObsTensor) -> torch.Tensor:
        """phi(obs), shape (N, feature_dim); checks the feature net's output shape."""
        phi_NF: torch.Tensor = self.feature_net(obs)
        if phi_NF.ndim != 2 or phi_NF.shape[1] != self.feature_dim:
            raise ConfigurationError(
                f"ICMModule: the feature net returned shape {tuple(phi_NF.shape)}; expected "
                f"(N, feature_dim={self.feature_dim}). Pass the feature net's output size as feature_dim."
            )
        return phi_NF

    @override
    def forward(self, obs: ObsTensor, act_N: torch.Tensor, obs_next: ObsTensor) -> ICMOutput:
        """Forward-model errors and inverse-model logits for N transitions."""
        phi_NF, phi_next_NF = self.features(obs), self.features(obs_next)
        onehot_NA = F.one_hot(act_N.reshape(-1).long(), self.num_actions).to(phi_NF.dtype)
        phi_next_pred_NF: torch.Tensor = self.forward_model(torch.cat([phi_NF, onehot_NA], dim=1))
        logits_NA: torch.Tensor = self.inverse_model(torch.cat([phi_NF, phi_next_NF], dim=1))
        return ICMOutput(icm_forward_error(phi_next_pred_NF, phi_next_NF), logits_NA)


# ---------------------------------------------------------------------------------------- params, stats


@dataclass(frozen=True, kw_only=True)
class ICMParams:
    """Hyperparameters of :class:`ICMOffPolicy` / :class:`ICMOnPolicy` (defaults: Tianshou's ICM tests;
    Tianshou's wrappers have none)."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate of the ICM module"""

    lr_scale: NonNegativeFloat = 1.0
    """multiplies the ICM loss (Tianshou's name); Adam's step is invariant to a constant loss factor
    except through its epsilon, so this hardly changes the step size; 0 freezes the module"""

    reward_scale: NonNegativeFloat = 0.01
    """intrinsic reward = reward_scale * forward-model error; 0: the inner algorithm learns from the
    environment's rewards only (the module still trains)"""

    forward_loss_weight: UnitFloat = 0.2
    """w in ``(1 - w) * inverse_loss + w * forward_loss``"""

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True, kw_only=True)
class ICMTrainingStats(TrainingStats):
    """The inner algorithm's statistics plus the ICM step's. ``num_gradient_steps`` is the inner
    algorithm's (the ICM step rides along and is not counted)."""

    inner: TrainingStats = field(default_factory=TrainingStats)
    """the inner algorithm's statistics of this update (their scalars are reported unprefixed)"""
    icm_loss: float = 0.0
    """the minimised ICM loss (with ``lr_scale``)"""
    icm_forward_loss: float = 0.0
    """mean forward-model error"""
    icm_inverse_loss: float = 0.0
    """inverse-model cross entropy"""
    intrinsic_reward: float = 0.0
    """mean intrinsic reward added to the transitions the inner algorithm learned from"""

    @override
    def as_scalars(self) -> dict[str, float]:
        return {**self.inner.as_scalars(), **super().as_scalars()}

    @override
    @classmethod
    def aggregate(cls, stats: Sequence[Self]) -> Self:
        merged = super().aggregate(stats)
        inner = type(stats[0].inner).aggregate([s.inner for s in stats])
        return dataclasses.replace(merged, inner=inner)


# ---------------------------------------------------------------------------------------- shared parts


class _Evaluated(NamedTuple):
    output: ICMOutput
    act_N: torch.Tensor
    valid_N: torch.Tensor | None


class _StepStats(NamedTuple):
    icm_loss: float
    icm_forward_loss: float
    icm_inverse_loss: float
    intrinsic_reward: float


def _stats(inner: TrainingStats, icm: _StepStats) -> ICMTrainingStats:
    return ICMTrainingStats(
        num_gradient_steps=inner.num_gradient_steps,
        inner=inner,
        icm_loss=icm.icm_loss,
        icm_forward_loss=icm.icm_forward_loss,
        icm_inverse_loss=icm.icm_inverse_loss,
        intrinsic_reward=icm.intrinsic_reward,
    )


class _ICMLearner:
    """The module, its optimizer and params: what both wrappers share (by composition)."""

    def __init__(self, owner: str, module: ICMModule, params: ICMParams):
        self.owner = owner
        self.module = module
        self.params = params
        self.optim = make_adam(module.parameters(), lr=params.lr)

    def evaluate(self, obs: ObsTensor, act: torch.Tensor, obs_next: ObsTensor) -> _Evaluated:
        """The module's outputs with their graph (also where an inner update samples under no_grad)."""
        act_N = act.reshape(-1)
        with torch.enable_grad():
            return _Evaluated(self.module(obs, act_N, obs_next), act_N, None)

    def step(self, evaluated: Sequence[_Evaluated], hooks: UpdateHooks) -> _StepStats:
        """One Adam step on the mean of the losses of ``evaluated``; the stats as floats."""
        parts = [
            icm_losses(
                e.output.forward_error_N,
                e.output.act_logits_NA,
                e.act_N,
                forward_loss_weight=self.params.forward_loss_weight,
                lr_scale=self.params.lr_scale,
                valid_N=e.valid_N,
            )
            for e in evaluated
        ]
        loss, fwd, inv = (torch.stack(column).mean() for column in zip(*parts, strict=True))
        check_finite_loss(self.owner, "icm loss", loss.detach())
        optimizer_step(self.optim, "icm_optim", {"icm loss": loss}, hooks)
        rewards = [self._masked_mean(e) for e in evaluated]
        values = torch.stack([loss.detach(), fwd.detach(), inv.detach(), *rewards]).tolist()
        return _StepStats(values[0], values[1], values[2], float(np.mean(values[3:])))

    def _masked_mean(self, e: _Evaluated) -> torch.Tensor:
        reward_N = icm_intrinsic_reward(e.output.forward_error_N, self.params.reward_scale)
        if e.valid_N is None:
            return reward_N.mean()
        return reward_N[e.valid_N].mean() if bool(e.valid_N.any()) else reward_N.new_zeros(())


def _check_inner(owner: str, inner: Algorithm[Any, Any], module: ICMModule) -> None:
    """Refuse inner algorithms the wrapper cannot shape (see the module docstring)."""
    num_actions = discrete_num_actions(owner, inner.policy.action_space)
    if num_actions != module.num_actions:
        raise ConfigurationError(
            f"{owner}: the ICM module has {module.num_actions} actions, the inner algorithm's policy "
            f"{num_actions}; build the module with the env's action space."
        )
    components = inner.components()
    taken = {"icm_module", "icm_optim"} & set(components)
    if taken:
        raise ConfigurationError(
            f"{owner}: the inner algorithm already has components {sorted(taken)} (an ICM wrapper?); "
            f"wrap a plain algorithm once."
        )
    inner_params = {id(p) for c in components.values() if isinstance(c, nn.Module) for p in c.parameters()}
    if any(id(p) in inner_params for p in module.parameters()):
        raise ConfigurationError(
            f"{owner}: the ICM module shares parameters with {type(inner).__name__}'s networks; give "
            f"the ICM module a feature net of its own."
        )


class _InnerState:
    """The inner algorithm's extra state and generators, kept in the wrapper's extra state."""

    @staticmethod
    def save(inner: Algorithm[Any, Any]) -> dict[str, Any]:
        return {"inner": inner.extra_state(), "inner_generators": generator_states(inner)}

    @staticmethod
    def load(inner: Algorithm[Any, Any], state: Mapping[str, Any]) -> None:
        inner.load_extra_state(state.get("inner", {}))
        load_generator_states(inner, state.get("inner_generators", {}))


def _register(wrapper: Algorithm[Any, Any], inner: Algorithm[Any, Any], learner: _ICMLearner) -> None:
    inner_components = {k: v for k, v in inner.components().items() if k != "policy"}
    wrapper.register_components(
        {**inner_components, "icm_module": learner.module, "icm_optim": learner.optim}
    )


# ---------------------------------------------------------------------------------------- off-policy


class _IntrinsicRewardHooks:
    """Update hooks for the inner algorithm: the trainer's hooks, then the intrinsic reward."""

    def __init__(self, learner: _ICMLearner, outer: UpdateHooks):
        self.learner = learner
        self.outer = outer
        self.evaluated: list[_Evaluated] = []

    def on_sampled_batch(self, batch: AnyTransitionBatch, /) -> AnyTransitionBatch:
        batch = self.outer.on_sampled_batch(batch)
        device = module_device(self.learner.module)
        if isinstance(batch, TransitionBatch):
            evaluated = self.learner.evaluate(
                obs_to_torch(batch.obs, device),
                array_to_torch(batch.act, device),
                obs_to_torch(batch.obs_next, device),
            )
            self.evaluated.append(evaluated)
            reward_N = icm_intrinsic_reward(
                evaluated.output.forward_error_N, self.learner.params.reward_scale
            )
            rew = (batch.rew + reward_N.cpu().numpy()).astype(np.float32)
            return dataclasses.replace(batch, rew=rew)
        moved = batch.to_torch(device)
        evaluated = self.learner.evaluate(moved.obs, moved.act, moved.obs_next)
        self.evaluated.append(evaluated)
        reward_N = icm_intrinsic_reward(evaluated.output.forward_error_N, self.learner.params.reward_scale)
        return dataclasses.replace(batch, rew=batch.rew + reward_N.to(batch.rew.device, batch.rew.dtype))

    def on_loss(self, losses: Mapping[str, torch.Tensor], /) -> None:
        self.outer.on_loss(losses)

    def on_optimizer_step(self, name: str, optimizer: torch.optim.Optimizer, /) -> None:
        self.outer.on_optimizer_step(name, optimizer)


@final
class ICMOffPolicy(OffPolicyAlgorithm[TPolicy, ICMTrainingStats]):
    """ICM around an off-policy algorithm (Tianshou's ``ICMOffPolicyWrapper``; see the module docstring).

    Each :meth:`update` is the inner algorithm's update on a sample whose rewards include the intrinsic
    reward, then one Adam step of the ICM module on that sample. Use it with ``OffPolicyTrainer``.
    """

    def __init__(
        self,
        inner: OffPolicyAlgorithm[TPolicy, TrainingStats],
        icm_module: ICMModule,
        params: ICMParams | None = None,
    ):
        """Args:
        inner: the algorithm to add curiosity to (its policy is this wrapper's policy). Its
            checkpoint components keep their names; the wrapper adds ``icm_module`` and ``icm_optim``.
        icm_module: the ICM networks, on the inner algorithm's device.
        params: hyperparameters.

        Raises:
            UnsupportedSpaceError: the policy's action space is not ``Discrete``.
            ConfigurationError: the inner algorithm uses n-step returns (``params.n_step > 1``), the
                module's action count differs, or the module shares parameters with the inner algorithm.
        """
        _check_inner("ICMOffPolicy", inner, icm_module)
        n_step = getattr(getattr(inner, "params", None), "n_step", 1)
        if isinstance(n_step, int) and n_step > 1:
            raise ConfigurationError(
                f"ICMOffPolicy: {type(inner).__name__}.params.n_step={n_step}; its n-step returns read the "
                f"rewards from the buffer, where the intrinsic reward never is (Tianshou 2.0.1 ignores it "
                f"silently). Use n_step=1 with ICM."
            )
        super().__init__(policy=inner.policy)
        self.inner = inner
        self.params = params or ICMParams()
        self.learner = _ICMLearner("ICMOffPolicy", icm_module, self.params)
        _register(self, inner, self.learner)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> ICMTrainingStats:
        shaping = _IntrinsicRewardHooks(self.learner, hooks)
        inner_stats = self.inner.update(buffer, batch_size, hooks=shaping)
        if not shaping.evaluated:
            raise ConfigurationError(
                f"ICMOffPolicy: {type(self.inner).__name__}.update sampled no batch through "
                f"hooks.on_sampled_batch, so no intrinsic reward could be added; wrap an algorithm "
                f"that samples through its update hooks."
            )
        icm = self.learner.step(shaping.evaluated, hooks)
        return _stats(inner_stats, icm)

    @override
    def close(self) -> None:
        self.inner.close()

    @override
    def extra_state(self) -> dict[str, Any]:
        return _InnerState.save(self.inner)

    @override
    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        _InnerState.load(self.inner, state)


# ---------------------------------------------------------------------------------------- on-policy


def _flat_obs(obs: ObsTensor, num: int) -> ObsTensor:
    if isinstance(obs, torch.Tensor):
        return obs.reshape(num, *obs.shape[2:])
    return {key: value.reshape(num, *value.shape[2:]) for key, value in obs.items()}


def _rollout_tensors(
    rollout: AnyRolloutBatch, device: torch.device
) -> tuple[ObsTensor, torch.Tensor, ObsTensor, torch.Tensor]:
    """obs, act, obs_next and valid of a (T, E) rollout, flattened to T*E rows, on ``device``."""
    t, e = rollout.rew.shape[0], rollout.rew.shape[1]
    num = int(t) * int(e)
    if isinstance(rollout, RolloutBatch):
        obs: ObsArray = rollout.obs
        obs_next: ObsArray = rollout.obs_next
        obs_t, obs_next_t = obs_to_torch(obs, device), obs_to_torch(obs_next, device)
        act, valid = array_to_torch(rollout.act, device), array_to_torch(rollout.valid, device)
    else:
        obs_t, obs_next_t = rollout.obs, rollout.obs_next
        act, valid = rollout.act.to(device), rollout.valid.to(device)
    return _flat_obs(obs_t, num), act.reshape(num), _flat_obs(obs_next_t, num), valid.reshape(num)


@final
class ICMOnPolicy(OnPolicyAlgorithm[TPolicy, ICMTrainingStats]):
    """ICM around an on-policy algorithm (Tianshou's ``ICMOnPolicyWrapper``; see the module docstring).

    Each :meth:`update` hands the inner algorithm the rollout with the intrinsic reward added to ``rew``
    (valid steps only), then takes one Adam step of the ICM module on the whole rollout. Use it with
    ``OnPolicyTrainer``.
    """

    def __init__(
        self,
        inner: OnPolicyAlgorithm[TPolicy, TrainingStats],
        icm_module: ICMModule,
        params: ICMParams | None = None,
    ):
        """Args:
        inner: the algorithm to add curiosity to (its policy is this wrapper's policy). Its
            checkpoint components keep their names; the wrapper adds ``icm_module`` and ``icm_optim``.
        icm_module: the ICM networks, on the inner algorithm's device.
        params: hyperparameters.

        Raises:
            UnsupportedSpaceError: the policy's action space is not ``Discrete``.
            ConfigurationError: the module's action count differs, or it shares parameters with the
                inner algorithm.
        """
        _check_inner("ICMOnPolicy", inner, icm_module)
        super().__init__(policy=inner.policy)
        self.inner = inner
        self.params = params or ICMParams()
        self.learner = _ICMLearner("ICMOnPolicy", icm_module, self.params)
        _register(self, inner, self.learner)

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> ICMTrainingStats:
        obs, act_N, obs_next, valid_N = _rollout_tensors(rollout, module_device(self.learner.module))
        evaluated = self.learner.evaluate(obs, act_N, obs_next)._replace(valid_N=valid_N)
        reward_N = icm_intrinsic_reward(evaluated.output.forward_error_N, self.params.reward_scale)
        reward_TE = (reward_N * valid_N.to(reward_N.dtype)).reshape(rollout.rew.shape)
        shaped: AnyRolloutBatch
        if isinstance(rollout, RolloutBatch):
            shaped = dataclasses.replace(
                rollout, rew=(rollout.rew + reward_TE.cpu().numpy()).astype(np.float32)
            )
        else:
            shaped = dataclasses.replace(
                rollout, rew=rollout.rew + reward_TE.to(rollout.rew.device, rollout.rew.dtype)
            )
        inner_stats = self.inner.update(
            shaped, batch_size=batch_size, num_repetitions=num_repetitions, hooks=hooks
        )
        icm = self.learner.step([evaluated], hooks)
        return _stats(inner_stats, icm)

    @override
    def close(self) -> None:
        self.inner.close()

    @override
    def extra_state(self) -> dict[str, Any]:
        return _InnerState.save(self.inner)

    @override
    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        _InnerState.load(self.inner, state)
