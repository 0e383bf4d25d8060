"""PPO (Schulman et al. 2017): the clipped surrogate objective with GAE advantages."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
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
    TimeoutBootstrap,
    log_prob_entropy,
    normalize_advantages,
    value_loss,
)
from tshtrain.algorithm.blocks.onpolicy_update import (
    KLRule,
    LossTerms,
    UpdateOptions,
    UpdateResult,
    actor_critic_update,
    check_stackable,
    stacked_actor_critic_update,
)
from tshtrain.algorithm.blocks.return_scaling import ReturnScale
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule, schedule_factor
from tshtrain.constraints import Constraint, PositiveFloat
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.errors import ConfigurationError

DualClipFloat = Annotated[float, Constraint(gt=1.0, description="a finite number > 1")]
"""the dual-clip constant c of PPO: a finite number > 1"""
AboveOneFloat = Annotated[float, Constraint(gt=1.0, description="a finite number > 1")]
"""a factor that must change what it multiplies: a finite number > 1"""


class AdvantageScope(enum.Enum):
    """Over which steps ``advantage_normalization`` standardises the advantages."""

    MINIBATCH = "minibatch"
    """each mini-batch on its own (Tianshou, Stable-Baselines3, CleanRL)"""
    ROLLOUT = "rollout"
    """the whole rollout, once per update (rsl_rl; before each repetition with recompute_advantage)"""


class GradClipScope(enum.Enum):
    """Over which parameters ``max_grad_norm`` clips the gradient norm."""

    TOGETHER = "together"
    """one norm over the actor's and the critic's parameters"""
    PER_NETWORK = "per_network"
    """the actor's norm and the critic's norm, each clipped to max_grad_norm (they must share no
    parameters); the reported grad_norm is still the norm over both"""


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
    desired_kl: PositiveFloat | None = None
    """KL-adaptive learning rate (rsl_rl's ``schedule="adaptive"``): before each gradient step the
    learning rate is divided by kl_lr_factor when the mini-batch's KL estimate (approx_kl) exceeds
    2 * desired_kl, multiplied by it when the estimate is below desired_kl / 2 (and above 0), and kept
    in [kl_lr_min, kl_lr_max]; the rate carries over from update to update (it starts at lr and is
    saved with the optimizer). E.g. 0.01; None: off (lr and lr_schedule decide). Not with lr_schedule"""
    kl_lr_factor: AboveOneFloat = 1.5
    """the factor of the KL-adaptive learning rate (desired_kl); > 1"""
    kl_lr_min: PositiveFloat = 1e-5
    """the lowest KL-adaptive learning rate (desired_kl)"""
    kl_lr_max: PositiveFloat = 1e-2
    """the highest KL-adaptive learning rate (desired_kl); at least kl_lr_min"""
    advantage_normalization_scope: AdvantageScope = AdvantageScope.MINIBATCH
    """where advantage_normalization standardises the advantages: per mini-batch or over the whole
    rollout (needs advantage_normalization=True)"""
    grad_clip_scope: GradClipScope = GradClipScope.TOGETHER
    """clip max_grad_norm over actor and critic together, or per network (needs max_grad_norm)"""
    timeout_bootstrap: TimeoutBootstrap = TimeoutBootstrap.FINAL_OBS
    """what a truncated (timed-out) step's target bootstraps from: V(final observation) (exact), V of
    the step's own observation (rsl_rl's approximation, for simulators without final observations) or
    nothing (a time-out ends the return like a termination)"""
    compile_loss: bool = False
    """run the mini-batch loss (actor and critic forward, and their backward) through
    ``torch.compile``: the same losses as eager to float tolerance; the first update pays the
    compilation (tens of seconds on a CPU). Off by default"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()
        check_schedule(self, "clip_schedule", self.clip_schedule)
        for name, kind in (
            ("advantage_normalization_scope", AdvantageScope),
            ("grad_clip_scope", GradClipScope),
            ("timeout_bootstrap", TimeoutBootstrap),
        ):
            _check_enum(name, getattr(self, name), kind)
        self._check_kl_rule()
        if self.advantage_normalization_scope is AdvantageScope.ROLLOUT and not self.advantage_normalization:
            raise ConfigurationError(
                "PPOParams.advantage_normalization_scope=rollout needs advantage_normalization=True "
                "(it says where the advantages are standardised); set it, or leave the scope minibatch."
            )
        if self.grad_clip_scope is GradClipScope.PER_NETWORK and self.max_grad_norm is None:
            raise ConfigurationError(
                "PPOParams.grad_clip_scope=per_network needs max_grad_norm (the norm each network is "
                "clipped to); set max_grad_norm, or leave the scope together."
            )

    def _check_kl_rule(self) -> None:
        if self.kl_lr_min > self.kl_lr_max:
            raise ConfigurationError(
                f"PPOParams.kl_lr_min={self.kl_lr_min} is above kl_lr_max={self.kl_lr_max}; allowed: "
                f"kl_lr_min <= kl_lr_max."
            )
        if self.desired_kl is not None and self.lr_schedule is not None:
            raise ConfigurationError(
                f"PPOParams.desired_kl={self.desired_kl} adapts the learning rate, and lr_schedule="
                f"{self.lr_schedule!r} schedules it; allowed: one of them (set the other to None)."
            )

    def kl_rule(self) -> KLRule | None:
        """The KL-adaptive learning-rate rule these params describe; None without ``desired_kl``."""
        if self.desired_kl is None:
            return None
        return KLRule(
            target_kl=self.desired_kl, factor=self.kl_lr_factor, min_lr=self.kl_lr_min, max_lr=self.kl_lr_max
        )


def _check_enum(name: str, value: object, kind: type[enum.Enum]) -> None:
    if not isinstance(value, kind):
        allowed = ", ".join(f"{kind.__name__}.{member.name}" for member in kind)
        raise ConfigurationError(f"PPOParams.{name} must be a {kind.__name__} ({allowed}), got {value!r}.")


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
        self._compiled_loss: Callable[[RolloutTensors, float | torch.Tensor], LossTerms] | None = (
            torch.compile(self.minibatch_loss) if self.params.compile_loss else None
        )
        """:meth:`minibatch_loss` through ``torch.compile`` (``compile_loss=True``), else None"""

    @override
    def clip_per_network(self) -> bool:
        return self.params.grad_clip_scope is GradClipScope.PER_NETWORK

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
        clip = self.current_clip_range()
        # compiled: the clip range as a tensor, so that a clip schedule does not recompile the loss
        clip_arg = torch.tensor(clip, device=self.policy.device) if params.compile_loss else clip
        loss = self.minibatch_loss if self._compiled_loss is None else self._compiled_loss
        r = actor_critic_update(
            self.ac,
            params,
            rollout,
            lambda batch: loss(batch, clip_arg),
            batch_size=batch_size,
            num_repetitions=num_repetitions,
            hooks=hooks,
            options=self.update_options(),
        )
        return _ppo_stats(r, clip)

    @staticmethod
    def check_stackable(members: Sequence[PPO]) -> None:
        """Refuse members that :meth:`stacked_update` cannot update together (one line, naming why):
        differing params, or an option a stacked update does not take.

        Raises:
            ConfigurationError: as described.
        """
        first = members[0]
        for k, member in enumerate(members[1:], start=1):
            if member.params != first.params:
                raise ConfigurationError(
                    f"PPO.stacked_update: member {k}'s PPOParams differ from member 0's; stacked seeds share "
                    f"their hyper-parameters."
                )
        if first.params.compile_loss:
            raise ConfigurationError(
                "PPO.stacked_update: compile_loss=True is not available for stacked seeds; set it to False."
            )
        check_stackable([m.ac for m in members], first.update_options())

    def current_clip_range(self) -> float:
        """The clip range of the next update (``clip_range`` times its schedule's factor)."""
        return self.params.clip_range * schedule_factor(self.params.clip_schedule, self.ac.num_update_steps)

    def update_options(self) -> UpdateOptions:
        """The options of :func:`actor_critic_update` that these params ask for."""
        params = self.params
        return UpdateOptions(
            recompute_advantage=params.recompute_advantage,
            return_scale=self.return_scale,
            kl_rule=params.kl_rule(),
            normalize_rollout_advantages=params.advantage_normalization
            and params.advantage_normalization_scope is AdvantageScope.ROLLOUT,
            timeout_bootstrap=params.timeout_bootstrap,
        )

    @staticmethod
    def stacked_update(
        members: Sequence[PPO],
        rollouts: Sequence[AnyRolloutBatch],
        *,
        batch_size: int | None,
        num_repetitions: int,
    ) -> list[PPOTrainingStats]:
        """One update of K independent PPO runs (seeds) at once: member k on ``rollouts[k]``, with its
        networks stacked with the others' for the gradient steps (see
        :func:`~tshtrain.algorithm.blocks.onpolicy_update.stacked_actor_critic_update`); the same
        learning as ``members[k].update(rollouts[k], ...)`` to float rounding. The members must share
        their params (``PPOParams``), architecture and update counts.

        Raises:
            ConfigurationError: members that differ, or an option a stacked update does not take
                (``compile_loss``, ``recompute_advantage``, ``return_scaling``, ``desired_kl``,
                ``grad_clip_scope=per_network``).
        """
        if not members:
            return []
        first = members[0]
        PPO.check_stackable(members)
        clips = {m.current_clip_range() for m in members}
        if len(clips) > 1:
            raise ConfigurationError(
                f"PPO.stacked_update: the members' clip ranges differ ({sorted(clips)}): their update counts "
                f"differ; stacked seeds update in lockstep."
            )
        clip = clips.pop()
        results = stacked_actor_critic_update(
            [m.ac for m in members],
            first.params,
            rollouts,
            lambda batch: first.minibatch_loss(batch, clip),
            batch_size=batch_size,
            num_repetitions=num_repetitions,
            options=first.update_options(),
        )
        return [_ppo_stats(r, clip) for r in results]

    def minibatch_loss(self, batch: RolloutTensors, clip: float | torch.Tensor) -> LossTerms:
        """The clipped surrogate loss of a mini-batch, with the value loss and entropy bonus (the
        advantages standardised here with ``advantage_normalization`` per mini-batch). Every mean runs
        over the last axis: given K stacked members' tensors (K, N) and networks that take them, it is
        each member's loss, (K,) terms (``PPO.stacked_update``)."""
        params = self.params
        logp, entropy = log_prob_entropy(self.policy, batch.obs, batch.act)
        adv = batch.advantages
        if (
            params.advantage_normalization
            and params.advantage_normalization_scope is AdvantageScope.MINIBATCH
        ):
            adv = normalize_advantages(adv)
        log_ratio = logp - batch.logp_old
        ratio = torch.exp(log_ratio)
        policy_loss = clipped_surrogate_loss(ratio, adv, clip, params.dual_clip)
        value = self.ac.values(batch.obs)
        v_loss = value_loss(value, batch.value_old, batch.returns, params.value_clip_range)
        mean_entropy = entropy.mean(dim=-1)
        loss = policy_loss + params.vf_coef * v_loss
        if params.ent_coef:  # with ent_coef 0 the entropy stays out of the backward pass (same gradients)
            loss = loss - params.ent_coef * mean_entropy
        with torch.no_grad():
            approx_kl = ((ratio - 1.0) - log_ratio).mean(dim=-1)
            clip_fraction = ((ratio - 1.0).abs() > clip).float().mean(dim=-1)
        return LossTerms(
            loss=loss,
            policy_loss=policy_loss,
            value_loss=v_loss,
            entropy=mean_entropy,
            approx_kl=approx_kl,
            clip_fraction=clip_fraction,
        )


def _ppo_stats(r: UpdateResult, clip: float) -> PPOTrainingStats:
    assert r.clip_fraction is not None  # reported by minibatch_loss
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


def clipped_surrogate_loss(
    ratio_N: torch.Tensor, adv_N: torch.Tensor, clip: float | torch.Tensor, dual_clip: float | None
) -> torch.Tensor:
    """PPO's policy loss: the mean over steps of ``-min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``;
    with ``dual_clip = c``, where ``A < 0`` the objective is ``max(that minimum, c * A)`` (dual clip).
    ``clip`` may be a 0-dim tensor (the compiled loss takes it so, to compile once for all values)."""
    if isinstance(clip, torch.Tensor):  # two branches for torch's overloads (numbers or tensors)
        clipped_N = ratio_N.clamp(1.0 - clip, 1.0 + clip)
    else:
        clipped_N = ratio_N.clamp(1.0 - clip, 1.0 + clip)
    loss_N = torch.maximum(-adv_N * ratio_N, -adv_N * clipped_N)
    if dual_clip is not None:
        loss_N = torch.where(adv_N < 0, torch.minimum(loss_N, -dual_clip * adv_N), loss_N)
    return loss_N.mean(dim=-1)
