"""Networks and policies for Box actions, shared by DDPG, TD3 and SAC.

Action convention: every network here acts in ``[-1, 1]`` per action dimension (a tanh at the end of
the actor), and that is what the replay buffer stores and the critics take. ``Policy.map_action`` maps
``[-1, 1]`` linearly onto the env's ``[low, high]`` before ``env.step``; uniformly random prefill
actions are mapped back with ``map_action_inverse``, so they are stored in ``[-1, 1]`` too.

* :class:`QEnsemble` — ``num_critics`` independent Q-networks ``Q_i(o, a)`` evaluated as one batched
  network (one matmul per layer for all members): a single critic for DDPG, the twin critics of TD3
  and SAC. Members are initialised independently, like separate ``nn.Linear`` MLPs.
* :class:`TanhGaussianPolicy` — SAC's stochastic actor ``a = tanh(mu + sigma * eps)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import Policy, module_device
from tshtrain.algorithm.blocks.encoders import accepts_dict_obs

# their home before blocks/ensemble.py: ``X as X`` re-exports them (PEP 484, mypy's explicit re-export)
from tshtrain.algorithm.blocks.ensemble import EnsembleLinear as EnsembleLinear  # noqa: PLC0414
from tshtrain.algorithm.blocks.ensemble import ensemble_mlp as ensemble_mlp  # noqa: PLC0414
from tshtrain.data.batch import ObsTensor
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

LOG_STD_MIN = -20.0
"""lower clamp of the actor's log standard deviation"""
LOG_STD_MAX = 2.0
"""upper clamp of the actor's log standard deviation"""
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def box_dim(space: gym.Space[Any]) -> int:
    """Number of action dimensions of a Box action space (flattened)."""
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise UnsupportedSpaceError(f"box_dim: {space!r} is not a Box action space.")


def _require_box(space: gym.Space[Any], owner: str) -> None:
    if not isinstance(space, gym.spaces.Box):
        raise UnsupportedSpaceError(f"{owner} needs a Box action space, got {space!r}.")


def _as_tensor(obs: ObsTensor, owner: str, takes_dict: bool = False) -> ObsTensor:
    if isinstance(obs, torch.Tensor) or takes_dict:
        return obs
    raise UnsupportedSpaceError(
        f"{owner}'s actor takes array observations, but got a dict of tensors (a Dict observation "
        f"space). Build the actor on a DictEncoder (tshtrain.algorithm.obs_encoder(space)), or give your "
        f"own module an attribute accepts_dict_obs = True."
    )


@final
class QEnsemble(nn.Module):
    """``num_critics`` MLP critics ``Q_i(o, a)`` on ``concat(o, a)``; ``forward(obs, act)`` returns
    shape (num_critics, N).

    Any module with the same ``forward(obs, act) -> (num_critics, N)`` contract can replace it.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_sizes: Sequence[int] = (256, 256),
        *,
        num_critics: int = 2,
        activation: type[nn.Module] = nn.ReLU,
    ):
        """Args:
        obs_dim: flattened observation size.
        act_dim: flattened action size.
        hidden_sizes: hidden layer widths of every member.
        num_critics: ensemble members (1 for DDPG, 2 for TD3 / SAC).
        activation: activation after each hidden layer.
        """
        super().__init__()
        if num_critics < 1:
            raise ConfigurationError(f"QEnsemble.num_critics must be >= 1, got {num_critics!r}.")
        self.num_critics = num_critics
        self.net = ensemble_mlp(num_critics, obs_dim + act_dim, 1, hidden_sizes, activation)

    @override
    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        q_MN1: torch.Tensor = self.net(self.ensemble_input(obs, act, self.num_critics))
        return q_MN1.squeeze(-1)

    @staticmethod
    def ensemble_input(
        obs: torch.Tensor, act: torch.Tensor, num_critics: int, batch_dims: int = 1
    ) -> torch.Tensor:
        """``concat(o, a)`` for every critic: (N, ...) observations and actions -> (num_critics, N, in);
        with ``batch_dims=2`` (K stacked seeds: (K, N, ...)) -> (K, num_critics, N, in)."""
        x = torch.cat([obs.flatten(batch_dims), act.flatten(batch_dims)], dim=-1)
        return x.unsqueeze(-3).expand(*x.shape[:-2], num_critics, *x.shape[-2:])


def split_mean_log_std(out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An actor's output (..., 2 * act_dim) as ``mu`` and the clamped ``log sigma`` (each (..., act_dim)),
    as :class:`TanhGaussianPolicy` reads it."""
    mu, log_std = torch.chunk(out, 2, dim=-1)
    return mu, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)


def critic_values(critic: nn.Module, obs: ObsTensor, act: torch.Tensor) -> torch.Tensor:
    """``critic(obs, act)`` with its (num_critics, N) result typed."""
    q_MN: torch.Tensor = critic(obs, act)
    return q_MN


@final
class TanhGaussianPolicy(Policy):
    """SAC's squashed Gaussian policy for Box actions.

    ``actor(obs)`` returns ``2 * act_dim`` numbers per observation: the mean ``mu`` and the log standard
    deviation (clamped to [LOG_STD_MIN, LOG_STD_MAX]) of a diagonal Gaussian over ``u``. Actions are
    ``a = tanh(u)`` in ``(-1, 1)``, mapped onto the Box bounds by :meth:`Policy.map_action`. Training
    actions sample ``u = mu + sigma * eps`` with ``eps ~ N(0, I)`` drawn from the policy's generator;
    deterministic actions are ``tanh(mu)``. The log-density of ``a`` includes the change of variables,

        log pi(a | o) = sum_i [ -eps_i^2 / 2 - log sigma_i - log(2 pi) / 2 - log(1 - tanh(u_i)^2) ],

    with ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`` computed in that stable form.
    """

    def __init__(
        self,
        actor: nn.Module,
        action_space: gym.Space[Any],
        *,
        deterministic_eval: bool = True,
        seed: int | None = None,
    ):
        """Args:
        actor: observation -> (N, 2 * act_dim): means, then log standard deviations.
        action_space: a Box with finite bounds.
        deterministic_eval: test steps act with ``tanh(mu)``.
        seed: seeds the policy's generator (training actions, and SAC's samples in its update).
        """
        _require_box(action_space, "TanhGaussianPolicy")
        super().__init__(
            action_space=action_space,
            deterministic_eval=deterministic_eval,
            seed=seed,
            device=module_device(actor),
        )
        self.actor = actor
        self._takes_dict = accepts_dict_obs(actor)
        self.act_dim = box_dim(action_space)

    def mean_log_std(self, obs: ObsTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``mu`` and the clamped ``log sigma``, each (N, act_dim)."""
        net_obs = (
            obs if isinstance(obs, torch.Tensor) else _as_tensor(obs, "TanhGaussianPolicy", self._takes_dict)
        )
        out: torch.Tensor = self.actor(net_obs)
        return split_mean_log_std(out)

    def sample(self, obs: ObsTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample: actions (N, act_dim) in (-1, 1) and their log-densities (N,)."""
        mu, log_std = self.mean_log_std(obs)
        eps = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
        return self.sample_with_noise(obs, eps, mu_log_std=(mu, log_std))

    def sample_with_noise(
        self,
        obs: ObsTensor,
        eps: torch.Tensor,
        *,
        mu_log_std: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`sample` with the standard normal noise ``eps`` (N, act_dim) given instead of drawn
        (stacked seeds draw each member's noise from its own generator outside ``vmap``);
        ``mu_log_std``: :meth:`mean_log_std` of ``obs`` if already computed."""
        mu, log_std = self.mean_log_std(obs) if mu_log_std is None else mu_log_std
        u = mu + log_std.exp() * eps
        log_prob = (-0.5 * eps.pow(2) - log_std - _HALF_LOG_2PI).sum(-1)
        log_prob = log_prob - (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1)
        return torch.tanh(u), log_prob

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        mu, log_std = self.mean_log_std(obs)
        if deterministic:
            return torch.tanh(mu)
        # what sample() draws and computes for the action, without its log-density
        eps = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
        return torch.tanh(mu + log_std.exp() * eps)
