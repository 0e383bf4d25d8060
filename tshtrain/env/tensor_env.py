"""The protocol of batched environments whose data stays in torch (GPU simulators: VMAS, Isaac Lab,
ManiSkill3) and the step record they return.

A :class:`TensorVectorEnv` steps ``num_envs`` environments at once; every tensor it takes and returns
lives on ``env.device``. Episodes reset themselves in the step that ends them (same-step autoreset, as
tshtrain's Gymnasium vector envs do): ``TensorStep.obs`` of an ended env is the first observation of
its next episode, and ``TensorStep.final_obs`` holds the true last observation of the episode that
ended (for every other env it equals ``obs``). The collector for such envs,
:class:`tshtrain.data.TensorCollector`, never converts to numpy.

Shapes (``N`` = num_envs): observations ``(N, *obs_shape)`` or a dict of such tensors (Dict
observation spaces), actions ``(N, *act_shape)`` in the env's action space, rewards ``(N,)`` float32,
``terminated`` / ``truncated`` ``(N,)`` bool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

import gymnasium as gym
import torch

TensorObs: TypeAlias = torch.Tensor | Mapping[str, torch.Tensor]
"""A batch of observations as tensors: one tensor, or one per key of a Dict observation space (the
same type as :data:`tshtrain.data.batch.ObsTensor`)."""


class TensorStep(NamedTuple):
    """What :meth:`TensorVectorEnv.step` returns (all tensors on the env's device)."""

    obs: TensorObs
    """o_{t+1}; for envs whose episode ended in this step, the first observation of the next one"""
    rew: torch.Tensor
    """r_t, shape (N,), float32"""
    terminated: torch.Tensor
    """shape (N,), bool: o_{t+1} is terminal (no bootstrapping from it)"""
    truncated: torch.Tensor
    """shape (N,), bool: the episode was cut (time limit) after this step"""
    final_obs: TensorObs
    """the observation to store as o_{t+1}: the episode's true last observation where it ended, the
    same as ``obs`` elsewhere"""
    info: Mapping[str, Any]
    """extra data (scalars per env as tensors of shape (N,), read by ``Collector(info_key=...)``)"""


@runtime_checkable
class TensorVectorEnv(Protocol):
    """A batched environment whose ``reset`` / ``step`` take and return torch tensors on ``device``."""

    @property
    def num_envs(self) -> int:
        """Number of environments stepped together (N)."""
        ...

    @property
    def device(self) -> torch.device:
        """Where every tensor of ``reset`` and ``step`` lives."""
        ...

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """The observation space of one env (Box, or a flat Dict of Box / Discrete)."""
        ...

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """The action space of one env (Box, Discrete, MultiDiscrete or MultiBinary)."""
        ...

    def reset(self, *, seed: int | None = None) -> tuple[TensorObs, Mapping[str, Any]]:
        """Reset every env (seeded if ``seed`` is given); returns (observations, info)."""
        ...

    def step(self, actions: torch.Tensor) -> TensorStep:
        """Step every env with ``actions`` (shape (N, *act_shape), on ``device``); ended episodes reset
        in the same call (see the module docstring)."""
        ...

    def close(self) -> None:
        """Release the simulator."""
        ...
