"""Soft actor-critic for Discrete actions (Christodoulou 2019), with automatic entropy tuning."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, final

import gymnasium as gym
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.ensemble import ensemble_mlp
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    sample_replay,
    td_loss,
    update_priorities,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams, setup_actor_critic
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.algorithm.blocks.temperature import EntropyTemperature
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.constraints import OpenUnitFloat, PositiveFloat, PositiveInt
from tshtrain.data.collector_base import AnyReplayBuffer


@final
@dataclass(frozen=True, kw_only=True)
class DiscreteSACParams(OffPolicyActorCriticParams):
    """Hyperparameters of :class:`DiscreteSAC` (besides those of :class:`OffPolicyActorCriticParams`,
    with other learning-rate defaults)."""

    actor_lr: PositiveFloat = 3e-4
    """Adam learning rate of the actor (the base's field with discrete SAC's default)"""
    critic_lr: PositiveFloat = 3e-4
    """Adam learning rate of the critics (the base's field with discrete SAC's default)"""
    alpha_lr: PositiveFloat = 3e-4
    """Adam learning rate of log(alpha) (auto_alpha=True only)"""
    alpha: PositiveFloat = 1.0
    """entropy coefficient: constant with auto_alpha=False, the starting value with auto_alpha=True"""
    auto_alpha: bool = True
    """tune alpha so that the policy's entropy tracks target_entropy"""
    target_entropy_ratio: OpenUnitFloat = 0.98
    """auto_alpha's entropy target, as a fraction in (0, 1] of the maximum entropy log(num_actions)"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class DiscreteSACTrainingStats(TrainingStats):
    """Statistics of discrete SAC gradient steps."""

    critic_loss: float = 0.0
    """sum over the critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """mean of sum_a pi(a|o) (alpha log pi(a|o) - min_i Q_i(o, a))"""
    alpha_loss: float = 0.0
    """log(alpha) * (entropy - target entropy) (0 without auto_alpha)"""
    alpha: float = 0.0
    """entropy coefficient used in the step"""
    q_mean: float = 0.0
    """mean Q_i(o, a) of the sampled transitions over the critics"""
    entropy: float = 0.0
    """mean entropy of pi(.|o) over the batch"""


@final
class DiscreteQEnsemble(nn.Module):
    """``num_critics`` MLP critics ``Q_i(o, .)`` returning one value per action: (num_critics, N, A)."""

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        hidden_sizes: Sequence[int] = (256, 256),
        *,
        num_critics: int = 2,
        activation: type[nn.Module] = nn.ReLU,
    ):
        super().__init__()
        self.num_critics = num_critics
        self.net = ensemble_mlp(num_critics, obs_dim, num_actions, hidden_sizes, activation)

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x_NI = obs.flatten(1)
        q_MNA: torch.Tensor = self.net(x_NI.expand(self.num_critics, *x_NI.shape))
        return q_MNA


@final
class DiscreteSAC(OffPolicyAlgorithm[CategoricalPolicy, DiscreteSACTrainingStats]):
    """Soft actor-critic for Discrete actions: a :class:`CategoricalPolicy` (logits) and critics
    ``critic(obs)`` -> (num_critics, N, num_actions), e.g. :class:`DiscreteQEnsemble`.

    With every action's value at hand, expectations over the policy are exact sums (no sampling):

    * critics: regress ``Q_i(o, a)`` towards
      ``y = R + D * sum_a' pi(a'|o') (min_i Q_targ_i(o', a') - alpha log pi(a'|o'))``;
    * actor: minimise ``mean sum_a pi(a|o) (alpha log pi(a|o) - min_i Q_i(o, a))``;
    * alpha: minimise ``log(alpha) * (H(pi(.|o)) - target_entropy)`` with ``target_entropy =
      target_entropy_ratio * log(num_actions)``;

    then a Polyak update of the target critics. Training actions are sampled by the policy (its
    generator); the collector needs no exploration noise.
    """

    def __init__(
        self,
        *,
        policy: CategoricalPolicy,
        critic: nn.Module,
        params: DiscreteSACParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        super().__init__(policy=policy)
        self.params = p = params or DiscreteSACParams()
        assert isinstance(policy.action_space, gym.spaces.Discrete)  # CategoricalPolicy checks it
        self.temperature = EntropyTemperature(
            alpha=p.alpha,
            learned=p.auto_alpha,
            lr=p.alpha_lr,
            target_entropy=p.target_entropy_ratio * math.log(int(policy.action_space.n)),
            device=policy.device,
        )
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=policy.actor,
            critic=critic,
            params=p,
            target_actor=False,
            obs_normalizer=obs_normalizer,
            extra_optimizers={"alpha_optim": self.temperature.optim},
        )

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"log_alpha": self.temperature.state()}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.temperature.load_state(state["log_alpha"])

    def _q(self, critic: nn.Module, obs: Any) -> torch.Tensor:
        q_MNA: torch.Tensor = critic(obs)
        return q_MNA

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> DiscreteSACTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        alpha = self.temperature.value()
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=policy.device, hooks=hooks
        )
        with torch.no_grad():
            log_pi_next = torch.log_softmax(policy.logits(batch.obs_next), dim=-1)
            q_next = self._q(self.nets.target_critic.net, batch.obs_next).min(dim=0).values
            v_next = (log_pi_next.exp() * (q_next - alpha * log_pi_next)).sum(-1)
            target = batch.returns + batch.discounts * v_next
        q_MNA = self._q(self.nets.critic, batch.obs)
        act_index = batch.act.long().view(1, -1, 1).expand(q_MNA.shape[0], -1, 1)
        q_MN = q_MNA.gather(2, act_index).squeeze(-1)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        log_pi = torch.log_softmax(policy.logits(batch.obs), dim=-1)
        pi = log_pi.exp()
        # the critics' values from before their step: saves a forward pass (CleanRL re-evaluates them)
        q_min = q_MNA.detach().min(dim=0).values
        actor_loss = (pi * (alpha * log_pi - q_min)).sum(-1).mean()
        self.nets.actor_step({"actor loss": actor_loss}, hooks)

        entropy = -(pi.detach() * log_pi.detach()).sum(-1).mean()
        alpha_loss = torch.zeros((), device=policy.device)
        if self.temperature.learned:
            alpha_loss = self.temperature.loss_from_entropy(entropy)
            self.temperature.step(alpha_loss, hooks)
        self.nets.update_targets(p.tau)
        stats = gradient_step_stats(
            DiscreteSACTrainingStats,
            "DiscreteSAC",
            {
                "critic_loss": critic.loss,
                "actor_loss": actor_loss,
                "alpha_loss": alpha_loss,
                "alpha": alpha,
                "q_mean": q_MN.mean(),
                "entropy": entropy,
            },
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss", "alpha_loss": "alpha loss"},
            deferred=self.defers_stats,
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return stats
