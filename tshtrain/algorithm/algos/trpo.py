"""TRPO (Schulman et al. 2015): natural-gradient steps scaled to a KL bound, with a backtracking line
search that keeps the KL within the bound and requires the surrogate loss to improve; the critic is
fitted by Adam, with GAE advantages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import torch
from typing_extensions import override

from tshtrain.algorithm.base import TrainingStats, UpdateHooks
from tshtrain.algorithm.blocks.natural_gradient import (
    action_distribution,
    flat_parameters,
    mean_kl,
    set_flat_parameters,
)
from tshtrain.algorithm.blocks.onpolicy import RolloutTensors
from tshtrain.algorithm.blocks.trust_region import (
    NaturalDirection,
    TrustRegionAlgorithm,
    TrustRegionParams,
    TrustRegionResult,
    surrogate_loss,
)
from tshtrain.constraints import PositiveFloat, PositiveInt
from tshtrain.errors import ConfigurationError


@final
@dataclass(frozen=True, kw_only=True)
class TRPOParams(TrustRegionParams):
    """Hyperparameters of :class:`TRPO` (besides those of :class:`TrustRegionParams`)."""

    max_kl: PositiveFloat = 0.01
    """the trust region: the largest mean KL(pi_before || pi_after) a policy step may reach"""
    backtrack_coeff: PositiveFloat = 0.8
    """the line search multiplies the step by this after each rejected trial; in (0, 1)"""
    max_backtracks: PositiveInt = 10
    """trials of the line search; when all fail the policy stays where it was"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backtrack_coeff >= 1.0:
            raise ConfigurationError(
                f"TRPOParams.backtrack_coeff must be < 1 (the line search shrinks the step), got "
                f"{self.backtrack_coeff}; 0.5 to 0.9 are usual values."
            )


@final
@dataclass(frozen=True, kw_only=True)
class TRPOTrainingStats(TrainingStats):
    """Statistics of one TRPO update, means over its mini-batches."""

    policy_loss: float = 0.0
    """the surrogate loss -mean(pi / pi_old * advantage) before each policy step"""
    value_loss: float = 0.0
    """squared error of the values to the returns at the last critic step of each mini-batch"""
    kl: float = 0.0
    """mean KL(pi_before || pi_after) of each policy step, on its mini-batch (0 for a rejected step)"""
    step_size: float = 0.0
    """the accepted multiple of the natural direction (0 when the line search failed)"""
    num_backtracks: float = 0.0
    """rejected trials of the line search before the accepted one (max_backtracks when all failed)"""
    line_search_failures: float = 0.0
    """fraction of the policy steps whose line search found no acceptable step"""
    explained_variance: float = 0.0
    """1 - Var(returns - values) / Var(returns) of the values before the update (NaN: constant returns)"""
    lr: float = 0.0
    """the critic's learning rate in this update"""


@final
class TRPO(TrustRegionAlgorithm[TRPOParams, TRPOTrainingStats]):
    """Trust region policy optimisation with a separate critic, for a :class:`CategoricalPolicy`
    (Discrete actions), a :class:`GaussianPolicy` (Box actions), a :class:`MultiCategoricalPolicy` or
    a :class:`BernoulliPolicy`.

    Per mini-batch: the natural direction x of the surrogate loss (as :class:`NPG`), the largest step
    ``sqrt(2 max_kl / x^T F x)`` along it, shrunk by ``backtrack_coeff`` until the mean KL is below
    ``max_kl`` and the surrogate loss is lower than before the step (at most ``max_backtracks`` trials;
    none accepted: no step); then ``num_critic_gradient_steps`` Adam steps on the critic.
    """

    @classmethod
    @override
    def default_params(cls) -> TRPOParams:
        return TRPOParams()

    @override
    def training_stats(self, result: TrustRegionResult) -> TRPOTrainingStats:
        policy_loss, kl, step_size, num_backtracks, failed = result.policy_columns
        return TRPOTrainingStats(
            num_gradient_steps=result.num_gradient_steps,
            policy_loss=policy_loss,
            value_loss=result.value_loss,
            kl=kl,
            step_size=step_size,
            num_backtracks=num_backtracks,
            line_search_failures=failed,
            explained_variance=result.explained_variance,
            lr=result.lr,
        )

    @override
    def policy_step(self, batch: RolloutTensors, hooks: UpdateHooks) -> torch.Tensor:
        """One line-searched natural-gradient step of the policy on a mini-batch; returns (surrogate
        loss before the step, KL across it, step size, rejected trials, 1 if all failed else 0),
        shape (5,). The loss goes to ``hooks.on_loss`` before its gradient."""
        params = self.params
        policy_loss = surrogate_loss(self.policy, batch)
        hooks.on_loss({"policy loss": policy_loss})
        found = self.natural_direction(policy_loss, batch)
        with torch.no_grad():
            x_P = found.direction_P
            curvature = x_P.dot(found.fisher_product(x_P))
            step_size = float(torch.sqrt(2.0 * params.max_kl / curvature))
            step_size, kl, num_rejected = self._line_search(batch, found, policy_loss.detach(), step_size)
        failed = float(num_rejected == params.max_backtracks)
        return torch.tensor(
            [float(policy_loss.detach()), kl, step_size, float(num_rejected), failed],
            device=policy_loss.device,
        )

    def _line_search(
        self, batch: RolloutTensors, found: NaturalDirection, loss_before: torch.Tensor, step_size: float
    ) -> tuple[float, float, int]:
        """Try ``step_size * backtrack_coeff^i`` for i = 0, 1, ...; keep the first step with
        KL < max_kl and a lower surrogate loss. Returns (accepted step size, its KL, rejected trials);
        (0, 0, max_backtracks) after restoring the parameters when none is accepted."""
        params = self.params
        start_P = flat_parameters(self.policy_parameters)
        for trial in range(params.max_backtracks):
            set_flat_parameters(self.policy_parameters, start_P + step_size * found.direction_P)
            kl = float(mean_kl(self.policy, found.old_dist, action_distribution(self.policy, batch.obs)))
            if kl < params.max_kl and bool(surrogate_loss(self.policy, batch) < loss_before):
                return step_size, kl, trial
            step_size *= params.backtrack_coeff
        set_flat_parameters(self.policy_parameters, start_P)
        return 0.0, 0.0, params.max_backtracks
