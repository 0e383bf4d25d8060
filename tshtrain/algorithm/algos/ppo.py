"""PPO (Schulman et al. 2017): the clipped surrogate objective with GAE advantages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, final

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
from tshtrain.algorithm.blocks.return_scaling import ReturnScale
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule, schedule_factor
from tshtrain.constraints import Constraint, PositiveFloat
from tshtrain.data.batch import AnyRolloutBatch

DualClipFloat = Annotated[float, Constraint(gt=1.0, description="a finite number > 1")]
"""the dual-clip constant c of PPO: a finite number > 1"""


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
    dual_clip: DualClipFloat | None = None
    """dual-clip PPO (Ye et al. 2020): where the advantage is negative, the clipped surrogate objective
    is bounded below by ``dual_clip * advantage`` (so a step whose ratio has grown far above 1 + eps
    stops pushing it down without limit); > 1, e.g. 3.0; None: off. As Tianshou's ``dual_clip``"""
    recompute_advantage: bool = False
    """recompute the values, GAE advantages and returns with the current critic before every
    repetition after the first (Andrychowicz et al. 2020, sec. 3.5); the old log-probabilities stay
    those of the policy that collected the rollout. As Tianshou's ``recompute_advantage``"""
    return_scaling: bool = False
    """the critic learns values divided by the running standard deviation of the returns (not
    centred): value targets are ``returns / s``, GAE uses ``s * critic(o)``, so the advantages keep
    reward units; ``s`` starts at 1 and merges each update's returns after its first preparation.
    As Tianshou's ``return_scaling``"""

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
    one Adam step each on ``policy_loss + vf_coef * value_loss - ent_coef * entropy``. Options of
    :class:`PPOParams`: ``dual_clip``, ``recompute_advantage`` (values and advantages again before each
    repetition) and ``return_scaling`` (value targets in units of the running return std).
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
        """See :class:`~tshtrain.algorithm.blocks.onpolicy.ActorCriticAlgorithm`."""
        super().__init__(
            policy=policy,
            critic=critic,
            params=params,
            obs_normalizer=obs_normalizer,
            seed=seed,
        )
        self.return_scale = ReturnScale() if self.params.return_scaling else None
        """the running std of the returns (``return_scaling=True``), else None"""

    @classmethod
    @override
    def default_params(cls) -> PPOParams:
        return PPOParams()

    @override
    def extra_state(self) -> dict[str, Any]:
        state = self.ac.extra_state()
        if self.return_scale is not None:
            state["return_scale"] = self.return_scale.state()
        return state

    @override
    def load_extra_state(self, state: Any) -> None:
        self.ac.load_extra_state(state)
        if self.return_scale is not None and "return_scale" in state:
            self.return_scale.load_state(state["return_scale"])

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
            recompute_advantage=params.recompute_advantage,
            return_scale=self.return_scale,
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
        policy_loss = clipped_surrogate_loss(ratio, adv, clip, params.dual_clip)
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


def clipped_surrogate_loss(
    ratio_N: torch.Tensor, adv_N: torch.Tensor, clip: float, dual_clip: float | None
) -> torch.Tensor:
    """PPO's policy loss: the mean over steps of ``-min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``;
    with ``dual_clip = c``, where ``A < 0`` the objective is ``max(that minimum, c * A)`` (dual clip)."""
    loss_N = torch.maximum(-adv_N * ratio_N, -adv_N * ratio_N.clamp(1.0 - clip, 1.0 + clip))
    if dual_clip is not None:
        loss_N = torch.where(adv_N < 0, torch.minimum(loss_N, -dual_clip * adv_N), loss_N)
    return loss_N.mean()
