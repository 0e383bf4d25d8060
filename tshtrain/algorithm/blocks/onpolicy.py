"""What A2C and PPO share, as functions and one small component (no common algorithm base class).

* :class:`ActorCriticParams`: the hyperparameters both take (their params classes extend it).
* :class:`ActorCritic`: the state both keep (policy, critic, optimizer, generator, update counter,
  optional observation normaliser) and the few operations on it.
* :func:`prepare_rollout`: values, GAE advantages, returns and old log-probabilities of a rollout.
* :func:`minibatches`, :func:`normalize_advantages`, :func:`value_loss`, :func:`explained_variance`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, final

import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import OnPolicyAlgorithm, Stateful, TStats_co, UpdateHooks, make_adam
from tshtrain.algorithm.blocks.gaussian import GaussianPolicy
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer, check_obs_normalizer
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import NonNegativeFloat, PositiveFloat, UnitFloat, validate_fields
from tshtrain.data.batch import ObsArray, ObsTensor, RolloutBatch
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError
from tshtrain.functional.returns import gae_advantages

ActorPolicy: TypeAlias = CategoricalPolicy | GaussianPolicy | MultiCategoricalPolicy | BernoulliPolicy
"""The policies A2C, PPO and REINFORCE train: categorical (Discrete actions), Gaussian (Box actions),
multi-categorical (MultiDiscrete actions) or Bernoulli (MultiBinary actions). Each has
``log_prob_entropy(obs, act)``."""


@dataclass(frozen=True, kw_only=True)
class ActorCriticParams(ABC):
    """Hyperparameters shared by :class:`~tshtrain.algorithm.A2CParams` and
    :class:`~tshtrain.algorithm.PPOParams` (use those; this base is abstract)."""

    lr: PositiveFloat = 3e-4
    """Adam learning rate (the base value that lr_schedule multiplies)"""
    lr_schedule: Schedule | None = None
    """multiplies lr by schedule.factor(k) in the update after k update steps (e.g.
    ``LinearSchedule(num_update_steps=...)``); None: constant lr"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    gae_lambda: UnitFloat = 0.95
    """GAE's lambda in [0, 1]: 1 gives Monte-Carlo advantages, 0 one-step TD errors"""
    vf_coef: NonNegativeFloat = 0.5
    """weight of the value loss (mean squared error) in the combined loss"""
    ent_coef: NonNegativeFloat = 0.0
    """weight of the entropy bonus (subtracted from the combined loss); 0: no entropy bonus"""
    max_grad_norm: PositiveFloat | None = 0.5
    """clip the gradient norm over the actor's and the critic's parameters; None: no clipping"""
    advantage_normalization: bool = True
    """standardise the advantages of each mini-batch to mean 0, std 1"""

    @abstractmethod
    def __post_init__(self) -> None:
        """Check the fields (each subclass calls this through ``super().__post_init__()``)."""
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


def log_prob_entropy(
    policy: ActorPolicy, obs: ObsTensor, act: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi(act | obs), entropy of pi(. | obs)), both shape (N,), differentiable: the policy's own
    ``log_prob_entropy``."""
    return policy.log_prob_entropy(obs, act)


def _unique_parameters(*modules: nn.Module) -> list[nn.Parameter]:
    """The parameters of the modules, each once (an actor and a critic may share layers)."""
    unique: dict[int, nn.Parameter] = {}
    for module in modules:
        for param in module.parameters():
            unique.setdefault(id(param), param)
    return list(unique.values())


@final
class ActorCritic:
    """Policy, critic, their Adam optimizer, the algorithm's generator (mini-batch shuffling), the
    update-step counter that drives schedules and the optional observation normaliser."""

    def __init__(
        self,
        *,
        owner: str,
        policy: ActorPolicy,
        critic: nn.Module,
        lr: float,
        lr_schedule: Schedule | None,
        obs_normalizer: RunningObsNormalizer | None,
        seed: int | None,
    ):
        check_obs_normalizer(owner, {"policy": policy, "critic": critic}, obs_normalizer)
        self.owner = owner
        self.policy = policy
        self.critic = critic
        self.obs_normalizer = obs_normalizer
        self.parameters = _unique_parameters(policy, critic)
        self.optim = make_adam(self.parameters, lr=lr)
        self.lrs = ScheduledLearningRates(lr_schedule, [self.optim])
        """the learning rate on its schedule, set from :attr:`num_update_steps` at each update"""
        self.rng = torch.Generator().manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))
        """shuffles the mini-batches"""
        self.num_update_steps = 0
        """update steps done; drives the schedules"""

    def components(self) -> dict[str, Stateful]:
        """policy, critic, optim and (if used) obs_normalizer."""
        components: dict[str, Stateful] = {"policy": self.policy, "critic": self.critic, "optim": self.optim}
        if self.obs_normalizer is not None:
            components["obs_normalizer"] = self.obs_normalizer
        return components

    def extra_state(self) -> dict[str, Any]:
        """The update-step counter and the generator's state."""
        return {"num_update_steps": self.num_update_steps, "rng_state": self.rng.get_state()}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`extra_state`."""
        self.num_update_steps = int(state.get("num_update_steps", 0))
        if "rng_state" in state:
            self.rng.set_state(state["rng_state"])

    def values(self, obs: ObsTensor) -> torch.Tensor:
        """V(obs), shape (N,); the critic may return (N,) or (N, 1)."""
        out: torch.Tensor = self.critic(obs)
        if out.dim() == 2 and out.shape[1] == 1:
            return out.squeeze(1)
        if out.dim() != 1:
            raise ConfigurationError(
                f"{self.owner}: the critic returned shape {tuple(out.shape)} for {_num_obs(obs)} "
                f"observations; it must return one value per observation, shape (N,) or (N, 1)."
            )
        return out

    def gradient_step(
        self,
        loss: torch.Tensor,
        reported: Mapping[str, torch.Tensor],
        hooks: UpdateHooks,
        max_grad_norm: float | None,
    ) -> torch.Tensor:
        """One Adam step on ``loss`` (``reported`` goes to ``hooks.post_loss`` first); returns the
        gradient norm before clipping (a 0-dim tensor)."""
        clip = float("inf") if max_grad_norm is None else max_grad_norm
        grad_norm = optimizer_step(
            self.optim,
            "optim",
            reported,
            hooks,
            minimise=loss,
            zero_grad_first=False,
            params=self.parameters,
            max_grad_norm=clip,
        )
        assert grad_norm is not None  # clipping is on
        return grad_norm.detach()

    def finish_update(self, obs_N: ObsTensor) -> None:
        """After the gradient steps: merge the rollout's observations into the normaliser, count."""
        if self.obs_normalizer is not None:
            if not isinstance(obs_N, torch.Tensor):
                raise UnsupportedSpaceError(f"{self.owner}: obs_normalizer takes array observations.")
            self.obs_normalizer.update(obs_N)
        self.num_update_steps += 1


@dataclass(frozen=True, kw_only=True)
class RolloutTensors:
    """The valid steps of a rollout, flattened to N = number of valid steps, ready for mini-batches."""

    obs: ObsTensor
    """o_t, shape (N, ...) (a dict of such tensors for Dict observations)"""
    act: torch.Tensor
    """a_t as stored, shape (N,) or (N, A)"""
    logp_old: torch.Tensor
    """log pi_old(a_t | o_t) of the policy that collected the rollout, shape (N,)"""
    value_old: torch.Tensor
    """V(o_t) before the update, shape (N,)"""
    advantages: torch.Tensor
    """GAE advantages, shape (N,)"""
    returns: torch.Tensor
    """value targets: advantages + value_old, shape (N,)"""

    def __len__(self) -> int:
        return len(self.advantages)

    def select(self, idx: torch.Tensor) -> RolloutTensors:
        """The steps at ``idx`` (a mini-batch)."""
        return RolloutTensors(
            obs=index_obs(self.obs, idx),
            act=self.act[idx],
            logp_old=self.logp_old[idx],
            value_old=self.value_old[idx],
            advantages=self.advantages[idx],
            returns=self.returns[idx],
        )


def _flat(array: np.ndarray, num: int) -> np.ndarray:
    return array.reshape(num, *array.shape[2:])


def _num_obs(obs: ObsTensor) -> int:
    return len(obs) if isinstance(obs, torch.Tensor) else len(next(iter(obs.values())))


def index_obs(obs: ObsTensor, idx: torch.Tensor) -> ObsTensor:
    """The observations at ``idx`` (every key of a dict observation): a mini-batch."""
    if isinstance(obs, torch.Tensor):
        return obs[idx]
    return {key: value[idx] for key, value in obs.items()}


def _next_values(
    ac: ActorCritic, rollout: RolloutBatch, obs_next_TE: ObsArray, value_TE: np.ndarray
) -> np.ndarray:
    """V(o_{t+1}) for every step: the next row's value inside an episode; at a non-terminal boundary
    (truncation, end of the collected column) the critic's value of the stored ``obs_next``."""
    next_value_TE = np.zeros_like(value_TE)
    next_value_TE[:-1] = value_TE[1:]
    ends_TE = rollout.boundary & rollout.valid & ~rollout.terminated
    if ends_TE.any():
        obs_ends = rollout_obs(obs_next_TE, ends_TE, ac.policy.device)
        next_value_TE[ends_TE] = ac.values(obs_ends).cpu().numpy()
    return next_value_TE


def _array_obs(obs: np.ndarray) -> np.ndarray:
    """float32 observations for the networks; uint8 ones (images) stay uint8, scaled in the network."""
    return obs if obs.dtype == np.uint8 else np.asarray(obs, dtype=np.float32)


def rollout_obs(obs: ObsArray, select: np.ndarray | None, device: torch.device) -> ObsTensor:
    """Rollout observations (T, E, ...) as tensors, flattened to (T * E, ...) (``select=None``) or
    indexed by the boolean (T, E) mask ``select``; a dict observation key by key (float64 becomes
    float32, other dtypes are kept: the network's encoders convert them)."""
    if isinstance(obs, np.ndarray):
        array = _array_obs(obs)
        flat = _flat(array, array.shape[0] * array.shape[1]) if select is None else array[select]
        return torch.as_tensor(flat, device=device)
    tensors: dict[str, torch.Tensor] = {}
    for key, value in obs.items():
        flat = _flat(value, value.shape[0] * value.shape[1]) if select is None else value[select]
        tensors[key] = torch.as_tensor(
            flat.astype(np.float32) if flat.dtype == np.float64 else flat, device=device
        )
    return tensors


@torch.no_grad()
def prepare_rollout(
    ac: ActorCritic, rollout: RolloutBatch, *, gamma: float, gae_lambda: float
) -> RolloutTensors:
    """Values, GAE advantages (bootstrapped with V(obs_next) at truncations and at the end of each
    column; see :func:`tshtrain.functional.gae_advantages`), returns and old log-probabilities."""
    num_t, num_e = rollout.shape
    device = ac.policy.device
    obs_all = rollout_obs(rollout.obs, None, device)
    value_TE = ac.values(obs_all).reshape(num_t, num_e).cpu().numpy()
    next_value_TE = _next_values(ac, rollout, rollout.obs_next, value_TE)
    adv_TE = gae_advantages(
        rollout.rew, value_TE, next_value_TE, rollout.terminated, rollout.boundary,
        gamma=gamma, gae_lambda=gae_lambda,
    )  # fmt: skip
    valid = rollout.valid.reshape(-1)
    obs_N = (
        obs_all
        if bool(valid.all())
        else index_obs(obs_all, torch.from_numpy(np.flatnonzero(valid)).to(device))
    )
    act_N = torch.as_tensor(_flat(rollout.act, num_t * num_e)[valid], device=device)
    value_N = torch.as_tensor(value_TE.reshape(-1)[valid], device=device)
    adv_N = torch.as_tensor(adv_TE.reshape(-1)[valid], device=device)
    logp_N, _ = log_prob_entropy(ac.policy, obs_N, act_N)
    return RolloutTensors(
        obs=obs_N, act=act_N, logp_old=logp_N, value_old=value_N, advantages=adv_N, returns=adv_N + value_N
    )


def minibatches(
    num: int, batch_size: int | None, num_repetitions: int, generator: torch.Generator
) -> Iterator[torch.Tensor]:
    """Index tensors: ``num_repetitions`` passes over ``range(num)``, each shuffled with ``generator``
    and cut into mini-batches of ``batch_size`` (None: one batch of all; the last may be smaller)."""
    size = num if batch_size is None else min(batch_size, num)
    for _ in range(num_repetitions):
        perm = torch.randperm(num, generator=generator)
        for start in range(0, num, size):
            yield perm[start : start + size]


def normalize_advantages(adv_N: torch.Tensor) -> torch.Tensor:
    """Standardised to mean 0, std 1 (unchanged if there is a single element)."""
    if len(adv_N) < 2:
        return adv_N
    return (adv_N - adv_N.mean()) / (adv_N.std() + 1e-8)


def value_loss(
    value_N: torch.Tensor,
    value_old_N: torch.Tensor,
    returns_N: torch.Tensor,
    clip_range: float | None,
) -> torch.Tensor:
    """Mean squared error to the returns; with ``clip_range``, the maximum of the errors of the
    value and of ``value_old + clamp(value - value_old, -clip_range, clip_range)`` (PPO2's clipping)."""
    error_N = (value_N - returns_N).square()
    if clip_range is None:
        return error_N.mean()
    clipped_N = value_old_N + (value_N - value_old_N).clamp(-clip_range, clip_range)
    return torch.maximum(error_N, (clipped_N - returns_N).square()).mean()


def explained_variance(value_N: torch.Tensor, returns_N: torch.Tensor) -> torch.Tensor:
    """1 - Var(returns - values) / Var(returns): 1 is perfect, 0 no better than a constant (NaN if
    the returns do not vary)."""
    var_returns = returns_N.var(unbiased=False)
    ratio = (returns_N - value_N).var(unbiased=False) / var_returns
    return torch.where(var_returns > 0, 1.0 - ratio, torch.full_like(ratio, float("nan")))


TActorCriticParams = TypeVar("TActorCriticParams", bound=ActorCriticParams)


class ActorCriticAlgorithm(OnPolicyAlgorithm[ActorPolicy, TStats_co], Generic[TActorCriticParams, TStats_co]):
    """What A2C and PPO share around their :class:`ActorCritic`: construction, components and the
    update-step counter in the extra state. Abstract: each implements ``update`` with its own loss."""

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        critic: nn.Module,
        params: TActorCriticParams,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the actor.
        critic: maps observations to values, shape (N,) or (N, 1); may share layers with the actor.
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of both the actor and
            the critic; updated at the end of every update with the rollout's observations.
        seed: seeds the algorithm's generator (mini-batch shuffling).
        """
        super().__init__(policy=policy)
        self.params = params
        self.critic = critic
        self.ac = ActorCritic(
            owner=type(self).__name__,
            policy=policy,
            critic=critic,
            lr=params.lr,
            lr_schedule=params.lr_schedule,
            obs_normalizer=obs_normalizer,
            seed=seed,
        )
        self.register_components(self.ac.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.ac.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.ac.load_extra_state(state)
