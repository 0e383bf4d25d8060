"""Batch-constrained deep Q-learning (BCQ, Fujimoto, Meger & Precup 2019), for Box actions (offline).

BCQ only takes actions like the dataset's. A :class:`~tshtrain.algorithm.blocks.vae.ConditionalVAE`
learns the behaviour policy ``G(a | s)``; a perturbation network ``xi(s, a)`` moves a generated action
by at most ``phi`` per dimension; twin critics ``Q_1, Q_2`` value them. One gradient step:

1. the VAE on the dataset's ``(s, a)``: reconstruction + 0.5 * KL;
2. the critics towards ``y = r + gamma * (1 - terminated) * max_j [ lmbda * min_i Q'_i(s', a_j)
   + (1 - lmbda) * max_i Q'_i(s', a_j) ]`` with ``a_j = xi'(s', G(s'))``, j = 1..num_sampled_actions
   (target networks primed);
3. the perturbation network to maximise ``Q_1(s, xi(s, G(s)))``;
4. Polyak averaging of the target perturbation network and target critics.

Acting (:class:`BCQPolicy`): generate ``num_forward_sampled_actions`` actions per observation, perturb
them and take the one with the largest ``Q_1``. All actions live in [-1, 1] (the stored convention).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import gymnasium as gym
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
    Policy,
    TrainingStats,
    UpdateHooks,
    make_adam,
    module_device,
    seeded_generator,
)
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.continuous import box_dim, critic_values
from tshtrain.algorithm.blocks.nets import mlp
from tshtrain.algorithm.blocks.offpolicy import ReplaySample, host_scalars, sample_replay, td_loss
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.algorithm.blocks.vae import ConditionalVAE, vae_loss
from tshtrain.constraints import OpenUnitFloat, PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.batch import ObsTensor
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


@final
class Perturbation(nn.Module):
    """BCQ's perturbation network ``xi(s, a) = clip(a + phi * tanh(net(s, a)), -1, 1)``."""

    def __init__(self, net: nn.Module, *, phi: float = 0.05):
        """Args:
        net: ``concat(obs, act)`` -> (N, act_dim), e.g. an :func:`~tshtrain.algorithm.mlp`.
        phi: the largest change per action dimension, in the [-1, 1] action scale (Tianshou and the
            paper's default 0.05); 0 is pure imitation of the VAE's actions.
        """
        super().__init__()
        if not 0.0 <= phi <= 2.0:
            raise ConfigurationError(f"Perturbation.phi must be a number in [0, 2], got {phi!r}.")
        self.net = net
        self.phi = phi

    @classmethod
    def from_sizes(
        cls, obs_dim: int, act_dim: int, hidden_sizes: tuple[int, ...] = (400, 300), *, phi: float = 0.05
    ) -> Perturbation:
        """An MLP perturbation network with ReLU hidden layers (the paper's sizes by default)."""
        return cls(mlp(obs_dim + act_dim, act_dim, hidden_sizes, nn.ReLU), phi=phi)

    @override
    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(torch.cat([obs.flatten(1), act], dim=-1))
        return (act + self.phi * torch.tanh(out)).clamp(-1.0, 1.0)


def _tensor_obs(obs: ObsTensor) -> torch.Tensor:
    if isinstance(obs, torch.Tensor):
        return obs
    raise UnsupportedSpaceError("BCQ takes array observations, got a dict of tensors (a Dict space).")


@final
class BCQPolicy(Policy):
    """BCQ's policy: per observation, ``num_forward_sampled_actions`` generated and perturbed actions,
    the one with the largest ``Q_1`` taken. Actions are drawn from the policy's generator whether or not
    ``deterministic`` is asked (BCQ has no separate greedy action; as in Tianshou)."""

    def __init__(
        self,
        *,
        perturbation: Perturbation,
        vae: ConditionalVAE,
        critic: nn.Module,
        action_space: gym.Space[Any],
        num_forward_sampled_actions: int = 100,
        seed: int | None = None,
    ):
        """Args:
        perturbation: the perturbation network ``xi(s, a)``.
        vae: the generative model of the dataset's actions.
        critic: ``critic(obs, act)`` -> (2, N), e.g. ``QEnsemble(o, a, num_critics=2)``; acting uses
            member 0.
        action_space: a Box with finite bounds.
        num_forward_sampled_actions: candidate actions per observation (Tianshou's
            ``forward_sampled_times``: 100).
        seed: seeds the generator of the latents (acting and the update's samples).
        """
        if not isinstance(action_space, gym.spaces.Box):
            raise UnsupportedSpaceError(f"BCQPolicy needs a Box action space, got {action_space!r}.")
        if num_forward_sampled_actions < 1:
            raise ConfigurationError(
                f"BCQPolicy.num_forward_sampled_actions must be >= 1, got {num_forward_sampled_actions!r}."
            )
        super().__init__(
            action_space=action_space, deterministic_eval=True, seed=seed, device=module_device(vae)
        )
        if vae.act_dim != box_dim(action_space):
            raise ConfigurationError(
                f"BCQPolicy: the vae generates {vae.act_dim} action dimensions, the action space has "
                f"{box_dim(action_space)}; build ConditionalVAE(obs_dim, {box_dim(action_space)}, ...)."
            )
        self.perturbation = perturbation
        self.vae = vae
        self.critic = critic
        self.num_forward_sampled_actions = num_forward_sampled_actions

    def perturbed_actions(self, obs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """``xi(s, G(s))`` for every row of ``obs`` (one latent draw each), differentiable in ``xi``."""
        with torch.no_grad():
            generated = self.vae.generate(obs, generator)
        perturbed: torch.Tensor = self.perturbation(obs, generated)
        return perturbed

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        del deterministic
        obs_NO = _tensor_obs(obs)
        n, k = obs_NO.shape[0], self.num_forward_sampled_actions
        obs_KO = obs_NO.repeat_interleave(k, dim=0)  # K = N * k rows, k per observation
        act_KA = self.perturbed_actions(obs_KO, self.generator)
        q_Nk = critic_values(self.critic, obs_KO, act_KA)[0].reshape(n, k)
        best_N = q_Nk.argmax(dim=1)
        return act_KA.reshape(n, k, -1)[torch.arange(n, device=best_N.device), best_N]


@dataclass(frozen=True, kw_only=True)
class BCQParams:
    """Hyperparameters of :class:`BCQ` (defaults: Tianshou 2.0.1's BCQ and its Pendulum test)."""

    actor_lr: PositiveFloat = 1e-3
    """Adam learning rate of the perturbation network"""
    critic_lr: PositiveFloat = 1e-3
    """Adam learning rate of the twin critics"""
    vae_lr: PositiveFloat = 1e-3
    """Adam learning rate of the VAE"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    tau: OpenUnitFloat = 0.005
    """Polyak rate of the target perturbation network and critics, in (0, 1]"""
    lmbda: UnitFloat = 0.75
    """weight of the smaller target critic in the target: lmbda * min + (1 - lmbda) * max; 1 is
    TD3's clipped double Q"""
    num_sampled_actions: PositiveInt = 10
    """actions generated per next observation; the target takes the best of them"""

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True, kw_only=True)
class BCQTrainingStats(TrainingStats):
    """Statistics of BCQ gradient steps."""

    critic_loss: float = 0.0
    """sum over the two critics of the mean squared TD error"""
    actor_loss: float = 0.0
    """-mean Q_1(s, xi(s, G(s)))"""
    vae_loss: float = 0.0
    """reconstruction loss + 0.5 * KL"""
    recon_loss: float = 0.0
    """mean squared error of the VAE's reconstructions"""
    q_mean: float = 0.0
    """mean Q_i(s, a) of the sampled transitions over both critics"""


def bcq_target(q_MK: torch.Tensor, batch: ReplaySample, *, lmbda: float, num_sampled: int) -> torch.Tensor:
    """The TD target from the target critics' values ``q_MK`` (2, N * num_sampled) of the sampled next
    actions (rows of one transition adjacent): soft clipped double Q, best sample, bootstrap."""
    soft_K = lmbda * q_MK.min(dim=0).values + (1.0 - lmbda) * q_MK.max(dim=0).values
    best_N = soft_K.reshape(-1, num_sampled).max(dim=1).values
    return batch.returns + batch.discounts * best_N


@final
class BCQ(OfflineAlgorithm[BCQPolicy, BCQTrainingStats]):
    """BCQ on a :class:`BCQPolicy` (see the module docstring). Each :meth:`update` is one step of the
    VAE, the critics and the perturbation network, then a Polyak update of the targets."""

    def __init__(self, *, policy: BCQPolicy, params: BCQParams | None = None, seed: int | None = None):
        """Args:
        policy: holds the perturbation network, the VAE and the twin critic.
        params: hyperparameters.
        seed: seeds the generator of the update's latents and VAE noise.
        """
        super().__init__(policy=policy)
        self.params = p = params or BCQParams()
        self.nets = ActorCriticTargets(
            actor=policy.perturbation,
            critic=policy.critic,
            actor_lr=p.actor_lr,
            critic_lr=p.critic_lr,
            target_actor=True,
        )
        self.vae_optim = make_adam(policy.vae.parameters(), lr=p.vae_lr)
        self.generator = seeded_generator(seed, policy.device)
        """draws the update's latents (VAE reparameterisation and generated actions)"""
        self.register_components({**self.nets.components(), "vae_optim": self.vae_optim})

    def _critic_target(self, batch: ReplaySample) -> torch.Tensor:
        p, k = self.params, self.params.num_sampled_actions
        with torch.no_grad():
            obs_next = _tensor_obs(batch.obs_next).repeat_interleave(k, dim=0)
            generated = self.policy.vae.generate(obs_next, self.generator)
            perturbation_target: TargetNetwork = self.nets.actor_target
            act_next = perturbation_target.net(obs_next, generated)
            q_MK = critic_values(self.nets.target_critic.net, obs_next, act_next)
            return bcq_target(q_MK, batch, lmbda=p.lmbda, num_sampled=k)

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> BCQTrainingStats:
        p, policy = self.params, self.policy
        batch = sample_replay(buffer, batch_size, gamma=p.gamma, n_step=1, device=policy.device, hooks=hooks)
        obs, act = _tensor_obs(batch.obs), batch.act.float()

        vae, recon, _ = vae_loss(policy.vae(obs, act, self.generator), act)
        optimizer_step(self.vae_optim, "vae_optim", {"vae loss": vae}, hooks)

        target = self._critic_target(batch)
        q_MN = critic_values(self.nets.critic, obs, act)
        critic = td_loss(q_MN, target, batch.weight)
        self.nets.critic_step({"critic loss": critic.loss}, hooks)

        with self.nets.frozen_critic():
            act_pi = policy.perturbed_actions(obs, self.generator)
            actor_loss = -critic_values(self.nets.critic, obs, act_pi)[0].mean()
            self.nets.actor_step({"actor loss": actor_loss}, hooks)
        self.nets.update_targets(p.tau)

        stats = host_scalars(
            "BCQ",
            {
                "critic loss": critic.loss,
                "actor loss": actor_loss,
                "vae loss": vae,
                "recon loss": recon,
                "q_mean": q_MN.mean(),
            },
            losses=("critic loss", "actor loss", "vae loss"),
        )
        return BCQTrainingStats(
            critic_loss=stats["critic loss"],
            actor_loss=stats["actor loss"],
            vae_loss=stats["vae loss"],
            recon_loss=stats["recon loss"],
            q_mean=stats["q_mean"],
        )
