"""DDPG: deep deterministic policy gradient (Lillicrap et al. 2016), for Box actions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

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
from tshtrain.algorithm.blocks.continuous import critic_values
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    host_scalars,
    sample_replay,
    td_loss,
    update_priorities,
)
from tshtrain.algorithm.blocks.policies import DeterministicActorPolicy
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import OpenUnitFloat, PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.collector_base import AnyReplayBuffer


@dataclass(frozen=True, kw_only=True)
class DDPGParams:
    """Hyperparameters of :class:`DDPG`."""

    actor_lr: PositiveFloat = 1e-3
    """Adam learning rate of the actor"""
    critic_lr: PositiveFloat = 1e-3
    """Adam learning rate of the critic"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    tau: OpenUnitFloat = 0.005
    """Polyak rate of the target actor and critic, in (0, 1]"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the gradient step after k gradient steps (e.g.
    ``LinearSchedule(num_update_steps=<gradient steps of the run>)``); None: constant learning rates"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class DDPGTrainingStats(TrainingStats):
    """Statistics of DDPG gradient steps."""

    critic_loss: float = 0.0
    """mean squared TD error"""
    actor_loss: float = 0.0
    """-mean Q(o, pi(o))"""
    q_mean: float = 0.0
    """mean Q(o, a) of the sampled transitions"""


@final
class DDPG(OffPolicyAlgorithm[DeterministicActorPolicy, DDPGTrainingStats]):
    """DDPG on a :class:`DeterministicActorPolicy` (exploration: its Gaussian ``noise_std`` through the
    collector's ``exploration_noise=True``) and a critic ``critic(obs, act)`` -> (1, N), e.g.
    ``QEnsemble(obs_dim, act_dim, num_critics=1)``.

    Each :meth:`update` steps the critic towards ``y = R + D * Q_targ(o', tanh(actor_targ(o')))``, then
    the actor on ``-mean Q(o, pi(o))``, then Polyak-updates both target networks.
    """

    def __init__(
        self,
        *,
        policy: DeterministicActorPolicy,
        critic: nn.Module,
        params: DDPGParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        super().__init__(policy=policy)
        self.obs_normalization = ObsNormalization(
            "DDPG", obs_normalizer, {"policy": policy, "critic": critic}
        )
        self.params = params or DDPGParams()
        self.nets = ActorCriticTargets(
            actor=policy.actor,
            critic=critic,
            actor_lr=self.params.actor_lr,
            critic_lr=self.params.critic_lr,
            target_actor=True,
        )
        self.register_components(self.nets.components())
        self.lrs = ScheduledLearningRates(self.params.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> DDPGTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=policy.device, hooks=hooks
        )
        with torch.no_grad():
            act_next = torch.tanh(self.nets.actor_target.net(batch.obs_next))
            q_next = critic_values(self.nets.target_critic.net, batch.obs_next, act_next)[0]
            target = batch.returns + batch.discounts * q_next
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        with self.nets.frozen_critic():
            actor_loss = -critic_values(self.nets.critic, batch.obs, policy.mean_actions(batch.obs))[0].mean()
            self.nets.actor_step({"actor loss": actor_loss}, hooks)
        self.nets.update_targets(p.tau)
        stats = host_scalars(
            "DDPG",
            {"critic loss": critic.loss, "actor loss": actor_loss, "q_mean": q_MN.mean()},
            losses=("critic loss", "actor loss"),
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return DDPGTrainingStats(
            critic_loss=stats["critic loss"], actor_loss=stats["actor loss"], q_mean=stats["q_mean"]
        )
