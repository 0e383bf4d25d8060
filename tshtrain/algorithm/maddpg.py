"""MADDPG: multi-agent deep deterministic policy gradient (Lowe et al. 2017), for Box actions.

Decentralised deterministic actors ``mu_a(o_a)`` and centralised critics ``Q_a(x, u_1, ..., u_A)``
(:mod:`tshtrain.algorithm.joint_actor_critic`) on the generic off-policy trainer with a
:class:`~tshtrain.data.MultiAgentCollector`. Each gradient step samples ``N`` joint transitions and

* steps the critics towards ``y_a = R_a + D * Q_targ_a(x', mu_targ_1(o'_1), ..., mu_targ_A(o'_A))``
  (``R_a`` agent ``a``'s n-step return, ``D`` the discount, 0 after a terminal state);
* steps the actors on ``-mean_a,n Q_a(x, u_1, ..., mu_a(o_a), ..., u_A)``: agent ``a``'s action from
  its current actor, the other agents' from the sample;
* Polyak-updates the target actors and critics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import NO_UPDATE_HOOKS, OffPolicyAlgorithm, TrainingStats, UpdateHooks
from tshtrain.algorithm.blocks.offpolicy import td_loss
from tshtrain.algorithm.blocks.offpolicy_actor_critic import setup_actor_critic
from tshtrain.algorithm.blocks.policies import DeterministicActorPolicy
from tshtrain.algorithm.joint_actor_critic import (
    JointActorCritic,
    MultiAgentActorCriticParams,
    joint_action,
    own_action_joint,
)
from tshtrain.algorithm.multi_agent import MultiAgentPolicy
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.algorithm.value_decomposition import sample_joint
from tshtrain.data.batch import ObsTensor
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.env.multi_agent import AgentColumns


@final
@dataclass(frozen=True, kw_only=True)
class MADDPGParams(MultiAgentActorCriticParams):
    """Hyperparameters of :class:`MADDPG` (those of :class:`MultiAgentActorCriticParams`). Exploration
    is each policy's Gaussian ``noise_std`` through the collector's ``exploration_noise=True``."""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class MADDPGTrainingStats(TrainingStats):
    """Statistics of MADDPG gradient steps."""

    critic_loss: float = 0.0
    """mean over agents and samples of the squared TD error (summed over a critic ensemble's members)"""
    actor_loss: float = 0.0
    """-mean over agents and samples of Q_a(x, u) with agent a's action from its current actor"""
    q_mean: float = 0.0
    """mean Q_a(x, u) of the sampled joint transitions"""


@final
class MADDPG(OffPolicyAlgorithm[MultiAgentPolicy, MADDPGTrainingStats]):
    """MADDPG over per-agent (or shared) :class:`DeterministicActorPolicy` s and centralised critics;
    see the module docstring. Targets use each critic's first ensemble member, as :class:`DDPG`."""

    def __init__(
        self,
        agents: Sequence[str] | AgentColumns,
        policies: DeterministicActorPolicy | Mapping[str, DeterministicActorPolicy],
        critics: nn.Module | Mapping[str, nn.Module],
        *,
        params: MADDPGParams | None = None,
    ):
        """Args:
        agents: the env's agents, in column order (``env.columns``).
        policies: one policy shared by every agent (give its actor the ``agent_id`` key), or one per
            agent by name (the same object for several agents shares it).
        critics: ``critic(x_N, u_NJ) -> (num_critics, N)``
            (:func:`~tshtrain.algorithm.joint_actor_critic.centralised_critic`): one shared by every agent
            (it also reads the agent id), or one per agent by name.
        params: the hyperparameters.
        """
        p = params or MADDPGParams()
        joint = JointActorCritic(
            agents,
            policies,
            critics,
            policy_type=DeterministicActorPolicy,
            critic_input=p.critic_input,
            owner="MADDPG",
        )
        super().__init__(policy=joint.policy)
        self.params = p
        self.joint = joint
        """the policies, the distinct actor networks and critics"""
        self.num_agents = joint.num_agents
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self, actor=joint.actors, critic=joint.critics, params=p, target_actor=True, obs_normalizer=None
        )

    def actions(self, obs: ObsTensor, *, target: bool) -> torch.Tensor:
        """``tanh(mu_a(o_a))`` of every agent for A * N agent-major rows, shape (A, N, act_dim): the
        online actors (differentiable) or the target copies."""
        targets = self.nets.actor_target.net
        assert isinstance(targets, nn.ModuleList)

        def act(k: int, rows: ObsTensor) -> torch.Tensor:
            if target:
                out: torch.Tensor = targets[self.joint.actor_index[k]](rows)
                return torch.tanh(out)
            return self.joint.policies[k].mean_actions(rows)

        parts = self.joint.per_policy(obs, act)
        act_all = parts[0] if len(parts) == 1 else torch.cat(parts)
        return act_all.view(self.num_agents, -1, act_all.shape[-1])

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> MADDPGTrainingStats:
        self.lrs.begin_update()
        p, a = self.params, self.num_agents
        sample = sample_joint(
            buffer,
            batch_size,
            a,
            gamma=p.gamma,
            n_step=p.n_step,
            device=self.policy.device,
            hooks=hooks,
            owner=type(self).__name__,
        )
        act_AND = sample.act.float().view(a, batch_size, -1)
        critics, target_critics = self.joint.critics, self.nets.target_critic.net
        assert isinstance(target_critics, nn.ModuleList)
        with torch.no_grad():
            next_ANJ = joint_action(self.actions(sample.obs_next, target=True)).expand(a, -1, -1)
            q_next_AN = self.joint.q_values(target_critics, sample.obs_next, next_ANJ)[0]
            target_AN = sample.returns_AN + sample.discount_N * q_next_AN
        q_MAN = self.joint.q_values(critics, sample.obs, joint_action(act_AND).expand(a, -1, -1))
        critic = td_loss(q_MAN.flatten(1), target_AN.flatten(), None)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        with self.nets.frozen_critic():
            own_ANJ = own_action_joint(act_AND, self.actions(sample.obs, target=False))
            actor_loss = -self.joint.q_values(critics, sample.obs, own_ANJ)[0].mean()
            self.nets.actor_step({"actor loss": actor_loss}, hooks)
        self.nets.update_targets(p.tau)
        return gradient_step_stats(
            MADDPGTrainingStats,
            "MADDPG",
            {"critic_loss": critic.loss, "actor_loss": actor_loss, "q_mean": q_MAN.detach().mean()},
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss"},
            deferred=self.defers_stats,
        )


__all__ = ["MADDPG", "MADDPGParams", "MADDPGTrainingStats"]
