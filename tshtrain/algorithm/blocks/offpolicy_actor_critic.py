"""What the off-policy actor-critics (DDPG, TD3, TD3+BC, SAC, discrete SAC, REDQ, CQL) share, as
functions, one record and an abstract params base, the counterpart of
:mod:`~tshtrain.algorithm.blocks.onpolicy` for A2C and PPO.

* :class:`OffPolicyActorCriticParams`: the hyperparameters all seven take (their params classes extend
  it; TD3 and TD3+BC through :class:`~tshtrain.algorithm.algos.td3.TwinDelayedParams`).
* :func:`setup_actor_critic`: their observation normalisation, networks, target copies, optimizers and
  learning-rate schedule, registered on the algorithm under the names they are saved by.

The seven are of two families (off-policy and offline), so they share no algorithm base class: each
calls :func:`setup_actor_critic` in its constructor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from tshtrain.algorithm.base import Algorithm
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import OpenUnitFloat, PositiveFloat, UnitFloat, validate_fields


@dataclass(frozen=True, kw_only=True)
class OffPolicyActorCriticParams(ABC):
    """Hyperparameters shared by the params of DDPG, TD3, TD3+BC, SAC, discrete SAC, REDQ and CQL (use
    those; this base is abstract). The learning-rate defaults are those of DDPG, TD3, SAC and REDQ;
    discrete SAC, CQL and TD3+BC declare their own."""

    actor_lr: PositiveFloat = 1e-3
    """Adam learning rate of the actor"""
    critic_lr: PositiveFloat = 1e-3
    """Adam learning rate of the critic network (one optimizer over all critics of a twin critic or an
    ensemble)"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    tau: OpenUnitFloat = 0.005
    """Polyak rate of the target networks, in (0, 1]: the target critics, and the target actor of DDPG,
    TD3 and TD3+BC"""
    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the gradient step after k gradient steps (e.g.
    ``LinearSchedule(num_update_steps=<gradient steps of the run>)``); None: constant learning rates"""

    @abstractmethod
    def __post_init__(self) -> None:
        """Check the fields (each subclass calls this through ``super().__post_init__()`` before its own
        cross-field rules)."""
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


class ActorCriticParts(NamedTuple):
    """What :func:`setup_actor_critic` builds; the algorithm keeps each part as the attribute of the
    same name."""

    obs_normalization: ObsNormalization
    """the optional observation normaliser, checked against the policy and the critic"""
    nets: ActorCriticTargets
    """critic, target networks, actor and critic optimizers"""
    lrs: ScheduledLearningRates
    """every optimizer's learning rate on the params' ``lr_schedule``"""


def setup_actor_critic(
    algorithm: Algorithm[Any, Any],
    *,
    actor: nn.Module,
    critic: nn.Module,
    params: OffPolicyActorCriticParams,
    target_actor: bool,
    obs_normalizer: RunningObsNormalizer | None,
    extra_optimizers: Mapping[str, torch.optim.Optimizer] | None = None,
) -> ActorCriticParts:
    """Build the parts every off-policy actor-critic has and register them on ``algorithm``.

    Registers, in this order: ``critic``, ``target_actor`` (``target_actor=True``), ``target_critic``,
    ``actor_optim``, ``critic_optim``, then ``extra_optimizers`` (e.g. ``{"alpha_optim": ...}``), then
    ``lr_schedule`` when the params set one. The schedule covers every optimizer registered so far.

    Args:
        algorithm: the algorithm being built (its policy is already set); names errors by its class.
        actor: the policy's network, trained by ``actor_optim``.
        critic: the critic network, trained by ``critic_optim``.
        params: the algorithm's hyperparameters (learning rates and their schedule).
        target_actor: keep a Polyak-averaged copy of the actor too (DDPG, TD3, TD3+BC).
        obs_normalizer: the :class:`RunningObsNormalizer` that is the first layer of the policy and the
            critic, or None.
        extra_optimizers: further optimizers of the algorithm by their saved names, built before.
    """
    obs_normalization = ObsNormalization(
        type(algorithm).__name__, obs_normalizer, {"policy": algorithm.policy, "critic": critic}
    )
    nets = ActorCriticTargets(
        actor=actor,
        critic=critic,
        actor_lr=params.actor_lr,
        critic_lr=params.critic_lr,
        target_actor=target_actor,
    )
    algorithm.register_components({**nets.components(), **(extra_optimizers or {})})
    lrs = ScheduledLearningRates(params.lr_schedule, optimizers_in(algorithm.components()))
    algorithm.register_components(lrs.components())
    return ActorCriticParts(obs_normalization=obs_normalization, nets=nets, lrs=lrs)
