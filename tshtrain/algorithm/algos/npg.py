"""NPG (Kakade 2001): natural policy gradient steps with a conjugate-gradient solve on the Fisher
matrix of the KL, and a critic fitted by Adam, with GAE advantages."""

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
    TrustRegionAlgorithm,
    TrustRegionParams,
    TrustRegionResult,
)
from tshtrain.constraints import PositiveFloat


@final
@dataclass(frozen=True, kw_only=True)
class NPGParams(TrustRegionParams):
    """Hyperparameters of :class:`NPG` (besides those of :class:`TrustRegionParams`)."""

    trust_region_size: PositiveFloat = 0.5
    """the step length along the natural gradient: parameters += trust_region_size * F^-1 grad (the
    name and default of Tianshou's NPG; 0.1 to 1 are usual values)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@final
@dataclass(frozen=True, kw_only=True)
class NPGTrainingStats(TrainingStats):
    """Statistics of one NPG update, means over its mini-batches."""

    policy_loss: float = 0.0
    """-mean(log pi(a | o) * advantage) before each policy step"""
    value_loss: float = 0.0
    """squared error of the values to the returns at the last critic step of each mini-batch"""
    kl: float = 0.0
    """mean KL(pi_before || pi_after) of each policy step, on its mini-batch"""
    explained_variance: float = 0.0
    """1 - Var(returns - values) / Var(returns) of the values before the update (NaN: constant returns)"""
    lr: float = 0.0
    """the critic's learning rate in this update"""


@final
class NPG(TrustRegionAlgorithm[NPGParams, NPGTrainingStats]):
    """Natural policy gradient with a separate critic, for a :class:`CategoricalPolicy` (Discrete
    actions), a :class:`GaussianPolicy` (Box actions), a :class:`MultiCategoricalPolicy` or a
    :class:`BernoulliPolicy`.

    Per mini-batch: the gradient g of ``-mean(log pi(a | o) * A)``, the direction
    x = -(F + damping I)^-1 g by conjugate gradients on Fisher-vector products of the KL, the policy's
    parameters moved by ``trust_region_size * x``; then ``num_critic_gradient_steps`` Adam steps on the
    critic's squared error to the returns.
    """

    @classmethod
    @override
    def default_params(cls) -> NPGParams:
        return NPGParams()

    @override
    def training_stats(self, result: TrustRegionResult) -> NPGTrainingStats:
        policy_loss, kl = result.policy_columns
        return NPGTrainingStats(
            num_gradient_steps=result.num_gradient_steps,
            policy_loss=policy_loss,
            value_loss=result.value_loss,
            kl=kl,
            explained_variance=result.explained_variance,
            lr=result.lr,
        )

    @override
    def policy_step(self, batch: RolloutTensors, hooks: UpdateHooks) -> torch.Tensor:
        """One natural-gradient step of the policy on a mini-batch; returns (policy loss, KL) before
        and across the step, shape (2,). The loss goes to ``hooks.on_loss`` before its gradient."""
        params = self.params
        logp, _ = self.policy.log_prob_entropy(batch.obs, batch.act)
        policy_loss = -(logp * batch.advantages).mean()
        hooks.on_loss({"policy loss": policy_loss})
        found = self.natural_direction(policy_loss, batch)
        with torch.no_grad():
            start_P = flat_parameters(self.policy_parameters)
            set_flat_parameters(
                self.policy_parameters, start_P + params.trust_region_size * found.direction_P
            )
            kl = mean_kl(self.policy, found.old_dist, action_distribution(self.policy, batch.obs))
        return torch.stack([policy_loss.detach(), kl])
