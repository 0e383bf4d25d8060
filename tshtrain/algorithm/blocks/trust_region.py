"""What NPG and TRPO share: their common hyperparameters, the state they keep, the natural-gradient
direction and the update loop (they differ only in how far the policy moves along the direction).

* :class:`TrustRegionParams`: the hyperparameters both take (their params classes extend it).
* :class:`TrustRegionAlgorithm`: an :class:`ActorCriticAlgorithm` whose Adam trains the critic alone,
  and the update. Abstract: each implements its policy step and names its statistics.
* :func:`natural_direction`: the conjugate-gradient solution of ``F x = -g`` for a mini-batch.
* :func:`trust_region_update`: one update: the rollout prepared once (values, GAE, old
  log-probabilities: :func:`~tshtrain.algorithm.blocks.onpolicy.prepare_rollout`), then per mini-batch
  one policy step (the algorithm's) followed by ``num_critic_gradient_steps`` Adam steps on the critic.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import NO_UPDATE_HOOKS, TStats_co, UpdateHooks, check_finite_loss
from tshtrain.algorithm.blocks.natural_gradient import (
    ActionDistribution,
    action_distribution,
    conjugate_gradient,
    detached,
    fisher_vector_product,
    flat_grad,
    mean_kl,
)
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.onpolicy import (
    ActorCritic,
    ActorCriticAlgorithm,
    ActorPolicy,
    RolloutTensors,
    explained_variance,
    minibatches,
    normalize_advantages,
    prepare_rollout,
    value_loss,
)
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.algorithm.blocks.world_critic import PerWorldCritic
from tshtrain.constraints import PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class TrustRegionParams(ABC):
    """Hyperparameters shared by :class:`~tshtrain.algorithm.NPGParams` and
    :class:`~tshtrain.algorithm.TRPOParams` (use those; this base is abstract)."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate of the critic (the policy moves by natural-gradient steps, not by Adam)"""
    lr_schedule: Schedule | None = None
    """multiplies lr by schedule.factor(k) in the update after k update steps; None: constant lr"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    gae_lambda: UnitFloat = 0.95
    """GAE's lambda in [0, 1]: 1 gives Monte-Carlo advantages, 0 one-step TD errors"""
    advantage_normalization: bool = True
    """standardise the advantages of the whole rollout to mean 0, std 1 (once per update, as
    Tianshou's NPG/TRPO do; A2C and PPO standardise each mini-batch)"""
    num_critic_gradient_steps: PositiveInt = 5
    """Adam steps on the critic's squared error per mini-batch, after the policy step (Tianshou:
    ``optim_critic_iters``)"""
    max_grad_norm: PositiveFloat | None = None
    """clip the critic's gradient norm; None: no clipping (Tianshou clips nothing here)"""
    damping: PositiveFloat = 0.1
    """added to the Fisher matrix's diagonal (F + damping * I) for a well-conditioned solve (Tianshou
    fixes it at 0.1)"""
    num_cg_iterations: PositiveInt = 10
    """conjugate-gradient iterations per policy step (Tianshou fixes it at 10)"""

    @abstractmethod
    def __post_init__(self) -> None:
        """Check the fields (each subclass calls this through ``super().__post_init__()``)."""
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


class NaturalDirection(NamedTuple):
    """A mini-batch's natural-gradient direction and what a step along it needs."""

    direction_P: torch.Tensor
    """x ~ -(F + damping I)^-1 g, with g the gradient of the policy loss: the ascent direction"""
    fisher_product: Callable[[torch.Tensor], torch.Tensor]
    """v -> (F + damping I) v at the parameters before the step"""
    old_dist: ActionDistribution
    """pi(. | obs) before the step (no gradient)"""


def natural_direction(
    policy: ActorPolicy,
    params: Sequence[nn.Parameter],
    policy_loss: torch.Tensor,
    batch: RolloutTensors,
    *,
    damping: float,
    num_cg_iterations: int,
) -> NaturalDirection:
    """The natural-gradient direction of ``policy_loss`` (a function of ``params``) on ``batch``:
    ``num_cg_iterations`` conjugate-gradient iterations on the damped Fisher matrix of the mean KL
    between the policy before the step and the policy as a function of ``params``."""
    loss_grad_P = flat_grad(policy_loss, params).detach()
    dist = action_distribution(policy, batch.obs)
    old_dist = detached(dist)
    kl_grad_P = flat_grad(mean_kl(policy, old_dist, dist), params, create_graph=True)
    product = fisher_vector_product(kl_grad_P, params, damping)
    direction_P = -conjugate_gradient(product, loss_grad_P, num_iterations=num_cg_iterations)
    return NaturalDirection(direction_P=direction_P, fisher_product=product, old_dist=old_dist)


def fit_critic(
    core: ActorCritic, params: TrustRegionParams, batch: RolloutTensors, hooks: UpdateHooks
) -> torch.Tensor:
    """``num_critic_gradient_steps`` Adam steps on mean((V(o) - R)^2); the last loss (0-dim, detached).
    Only the critic's parameters get gradients (they are disjoint from the policy's), so Adam, which
    also holds the policy's parameters, moves the critic alone."""
    loss = torch.zeros((), device=batch.returns.device)
    for _ in range(params.num_critic_gradient_steps):
        loss = value_loss(core.values(batch.obs), batch.value_old, batch.returns, None)
        core.gradient_step(loss, {"value loss": loss}, hooks, params.max_grad_norm)
    return loss.detach()


class TrustRegionResult(NamedTuple):
    """One update's statistics: means over its mini-batches, as floats."""

    num_gradient_steps: int
    """policy steps plus critic Adam steps"""
    lr: float
    policy_columns: list[float]
    """the means of the columns the algorithm's policy step returned, in its order"""
    value_loss: float
    explained_variance: float
    """of the values before the update"""


PolicyStep = Callable[[RolloutTensors], torch.Tensor]
"""one policy step on a mini-batch; returns its statistics as a 1-D tensor whose first column is the
policy loss before the step"""


def trust_region_update(
    core: ActorCritic,
    params: TrustRegionParams,
    rollout: AnyRolloutBatch,
    policy_step: PolicyStep,
    *,
    batch_size: int | None,
    num_repetitions: int,
    hooks: UpdateHooks,
) -> TrustRegionResult:
    """One NPG / TRPO update of ``core`` on ``rollout``: per mini-batch ``policy_step``, then the critic."""
    lr = params.lr * core.lrs.apply(core.num_update_steps)
    data = prepare_rollout(core, rollout, gamma=params.gamma, gae_lambda=params.gae_lambda)
    if params.advantage_normalization:
        data = dataclasses.replace(data, advantages=normalize_advantages(data.advantages))
    rows = []
    for idx in minibatches(len(data), batch_size, num_repetitions, core.rng):
        batch = data.select(idx)
        policy_row = policy_step(batch)
        rows.append(torch.cat([policy_row, fit_critic(core, params, batch, hooks).reshape(1)]))
    means = torch.stack(rows).mean(dim=0)
    check_finite_loss(core.owner, "policy loss", means[0])
    check_finite_loss(core.owner, "value loss", means[-1])
    core.finish_update(data.obs)
    values: list[float] = torch.cat(
        [means, explained_variance(data.value_old, data.returns).reshape(1)]
    ).tolist()
    return TrustRegionResult(
        num_gradient_steps=len(rows) * (1 + params.num_critic_gradient_steps),
        lr=lr,
        policy_columns=values[:-2],
        value_loss=values[-2],
        explained_variance=values[-1],
    )


def surrogate_loss(policy: ActorPolicy, batch: RolloutTensors) -> torch.Tensor:
    """-mean(pi(a | o) / pi_old(a | o) * advantage): the importance-sampled policy loss whose gradient
    at pi = pi_old is the policy gradient's (differentiable)."""
    logp, _ = policy.log_prob_entropy(batch.obs, batch.act)
    return -(torch.exp(logp - batch.logp_old) * batch.advantages).mean()


TTrustRegionParams = TypeVar("TTrustRegionParams", bound=TrustRegionParams)


class TrustRegionAlgorithm(ActorCriticAlgorithm[TTrustRegionParams, TStats_co]):
    """What NPG and TRPO share: the :class:`ActorCriticAlgorithm` construction with a critic of its
    own, the flat policy parameters and the update loop (:func:`trust_region_update`). Abstract: each
    implements :meth:`policy_step` and :meth:`training_stats`."""

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        critic: nn.Module,
        params: TTrustRegionParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """As :class:`ActorCriticAlgorithm`, but the policy's parameters move by natural-gradient steps
        and Adam trains the critic alone, so the critic must not share parameters with the policy (nor
        be a :class:`PerWorldCritic`)."""
        _check_separate_critic(type(self).__name__, policy, critic)
        super().__init__(
            policy=policy, critic=critic, params=params, obs_normalizer=obs_normalizer, seed=seed
        )
        self.policy_parameters = [p for p in policy.parameters() if p.requires_grad]
        """the parameters a natural-gradient step moves, in a fixed order (the flat vector's layout)"""

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> TStats_co:
        result = trust_region_update(
            self.ac,
            self.params,
            rollout,
            lambda batch: self.policy_step(batch, hooks),
            batch_size=batch_size,
            num_repetitions=num_repetitions,
            hooks=hooks,
        )
        return self.training_stats(result)

    def natural_direction(self, policy_loss: torch.Tensor, batch: RolloutTensors) -> NaturalDirection:
        """:func:`natural_direction` of ``policy_loss`` for the policy's parameters, with the params'
        damping and conjugate-gradient iterations."""
        return natural_direction(
            self.policy,
            self.policy_parameters,
            policy_loss,
            batch,
            damping=self.params.damping,
            num_cg_iterations=self.params.num_cg_iterations,
        )

    @abstractmethod
    def policy_step(self, batch: RolloutTensors, hooks: UpdateHooks) -> torch.Tensor:
        """One policy step on a mini-batch (a :data:`PolicyStep`); the policy loss goes to
        ``hooks.on_loss`` before its gradient."""

    @abstractmethod
    def training_stats(self, result: TrustRegionResult) -> TStats_co:
        """The algorithm's statistics record of an update's result (its policy columns named)."""


def _check_separate_critic(owner: str, policy: ActorPolicy, critic: nn.Module) -> None:
    """The critic must have parameters of its own only, and not be a per-world critic."""
    if isinstance(critic, PerWorldCritic):
        raise ConfigurationError(
            f"{owner}: a PerWorldCritic is not supported (its grouped rollout layout is implemented for "
            f"A2C and PPO only); use a critic that maps each observation to a value, or PPO."
        )
    policy_ids = {id(p) for p in policy.parameters()}
    shared = [name for name, p in critic.named_parameters() if id(p) in policy_ids]
    if shared:
        raise ConfigurationError(
            f"{owner}: the critic shares {len(shared)} parameter tensors with the policy (e.g. "
            f"{shared[0]!r}); the natural-gradient step moves the policy's parameters and Adam the "
            f"critic's, so they must be disjoint. Give the critic its own layers."
        )
