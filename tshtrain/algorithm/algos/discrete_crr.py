"""Critic-regularised regression (CRR, Wang et al. 2020) for Discrete actions (offline).

A critic ``Q(s, .)`` learns by TD towards the value of the (target) actor's policy at the next state,

    y = r + gamma * (1 - terminated) * sum_a' pi'(a' | s') Q'(s', a'),
    critic_loss = 0.5 * mean (Q(s, a) - y)^2,

and the actor ``pi`` does behaviour cloning weighted by the critic's advantage of the dataset's action,

    A(s, a) = Q(s, a) - sum_b pi(b | s) Q(s, b),    actor_loss = -mean f(A) * log pi(a | s),

with ``f(A) = min(exp(A / beta), ratio_upper_bound)`` ("exp"), ``f(A) = 1[A > 0]`` ("binary") or
``f = 1`` ("all": plain behaviour cloning). The weight is a constant of the actor loss (no gradient flows
through it). As in Tianshou's DiscreteCRR, a conservative penalty ``min_q_weight * mean(logsumexp_a Q(s, a)
- Q(s, a_data))`` is added, and one Adam steps the sum of the three terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, final

import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.algos.discrete_cql import discrete_conservative_penalty
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
    TrainingStats,
    UpdateHooks,
    make_adam,
)
from tshtrain.algorithm.blocks.offpolicy import host_scalars, sample_replay
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.constraints import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    UnitFloat,
    validate_fields,
)
from tshtrain.data.batch import ObsTensor
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError


class PolicyImprovement(StrEnum):
    """The weight ``f`` of the actor's log-likelihood in :class:`DiscreteCRR`."""

    EXP = "exp"
    """``min(exp(A / beta), ratio_upper_bound)``"""
    BINARY = "binary"
    """``1`` where the advantage is positive, else ``0``"""
    ALL = "all"
    """``1`` everywhere: behaviour cloning"""


@dataclass(frozen=True, kw_only=True)
class DiscreteCRRParams:
    """Hyperparameters of :class:`DiscreteCRR` (defaults: Tianshou 2.0.1's DiscreteCRR; ``lr``: its
    CartPole test's)."""

    lr: PositiveFloat = 7e-4
    """Adam learning rate of actor and critic (one optimizer)"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""
    policy_improvement: PolicyImprovement = PolicyImprovement.EXP
    """the advantage weight f: EXP, BINARY or ALL (the strings "exp", "binary", "all" are accepted)"""
    beta: PositiveFloat = 1.0
    """temperature of the EXP weight exp(A / beta)"""
    ratio_upper_bound: PositiveFloat = 20.0
    """the EXP weight is clipped to at most this"""
    min_q_weight: NonNegativeFloat = 10.0
    """weight of the conservative penalty logsumexp_a Q(s, a) - Q(s, a_data); 0 leaves it out"""
    target_update_freq: NonNegativeInt = 0
    """gradient steps between hard copies of actor and critic into their targets; 0: no target
    networks (the online ones give the TD target)"""

    def __post_init__(self) -> None:
        validate_fields(self)
        allowed = [mode.value for mode in PolicyImprovement]
        if self.policy_improvement not in allowed:
            raise ConfigurationError(
                f"DiscreteCRRParams.policy_improvement must be one of {allowed}, got "
                f"{self.policy_improvement!r}."
            )
        object.__setattr__(self, "policy_improvement", PolicyImprovement(self.policy_improvement))


@dataclass(frozen=True, kw_only=True)
class DiscreteCRRTrainingStats(TrainingStats):
    """Statistics of discrete CRR gradient steps."""

    loss: float = 0.0
    """actor_loss + critic_loss + min_q_weight * cql_penalty"""
    actor_loss: float = 0.0
    """-mean f(A) log pi(a | s)"""
    critic_loss: float = 0.0
    """0.5 * mean squared TD error"""
    cql_penalty: float = 0.0
    """mean logsumexp_a Q(s, a) - Q(s, a_data), unweighted"""
    weight_mean: float = 0.0
    """mean advantage weight f(A) of the batch"""


def advantage_weights(
    advantage_N: torch.Tensor, mode: PolicyImprovement, *, beta: float, ratio_upper_bound: float
) -> torch.Tensor:
    """``f(A)`` of each advantage (no gradient): see :class:`PolicyImprovement`."""
    advantage_N = advantage_N.detach()
    if mode == PolicyImprovement.EXP:
        return (advantage_N / beta).exp().clamp(max=ratio_upper_bound)
    if mode == PolicyImprovement.BINARY:
        return (advantage_N > 0).to(advantage_N.dtype)
    return torch.ones_like(advantage_N)


def crr_losses(
    q_NA: torch.Tensor,
    logits_NA: torch.Tensor,
    act_N: torch.Tensor,
    target_N: torch.Tensor,
    params: DiscreteCRRParams,
) -> dict[str, torch.Tensor]:
    """The actor, critic and conservative terms of one CRR step from the critic's ``q_NA``, the actor's
    ``logits_NA`` at the sampled observations, the dataset's actions and the TD targets; keys ``loss``,
    ``actor loss``, ``critic loss``, ``cql penalty``, ``weight``."""
    act = act_N.long().unsqueeze(-1)
    q_data_N = q_NA.gather(1, act).squeeze(-1)
    logp_NA = torch.log_softmax(logits_NA, dim=-1)
    advantage_N = q_data_N - (logp_NA.exp() * q_NA).sum(-1)
    weight_N = advantage_weights(
        advantage_N, params.policy_improvement, beta=params.beta, ratio_upper_bound=params.ratio_upper_bound
    )
    actor = -(weight_N * logp_NA.gather(1, act).squeeze(-1)).mean()
    critic = 0.5 * F.mse_loss(q_data_N, target_N)
    penalty = discrete_conservative_penalty(q_NA, act_N)
    loss = actor + critic + params.min_q_weight * penalty
    return {
        "loss": loss,
        "actor loss": actor,
        "critic loss": critic,
        "cql penalty": penalty,
        "weight": weight_N.mean(),
    }


@final
class DiscreteCRR(OfflineAlgorithm[CategoricalPolicy, DiscreteCRRTrainingStats]):
    """Discrete CRR on a :class:`CategoricalPolicy` (the actor, logits) and a critic ``critic(obs)`` ->
    ``Q(s, .)`` of shape (N, num_actions); see the module docstring. With ``target_update_freq > 0``
    target copies of both are refreshed (hard copies) every ``target_update_freq`` gradient steps."""

    def __init__(
        self, *, policy: CategoricalPolicy, critic: nn.Module, params: DiscreteCRRParams | None = None
    ):
        """Args:
        policy: the actor; test steps act greedily (``deterministic_eval=True``) unless built otherwise.
        critic: observation -> Q-values (N, num_actions).
        params: hyperparameters.
        """
        super().__init__(policy=policy)
        self.params = p = params or DiscreteCRRParams()
        self.critic = critic
        # a trunk shared by actor and critic (as in Tianshou's CRR test) is optimised once
        shared = {id(param): param for param in [*policy.actor.parameters(), *critic.parameters()]}
        self.optim = make_adam(shared.values(), lr=p.lr)
        self.target_actor = TargetNetwork(policy.actor) if p.target_update_freq > 0 else None
        self.target_critic = TargetNetwork(critic) if p.target_update_freq > 0 else None
        self.num_gradient_steps = 0
        self.register_components({"critic": critic, "optim": self.optim})
        if self.target_actor is not None and self.target_critic is not None:
            self.register_components({"target_actor": self.target_actor, "target_critic": self.target_critic})

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"num_gradient_steps": self.num_gradient_steps}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.num_gradient_steps = int(state["num_gradient_steps"])

    def _next_value(self, obs_next: ObsTensor) -> torch.Tensor:
        """``sum_a' pi'(a' | s') Q'(s', a')`` with the target networks (the online ones without)."""
        actor = self.policy.actor if self.target_actor is None else self.target_actor.net
        critic = self.critic if self.target_critic is None else self.target_critic.net
        with torch.no_grad():
            logits: torch.Tensor = actor(obs_next)
            q_next: torch.Tensor = critic(obs_next)
            return (torch.softmax(logits, dim=-1) * q_next).sum(-1)

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> DiscreteCRRTrainingStats:
        p = self.params
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=self.policy.device, hooks=hooks
        )
        target = batch.returns + batch.discounts * self._next_value(batch.obs_next)
        q_NA: torch.Tensor = self.critic(batch.obs)
        losses = crr_losses(q_NA, self.policy.logits(batch.obs), batch.act, target, p)
        optimizer_step(self.optim, "optim", {"loss": losses["loss"]}, hooks)
        self.num_gradient_steps += 1
        if p.target_update_freq > 0 and self.num_gradient_steps % p.target_update_freq == 0:
            assert self.target_actor is not None and self.target_critic is not None
            self.target_actor.hard_update()
            self.target_critic.hard_update()
        stats = host_scalars("DiscreteCRR", losses, losses=("loss",))
        return DiscreteCRRTrainingStats(
            loss=stats["loss"],
            actor_loss=stats["actor loss"],
            critic_loss=stats["critic loss"],
            cql_penalty=stats["cql penalty"],
            weight_mean=stats["weight"],
        )
