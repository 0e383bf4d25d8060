"""What A2C and PPO share, as functions, one small component and a thin abstract base (NPG and TRPO
build on the same pieces).

* :class:`ActorCriticParams`: the hyperparameters both take (their params classes extend it).
* :class:`ActorCritic`: the state both keep (policy, critic, optimizer, generator, update counter,
  optional observation normaliser) and the few operations on it.
* :func:`prepare_rollout`: values, GAE advantages, returns and old log-probabilities of a rollout.
* :func:`minibatches`, :func:`normalize_advantages`, :func:`value_loss`, :func:`explained_variance`.
* :class:`TimeoutBootstrap`: what a truncated (timed-out) step bootstraps from.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    OnPolicyAlgorithm,
    Stateful,
    TStats_co,
    UpdateHooks,
    make_adam,
    seeded_generator,
)
from tshtrain.algorithm.blocks.gaussian import GaussianPolicy
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer, check_obs_normalizer
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.algorithm.blocks.world_critic import PerWorldCritic
from tshtrain.constraints import NonNegativeFloat, PositiveFloat, UnitFloat, validate_fields
from tshtrain.data.batch import AnyRolloutBatch, ObsTensor, TensorRolloutBatch, obs_to_torch
from tshtrain.devices import restore_generator_state
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError
from tshtrain.functional.returns import gae_advantages_torch

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
    """standardise the advantages of each mini-batch to mean 0, std 1 (PPO can standardise them over
    the whole rollout instead: ``PPOParams.advantage_normalization_scope``)"""
    adam_eps: PositiveFloat = 1e-8
    """Adam's epsilon (the term added to the denominator); torch's default 1e-8; 1e-5 is what
    Stable-Baselines3, CleanRL and rsl_rl use"""

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
    update-step counter that drives schedules and the optional observation normaliser.

    ``clip_per_network=True`` clips the gradient norms of the actor's and of the critic's parameters
    separately (they must share none); otherwise one norm over both is clipped."""

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
        adam_eps: float = 1e-8,
        clip_per_network: bool = False,
    ):
        check_obs_normalizer(owner, {"policy": policy, "critic": critic}, obs_normalizer)
        self.owner = owner
        self.policy = policy
        self.critic = critic
        self.obs_normalizer = obs_normalizer
        self.parameters = _unique_parameters(policy, critic)
        self.clip_groups = _clip_groups(owner, policy, critic) if clip_per_network else None
        """(actor parameters, critic parameters) clipped separately; None: clipped together"""
        self.optim = make_adam(self.parameters, lr=lr, eps=adam_eps)
        self.lrs = ScheduledLearningRates(lr_schedule, [self.optim])
        """the learning rate on its schedule, set from :attr:`num_update_steps` at each update"""
        self.rng = seeded_generator(seed, policy.device)
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
            restore_generator_state(self.rng, state["rng_state"], owner=f"{self.owner}.rng")

    def values(self, obs: ObsTensor) -> torch.Tensor:
        """V(obs), shape (N,); the critic may return (N,) or (N, 1). A :class:`PerWorldCritic` takes
        rows laid out world-major in groups of its ``num_agents`` (what the update's grouped path
        passes; see :meth:`PerWorldCritic.grouped_values`)."""
        if isinstance(self.critic, PerWorldCritic):
            return self.critic.grouped_values(obs)
        out: torch.Tensor = self.critic(obs)
        if out.dim() >= 2 and out.shape[-1] == 1:  # (N, 1), or (K, N, 1) for stacked members
            return out.squeeze(-1)
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
        """One Adam step on ``loss`` (``reported`` goes to ``hooks.on_loss`` first); returns the
        gradient norm before clipping (a 0-dim tensor)."""
        clip = float("inf") if max_grad_norm is None else max_grad_norm
        grad_norm = optimizer_step(
            self.optim,
            "optim",
            reported,
            hooks,
            minimise=loss,
            zero_grad_first=False,
            params=self.parameters if self.clip_groups is None else None,
            clip_groups=self.clip_groups,
            max_grad_norm=clip,
        )
        assert grad_norm is not None  # clipping is on
        return grad_norm.detach()

    def finish_update(self, obs_N: ObsTensor) -> None:
        """After the gradient steps: merge the rollout's observations into the normaliser, count."""
        if self.obs_normalizer is not None:
            if not isinstance(obs_N, torch.Tensor):
                raise UnsupportedSpaceError(
                    f"{self.owner}: obs_normalizer normalises array observations; this rollout has Dict "
                    f"observations (keys {sorted(obs_N)}). Drop the normaliser or normalise inside the "
                    f"encoder."
                )
            self.obs_normalizer.update(obs_N)
        self.num_update_steps += 1


def _clip_groups(
    owner: str, policy: nn.Module, critic: nn.Module
) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """The actor's and the critic's parameters, for clipping their gradient norms separately."""
    actor, value = list(policy.parameters()), list(critic.parameters())
    shared = {id(p) for p in actor} & {id(p) for p in value}
    if shared:
        raise ConfigurationError(
            f"{owner}: grad_clip_scope=per_network needs an actor and a critic without shared "
            f"parameters; these share {len(shared)} tensor(s). Use grad_clip_scope=together."
        )
    return actor, value


@dataclass(frozen=True, kw_only=True)
class RolloutTensors:
    """The valid steps of a rollout, flattened to N = number of valid steps, ready for mini-batches
    (tensors on the policy's device)."""

    obs: ObsTensor
    """o_t, shape (N, ...) (one tensor per key for Dict observations)"""
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
        """The steps at ``idx`` (a mini-batch; a 1-D integer tensor)."""

        def rows(x: torch.Tensor) -> torch.Tensor:
            # the same rows as x[idx], gathered 3-5x faster on the CPU (no advanced-indexing machinery)
            return x.index_select(0, idx)

        return RolloutTensors(
            obs=map_obs_tensor(self.obs, rows),
            act=rows(self.act),
            logp_old=rows(self.logp_old),
            value_old=rows(self.value_old),
            advantages=rows(self.advantages),
            returns=rows(self.returns),
        )


def map_obs_tensor(obs: ObsTensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> ObsTensor:
    """``fn`` applied to an observation tensor, or to every tensor of a Dict observation."""
    if isinstance(obs, torch.Tensor):
        return fn(obs)
    return {key: fn(value) for key, value in obs.items()}


def _num_obs(obs: ObsTensor) -> int:
    return len(obs) if isinstance(obs, torch.Tensor) else len(next(iter(obs.values())))


def rollout_to_torch(rollout: AnyRolloutBatch, device: torch.device) -> TensorRolloutBatch:
    """A rollout as tensors on ``device``: a numpy :class:`RolloutBatch` is converted (zero-copy on the
    CPU; array observations become float32, Dict observations keep their dtypes except float64 ->
    float32); a :class:`TensorRolloutBatch` is moved (a no-op on its own device)."""
    if isinstance(rollout, TensorRolloutBatch):
        if rollout.rew.device == device:
            return rollout
        return TensorRolloutBatch(
            obs=map_obs_tensor(rollout.obs, lambda x: x.to(device)),
            act=rollout.act.to(device),
            rew=rollout.rew.to(device),
            terminated=rollout.terminated.to(device),
            truncated=rollout.truncated.to(device),
            obs_next=map_obs_tensor(rollout.obs_next, lambda x: x.to(device)),
            boundary=rollout.boundary.to(device),
            valid=rollout.valid.to(device),
            num_valid=rollout.num_valid,
            logp=None if rollout.logp is None else rollout.logp.to(device),
            value=None if rollout.value is None else rollout.value.to(device),
        )
    return TensorRolloutBatch(
        obs=obs_to_torch(rollout.obs, device),
        act=torch.as_tensor(rollout.act, device=device),
        rew=torch.as_tensor(rollout.rew, device=device),
        terminated=torch.as_tensor(rollout.terminated, device=device),
        truncated=torch.as_tensor(rollout.truncated, device=device),
        obs_next=obs_to_torch(rollout.obs_next, device),
        boundary=torch.as_tensor(rollout.boundary, device=device),
        valid=torch.as_tensor(rollout.valid, device=device),
        num_valid=rollout.num_steps,
    )


def float_obs(obs: ObsTensor) -> ObsTensor:
    """Array observations as float32, except uint8 images (kept: the network's encoder scales them);
    Dict observations unchanged (their encoders decide)."""
    if isinstance(obs, torch.Tensor) and obs.dtype != torch.uint8:
        return obs.to(torch.float32)
    return obs


def index_obs(obs: ObsTensor, idx: torch.Tensor) -> ObsTensor:
    """The observations at ``idx`` (every key of a dict observation): a mini-batch."""
    if isinstance(obs, torch.Tensor):
        return obs[idx]
    return {key: value[idx] for key, value in obs.items()}


class TimeoutBootstrap(enum.Enum):
    """What the value target of a truncated (timed-out, not terminated) step bootstraps from."""

    FINAL_OBS = "final_obs"
    """V(final observation): the critic's value of the observation the env returned at the time-out
    (the env adapters keep it in ``obs_next``); the exact target"""
    STEP_OBS = "step_obs"
    """V(o_t): the value of the step's own observation, the approximation of simulators that reset
    in place and do not return the final observation (rsl_rl's ``time_outs`` handling)"""
    OFF = "off"
    """nothing: a time-out ends the return as a termination does"""


def bootstrap_ends(rollout: TensorRolloutBatch, timeout_bootstrap: TimeoutBootstrap) -> torch.Tensor:
    """The steps whose next value is the critic's value of the stored ``obs_next``: non-terminal
    boundaries (the end of a collected column; a truncation with ``FINAL_OBS``)."""
    ends = rollout.boundary & rollout.valid & ~rollout.terminated
    if timeout_bootstrap is TimeoutBootstrap.FINAL_OBS:
        return ends
    return ends & ~rollout.truncated


def timeout_next_values(
    next_value_TE: torch.Tensor,
    value_TE: torch.Tensor,
    rollout: TensorRolloutBatch,
    timeout_bootstrap: TimeoutBootstrap,
) -> torch.Tensor:
    """``next_value_TE`` with the truncated steps' next values set by ``timeout_bootstrap`` (V(o_t)
    for ``STEP_OBS``, 0 for ``OFF``); unchanged for ``FINAL_OBS``."""
    if timeout_bootstrap is TimeoutBootstrap.FINAL_OBS:
        return next_value_TE
    cut_TE = rollout.truncated & rollout.valid & ~rollout.terminated
    bootstrap_TE = value_TE if timeout_bootstrap is TimeoutBootstrap.STEP_OBS else torch.zeros_like(value_TE)
    return torch.where(cut_TE, bootstrap_TE, next_value_TE)


def _next_values(
    ac: ActorCritic,
    rollout: TensorRolloutBatch,
    obs_next_TE: ObsTensor,
    value_TE: torch.Tensor,
    timeout_bootstrap: TimeoutBootstrap,
) -> torch.Tensor:
    """V(o_{t+1}) for every step: the next row's value inside an episode; at a non-terminal boundary
    (truncation, end of the collected column) the critic's value of the stored ``obs_next``, or at a
    truncation what ``timeout_bootstrap`` says."""
    next_value_TE = torch.zeros_like(value_TE)
    next_value_TE[:-1] = value_TE[1:]
    ends_TE = bootstrap_ends(rollout, timeout_bootstrap)
    if bool(ends_TE.any()):
        obs_ends = map_obs_tensor(obs_next_TE, lambda x: x[ends_TE])
        next_value_TE[ends_TE] = ac.values(obs_ends)
    return timeout_next_values(next_value_TE, value_TE, rollout, timeout_bootstrap)


FORWARD_CHUNK_ROWS = 4096
"""Rows per forward pass when :func:`prepare_rollout` evaluates a whole rollout: a few thousand rows
keep a small MLP's activations in the CPU's caches (one pass over 32768 rows is ~1.5x slower per row).
The results equal one pass over all rows bit for bit for networks that treat rows independently
(not for batch normalisation in training mode)."""


def in_chunks(fn: Callable[[slice], torch.Tensor], num_rows: int) -> torch.Tensor:
    """``fn`` of consecutive row ranges of at most :data:`FORWARD_CHUNK_ROWS` rows, concatenated."""
    if num_rows <= FORWARD_CHUNK_ROWS:
        return fn(slice(0, num_rows))
    starts = range(0, num_rows, FORWARD_CHUNK_ROWS)
    return torch.cat([fn(slice(start, start + FORWARD_CHUNK_ROWS)) for start in starts])


@torch.no_grad()
def prepare_rollout(
    ac: ActorCritic,
    rollout: AnyRolloutBatch,
    *,
    gamma: float,
    gae_lambda: float,
    timeout_bootstrap: TimeoutBootstrap = TimeoutBootstrap.FINAL_OBS,
) -> RolloutTensors:
    """Values, GAE advantages (bootstrapped with V(obs_next) at the end of each column and, by
    default, at truncations (see :class:`TimeoutBootstrap`); see
    :func:`tshtrain.functional.gae_advantages_torch`), returns and old log-probabilities.

    One torch path for both rollout kinds: a numpy :class:`RolloutBatch` is converted first
    (:func:`rollout_to_torch`, zero-copy on the CPU, where the result is bit-identical to the numpy
    computation); Dict observations are indexed and reshaped key by key."""
    device = ac.policy.device
    data = rollout_to_torch(rollout, device)
    num_t, num_e = data.shape
    obs_all = map_obs_tensor(float_obs(data.obs), lambda x: x.reshape(num_t * num_e, *x.shape[2:]))
    if data.value is not None:  # computed while collecting (TensorCollector(values=...)): the same maths
        value_TE = data.value
    else:
        value_TE = in_chunks(
            lambda rows: ac.values(map_obs_tensor(obs_all, lambda x: x[rows])), num_t * num_e
        ).reshape(num_t, num_e)
    next_value_TE = _next_values(ac, data, float_obs(data.obs_next), value_TE, timeout_bootstrap)
    adv_TE = gae_advantages_torch(
        data.rew, value_TE, next_value_TE, data.terminated, data.boundary, gamma=gamma, gae_lambda=gae_lambda
    ).to(device)
    valid = data.valid.reshape(-1)
    all_valid = data.num_valid == num_t * num_e
    obs_N = obs_all if all_valid else map_obs_tensor(obs_all, lambda x: x[valid])
    act_flat = data.act.reshape(num_t * num_e, *data.act.shape[2:])
    act_N = act_flat if all_valid else act_flat[valid]

    def flat(x_TE: torch.Tensor) -> torch.Tensor:
        return x_TE.reshape(-1) if all_valid else x_TE.reshape(-1)[valid]

    value_N, adv_N = flat(value_TE), flat(adv_TE)
    logp_N = old_log_probs(ac.policy, obs_N, act_N, None if data.logp is None else flat(data.logp))
    return RolloutTensors(
        obs=obs_N, act=act_N, logp_old=logp_N, value_old=value_N, advantages=adv_N, returns=adv_N + value_N
    )


def old_log_probs(
    policy: ActorPolicy, obs_N: ObsTensor, act_N: torch.Tensor, stored_N: torch.Tensor | None
) -> torch.Tensor:
    """log pi_old(act | obs) of a prepared rollout, shape (N,): ``stored_N`` when the collector stored
    them (the same values: :meth:`tshtrain.algorithm.Policy.actions_with_log_prob`), else recomputed
    in chunks (one actor pass over the rollout)."""
    if stored_N is not None:
        return stored_N
    return in_chunks(
        lambda rows: log_prob_entropy(policy, map_obs_tensor(obs_N, lambda x: x[rows]), act_N[rows])[0],
        len(act_N),
    )


def minibatches(
    num: int, batch_size: int | None, num_repetitions: int, generator: torch.Generator
) -> Iterator[torch.Tensor]:
    """Index tensors: ``num_repetitions`` passes over ``range(num)``, each shuffled with ``generator``
    and cut into mini-batches of ``batch_size`` (None: one batch of all; the last may be smaller)."""
    size = num if batch_size is None else min(batch_size, num)
    for _ in range(num_repetitions):
        perm = torch.randperm(num, generator=generator, device=generator.device)
        for start in range(0, num, size):
            yield perm[start : start + size]


def normalize_advantages(adv_N: torch.Tensor) -> torch.Tensor:
    """Standardised to mean 0, std 1 over the last axis (unchanged if it holds a single element); with
    a leading member axis (K, N), each member's row on its own (bit for bit the row's own result)."""
    if adv_N.shape[-1] < 2:
        return adv_N
    return (adv_N - adv_N.mean(dim=-1, keepdim=True)) / (adv_N.std(dim=-1, keepdim=True) + 1e-8)


def value_loss(
    value_N: torch.Tensor,
    value_old_N: torch.Tensor,
    returns_N: torch.Tensor,
    clip_range: float | None,
) -> torch.Tensor:
    """Mean squared error to the returns; with ``clip_range``, the maximum of the errors of the
    value and of ``value_old + clamp(value - value_old, -clip_range, clip_range)`` (PPO2's clipping).
    The mean runs over the last axis (per member with a leading member axis)."""
    error_N = (value_N - returns_N).square()
    if clip_range is None:
        return error_N.mean(dim=-1)
    clipped_N = value_old_N + (value_N - value_old_N).clamp(-clip_range, clip_range)
    return torch.maximum(error_N, (clipped_N - returns_N).square()).mean(dim=-1)


def explained_variance(value_N: torch.Tensor, returns_N: torch.Tensor) -> torch.Tensor:
    """1 - Var(returns - values) / Var(returns): 1 is perfect, 0 no better than a constant (NaN if
    the returns do not vary)."""
    var_returns = returns_N.var(unbiased=False)
    ratio = (returns_N - value_N).var(unbiased=False) / var_returns
    return torch.where(var_returns > 0, 1.0 - ratio, torch.full_like(ratio, float("nan")))


class LearningRateParams(Protocol):
    """What :class:`ActorCriticAlgorithm` reads from its params: the Adam learning rate and its
    schedule (fields of :class:`ActorCriticParams` and of the trust-region params)."""

    @property
    def lr(self) -> float:
        """the base learning rate of the Adam optimizer"""
        ...

    @property
    def lr_schedule(self) -> Schedule | None:
        """multiplies lr by schedule.factor(k) after k update steps; None: constant"""
        ...


TActorCriticParams = TypeVar("TActorCriticParams", bound=LearningRateParams)


class ActorCriticAlgorithm(OnPolicyAlgorithm[ActorPolicy, TStats_co], Generic[TActorCriticParams, TStats_co]):
    """What A2C, PPO, NPG and TRPO share around their :class:`ActorCritic`: construction, default
    params, components and the update-step counter in the extra state. Abstract: each implements
    ``update`` and :meth:`default_params`."""

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        critic: nn.Module,
        params: TActorCriticParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the actor.
        critic: maps observations to values, shape (N,) or (N, 1); may share layers with the actor
            (not for NPG and TRPO).
        params: hyperparameters; None: :meth:`default_params`.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of both the actor and
            the critic; updated at the end of every update with the rollout's observations.
        seed: seeds the algorithm's generator (mini-batch shuffling).
        """
        super().__init__(policy=policy)
        self.params: TActorCriticParams = params or self.default_params()
        self.critic = critic
        self.ac = ActorCritic(
            owner=type(self).__name__,
            policy=policy,
            critic=critic,
            lr=self.params.lr,
            lr_schedule=self.params.lr_schedule,
            obs_normalizer=obs_normalizer,
            seed=seed,
            adam_eps=self.params.adam_eps if isinstance(self.params, ActorCriticParams) else 1e-8,
            clip_per_network=self.clip_per_network(),
        )
        self.register_components(self.ac.components())

    @classmethod
    @abstractmethod
    def default_params(cls) -> TActorCriticParams:
        """The params used when the constructor is given none (the params class's defaults)."""

    def clip_per_network(self) -> bool:
        """Whether the gradient norms of actor and critic are clipped separately (read from
        ``self.params`` in the constructor); False here: one norm over both."""
        return False

    def collection_values(self) -> Callable[[ObsTensor], torch.Tensor]:
        """V(obs) for a collector to compute while collecting (``TensorCollector(values=...)``): the
        critic, as the update would evaluate it, without gradients; the update then uses the stored
        values instead of a critic pass over the rollout (equal up to float rounding: a CPU matrix
        product may round one vector step's rows differently from the update's chunks). ConfigurationError
        for a :class:`PerWorldCritic` (its values need the whole world's rows)."""
        if isinstance(self.critic, PerWorldCritic):
            raise ConfigurationError(
                f"{type(self).__name__}.collection_values(): the critic is a PerWorldCritic, whose values "
                f"need every agent's rows of a world step together; leave TensorCollector.values None."
            )
        ac = self.ac

        def values(obs: ObsTensor) -> torch.Tensor:
            device = ac.policy.device
            with torch.no_grad():
                return ac.values(map_obs_tensor(float_obs(obs), lambda x: x.to(device)))

        return values

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.ac.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.ac.load_extra_state(state)
