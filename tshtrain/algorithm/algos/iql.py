"""Implicit Q-learning (IQL, Kostrikov, Nair & Levine 2022), for Box actions (offline).

IQL never evaluates Q on actions outside the dataset. Each gradient step, on a batch ``(o, a, r, o')``:

* value: expectile regression of ``V(o)`` towards ``q = min_i Q_targ_i(o, a)``,
  ``L_V = mean(|expectile - 1(q - V(o) < 0)| * (q - V(o))^2)``; with ``expectile > 0.5`` V approaches
  an upper expectile of Q over the dataset's actions (a soft maximum);
* actor: advantage-weighted regression onto the dataset's actions,
  ``L_pi = -mean(w * log pi(a|o))``, ``w = min(exp(beta * (q - V(o))), max_weight)`` (no gradient
  through ``w``), with the updated V;
* critics: every ``Q_i(o, a)`` regresses towards ``R + D * V(o')`` with the updated V (no max over
  actions, no target network for V);
* a Polyak update of the target critics.

This is the order of the authors' implementation. Actions live in the policy's ``[-1, 1]`` space (checked
in :meth:`IQL.process_buffer`); the log-density of a dataset action includes the tanh change of variables,
which does not depend on the policy's weights, so it changes the reported loss and not the gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.algos.cql import check_unit_actions
from tshtrain.algorithm.base import NO_UPDATE_HOOKS, OfflineAlgorithm, TrainingStats, UpdateHooks, make_adam
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.continuous import TanhGaussianPolicy, critic_values
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import host_scalars, sample_replay, td_loss
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import OpenUnitFloat, PositiveFloat, UnitFloat, validate_fields
from tshtrain.data.batch import ObsTensor
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
ACTION_EPS = 1e-6
"""dataset actions are clamped to [-1 + ACTION_EPS, 1 - ACTION_EPS] before atanh"""


@dataclass(frozen=True, kw_only=True)
class IQLParams:
    """Hyperparameters of :class:`IQL` (the paper's MuJoCo locomotion values)."""

    actor_lr: PositiveFloat = 3e-4
    """Adam learning rate of the actor"""
    critic_lr: PositiveFloat = 3e-4
    """Adam learning rate of the twin critics"""
    value_lr: PositiveFloat = 3e-4
    """Adam learning rate of the state-value network V"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    tau: OpenUnitFloat = 0.005
    """Polyak rate of the target critics, in (0, 1]"""
    expectile: OpenUnitFloat = 0.7
    """the expectile of V's regression, in (0, 1): 0.5 is the mean (SARSA-like), towards 1 the maximum over
    the dataset's actions (the paper: 0.7 locomotion, 0.9 AntMaze)"""
    beta: PositiveFloat = 3.0
    """inverse temperature of the advantage weights exp(beta * A) (the paper: 3.0 locomotion, 10.0
    AntMaze); larger follows the advantage more greedily"""
    max_weight: PositiveFloat = 100.0
    """upper clip of the advantage weights (the authors' code: 100)"""

    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the gradient step after k gradient steps (the
    paper decays the actor's with a cosine schedule); None: constant learning rates"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)
        if self.expectile >= 1.0:
            raise ConfigurationError(
                f"IQLParams.expectile must be in (0, 1), got {self.expectile!r}: at 1 V regresses only "
                f"towards values above it and diverges; the paper uses 0.7 (locomotion) or 0.9 (AntMaze)."
            )


@dataclass(frozen=True, kw_only=True)
class IQLTrainingStats(TrainingStats):
    """Statistics of IQL gradient steps."""

    value_loss: float = 0.0
    """expectile loss of V against min_i Q_targ_i(o, a)"""
    critic_loss: float = 0.0
    """sum over the critics of the mean squared TD error towards R + D * V(o')"""
    actor_loss: float = 0.0
    """-mean(w * log pi(a|o)) over the dataset's actions"""
    q_mean: float = 0.0
    """mean Q_i(o, a) of the sampled transitions over the critics"""
    v_mean: float = 0.0
    """mean V(o) after the value step"""
    advantage_mean: float = 0.0
    """mean of min_i Q_targ_i(o, a) - V(o) after the value step"""
    weight_mean: float = 0.0
    """mean advantage weight w (clipped)"""


def expectile_loss(diff_N: torch.Tensor, expectile: float) -> torch.Tensor:
    """``mean(|expectile - 1(diff < 0)| * diff^2)`` with ``diff = target - prediction``: the asymmetric
    squared loss whose minimiser is the ``expectile``-expectile of the targets."""
    weight_N = torch.where(diff_N < 0, 1.0 - expectile, expectile)
    return (weight_N * diff_N.pow(2)).mean()


def advantage_weights(adv_N: torch.Tensor, beta: float, max_weight: float) -> torch.Tensor:
    """``min(exp(beta * adv), max_weight)``, detached (the weights of advantage-weighted regression)."""
    return torch.exp(beta * adv_N.detach()).clamp(max=max_weight)


def tanh_gaussian_log_prob(mu: torch.Tensor, log_std: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
    """``log pi(a|o)`` of given actions ``act`` (N, A) in [-1, 1] under the squashed Gaussian with
    pre-tanh mean ``mu`` and log std ``log_std`` (as :class:`TanhGaussianPolicy` samples them), shape (N,).
    Actions are clamped to ``1 - ACTION_EPS`` in magnitude first, so boundary actions stay finite."""
    a = act.clamp(-1.0 + ACTION_EPS, 1.0 - ACTION_EPS)
    u = torch.atanh(a)
    z = (u - mu) * torch.exp(-log_std)
    gaussian_N = (-0.5 * z.pow(2) - log_std - _HALF_LOG_2PI).sum(-1)
    log_det_N = (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1)
    return gaussian_N - log_det_N


def _values(value: nn.Module, obs: ObsTensor) -> torch.Tensor:
    v: torch.Tensor = value(obs)
    return v.reshape(v.shape[0])


@final
class IQL(OfflineAlgorithm[TanhGaussianPolicy, IQLTrainingStats]):
    """IQL on a :class:`TanhGaussianPolicy`, a twin critic and a state-value network (module docstring).

    Test steps act with ``tanh(mu)`` (``deterministic_eval=True`` of the policy). The update draws no
    random numbers.
    """

    def __init__(
        self,
        *,
        policy: TanhGaussianPolicy,
        critic: nn.Module,
        value: nn.Module,
        params: IQLParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        """Args:
        policy: the actor.
        critic: ``critic(obs, act)`` -> (num_critics, N), e.g. ``QEnsemble(obs_dim, act_dim)``.
        value: ``value(obs)`` -> (N,) or (N, 1), e.g. ``mlp(obs_dim, 1, (256, 256), nn.ReLU)``.
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of every network
            reading observations (policy, critic, value); fitted to the dataset in :meth:`process_buffer`.
        """
        super().__init__(policy=policy)
        self.params = p = params or IQLParams()
        self.obs_normalization = ObsNormalization(
            "IQL", obs_normalizer, {"policy": policy, "critic": critic, "value": value}
        )
        self.nets = ActorCriticTargets(
            actor=policy.actor, critic=critic, actor_lr=p.actor_lr, critic_lr=p.critic_lr, target_actor=False
        )
        self.value = value
        self.value_optim = make_adam(value.parameters(), lr=p.value_lr)
        self.register_components({**self.nets.components(), "value": value, "value_optim": self.value_optim})
        self.lrs = ScheduledLearningRates(p.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        """Check that the dataset's actions lie in ``[-1, 1]`` and fit the observation normaliser (if
        any) to the dataset's observations."""
        check_unit_actions("IQL", buffer)
        if self.obs_normalization.fit(buffer):
            self.nets.hard_update_targets()

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> IQLTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        batch = sample_replay(buffer, batch_size, gamma=p.gamma, n_step=1, device=policy.device, hooks=hooks)
        act = batch.act.float()
        with torch.no_grad():
            q_target_N = critic_values(self.nets.target_critic.net, batch.obs, act).min(dim=0).values

        value_loss = expectile_loss(q_target_N - _values(self.value, batch.obs), p.expectile)
        optimizer_step(self.value_optim, "value_optim", {"value loss": value_loss}, hooks)

        with torch.no_grad():
            v_N = _values(self.value, batch.obs)
            weight_N = advantage_weights(q_target_N - v_N, p.beta, p.max_weight)
            v_next_N = _values(self.value, batch.obs_next)
        mu, log_std = policy.mean_log_std(batch.obs)
        actor_loss = -(weight_N * tanh_gaussian_log_prob(mu, log_std, act)).mean()
        self.nets.actor_step({"actor loss": actor_loss}, hooks)

        q_MN = critic_values(self.nets.critic, batch.obs, act)
        critic = td_loss(q_MN, batch.returns + batch.discounts * v_next_N, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)
        self.nets.update_targets(p.tau)

        stats = host_scalars(
            "IQL",
            {
                "value loss": value_loss,
                "critic loss": critic.loss,
                "actor loss": actor_loss,
                "q_mean": q_MN.mean(),
                "v_mean": v_N.mean(),
                "advantage_mean": (q_target_N - v_N).mean(),
                "weight_mean": weight_N.mean(),
            },
            losses=("critic loss", "value loss", "actor loss"),
        )
        return IQLTrainingStats(
            value_loss=stats["value loss"],
            critic_loss=stats["critic loss"],
            actor_loss=stats["actor loss"],
            q_mean=stats["q_mean"],
            v_mean=stats["v_mean"],
            advantage_mean=stats["advantage_mean"],
            weight_mean=stats["weight_mean"],
        )
