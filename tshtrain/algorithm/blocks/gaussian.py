"""A diagonal Gaussian policy for Box actions with a state-independent log standard deviation.

Log-probabilities and entropies are computed with explicit formulas (no ``torch.distributions``
objects), and actions are sampled from the policy's own ``torch.Generator``.
"""

from __future__ import annotations

import math
from typing import Any, final

import gymnasium as gym
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import Policy, module_device
from tshtrain.algorithm.blocks.encoders import accepts_dict_obs
from tshtrain.data.batch import ObsTensor
from tshtrain.errors import UnsupportedSpaceError

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_prob(mean_NA: torch.Tensor, log_std_A: torch.Tensor, act_NA: torch.Tensor) -> torch.Tensor:
    """log N(act | mean, diag(exp(log_std))^2), summed over the action dimensions, shape (N,)."""
    z_NA = (act_NA - mean_NA) * torch.exp(-log_std_A)
    return (-0.5 * z_NA.square() - log_std_A - _HALF_LOG_2PI).sum(dim=-1)


def gaussian_entropy(log_std_A: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian with the given log standard deviations (a scalar)."""
    return (log_std_A + 0.5 + _HALF_LOG_2PI).sum()


@final
class GaussianPolicy(Policy):
    """Box actions ``a ~ N(actor(obs), diag(exp(log_std))^2)``, with ``log_std`` a learned parameter
    that does not depend on the observation.

    The Gaussian lives in the policy's action space ``[-1, 1]^A`` and is **not squashed**: samples can
    leave the interval. They are stored unchanged, so log-probabilities of stored actions are exact,
    and :meth:`Policy.map_action` clips them to ``[-1, 1]`` before scaling them onto the env's bounds
    (``action_scaling=True``; with ``action_scaling=False`` the env receives the raw samples, so make
    sure it accepts them). Deterministic actions (test steps, by default) are the mean.
    """

    def __init__(
        self,
        actor: nn.Module,
        action_space: gym.Space[Any],
        *,
        init_log_std: float = 0.0,
        action_scaling: bool = True,
        deterministic_eval: bool = True,
        seed: int | None = None,
    ):
        """Args:
        actor: maps observations to action means, shape (N, A).
        action_space: a one-dimensional Box.
        init_log_std: initial log standard deviation of every action dimension (in the policy's
            ``[-1, 1]`` space: with ``action_scaling`` a std of 1 covers half the Box's width).
        action_scaling: map actions from [-1, 1] onto the Box's bounds (see :class:`Policy`).
        deterministic_eval: test steps act with the mean.
        seed: seeds the policy's generator, from which actions are sampled.
        """
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise UnsupportedSpaceError(
                f"GaussianPolicy needs a one-dimensional Box action space, got {action_space!r}; "
                f"flatten other Box spaces with gymnasium.wrappers.FlattenAction or similar."
            )
        super().__init__(
            action_space=action_space,
            action_scaling=action_scaling,
            deterministic_eval=deterministic_eval,
            seed=seed,
            device=module_device(actor),
        )
        self.actor = actor
        self._takes_dict = accepts_dict_obs(actor)
        self.log_std = nn.Parameter(torch.full(action_space.shape, float(init_log_std), device=self.device))

    def mean_actions(self, obs: ObsTensor) -> torch.Tensor:
        """The means ``actor(obs)``, shape (N, A), differentiable."""
        if not (isinstance(obs, torch.Tensor) or self._takes_dict):
            raise UnsupportedSpaceError(
                "GaussianPolicy's actor takes array observations, but got a dict of tensors (a Dict "
                "observation space). Build the actor on a DictEncoder "
                "(tshtrain.algorithm.obs_encoder(space)), or give your own module an attribute "
                "accepts_dict_obs = True."
            )
        mean: torch.Tensor = self.actor(obs)
        return mean

    def log_prob_entropy(self, obs: ObsTensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(act | obs), shape (N,); entropy of pi(. | obs), shape (N,)), differentiable."""
        mean_NA = self.mean_actions(obs)
        logp_N = gaussian_log_prob(mean_NA, self.log_std, act)
        return logp_N, gaussian_entropy(self.log_std).expand(len(logp_N))

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        return self._sample(self.mean_actions(obs), deterministic)

    @override
    def actions_with_log_prob(
        self, obs: ObsTensor, *, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        mean_NA = self.mean_actions(obs)
        act_NA = self._sample(mean_NA, deterministic)
        # the formula of log_prob_entropy on the same mean: the value an update would recompute
        return act_NA, None if deterministic else gaussian_log_prob(mean_NA, self.log_std, act_NA)

    def _sample(self, mean_NA: torch.Tensor, deterministic: bool) -> torch.Tensor:
        if deterministic:
            return mean_NA
        noise_NA = torch.randn(
            mean_NA.shape, generator=self.generator, dtype=mean_NA.dtype, device=mean_NA.device
        )
        return mean_NA + torch.exp(self.log_std) * noise_NA
