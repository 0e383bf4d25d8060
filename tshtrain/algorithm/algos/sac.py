"""Soft actor-critic (Haarnoja et al. 2018) with automatic entropy tuning, for Box actions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.continuous import TanhGaussianPolicy, critic_values
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    ReplaySample,
    sample_replay,
    td_loss,
    update_priorities,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams, setup_actor_critic
from tshtrain.algorithm.blocks.temperature import box_temperature
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.constraints import FiniteFloat, PositiveFloat, PositiveInt
from tshtrain.data.batch import ObsTensor
from tshtrain.data.collector_base import AnyReplayBuffer


@final
@dataclass(frozen=True, kw_only=True)
class SACParams(OffPolicyActorCriticParams):
    """Hyperparameters of :class:`SAC` (besides those of :class:`OffPolicyActorCriticParams`)."""

    alpha_lr: PositiveFloat = 1e-3
    """Adam learning rate of log(alpha) (auto_alpha=True only)"""
    alpha: PositiveFloat = 1.0
    """entropy coefficient: constant with auto_alpha=False, the starting value with auto_alpha=True"""
    auto_alpha: bool = True
    """tune alpha so that the policy's entropy tracks target_entropy"""
    target_entropy: FiniteFloat | None = None
    """entropy target of auto_alpha; None: -(number of action dimensions)"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class SACTrainingStats(TrainingStats):
    """Statistics of SAC gradient steps."""

    critic_loss: float = 0.0
    """sum over the critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """mean of alpha * log pi(a|o) - min_i Q_i(o, a) for fresh actions a"""
    alpha_loss: float = 0.0
    """-log(alpha) * mean(log pi + target_entropy) (0 without auto_alpha)"""
    alpha: float = 0.0
    """entropy coefficient used in the step"""
    q_mean: float = 0.0
    """mean Q_i(o, a) of the sampled transitions over the critics"""
    entropy: float = 0.0
    """-mean log pi(a|o) of the fresh actions (a single-sample entropy estimate)"""


@torch.no_grad()
def soft_td_target(
    policy: TanhGaussianPolicy, nets: ActorCriticTargets, sample: ReplaySample, alpha: torch.Tensor
) -> torch.Tensor:
    """``R + D * (min_i Q_targ_i(o', a') - alpha * log pi(a'|o'))`` with ``a' ~ pi(.|o')`` (SAC, CQL)."""
    act_next, log_prob_next = policy.sample(sample.obs_next)
    q_next = critic_values(nets.target_critic.net, sample.obs_next, act_next).min(dim=0).values
    return sample.returns + sample.discounts * (q_next - alpha * log_prob_next)


def soft_actor_step(
    policy: TanhGaussianPolicy,
    nets: ActorCriticTargets,
    obs: ObsTensor,
    alpha: torch.Tensor,
    hooks: UpdateHooks,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One actor step on ``mean(alpha * log pi(a|o) - min_i Q_i(o, a))``, ``a ~ pi(.|o)``
    reparameterised, the critics' weights frozen (SAC, CQL); returns the loss and the log pi."""
    with nets.frozen_critic():
        act, log_prob = policy.sample(obs)
        q_new = critic_values(nets.critic, obs, act).min(dim=0).values
        actor_loss = (alpha * log_prob - q_new).mean()
        nets.actor_step({"actor loss": actor_loss}, hooks)
    return actor_loss, log_prob


@final
class SAC(OffPolicyAlgorithm[TanhGaussianPolicy, SACTrainingStats]):
    """Soft actor-critic with clipped double-Q targets and (optionally) automatic entropy tuning.

    Each :meth:`update` is one gradient step of the critics, the actor and ``log(alpha)``, in this
    order (as CleanRL), followed by a Polyak update of the target critics:

    * critics: regress every ``Q_i(o, a)`` towards
      ``y = R + D * (min_i Q_targ_i(o', a') - alpha * log pi(a'|o'))``, ``a' ~ pi(.|o')``, where
      ``R`` / ``D`` are the (n-step) return and discount (``gamma^m``, 0 after a terminal state);
    * actor: minimise ``mean(alpha * log pi(a|o) - min_i Q_i(o, a))``, ``a ~ pi(.|o)`` reparameterised
      (the critics' weights get no gradient from this);
    * alpha: minimise ``-log(alpha) * mean(log pi(a|o) + target_entropy)``.

    Samples come from the policy's generator; its state is saved with the algorithm (as every
    generator of an algorithm and its policy is, by :meth:`Algorithm.state_dict`).
    """

    def __init__(
        self,
        *,
        policy: TanhGaussianPolicy,
        critic: nn.Module,
        params: SACParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        """Args:
        policy: the actor.
        critic: ``critic(obs, act)`` -> (num_critics, N), e.g. ``QEnsemble(obs_dim, act_dim)``.
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of every network
            reading observations; updated after every update with its batch's observations.
        """
        super().__init__(policy=policy)
        self.params = p = params or SACParams()
        self.temperature = box_temperature(p, act_dim=policy.act_dim, device=policy.device)
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=policy.actor,
            critic=critic,
            params=p,
            target_actor=False,
            obs_normalizer=obs_normalizer,
            extra_optimizers={"alpha_optim": self.temperature.optim},
        )

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"log_alpha": self.temperature.state()}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.temperature.load_state(state["log_alpha"])

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return self.temperature.alpha

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> SACTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        alpha = self.temperature.value()
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=policy.device, hooks=hooks
        )
        target = soft_td_target(policy, self.nets, batch, alpha)
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        actor_loss, log_prob = soft_actor_step(policy, self.nets, batch.obs, alpha, hooks)

        alpha_loss = torch.zeros((), device=actor_loss.device)
        if self.temperature.learned:
            alpha_loss = self.temperature.loss_from_log_prob(log_prob)
            self.temperature.step(alpha_loss, hooks)
        self.nets.update_targets(p.tau)
        stats = gradient_step_stats(
            SACTrainingStats,
            "SAC",
            {
                "critic_loss": critic.loss,
                "actor_loss": actor_loss,
                "alpha_loss": alpha_loss,
                "alpha": alpha,
                "q_mean": q_MN.mean(),
                "entropy": -log_prob.mean(),
            },
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss", "alpha_loss": "alpha loss"},
            deferred=self.defers_stats,
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return stats
