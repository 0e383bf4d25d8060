"""Actor, critic, their target copies and their optimizers: the state that DDPG, TD3, TD3+BC, SAC,
discrete SAC and CQL share."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import final

import torch
from torch import nn

from tshtrain.algorithm.base import Stateful, UpdateHooks, make_adam
from tshtrain.algorithm.blocks.offpolicy import frozen
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.polyak import TargetNetwork


@final
class ActorCriticTargets:
    """An actor and a critic with an Adam optimizer each, a Polyak-averaged target copy of the critic
    and (``target_actor=True``: DDPG, TD3, TD3+BC) of the actor.

    :meth:`components` names them as the algorithms save them: ``critic``, ``target_actor``,
    ``target_critic``, ``actor_optim``, ``critic_optim`` (the actor is saved with the policy).
    """

    def __init__(
        self, *, actor: nn.Module, critic: nn.Module, actor_lr: float, critic_lr: float, target_actor: bool
    ):
        """Args:
        actor: the policy's network (trained by :attr:`actor_optim`).
        critic: the critic network (trained by :attr:`critic_optim`).
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of the critic.
        target_actor: also keep a target copy of the actor.
        """
        self.critic = critic
        self.target_actor = TargetNetwork(actor) if target_actor else None
        self.target_critic = TargetNetwork(critic)
        self.critic_params = [param for param in critic.parameters() if param.requires_grad]
        """the critic's trainable parameters (frozen while the actor's loss backpropagates)"""
        self.actor_optim = make_adam(actor.parameters(), lr=actor_lr)
        self.critic_optim = make_adam(critic.parameters(), lr=critic_lr)

    def components(self) -> dict[str, Stateful]:
        """The critic, the targets and both optimizers, by their saved names."""
        components: dict[str, Stateful] = {"critic": self.critic}
        if self.target_actor is not None:
            components["target_actor"] = self.target_actor
        components["target_critic"] = self.target_critic
        components["actor_optim"] = self.actor_optim
        components["critic_optim"] = self.critic_optim
        return components

    @property
    def actor_target(self) -> TargetNetwork:
        """The target actor (only with ``target_actor=True``)."""
        assert self.target_actor is not None, "built without target_actor"
        return self.target_actor

    def critic_step(self, losses: Mapping[str, torch.Tensor], hooks: UpdateHooks) -> None:
        """One step of the critic's optimizer on the single loss in ``losses``."""
        optimizer_step(self.critic_optim, "critic_optim", losses, hooks)

    def actor_step(self, losses: Mapping[str, torch.Tensor], hooks: UpdateHooks) -> None:
        """One step of the actor's optimizer on the single loss in ``losses``."""
        optimizer_step(self.actor_optim, "actor_optim", losses, hooks)

    def frozen_critic(self) -> AbstractContextManager[None]:
        """A block in which the critic's weights need no gradient (the actor's loss goes through it)."""
        return frozen(self.critic_params)

    def update_targets(self, tau: float) -> None:
        """Polyak-average the target actor (if any), then the target critic, by ``tau``."""
        if self.target_actor is not None:
            self.target_actor.update(tau)
        self.target_critic.update(tau)

    def hard_update_targets(self) -> None:
        """Copy the online networks into the targets."""
        if self.target_actor is not None:
            self.target_actor.hard_update()
        self.target_critic.hard_update()
