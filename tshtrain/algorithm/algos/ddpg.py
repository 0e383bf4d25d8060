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
from tshtrain.algorithm.blocks.continuous import critic_values
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    sample_replay,
    td_loss,
    update_priorities,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams, setup_actor_critic
from tshtrain.algorithm.blocks.policies import DeterministicActorPolicy
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.constraints import PositiveInt
from tshtrain.data.collector_base import AnyReplayBuffer


@final
@dataclass(frozen=True, kw_only=True)
class DDPGParams(OffPolicyActorCriticParams):
    """Hyperparameters of :class:`DDPG` (besides those of :class:`OffPolicyActorCriticParams`)."""

    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


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
        self.params = params or DDPGParams()
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=policy.actor,
            critic=critic,
            params=self.params,
            target_actor=True,
            obs_normalizer=obs_normalizer,
        )

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
        stats = gradient_step_stats(
            DDPGTrainingStats,
            "DDPG",
            {"critic_loss": critic.loss, "actor_loss": actor_loss, "q_mean": q_MN.mean()},
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss"},
            deferred=self.defers_stats,
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return stats
