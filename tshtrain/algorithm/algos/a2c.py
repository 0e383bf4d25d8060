"""A2C (Mnih et al. 2016, synchronous): the advantage actor-critic policy gradient with GAE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import torch
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.onpolicy import (
    ActorCriticAlgorithm,
    ActorCriticParams,
    RolloutTensors,
    log_prob_entropy,
    normalize_advantages,
    value_loss,
)
from tshtrain.algorithm.blocks.onpolicy_update import LossTerms, actor_critic_update
from tshtrain.data.batch import AnyRolloutBatch


@final
@dataclass(frozen=True, kw_only=True)
class A2CParams(ActorCriticParams):
    """Hyperparameters of :class:`A2C` (all in :class:`ActorCriticParams`)."""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@final
@dataclass(frozen=True, kw_only=True)
class A2CTrainingStats(TrainingStats):
    """Statistics of one A2C update, means over its mini-batches."""

    loss: float = 0.0
    """the combined loss: policy_loss + vf_coef * value_loss - ent_coef * entropy"""
    policy_loss: float = 0.0
    """the policy-gradient loss -mean(advantage * log pi(a | o))"""
    value_loss: float = 0.0
    """squared error of the values to the returns"""
    entropy: float = 0.0
    """mean entropy of the policy on the mini-batches"""
    approx_kl: float = 0.0
    """estimate of KL(pi_old || pi) before each gradient step (0 for the first one)"""
    explained_variance: float = 0.0
    """1 - Var(returns - values) / Var(returns) of the values before the update (NaN: constant returns)"""
    grad_norm: float = 0.0
    """gradient norm before clipping"""
    lr: float = 0.0
    """the learning rate of this update"""


@final
class A2C(ActorCriticAlgorithm[A2CParams, A2CTrainingStats]):
    """Advantage actor-critic with a separate critic, for a :class:`CategoricalPolicy` (Discrete
    actions) or a :class:`GaussianPolicy` (Box actions).

    Each update computes values and GAE advantages once, then takes one Adam step per mini-batch
    (``batch_size=None`` and ``num_repetitions=1``, the classic A2C: one step on the whole rollout) on
    ``policy_loss + vf_coef * value_loss - ent_coef * entropy``.
    """

    @classmethod
    @override
    def default_params(cls) -> A2CParams:
        return A2CParams()

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> A2CTrainingStats:
        r = actor_critic_update(
            self.ac,
            self.params,
            rollout,
            self.minibatch_loss,
            batch_size=batch_size,
            num_repetitions=num_repetitions,
            hooks=hooks,
        )
        return A2CTrainingStats(
            num_gradient_steps=r.num_gradient_steps,
            loss=r.loss,
            policy_loss=r.policy_loss,
            value_loss=r.value_loss,
            entropy=r.entropy,
            approx_kl=r.approx_kl,
            explained_variance=r.explained_variance,
            grad_norm=r.grad_norm,
            lr=r.lr,
        )

    def minibatch_loss(self, batch: RolloutTensors) -> LossTerms:
        """The advantage policy-gradient loss of a mini-batch, with the value loss and entropy bonus."""
        params = self.params
        logp, entropy = log_prob_entropy(self.policy, batch.obs, batch.act)
        adv = batch.advantages
        if params.advantage_normalization:
            adv = normalize_advantages(adv)
        policy_loss = -(adv * logp).mean()
        value = self.ac.values(batch.obs)
        v_loss = value_loss(value, batch.value_old, batch.returns, None)
        mean_entropy = entropy.mean()
        loss = policy_loss + params.vf_coef * v_loss
        if params.ent_coef:  # with ent_coef 0 the entropy stays out of the backward pass (same gradients)
            loss = loss - params.ent_coef * mean_entropy
        with torch.no_grad():
            log_ratio = logp - batch.logp_old
            approx_kl = (torch.expm1(log_ratio) - log_ratio).mean()
        return LossTerms(
            loss=loss, policy_loss=policy_loss, value_loss=v_loss, entropy=mean_entropy, approx_kl=approx_kl
        )
