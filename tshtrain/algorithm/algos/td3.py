"""TD3: twin delayed deep deterministic policy gradient (Fujimoto et al. 2018), for Box actions."""

from __future__ import annotations

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
    seeded_generator,
)
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.continuous import critic_values
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    ReplaySample,
    sample_replay,
    td_loss,
    update_priorities,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams, setup_actor_critic
from tshtrain.algorithm.blocks.policies import DeterministicActorPolicy
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.constraints import NonNegativeFloat, PositiveInt
from tshtrain.data.collector_base import AnyReplayBuffer


@dataclass(frozen=True, kw_only=True)
class TwinDelayedParams(OffPolicyActorCriticParams):
    """Hyperparameters shared by :class:`TD3Params` and :class:`~tshtrain.algorithm.TD3BCParams`
    (use those; this base is abstract). Noise scales are in the policy's [-1, 1] action space."""

    policy_noise: NonNegativeFloat = 0.2
    """std of the Gaussian noise added to the target actor's actions (target policy smoothing)"""
    noise_clip: NonNegativeFloat = 0.5
    """the target policy noise is clipped to [-noise_clip, noise_clip]"""
    policy_delay: PositiveInt = 2
    """gradient steps of the critics per step of the actor and the target networks"""


@final
@dataclass(frozen=True, kw_only=True)
class TD3Params(TwinDelayedParams):
    """Hyperparameters of :class:`TD3` (besides those of :class:`TwinDelayedParams`)."""

    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class TD3TrainingStats(TrainingStats):
    """Statistics of TD3 gradient steps."""

    critic_loss: float = 0.0
    """sum over the two critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """-mean Q_1(o, pi(o)) at the latest actor step (the actor steps every policy_delay steps)"""
    q_mean: float = 0.0
    """mean Q_i(o, a) of the sampled transitions over both critics"""


def smoothed_target_actions(
    target_actor: nn.Module, obs_next: Any, *, noise_std: float, noise_clip: float, generator: torch.Generator
) -> torch.Tensor:
    """``clip(tanh(actor_targ(o')) + clip(noise, -c, c), -1, 1)`` with ``noise ~ N(0, noise_std^2)``."""
    mean: torch.Tensor = torch.tanh(target_actor(obs_next))
    if noise_std == 0.0:
        return mean
    noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
    return (mean + (noise * noise_std).clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)


@torch.no_grad()
def smoothed_td_target(
    nets: ActorCriticTargets,
    sample: ReplaySample,
    *,
    noise_std: float,
    noise_clip: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """``R + D * min_i Q_targ_i(o', a~')`` with ``a~'`` the target actor's smoothed action (TD3, TD3+BC)."""
    act_next = smoothed_target_actions(
        nets.actor_target.net,
        sample.obs_next,
        noise_std=noise_std,
        noise_clip=noise_clip,
        generator=generator,
    )
    q_next = critic_values(nets.target_critic.net, sample.obs_next, act_next).min(dim=0).values
    return sample.returns + sample.discounts * q_next


@final
class TD3(OffPolicyAlgorithm[DeterministicActorPolicy, TD3TrainingStats]):
    """TD3 on a :class:`DeterministicActorPolicy` (exploration: its Gaussian ``noise_std`` through the
    collector's ``exploration_noise=True``) and a twin critic (``QEnsemble(..., num_critics=2)``).

    Each :meth:`update` is one gradient step of the critics towards
    ``y = R + D * min_i Q_targ_i(o', a~')``, ``a~'`` the target actor's action with clipped Gaussian
    noise (target policy smoothing); every ``policy_delay``-th step also steps the actor on
    ``-mean Q_1(o, pi(o))`` and Polyak-updates the target actor and critics.
    """

    def __init__(
        self,
        *,
        policy: DeterministicActorPolicy,
        critic: nn.Module,
        params: TD3Params | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the actor, ``tanh(actor(obs))`` in [-1, 1].
        critic: ``critic(obs, act)`` -> (num_critics, N) with 2 critics, e.g. ``QEnsemble(o, a)``.
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of every network
            reading observations; updated after every update with its batch's observations.
        seed: seeds the generator of the target policy noise.
        """
        super().__init__(policy=policy)
        self.params = params or TD3Params()
        self.obs_normalization, self.nets, self.lrs = setup_actor_critic(
            self,
            actor=policy.actor,
            critic=critic,
            params=self.params,
            target_actor=True,
            obs_normalizer=obs_normalizer,
        )
        self.generator = seeded_generator(seed, policy.device)
        """draws the target policy noise"""
        self.num_gradient_steps = 0
        self._actor_loss = torch.zeros((), device=policy.device)

    @override
    def extra_state(self) -> dict[str, Any]:
        return {
            "num_gradient_steps": self.num_gradient_steps,
            "actor_loss": self._actor_loss.clone(),
        }

    @override
    def load_extra_state(self, state: Any) -> None:
        self.num_gradient_steps = int(state["num_gradient_steps"])
        self._actor_loss = state["actor_loss"].to(self.device, copy=True)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TD3TrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=policy.device, hooks=hooks
        )
        target = smoothed_td_target(
            self.nets, batch, noise_std=p.policy_noise, noise_clip=p.noise_clip, generator=self.generator
        )
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)
        self.num_gradient_steps += 1

        if self.num_gradient_steps % p.policy_delay == 0:
            with self.nets.frozen_critic():
                actor_loss = -critic_values(self.nets.critic, batch.obs, policy.mean_actions(batch.obs))[
                    0
                ].mean()
                self.nets.actor_step({"actor loss": actor_loss}, hooks)
            self.nets.update_targets(p.tau)
            self._actor_loss = actor_loss.detach()
        stats = gradient_step_stats(
            TD3TrainingStats,
            "TD3",
            {"critic_loss": critic.loss, "actor_loss": self._actor_loss, "q_mean": q_MN.mean()},
            losses={"critic_loss": "critic loss", "actor_loss": "actor loss"},
            deferred=self.defers_stats,
        )
        update_priorities(buffer, batch.indices, critic.td_errors)
        self.obs_normalization.update(batch.obs)
        return stats
