"""TD3+BC (Fujimoto & Gu 2021): TD3 with a behaviour-cloning term in the actor loss, for Box actions
(offline).

The critics are trained exactly as in TD3. The actor maximises ``lambda * Q_1(s, pi(s))`` and stays
close to the dataset's actions,

    actor_loss = -lambda * mean Q_1(s, pi(s)) + mean (pi(s) - a)^2,   lambda = alpha / mean |Q_1(s, pi(s))|,

with states ``s`` standardised by the dataset's mean and standard deviation, computed once in
:meth:`TD3BC.process_buffer` into a :class:`RunningObsNormalizer` that is the first layer of both actor
and critic (so test steps see the same normalisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.algos.td3 import TwinDelayedParams, smoothed_td_target
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
    TrainingStats,
    UpdateHooks,
    seeded_generator,
)
from tshtrain.algorithm.blocks.continuous import critic_values
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    host_scalars,
    sample_replay,
    td_loss,
)
from tshtrain.algorithm.blocks.offpolicy_actor_critic import setup_actor_critic
from tshtrain.algorithm.blocks.policies import DeterministicActorPolicy
from tshtrain.constraints import NonNegativeFloat, PositiveFloat
from tshtrain.data.buffer import BaseReplayBuffer


@final
@dataclass(frozen=True, kw_only=True)
class TD3BCParams(TwinDelayedParams):
    """Hyperparameters of :class:`TD3BC` (besides those of :class:`TwinDelayedParams`, with the paper's
    learning rates)."""

    actor_lr: PositiveFloat = 3e-4
    """Adam learning rate of the actor (the base's field with the paper's default)"""
    critic_lr: PositiveFloat = 3e-4
    """Adam learning rate of the twin critics (the base's field with the paper's default)"""
    alpha: NonNegativeFloat = 2.5
    """weight of the Q term relative to behaviour cloning (lambda = alpha / mean |Q|); 0 is pure
    behaviour cloning, the paper uses 2.5"""

    @override
    def __post_init__(self) -> None:
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class TD3BCTrainingStats(TrainingStats):
    """Statistics of TD3+BC gradient steps."""

    critic_loss: float = 0.0
    """sum over the two critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """-lambda * mean Q_1(s, pi(s)) + bc_loss at the latest actor step"""
    bc_loss: float = 0.0
    """mean squared error to the dataset's actions at the latest actor step"""
    q_mean: float = 0.0
    """mean Q_i(s, a) of the sampled transitions over both critics"""


def td3_bc_actor_loss(
    q_N: torch.Tensor, act_pi: torch.Tensor, act_data: torch.Tensor, alpha: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``-lambda * mean(q) + mse(pi, a)`` with ``lambda = alpha / mean|q|`` (no gradient through lambda);
    returns the loss and the behaviour-cloning term."""
    lmbda = alpha / q_N.abs().mean().detach().clamp_min(1e-6)
    bc = F.mse_loss(act_pi, act_data)
    return -lmbda * q_N.mean() + bc, bc


@final
class TD3BC(OfflineAlgorithm[DeterministicActorPolicy, TD3BCTrainingStats]):
    """TD3+BC on a :class:`DeterministicActorPolicy` and a twin critic (``QEnsemble(..., num_critics=2)``).

    Pass the :class:`RunningObsNormalizer` that is the first layer of the policy's actor and of the
    critic; :meth:`process_buffer` (called by the :class:`~tshtrain.trainer.OfflineTrainer` before
    training) replaces its statistics by the dataset's. Each :meth:`update`
    is one critic step as in TD3; every ``policy_delay``-th step also steps the actor on the TD3+BC
    loss and Polyak-updates the target networks.
    """

    def __init__(
        self,
        *,
        policy: DeterministicActorPolicy,
        critic: nn.Module,
        obs_normalizer: RunningObsNormalizer | None = None,
        params: TD3BCParams | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the actor, ``tanh(actor(obs))`` in [-1, 1].
        critic: ``critic(obs, act)`` -> (num_critics, N) with 2 critics, e.g. ``QEnsemble(o, a)``.
        obs_normalizer: the first layer of actor and critic, fitted to the dataset in
            :meth:`process_buffer` (the paper's state normalisation); None: raw observations.
        params: hyperparameters.
        seed: seeds the generator of the target policy noise.
        """
        super().__init__(policy=policy)
        self.params = params or TD3BCParams()
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
        self._bc_loss = torch.zeros((), device=policy.device)

    @override
    def extra_state(self) -> dict[str, Any]:
        return {
            "num_gradient_steps": self.num_gradient_steps,
            "actor_loss": self._actor_loss.clone(),
            "bc_loss": self._bc_loss.clone(),
        }

    @override
    def load_extra_state(self, state: Any) -> None:
        self.num_gradient_steps = int(state["num_gradient_steps"])
        self._actor_loss = state["actor_loss"].to(self.device, copy=True)
        self._bc_loss = state["bc_loss"].to(self.device, copy=True)

    @override
    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        """Fit the observation normaliser (if any) to the dataset's observations."""
        if self.obs_normalization.fit(buffer):
            self.nets.hard_update_targets()  # the targets take the statistics too

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TD3BCTrainingStats:
        self.lrs.begin_update()
        p, policy = self.params, self.policy
        batch = sample_replay(buffer, batch_size, gamma=p.gamma, n_step=1, device=policy.device, hooks=hooks)
        target = smoothed_td_target(
            self.nets, batch, noise_std=p.policy_noise, noise_clip=p.noise_clip, generator=self.generator
        )
        q_MN = critic_values(self.nets.critic, batch.obs, batch.act)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)
        self.num_gradient_steps += 1

        if self.num_gradient_steps % p.policy_delay == 0:
            with self.nets.frozen_critic():
                act_pi = policy.mean_actions(batch.obs)
                q_N = critic_values(self.nets.critic, batch.obs, act_pi)[0]
                actor_loss, bc_loss = td3_bc_actor_loss(q_N, act_pi, batch.act.float(), p.alpha)
                self.nets.actor_step({"actor loss": actor_loss}, hooks)
            self.nets.update_targets(p.tau)
            self._actor_loss, self._bc_loss = actor_loss.detach(), bc_loss.detach()
        stats = host_scalars(
            "TD3BC",
            {
                "critic loss": critic.loss,
                "actor loss": self._actor_loss,
                "bc loss": self._bc_loss,
                "q_mean": q_MN.mean(),
            },
            losses=("critic loss", "actor loss"),
        )
        return TD3BCTrainingStats(
            critic_loss=stats["critic loss"],
            actor_loss=stats["actor loss"],
            bc_loss=stats["bc loss"],
            q_mean=stats["q_mean"],
        )
