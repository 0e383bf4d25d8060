"""Conservative Q-learning (Kumar et al. 2020), CQL(H) on top of SAC, for Box actions (offline).

The critics of SAC are trained with an extra conservative penalty that pushes Q down on actions the
policy or a uniform distribution would pick and up on the dataset's actions:

    penalty_i = cql_weight * ( T * logsumexp_k( Q_i(o, a_k) / T - log mu(a_k) ... ) - Q_i(o, a_data) ),

the log-sum-exp taken over ``num_sampled_actions`` uniformly random actions, the same number of policy
actions at ``o`` and at ``o'`` (each importance-corrected by its log-density, as in the authors' code).
With ``with_lagrange=True`` the weight is tuned (CQL-Lagrange) so that the penalty stays near
``lagrange_threshold``, clamped to ``[cql_weight_min, cql_weight_max]``. With ``calibrated=True``
(Cal-QL, Nakamoto et al. 2023) every sampled value in the log-sum-exp is first raised to at least the
dataset's discounted return-to-go from ``o`` (:mod:`~tshtrain.algorithm.blocks.calibration`).

Actions live in the policy's ``[-1, 1]`` space, as for the other continuous algorithms: the policy maps
them onto the Box bounds when acting, the dataset must store them in that space (checked when the run
starts) and the uniform actions of the penalty are drawn from ``[-1, 1]`` (Tianshou's ``min_action`` /
``max_action`` after its action scaling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, final

import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.algos.sac import soft_actor_step, soft_td_target
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
    TrainingStats,
    UpdateHooks,
    make_adam,
)
from tshtrain.algorithm.blocks.calibration import DatasetReturns
from tshtrain.algorithm.blocks.continuous import TanhGaussianPolicy, critic_values
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    host_scalars,
    sample_replay,
    td_loss,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams, setup_actor_critic
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.temperature import box_temperature
from tshtrain.constraints import FiniteFloat, NonNegativeFloat, PositiveFloat, PositiveInt
from tshtrain.data.batch import ObsTensor
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


@final
@dataclass(frozen=True, kw_only=True)
class CQLParams(OffPolicyActorCriticParams):
    """Hyperparameters of :class:`CQL` (besides those of :class:`OffPolicyActorCriticParams`, with
    other learning-rate defaults)."""

    actor_lr: PositiveFloat = 1e-4
    """Adam learning rate of the actor (the base's field with CQL's default)"""
    critic_lr: PositiveFloat = 3e-4
    """Adam learning rate of the critics (the base's field with CQL's default)"""
    alpha_lr: PositiveFloat = 3e-4
    """Adam learning rate of log(alpha), the entropy coefficient (auto_alpha=True only)"""
    alpha: PositiveFloat = 0.2
    """entropy coefficient: constant with auto_alpha=False, the starting value with auto_alpha=True"""
    auto_alpha: bool = True
    """tune alpha so that the policy's entropy tracks target_entropy"""
    target_entropy: FiniteFloat | None = None
    """entropy target of auto_alpha; None: -(number of action dimensions)"""
    cql_weight: NonNegativeFloat = 5.0
    """weight of the conservative penalty (its starting value with with_lagrange=True, which needs it
    > 0); 0 turns CQL into SAC, 1 to 10 is usual"""
    temperature: PositiveFloat = 1.0
    """temperature T of the log-sum-exp"""
    num_sampled_actions: PositiveInt = 10
    """random actions, and policy actions at o and at o', sampled per transition for the log-sum-exp"""
    with_lagrange: bool = False
    """tune the penalty weight by dual gradient descent so that the penalty tracks lagrange_threshold"""
    lagrange_threshold: FiniteFloat = 10.0
    """target of the (unweighted) penalty minus its threshold with with_lagrange=True"""
    cql_weight_lr: PositiveFloat = 3e-4
    """Adam learning rate of log(cql_weight) (with_lagrange=True only)"""
    cql_weight_min: NonNegativeFloat = 0.0
    """lower clamp of the tuned cql_weight (with_lagrange=True only); Tianshou's ``alpha_min`` (its name
    for this multiplier is cql alpha; here ``alpha`` is the entropy coefficient)"""
    cql_weight_max: PositiveFloat = 1e6
    """upper clamp of the tuned cql_weight (with_lagrange=True only); Tianshou's ``alpha_max``"""
    calibrated: bool = False
    """Cal-QL: raise each sampled (importance-corrected) value of the log-sum-exp to at least the
    discounted Monte-Carlo return-to-go of the dataset from the same observation, computed once when
    the run starts (episodes cut by truncation or by the end of the data are summed up to the cut).
    Tianshou's CQL has this on by default; here it is off, plain CQL"""
    max_grad_norm: PositiveFloat | None = None
    """clip the gradient norm of the critics' step (over all critics' parameters together; Tianshou
    clips each of its two critics to 1.0 by default); None: no clipping"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()
        if self.with_lagrange and self.cql_weight == 0:
            raise ConfigurationError(
                "CQLParams.cql_weight=0 cannot be tuned with with_lagrange=True (log(0)); start it at "
                "a positive value, e.g. 1.0."
            )
        if self.cql_weight_min > self.cql_weight_max:
            raise ConfigurationError(
                f"CQLParams.cql_weight_min={self.cql_weight_min!r} is above cql_weight_max="
                f"{self.cql_weight_max!r}; the clamp needs cql_weight_min <= cql_weight_max."
            )


@dataclass(frozen=True, kw_only=True)
class CQLTrainingStats(TrainingStats):
    """Statistics of CQL gradient steps."""

    critic_loss: float = 0.0
    """sum over the critics of the mean squared TD error plus the weighted conservative penalty"""
    td_loss: float = 0.0
    """sum over the critics of the mean squared TD error"""
    cql_penalty: float = 0.0
    """sum over the critics of logsumexp(Q(o, sampled)) - Q(o, a_data), unweighted"""
    cql_weight: float = 0.0
    """weight of the penalty used in the step"""
    actor_loss: float = 0.0
    """mean of alpha * log pi(a|o) - min_i Q_i(o, a) for fresh actions a"""
    alpha: float = 0.0
    """entropy coefficient used in the step"""
    q_mean: float = 0.0
    """mean Q_i(o, a_data) over the critics"""


def conservative_penalty(
    q_data_MN: torch.Tensor, q_sampled_MNK: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Per critic, ``mean_N( T * logsumexp_K(q_sampled / T) - q_data )``, shape (M,).

    ``q_sampled_MNK`` holds the (importance-corrected) values of K sampled actions per transition.
    """
    lse_MN = torch.logsumexp(q_sampled_MNK / temperature, dim=-1) * temperature
    return (lse_MN - q_data_MN).mean(dim=1)


def check_unit_actions(owner: str, buffer: BaseReplayBuffer) -> None:
    """ConfigurationError unless every stored action lies in the policy's ``[-1, 1]`` space (what a
    collector stores; a dataset of env actions must be mapped first)."""
    if len(buffer) == 0:
        return
    act = buffer.field_at("act", buffer.chronological_indices())
    low, high = float(act.min()), float(act.max())
    if low < -1.0 - 1e-6 or high > 1.0 + 1e-6:
        raise ConfigurationError(
            f"{owner}: the dataset's actions range over [{low:.4g}, {high:.4g}]; the policy and the "
            "penalty's uniform actions live in [-1, 1] (mapped onto the env's Box bounds when acting). "
            "Store actions in that space: minari_to_buffer(..., action_scaling=True), or "
            "policy.map_action_inverse(env_actions) for a hand-made dataset."
        )


def _repeat(obs: ObsTensor, num: int) -> torch.Tensor:
    if not isinstance(obs, torch.Tensor):
        raise UnsupportedSpaceError("CQL takes array observations (it repeats them per sampled action).")
    return obs.repeat_interleave(num, dim=0)


@final
class CQL(OfflineAlgorithm[TanhGaussianPolicy, CQLTrainingStats]):
    """CQL(H) with SAC's actor, twin critics and (optional) automatic entropy tuning.

    Each :meth:`update` is one gradient step of the critics on ``TD loss + cql_weight * penalty`` (see
    the module docstring), of the actor and ``log(alpha)`` as in SAC, of ``log(cql_weight)`` with
    ``with_lagrange=True`` (ascending ``cql_weight * (penalty - lagrange_threshold)``), and a Polyak
    update of the target critics. Samples come from the policy's generator, saved with the algorithm.
    """

    def __init__(
        self,
        *,
        policy: TanhGaussianPolicy,
        critic: nn.Module,
        params: CQLParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        """Args:
        policy: the actor.
        critic: ``critic(obs, act)`` -> (num_critics, N), e.g. ``QEnsemble(obs_dim, act_dim)``.
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of every network
            reading observations; fitted to the dataset in :meth:`process_buffer`.
        """
        super().__init__(policy=policy)
        self.params = p = params or CQLParams()
        self.temperature = box_temperature(p, act_dim=policy.act_dim, device=policy.device)
        initial_weight = math.log(p.cql_weight) if p.with_lagrange else 0.0
        self.log_cql_weight = nn.Parameter(torch.tensor(initial_weight, device=policy.device))
        self.log_cql_weight.requires_grad_(p.with_lagrange)
        self.cql_weight_optim = make_adam([self.log_cql_weight], lr=p.cql_weight_lr)
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=policy.actor,
            critic=critic,
            params=p,
            target_actor=False,
            obs_normalizer=obs_normalizer,
            extra_optimizers={
                "alpha_optim": self.temperature.optim,
                "cql_weight_optim": self.cql_weight_optim,
            },
        )
        self.dataset_returns: DatasetReturns | None = None
        """the dataset's returns-to-go (``calibrated=True``; set by :meth:`process_buffer`)"""

    @override
    def extra_state(self) -> dict[str, Any]:
        return {
            "log_alpha": self.temperature.state(),
            "log_cql_weight": self.log_cql_weight.detach().clone(),
        }

    @override
    def load_extra_state(self, state: Any) -> None:
        self.temperature.load_state(state["log_alpha"])
        with torch.no_grad():
            self.log_cql_weight.copy_(state["log_cql_weight"])

    def _cql_weight(self) -> torch.Tensor:
        p = self.params
        if p.with_lagrange:
            return self.log_cql_weight.exp().clamp(p.cql_weight_min, p.cql_weight_max)
        return torch.tensor(self.params.cql_weight, device=self.policy.device)

    def _sampled_values(
        self, obs: ObsTensor, obs_next: ObsTensor, lower_bound_N: torch.Tensor | None
    ) -> torch.Tensor:
        """Critic values of K uniform actions and K policy actions at o and at o', (M, N, 3K), each
        importance-corrected and, with ``lower_bound_N`` (Cal-QL), raised to at least it."""
        policy, num = self.policy, self.params.num_sampled_actions
        obs_NK, obs_next_NK = _repeat(obs, num), _repeat(obs_next, num)
        n = len(obs_NK) // num
        with torch.no_grad():
            act_cur, log_prob_cur = policy.sample(obs_NK)
            act_next, log_prob_next = policy.sample(obs_next_NK)
        act_rand = (
            torch.rand(act_cur.shape, generator=policy.generator, dtype=act_cur.dtype, device=act_cur.device)
            * 2.0
            - 1.0
        )
        log_density_rand = policy.act_dim * math.log(0.5)
        parts = [
            critic_values(self.nets.critic, obs_NK, act_rand) - log_density_rand,
            critic_values(self.nets.critic, obs_NK, act_cur) - log_prob_cur,
            critic_values(self.nets.critic, obs_NK, act_next) - log_prob_next,
        ]
        q_MNK = torch.cat([part.reshape(part.shape[0], n, num) for part in parts], dim=-1)
        if lower_bound_N is not None:
            q_MNK = torch.maximum(q_MNK, lower_bound_N.to(q_MNK.dtype)[None, :, None])
        return q_MNK

    @override
    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        """Check that the dataset's actions lie in ``[-1, 1]``, fit the observation normaliser (if
        any) and, with ``calibrated=True``, compute the dataset's returns-to-go."""
        check_unit_actions("CQL", buffer)
        if self.obs_normalization.fit(buffer):
            self.nets.hard_update_targets()  # the targets take the statistics too
        if self.params.calibrated:
            self.dataset_returns = DatasetReturns(buffer, self.params.gamma, self.policy.device)

    def _lower_bound(self, indices: np.ndarray | torch.Tensor) -> torch.Tensor | None:
        """Cal-QL's lower bound of the sampled transitions (None unless ``calibrated``)."""
        if not self.params.calibrated:
            return None
        if self.dataset_returns is None:
            raise ConfigurationError(
                "CQL(calibrated=True) needs the dataset's returns: call process_buffer(buffer) before "
                "update (the OfflineTrainer does), or set calibrated=False."
            )
        return self.dataset_returns.at(indices)

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> CQLTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        alpha = self.temperature.value()
        batch = sample_replay(buffer, batch_size, gamma=p.gamma, n_step=1, device=policy.device, hooks=hooks)
        target = soft_td_target(policy, self.nets, batch, alpha)
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        td = td_loss(q_MN, target, batch.weight)
        sampled_MNK = self._sampled_values(batch.obs, batch.obs_next, self._lower_bound(batch.indices))
        penalty_M = conservative_penalty(q_MN, sampled_MNK, p.temperature)
        cql_weight = self._cql_weight()
        penalty = penalty_M.detach().sum()  # reported unweighted, before the Lagrange threshold
        if p.with_lagrange:
            penalty_M = penalty_M - p.lagrange_threshold
        critic_loss = td.loss + (cql_weight.detach() * penalty_M).sum()
        optimizer_step(
            self.nets.critic_optim,
            "critic_optim",
            {"critic loss": critic_loss},
            hooks,
            params=self.nets.critic_params if p.max_grad_norm is not None else None,
            max_grad_norm=p.max_grad_norm,
        )

        weight_loss = torch.zeros((), device=critic_loss.device)
        if p.with_lagrange:
            weight_loss = -(cql_weight * penalty_M.detach()).sum()
            optimizer_step(self.cql_weight_optim, "cql_weight_optim", {"cql weight loss": weight_loss}, hooks)

        actor_loss, log_prob = soft_actor_step(policy, self.nets, batch.obs, alpha, hooks)
        if self.temperature.learned:
            self.temperature.step(self.temperature.loss_from_log_prob(log_prob), hooks)
        self.nets.update_targets(p.tau)
        stats = host_scalars(
            "CQL",
            {
                "critic loss": critic_loss,
                "td loss": td.loss,
                "cql penalty": penalty,
                "cql weight": cql_weight,
                "actor loss": actor_loss,
                "cql weight loss": weight_loss,
                "alpha": alpha,
                "q_mean": q_MN.mean(),
            },
            losses=("critic loss", "actor loss", "cql weight loss"),
        )
        return CQLTrainingStats(
            critic_loss=stats["critic loss"],
            td_loss=stats["td loss"],
            cql_penalty=stats["cql penalty"],
            cql_weight=stats["cql weight"],
            actor_loss=stats["actor loss"],
            alpha=stats["alpha"],
            q_mean=stats["q_mean"],
        )
