"""Typed batch records passed between the buffer, the collector and algorithms.

Shape suffixes follow STYLE.md: ``N`` = batch of transitions, ``T`` = time, ``E`` = env (buffer column).
Observations are an array, or a flat dict of arrays for Dict observation spaces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

import numpy as np
import torch

from tshtrain.errors import ConfigurationError

ObsArray: TypeAlias = np.ndarray | Mapping[str, np.ndarray]
"""A batch of observations: one array, or one array per key of a Dict observation space."""

ObsTensor: TypeAlias = torch.Tensor | Mapping[str, torch.Tensor]
"""The torch counterpart of :data:`ObsArray`."""

_T = TypeVar("_T")
_U = TypeVar("_U")
_Obs = TypeVar("_Obs", np.ndarray, torch.Tensor)


def map_obs(obs: np.ndarray | Mapping[str, np.ndarray], fn: Callable[[np.ndarray], _U]) -> _U | dict[str, _U]:
    """Apply ``fn`` to an observation array, or to every array of a dict observation."""
    if isinstance(obs, np.ndarray):
        return fn(obs)
    return {key: fn(value) for key, value in obs.items()}


def array_to_torch(x: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    """``x`` as a tensor on ``device``: zero-copy on the CPU; on CUDA one copy into pinned (page-locked)
    host memory, then an asynchronous (``non_blocking``) transfer ordered on the current stream."""
    if not isinstance(device, torch.device):
        device = torch.device(device)
    if device.type != "cuda":
        return torch.as_tensor(x, device=device)
    return torch.from_numpy(np.ascontiguousarray(x)).pin_memory().to(device, non_blocking=True)


def obs_to_torch(obs: ObsArray, device: torch.device | str = "cpu") -> ObsTensor:
    """Observations as tensors on ``device`` (:func:`array_to_torch`: zero-copy on the CPU, pinned
    memory and a non-blocking copy on CUDA); float64 becomes float32."""

    def convert(x: np.ndarray) -> torch.Tensor:
        if x.dtype == np.float64:
            x = x.astype(np.float32)
        return array_to_torch(x, device)

    if isinstance(obs, np.ndarray):
        return convert(obs)
    return {key: convert(value) for key, value in obs.items()}


def obs_len(obs: ObsArray) -> int:
    """Length of the leading dimension of an observation batch."""
    if isinstance(obs, np.ndarray):
        return len(obs)
    return len(next(iter(obs.values())))


@dataclass(frozen=True, kw_only=True)
class TransitionBatch:
    """A batch of N transitions sampled from a replay buffer (numpy arrays, leading dim N)."""

    obs: ObsArray
    """observation o_t"""
    act: np.ndarray
    """action a_t as the policy produced it (before mapping to the env's action space)"""
    rew: np.ndarray
    """reward r_t (float32)"""
    terminated: np.ndarray
    """True if o_{t+1} is terminal (no bootstrapping)"""
    truncated: np.ndarray
    """True if the episode was cut by a time limit after this step (o_{t+1} is its true last state)"""
    obs_next: ObsArray
    """observation o_{t+1}; for the last step of an episode, the true final observation"""
    indices: np.ndarray
    """flat buffer indices the transitions were read from (for priority updates, n-step targets)"""
    weight: np.ndarray | None = None
    """importance-sampling weights (prioritized buffers only), normalised so that the max is 1"""

    @property
    def done(self) -> np.ndarray:
        """terminated | truncated: the episode ended after this transition."""
        return np.asarray(np.logical_or(self.terminated, self.truncated))

    def __len__(self) -> int:
        return len(self.rew)

    def to_torch(self, device: torch.device | str = "cpu") -> TorchTransitionBatch:
        """Tensors for an algorithm's update, moved once per sample (:func:`array_to_torch`: zero-copy
        on the CPU where dtypes allow, pinned memory and non-blocking copies on CUDA)."""
        return TorchTransitionBatch(
            obs=obs_to_torch(self.obs, device),
            act=array_to_torch(self.act, device),
            rew=array_to_torch(self.rew, device),
            terminated=array_to_torch(self.terminated, device),
            truncated=array_to_torch(self.truncated, device),
            obs_next=obs_to_torch(self.obs_next, device),
            weight=None if self.weight is None else array_to_torch(self.weight, device),
        )


@dataclass(frozen=True, kw_only=True)
class TorchTransitionBatch:
    """The tensor view of a :class:`TransitionBatch` (see its fields)."""

    obs: ObsTensor
    act: torch.Tensor
    rew: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    obs_next: ObsTensor
    weight: torch.Tensor | None = None
    indices: torch.Tensor | None = None
    """flat buffer indices (on the buffer's device) when sampled from a
    :class:`~tshtrain.data.TensorReplayBuffer`; None for a converted :class:`TransitionBatch`"""

    @property
    def done(self) -> torch.Tensor:
        """terminated | truncated: the episode ended after this transition."""
        return self.terminated | self.truncated

    def __len__(self) -> int:
        return len(self.rew)

    def to_torch(self, device: torch.device | str = "cpu") -> TorchTransitionBatch:
        """This batch on ``device`` (itself when it is there already); the counterpart of
        :meth:`TransitionBatch.to_torch`, so that either batch kind can be asked for tensors."""
        target = torch.device(device)
        if self.rew.device == target:
            return self

        def move(obs: ObsTensor) -> ObsTensor:
            if isinstance(obs, torch.Tensor):
                return obs.to(target)
            return {key: value.to(target) for key, value in obs.items()}

        return TorchTransitionBatch(
            obs=move(self.obs),
            act=self.act.to(target),
            rew=self.rew.to(target),
            terminated=self.terminated.to(target),
            truncated=self.truncated.to(target),
            obs_next=move(self.obs_next),
            weight=None if self.weight is None else self.weight.to(target),
            indices=self.indices,
        )


AnyTransitionBatch: TypeAlias = TransitionBatch | TorchTransitionBatch
"""A sampled batch of either data path: numpy (:class:`TransitionBatch`, from a numpy buffer) or
tensors (:class:`TorchTransitionBatch`, from a :class:`~tshtrain.data.TensorReplayBuffer`)."""


@dataclass(frozen=True, kw_only=True)
class RolloutBatch:
    """The data of one on-policy collection step in time-major (T, E) layout.

    Columns (envs) may have collected different numbers of steps (episode-based collection); shorter
    columns are padded at the end and ``valid_TE`` marks the real entries.
    """

    obs: ObsArray
    """o_t, shape (T, E, ...)"""
    act: np.ndarray
    """a_t, shape (T, E, ...)"""
    rew: np.ndarray
    """r_t, shape (T, E), float32; 0 in padding"""
    terminated: np.ndarray
    """shape (T, E); True where o_{t+1} is terminal"""
    truncated: np.ndarray
    """shape (T, E); True where the episode was cut by a time limit after step t"""
    obs_next: ObsArray
    """o_{t+1}, shape (T, E, ...); the true final observation at episode ends"""
    boundary: np.ndarray
    """shape (T, E); True where a backward return recursion must not reach across t -> t+1:
    episode ends, the last collected step of a column, and padding"""
    valid: np.ndarray
    """shape (T, E); False for padding"""

    @property
    def num_steps(self) -> int:
        """Number of valid transitions."""
        return int(self.valid.sum())

    @property
    def shape(self) -> tuple[int, int]:
        """(T, E)"""
        t, e = self.rew.shape
        return int(t), int(e)

    def select_columns(self, columns: slice) -> RolloutBatch:
        """The rollout of the columns ``columns`` only (views, no copy): a learner's share of a
        multi-agent rollout."""
        return RolloutBatch(
            obs=_columns_of(self.obs, columns),
            act=self.act[:, columns],
            rew=self.rew[:, columns],
            terminated=self.terminated[:, columns],
            truncated=self.truncated[:, columns],
            obs_next=_columns_of(self.obs_next, columns),
            boundary=self.boundary[:, columns],
            valid=self.valid[:, columns],
        )


def _columns_of(obs: _Obs | Mapping[str, _Obs], columns: slice) -> _Obs | Mapping[str, _Obs]:
    if isinstance(obs, Mapping):
        return {key: value[:, columns] for key, value in obs.items()}
    return obs[:, columns]


@dataclass(frozen=True, kw_only=True)
class TensorRolloutBatch:
    """The tensor counterpart of :class:`RolloutBatch` (same fields, same (T, E) layout, tensors on
    the buffer's device): what :meth:`tshtrain.data.TensorReplayBuffer.rollout` returns."""

    obs: ObsTensor
    """o_t, shape (T, E, ...)"""
    act: torch.Tensor
    """a_t, shape (T, E, ...)"""
    rew: torch.Tensor
    """r_t, shape (T, E), float32; 0 in padding"""
    terminated: torch.Tensor
    """shape (T, E); True where o_{t+1} is terminal"""
    truncated: torch.Tensor
    """shape (T, E); True where the episode was cut by a time limit after step t"""
    obs_next: ObsTensor
    """o_{t+1}, shape (T, E, ...); the true final observation at episode ends"""
    boundary: torch.Tensor
    """shape (T, E); see :attr:`RolloutBatch.boundary`"""
    valid: torch.Tensor
    """shape (T, E); False for padding"""
    num_valid: int
    """number of valid transitions (known to the buffer without a device sync)"""
    logp: torch.Tensor | None = None
    """log pi(a_t | o_t) of the policy that collected the rollout, shape (T, E), when the collector
    stored it for every step (:meth:`tshtrain.data.TensorReplayBuffer.add`); None: an on-policy
    update recomputes it"""
    value: torch.Tensor | None = None
    """V(o_t) of the critic, shape (T, E), when the collector computed values while collecting
    (``TensorCollector(values=...)``) for every step; None: an on-policy update computes them"""

    @property
    def num_steps(self) -> int:
        """Number of valid transitions."""
        return self.num_valid

    def select_columns(self, columns: slice) -> TensorRolloutBatch:
        """See :meth:`RolloutBatch.select_columns` (one host sync: the valid count)."""
        valid = self.valid[:, columns]
        return TensorRolloutBatch(
            obs=_columns_of(self.obs, columns),
            act=self.act[:, columns],
            rew=self.rew[:, columns],
            terminated=self.terminated[:, columns],
            truncated=self.truncated[:, columns],
            obs_next=_columns_of(self.obs_next, columns),
            boundary=self.boundary[:, columns],
            valid=valid,
            num_valid=int(valid.sum()),
            logp=None if self.logp is None else self.logp[:, columns],
            value=None if self.value is None else self.value[:, columns],
        )

    @property
    def shape(self) -> tuple[int, int]:
        """(T, E)"""
        t, e = self.rew.shape
        return int(t), int(e)


AnyRolloutBatch: TypeAlias = RolloutBatch | TensorRolloutBatch
"""The rollout of either data path; on-policy updates take both."""


def numpy_batch(batch: AnyTransitionBatch, owner: str) -> TransitionBatch:
    """``batch`` if it is a numpy :class:`TransitionBatch`; a callback that works on numpy data
    calls this in ``on_sampled_batch`` so that a run on the torch path fails with a clear message."""
    if not isinstance(batch, TransitionBatch):
        raise ConfigurationError(
            f"{owner} works on numpy batches (Collector + VectorReplayBuffer); this run samples "
            f"{type(batch).__name__}s from a TensorReplayBuffer. Drop {owner} on the torch path."
        )
    return batch


def numpy_rollout(rollout: AnyRolloutBatch, owner: str) -> RolloutBatch:
    """``rollout`` if it is a numpy :class:`RolloutBatch` (see :func:`numpy_batch`)."""
    if not isinstance(rollout, RolloutBatch):
        raise ConfigurationError(
            f"{owner} works on numpy rollouts (Collector + VectorReplayBuffer); this run collects "
            f"{type(rollout).__name__}es with a TensorCollector. Drop {owner} on the torch path."
        )
    return rollout
