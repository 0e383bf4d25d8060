"""MASAC: soft actor-critic with decentralised actors and centralised twin critics, for Box actions.

SAC (Haarnoja et al. 2018) in the MADDPG layout (:mod:`tshtrain.algorithm.joint_actor_critic`):
squashed Gaussian actors ``pi_a(.|o_a)`` on each agent's own observation and critics
``Q_i,a(x, u_1, ..., u_A)`` on the critic input and every agent's action. Each gradient step samples
``N`` joint transitions and

* steps the critics towards
  ``y_a = R_a + D * (min_i Q_targ_i,a(x', u'_1, ..., u'_A) - alpha * log pi_a(u'_a|o'_a))`` with
  ``u'_b ~ pi_b(.|o'_b)`` for every agent;
* steps the actors on ``mean_a,n (alpha * log pi_a(u~_a|o_a) - min_i Q_i,a(x, u_1, ..., u~_a, ..., u_A))``,
  ``u~_a ~ pi_a(.|o_a)`` reparameterised, the other agents' actions from the sample;
* with ``auto_alpha``, steps ``log(alpha)`` (one temperature for all agents) on
  ``-log(alpha) * mean(log pi_a(u~_a|o_a) + target_entropy)``;
* Polyak-updates the target critics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    generator_states,
    load_generator_states,
)
from tshtrain.algorithm.blocks.continuous import TanhGaussianPolicy
from tshtrain.algorithm.blocks.offpolicy import td_loss
from tshtrain.algorithm.blocks.offpolicy_actor_critic import setup_actor_critic
from tshtrain.algorithm.blocks.temperature import box_temperature
from tshtrain.algorithm.joint_actor_critic import (
    JointActorCritic,
    MultiAgentActorCriticParams,
    joint_action,
    own_action_joint,
)
from tshtrain.algorithm.multi_agent import MultiAgentPolicy
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.algorithm.value_decomposition import sample_joint
from tshtrain.constraints import FiniteFloat, PositiveFloat
from tshtrain.data.batch import ObsTensor
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.env.multi_agent import AgentColumns


@final
@dataclass(frozen=True, kw_only=True)
class MASACParams(MultiAgentActorCriticParams):
    """Hyperparameters of :class:`MASAC` (besides those of :class:`MultiAgentActorCriticParams`)."""

    alpha_lr: PositiveFloat = 1e-3
    """Adam learning rate of log(alpha) (auto_alpha=True only)"""
    alpha: PositiveFloat = 1.0
    """entropy coefficient of every agent: constant with auto_alpha=False, the starting value with
    auto_alpha=True"""
    auto_alpha: bool = True
    """tune alpha so that each agent's policy entropy tracks target_entropy"""
    target_entropy: FiniteFloat | None = None
    """entropy target of one agent's policy for auto_alpha; None: -(number of action dimensions)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class MASACTrainingStats(TrainingStats):
    """Statistics of MASAC gradient steps."""

    critic_loss: float = 0.0
    """sum over the critics' ensemble members of the mean (over agents and samples) squared TD error"""
    actor_loss: float = 0.0
    """mean over agents and samples of alpha * log pi_a - min_i Q_i,a for fresh actions of agent a"""
    alpha_loss: float = 0.0
    """-log(alpha) * mean(log pi + target_entropy) (0 without auto_alpha)"""
    alpha: float = 0.0
    """entropy coefficient used in the step"""
    q_mean: float = 0.0
    """mean Q_i,a(x, u) of the sampled joint transitions over members and agents"""
    entropy: float = 0.0
    """-mean log pi_a(u~_a|o_a) of the fresh actions (a single-sample entropy estimate)"""


@final
class MASAC(OffPolicyAlgorithm[MultiAgentPolicy, MASACTrainingStats]):
    """MASAC over per-agent (or shared) :class:`TanhGaussianPolicy` s and centralised twin critics; see
    the module docstring. Samples come from each policy's generator, saved with the algorithm."""

    def __init__(
        self,
        agents: Sequence[str] | AgentColumns,
        policies: TanhGaussianPolicy | Mapping[str, TanhGaussianPolicy],
        critics: nn.Module | Mapping[str, nn.Module],
        *,
        params: MASACParams | None = None,
    ):
        """Args:
        agents: the env's agents, in column order (``env.columns``).
        policies: one policy shared by every agent (give its actor the ``agent_id`` key), or one per
            agent by name (the same object for several agents shares it).
        critics: ``critic(x_N, u_NJ) -> (num_critics, N)``, twin critics as in SAC
            (:func:`~tshtrain.algorithm.joint_actor_critic.centralised_critic` with ``num_critics=2``):
            one shared by every agent (it also reads the agent id), or one per agent by name.
        params: the hyperparameters.
        """
        p = params or MASACParams()
        joint = JointActorCritic(
            agents,
            policies,
            critics,
            policy_type=TanhGaussianPolicy,
            critic_input=p.critic_input,
            owner="MASAC",
        )
        super().__init__(policy=joint.policy)
        self.params = p
        self.joint = joint
        """the policies, the distinct actor networks and critics"""
        self.num_agents = joint.num_agents
        self.temperature = box_temperature(p, act_dim=joint.policies[0].act_dim, device=self.policy.device)
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=joint.actors,
            critic=joint.critics,
            params=p,
            target_actor=False,
            obs_normalizer=None,
            extra_optimizers={"alpha_optim": self.temperature.optim},
        )

    @override
    def extra_state(self) -> dict[str, Any]:
        return {
            "log_alpha": self.temperature.state(),
            "policy_generators": [generator_states(policy) for policy in self.joint.policies],
        }

    @override
    def load_extra_state(self, state: Any) -> None:
        self.temperature.load_state(state["log_alpha"])
        for policy, saved in zip(self.joint.policies, state["policy_generators"], strict=True):
            load_generator_states(policy, saved)

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return self.temperature.alpha

    def sample_actions(self, obs: ObsTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions (A, N, act_dim) of every agent for A * N agent-major rows, and their
        log-densities (A, N)."""
        parts = self.joint.per_policy(obs, lambda k, rows: self.joint.policies[k].sample(rows))
        act = torch.cat([act for act, _ in parts])
        log_prob = torch.cat([log_prob for _, log_prob in parts])
        return act.view(self.num_agents, -1, act.shape[-1]), log_prob.view(self.num_agents, -1)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> MASACTrainingStats:
        self.lrs.begin_update()
        p, a = self.params, self.num_agents
        alpha = self.temperature.value()
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
            next_AND, next_log_prob_AN = self.sample_actions(sample.obs_next)
            next_ANJ = joint_action(next_AND).expand(a, -1, -1)
            q_next_AN = self.joint.q_values(target_critics, sample.obs_next, next_ANJ).min(dim=0).values
            target_AN = sample.returns_AN + sample.discount_N * (q_next_AN - alpha * next_log_prob_AN)
        q_MAN = self.joint.q_values(critics, sample.obs, joint_action(act_AND).expand(a, -1, -1))
        critic = td_loss(q_MAN.flatten(1), target_AN.flatten(), None)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        with self.nets.frozen_critic():
            own_AND, log_prob_AN = self.sample_actions(sample.obs)
            q_own_AN = self.joint.q_values(critics, sample.obs, own_action_joint(act_AND, own_AND))
            actor_loss = (alpha * log_prob_AN - q_own_AN.min(dim=0).values).mean()
            self.nets.actor_step({"actor loss": actor_loss}, hooks)

        alpha_loss = torch.zeros((), device=actor_loss.device)
        if self.temperature.learned:
            alpha_loss = self.temperature.loss_from_log_prob(log_prob_AN.flatten())
            self.temperature.step(alpha_loss, hooks)
        self.nets.update_targets(p.tau)
        return gradient_step_stats(
            MASACTrainingStats,
            "MASAC",
            {
                "critic_loss": critic.loss,
                "actor_loss": actor_loss,
                "alpha_loss": alpha_loss,
                "alpha": alpha,
                "q_mean": q_MAN.detach().mean(),
                "entropy": -log_prob_AN.detach().mean(),
            },
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss", "alpha_loss": "alpha loss"},
            deferred=self.defers_stats,
        )


__all__ = ["MASAC", "MASACParams", "MASACTrainingStats"]
