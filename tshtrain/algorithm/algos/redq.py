"""Randomized ensembled double Q-learning (REDQ, Chen et al. 2021), for Box actions.

REDQ is SAC with an ensemble of ``N`` critics and a high update-to-data ratio ``G``:

* critics: every ``Q_i(o, a)`` of the ensemble regresses towards one shared target computed from a
  random subset ``S`` of ``M`` target critics, drawn anew in each gradient step,
  ``y = R + D * (min_{i in S} Q_targ_i(o', a') - alpha * log pi(a'|o'))``, ``a' ~ pi(.|o')``
  (``target_mode=REDQTarget.MEAN`` averages over ``S`` instead of taking the minimum);
* actor: every ``actor_delay``-th gradient step, minimise
  ``mean(alpha * log pi(a|o) - mean_{i=1..N} Q_i(o, a))``, ``a ~ pi(.|o)`` reparameterised (the mean
  over the *whole* ensemble, not the minimum), followed by a step of ``log(alpha)`` when it is learned;
* a Polyak update of the target critics after every gradient step.

``G`` is not a parameter of the algorithm: it is the trainer's
``update_step_num_gradient_steps_per_sample`` (gradient steps per collected env step). The paper updates
the actor once per env step, i.e. ``actor_delay = G``.
"""

from __future__ import annotations

import enum
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
    seeded_generator,
)
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
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError


class REDQTarget(enum.Enum):
    """How REDQ reduces the random subset of target critics to one target value."""

    MIN = "min"
    """the minimum over the subset (the paper, Tianshou's default)"""
    MEAN = "mean"
    """the mean over the subset"""


@final
@dataclass(frozen=True, kw_only=True)
class REDQParams(OffPolicyActorCriticParams):
    """Hyperparameters of :class:`REDQ` (besides those of :class:`OffPolicyActorCriticParams`;
    Tianshou 2.0.1's defaults). The ensemble size ``N`` is the critic's ``num_critics``; the
    update-to-data ratio ``G`` is the trainer's ``update_step_num_gradient_steps_per_sample``."""

    alpha_lr: PositiveFloat = 3e-4
    """Adam learning rate of log(alpha) (auto_alpha=True only)"""
    alpha: PositiveFloat = 0.2
    """entropy coefficient: constant with auto_alpha=False, the starting value with auto_alpha=True"""
    auto_alpha: bool = False
    """tune alpha so that the policy's entropy tracks target_entropy (Tianshou: a fixed 0.2 unless an
    AutoAlpha is passed; the REDQ paper tunes it)"""
    target_entropy: FiniteFloat | None = None
    """entropy target of auto_alpha; None: -(number of action dimensions)"""
    subset_size: PositiveInt = 2
    """M: target critics drawn (without replacement) per gradient step; at most the ensemble size"""
    target_mode: REDQTarget = REDQTarget.MIN
    """how the subset's target values are reduced"""
    actor_delay: PositiveInt = 20
    """gradient steps of the critics per step of the actor and of alpha; set it to the trainer's
    update_step_num_gradient_steps_per_sample for the paper's one actor step per env step"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.target_mode, REDQTarget):
            raise ConfigurationError(
                f"REDQParams.target_mode must be a REDQTarget (REDQTarget.MIN or REDQTarget.MEAN), got "
                f"{self.target_mode!r}."
            )


@dataclass(frozen=True, kw_only=True)
class REDQTrainingStats(TrainingStats):
    """Statistics of REDQ gradient steps."""

    critic_loss: float = 0.0
    """sum over the N critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """alpha * log pi(a|o) - mean_i Q_i(o, a) at the latest actor step"""
    alpha_loss: float = 0.0
    """-log(alpha) * mean(log pi + target_entropy) at the latest actor step (0 without auto_alpha)"""
    alpha: float = 0.0
    """entropy coefficient used in the step"""
    q_mean: float = 0.0
    """mean Q_i(o, a) of the sampled transitions over the ensemble"""
    q_std: float = 0.0
    """standard deviation over the ensemble of Q_i(o, a), averaged over the transitions"""
    entropy: float = 0.0
    """-mean log pi(a|o) of the fresh actions at the latest actor step"""


def ensemble_size_of(critic: nn.Module) -> int:
    """The critic's ``num_critics`` (as :class:`~tshtrain.algorithm.QEnsemble` has it)."""
    num_critics = getattr(critic, "num_critics", None)
    if not isinstance(num_critics, int) or num_critics < 1:
        raise ConfigurationError(
            f"REDQ: the critic needs an int attribute num_critics >= 1 (the ensemble size N), got "
            f"{num_critics!r} on {type(critic).__name__}; use QEnsemble(obs_dim, act_dim, num_critics=10)."
        )
    return num_critics


def subset_target_values(q_next_MN: torch.Tensor, subset_S: torch.Tensor, mode: REDQTarget) -> torch.Tensor:
    """The target critics' values ``q_next_MN`` (one row per critic) reduced over the rows in
    ``subset_S`` by ``mode``: shape (N,)."""
    q_SN = q_next_MN.index_select(0, subset_S)
    if mode is REDQTarget.MIN:
        return q_SN.min(dim=0).values
    return q_SN.mean(dim=0)


@final
class REDQ(OffPolicyAlgorithm[TanhGaussianPolicy, REDQTrainingStats]):
    """REDQ: SAC's actor on an ensemble of N critics, the TD target from a random subset of M of them.

    See the module docstring for the losses. The random subsets come from the algorithm's generator and
    the actions from the policy's; both generators are saved with the algorithm.
    """

    def __init__(
        self,
        *,
        policy: TanhGaussianPolicy,
        critic: nn.Module,
        params: REDQParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the actor.
        critic: ``critic(obs, act)`` -> (N, batch) with an int attribute ``num_critics`` = N, e.g.
            ``QEnsemble(obs_dim, act_dim, num_critics=10)`` (one batched network for the ensemble).
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of every network
            reading observations; updated after every update with its batch's observations.
        seed: seeds the generator of the random critic subsets.
        """
        super().__init__(policy=policy)
        self.params = p = params or REDQParams()
        self.ensemble_size = ensemble_size_of(critic)
        if p.subset_size > self.ensemble_size:
            raise ConfigurationError(
                f"REDQParams.subset_size={p.subset_size} exceeds the critic's ensemble size "
                f"num_critics={self.ensemble_size}; allowed: 1 <= subset_size <= num_critics."
            )
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
        self.generator = seeded_generator(seed, policy.device)
        """draws the random subsets of target critics"""
        self.num_gradient_steps = 0
        zero = torch.zeros((), device=policy.device)
        self._actor_loss, self._alpha_loss, self._entropy = zero, zero.clone(), zero.clone()

    @override
    def extra_state(self) -> dict[str, Any]:
        return {
            "log_alpha": self.temperature.state(),
            "num_gradient_steps": self.num_gradient_steps,
            "last_actor_step": torch.stack([self._actor_loss, self._alpha_loss, self._entropy]),
        }

    @override
    def load_extra_state(self, state: Any) -> None:
        self.temperature.load_state(state["log_alpha"])
        self.num_gradient_steps = int(state["num_gradient_steps"])
        last = state["last_actor_step"].to(self.device, copy=True)
        self._actor_loss, self._alpha_loss, self._entropy = last[0], last[1], last[2]

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return self.temperature.alpha

    @torch.no_grad()
    def td_target(self, batch: ReplaySample, alpha: torch.Tensor) -> torch.Tensor:
        """``R + D * (reduce_{i in S} Q_targ_i(o', a') - alpha * log pi(a'|o'))`` for a fresh random
        subset ``S`` of ``subset_size`` target critics, ``a' ~ pi(.|o')``."""
        act_next, log_prob_next = self.policy.sample(batch.obs_next)
        q_next_MN = critic_values(self.nets.target_critic.net, batch.obs_next, act_next)
        subset_S = torch.randperm(self.ensemble_size, generator=self.generator, device=self.generator.device)
        q_next_N = subset_target_values(
            q_next_MN, subset_S[: self.params.subset_size].to(q_next_MN.device), self.params.target_mode
        )
        return batch.returns + batch.discounts * (q_next_N - alpha * log_prob_next)

    def _actor_step(self, batch: ReplaySample, alpha: torch.Tensor, hooks: UpdateHooks) -> None:
        with self.nets.frozen_critic():
            act, log_prob = self.policy.sample(batch.obs)
            q_new_N = critic_values(self.nets.critic, batch.obs, act).mean(dim=0)
            actor_loss = (alpha * log_prob - q_new_N).mean()
            self.nets.actor_step({"actor loss": actor_loss}, hooks)
        alpha_loss = torch.zeros((), device=actor_loss.device)
        if self.temperature.learned:
            alpha_loss = self.temperature.loss_from_log_prob(log_prob)
            self.temperature.step(alpha_loss, hooks)
        self._actor_loss, self._alpha_loss = actor_loss.detach(), alpha_loss.detach()
        self._entropy = -log_prob.detach().mean()

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> REDQTrainingStats:
        self.lrs.begin_update()
        p = self.params
        alpha = self.temperature.value()
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=self.policy.device, hooks=hooks
        )
        target_N = self.td_target(batch, alpha)
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        critic = td_loss(q_MN, target_N, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)
        self.num_gradient_steps += 1
        if self.num_gradient_steps % p.actor_delay == 0:
            self._actor_step(batch, alpha, hooks)
        self.nets.update_targets(p.tau)
        stats = gradient_step_stats(
            REDQTrainingStats,
            "REDQ",
            {
                "critic_loss": critic.loss,
                "actor_loss": self._actor_loss,
                "alpha_loss": self._alpha_loss,
                "alpha": alpha,
                "q_mean": q_MN.mean(),
                "q_std": q_MN.detach().std(dim=0).mean() if self.ensemble_size > 1 else q_MN.new_zeros(()),
                "entropy": self._entropy,
            },
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss", "alpha_loss": "alpha loss"},
            deferred=self.defers_stats,
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return stats
