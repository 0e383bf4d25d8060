"""PPO (Schulman et al. 2017): the clipped surrogate objective with GAE advantages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.onpolicy import (
    ActorCriticAlgorithm,
    ActorCriticParams,
    ActorPolicy,
    RolloutTensors,
    log_prob_entropy,
    normalize_advantages,
    value_loss,
)
from tshtrain.algorithm.blocks.onpolicy_update import LossTerms, actor_critic_update
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule, schedule_factor
from tshtrain.constraints import PositiveFloat
from tshtrain.data.batch import AnyRolloutBatch


@final
@dataclass(frozen=True, kw_only=True)
class PPOParams(ActorCriticParams):
    """Hyperparameters of :class:`PPO` (besides those of :class:`ActorCriticParams`)."""

    clip_range: PositiveFloat = 0.2
    """epsilon of the clipped surrogate: the probability ratio is clipped to [1 - eps, 1 + eps]; 0.1 to
    0.3 are usual values"""
    clip_schedule: Schedule | None = None
    """multiplies clip_range by schedule.factor(k) in the update after k update steps; None: constant"""
    value_clip_range: PositiveFloat | None = None
    """clip the value change per update to +-value_clip_range around the old value (PPO2's value
    clipping; in the units of the returns); None: no value clipping"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()
        check_schedule(self, "clip_schedule", self.clip_schedule)


@final
@dataclass(frozen=True, kw_only=True)
class PPOTrainingStats(TrainingStats):
    """Statistics of one PPO update, means over its mini-batches."""

    loss: float = 0.0
    """the combined loss: policy_loss + vf_coef * value_loss - ent_coef * entropy"""
    policy_loss: float = 0.0
    """the clipped surrogate loss"""
    value_loss: float = 0.0
    """the (optionally clipped) squared error of the values to the returns"""
    entropy: float = 0.0
    """mean entropy of the policy on the mini-batches"""
    approx_kl: float = 0.0
    """estimate of KL(pi_old || pi) before each gradient step: mean of (ratio - 1) - log(ratio)"""
    clip_fraction: float = 0.0
    """fraction of steps whose probability ratio lay outside [1 - clip, 1 + clip]"""
    explained_variance: float = 0.0
    """1 - Var(returns - values) / Var(returns) of the values before the update (NaN: constant returns)"""
    grad_norm: float = 0.0
    """gradient norm before clipping"""
    lr: float = 0.0
    """the learning rate of this update"""
    clip_range: float = 0.0
    """the clip range of this update"""


@final
class PPO(ActorCriticAlgorithm[PPOParams, PPOTrainingStats]):
    """Proximal policy optimisation with a separate critic, for a :class:`CategoricalPolicy` (Discrete
    actions) or a :class:`GaussianPolicy` (Box actions).

    Each update computes values, GAE advantages and the log-probabilities of the collected actions once,
    then makes ``num_repetitions`` passes over the rollout in shuffled mini-batches of ``batch_size``,
    one Adam step each on ``policy_loss + vf_coef * value_loss - ent_coef * entropy``.
    """

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        critic: nn.Module,
        params: PPOParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """See :class:`~tshtrain.algorithm.blocks.onpolicy.ActorCriticAlgorithm`; ``params``: default
        ``PPOParams()``."""
        super().__init__(
            policy=policy,
            critic=critic,
            params=params or PPOParams(),
            obs_normalizer=obs_normalizer,
            seed=seed,
        )

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> PPOTrainingStats:
        params = self.params
        clip = params.clip_range * schedule_factor(params.clip_schedule, self.ac.num_update_steps)
        r = actor_critic_update(
            self.ac,
            params,
            rollout,
            lambda batch: self.minibatch_loss(batch, clip),
            batch_size=batch_size,
            num_repetitions=num_repetitions,
            hooks=hooks,
        )
        assert r.clip_fraction is not None  # reported by _loss
        return PPOTrainingStats(
            num_gradient_steps=r.num_gradient_steps,
            loss=r.loss,
            policy_loss=r.policy_loss,
            value_loss=r.value_loss,
            entropy=r.entropy,
            approx_kl=r.approx_kl,
            clip_fraction=r.clip_fraction,
            explained_variance=r.explained_variance,
            grad_norm=r.grad_norm,
            lr=r.lr,
            clip_range=clip,
        )

    def minibatch_loss(self, batch: RolloutTensors, clip: float) -> LossTerms:
        """The clipped surrogate loss of a mini-batch, with the value loss and entropy bonus."""
        params = self.params
        logp, entropy = log_prob_entropy(self.policy, batch.obs, batch.act)
        adv = batch.advantages
        if params.advantage_normalization:
            adv = normalize_advantages(adv)
        log_ratio = logp - batch.logp_old
        ratio = torch.exp(log_ratio)
        policy_loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1.0 - clip, 1.0 + clip)).mean()
        value = self.ac.values(batch.obs)
        v_loss = value_loss(value, batch.value_old, batch.returns, params.value_clip_range)
        mean_entropy = entropy.mean()
        loss = policy_loss + params.vf_coef * v_loss - params.ent_coef * mean_entropy
        with torch.no_grad():
            approx_kl = ((ratio - 1.0) - log_ratio).mean()
            clip_fraction = ((ratio - 1.0).abs() > clip).float().mean()
        return LossTerms(
            loss=loss,
            policy_loss=policy_loss,
            value_loss=v_loss,
            entropy=mean_entropy,
            approx_kl=approx_kl,
            clip_fraction=clip_fraction,
        )
