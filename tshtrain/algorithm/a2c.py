"""A2C (Mnih et al. 2016, synchronous): the advantage actor-critic policy gradient with GAE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OnPolicyAlgorithm,
    Stateful,
    TrainingStats,
    UpdateHooks,
    check_finite_loss,
)
from tshtrain.algorithm.normalization import RunningObsNormalizer
from tshtrain.algorithm.onpolicy import (
    ActorCritic,
    ActorCriticParams,
    ActorPolicy,
    RolloutTensors,
    explained_variance,
    log_prob_entropy,
    minibatches,
    normalize_advantages,
    prepare_rollout,
    value_loss,
)
from tshtrain.algorithm.schedules import schedule_factor
from tshtrain.data.batch import RolloutBatch


@final
@dataclass(frozen=True, kw_only=True)
class A2CParams(ActorCriticParams):
    """Hyperparameters of :class:`A2C` (all in :class:`ActorCriticParams`)."""


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
class A2C(OnPolicyAlgorithm[ActorPolicy]):
    """Advantage actor-critic with a separate critic, for a :class:`CategoricalPolicy` (Discrete
    actions) or a :class:`GaussianPolicy` (Box actions).

    Each update computes values and GAE advantages once, then takes one Adam step per mini-batch
    (``batch_size=None`` and ``num_repetitions=1``, the classic A2C: one step on the whole rollout) on
    ``policy_loss + vf_coef * value_loss - ent_coef * entropy``.
    """

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        critic: nn.Module,
        params: A2CParams | None = None,
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
        self.params = params or A2CParams()
        self.critic = critic
        self.ac = ActorCritic(
            owner="A2C",
            policy=policy,
            critic=critic,
            lr=self.params.lr,
            obs_normalizer=obs_normalizer,
            seed=seed,
        )

    @override
    def components(self) -> dict[str, Stateful]:
        return self.ac.components()

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.ac.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.ac.load_extra_state(state)

    @override
    def update(
        self,
        rollout: RolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> TrainingStats:
        params = self.params
        lr = params.lr * schedule_factor(params.lr_schedule, self.ac.num_update_steps)
        self.ac.set_lr(lr)
        data = prepare_rollout(self.ac, rollout, gamma=params.gamma, gae_lambda=params.gae_lambda)
        rows = [
            self._gradient_step(data, idx, hooks)
            for idx in minibatches(len(data), batch_size, num_repetitions, self.ac.rng)
        ]
        means = torch.stack(rows).mean(dim=0)
        check_finite_loss("A2C", "policy loss", means[1])
        check_finite_loss("A2C", "value loss", means[2])
        self.ac.finish_update(data.obs)
        ev = explained_variance(data.value_old, data.returns)
        loss, policy_loss, value_loss_, entropy, approx_kl, grad_norm, explained_var = torch.cat(
            [means, ev.reshape(1)]
        ).tolist()
        return A2CTrainingStats(
            num_gradient_steps=len(rows),
            loss=loss,
            policy_loss=policy_loss,
            value_loss=value_loss_,
            entropy=entropy,
            approx_kl=approx_kl,
            explained_variance=explained_var,
            grad_norm=grad_norm,
            lr=lr,
        )

    def _gradient_step(self, data: RolloutTensors, idx: torch.Tensor, hooks: UpdateHooks) -> torch.Tensor:
        """One Adam step on a mini-batch; returns its detached statistics
        (loss, policy loss, value loss, entropy, approx KL, grad norm)."""
        params = self.params
        logp, entropy = log_prob_entropy(self.policy, data.obs[idx], data.act[idx])
        adv = data.advantages[idx]
        if params.advantage_normalization:
            adv = normalize_advantages(adv)
        policy_loss = -(adv * logp).mean()
        value = self.ac.values(data.obs[idx])
        v_loss = value_loss(value, data.value_old[idx], data.returns[idx], None)
        mean_entropy = entropy.mean()
        loss = policy_loss + params.vf_coef * v_loss - params.ent_coef * mean_entropy
        reported = {"loss": loss, "policy loss": policy_loss, "value loss": v_loss}
        grad_norm = self.ac.gradient_step(loss, reported, hooks, params.max_grad_norm)
        with torch.no_grad():
            log_ratio = logp - data.logp_old[idx]
            approx_kl = (torch.expm1(log_ratio) - log_ratio).mean()
            return torch.stack([loss, policy_loss, v_loss, mean_entropy, approx_kl, grad_norm]).detach()
