"""Mini-batches of a numpy replay buffer gathered straight into tensors that are allocated once.

:meth:`~tshtrain.data.BaseReplayBuffer.sample_torch` (what ``sample_replay`` uses on the hot path of
every off-policy gradient step) draws the indices once and gathers each field with one ``np.take``
into a *staging* array of the batch's shape, which is the numpy view of a tensor:

* on the CPU the staging tensors are the batch (no copy, no allocation per call);
* on CUDA they are pinned (page-locked) host tensors; each is copied to the device with
  ``non_blocking=True`` (a fresh device tensor from the caching allocator), and a CUDA event recorded
  after the copies makes the next gather wait until they have read the staging memory.

So on the CPU a sample's tensors are overwritten by the next sample of the same buffer, batch size and
device: an update uses its batch before it samples again, and must not keep it across updates (copy
what you keep, e.g. ``obs.clone()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, final

import numpy as np
import torch

from tshtrain.data.batch import ObsTensor, array_to_torch, obs_to_torch
from tshtrain.errors import require_positive

__all__ = ["StagedSample", "StagingArrays"]


class StagedSample(NamedTuple):
    """A mini-batch with its one-step (or n-step) targets, as tensors on the sampling device."""

    obs: ObsTensor
    """o_t"""
    act: torch.Tensor
    """a_t as stored"""
    returns: torch.Tensor
    """shape (N,): sum_{k<m} gamma^k r_{t+k} (m = 1: the reward)"""
    discounts: torch.Tensor
    """shape (N,) float32: gamma^m * (1 - terminated_{t+m-1})"""
    obs_next: ObsTensor
    """o_{t+m}"""
    indices: np.ndarray
    """the flat buffer indices drawn"""


@final
class StagingArrays:
    """The staging tensors of one (batch size, device) of one buffer (see the module docstring)."""

    def __init__(self, batch_size: int, device: torch.device):
        """Args:
        batch_size: transitions per sample (positive).
        device: where the sampled tensors go.
        """
        require_positive("BaseReplayBuffer.sample_torch", "batch_size", batch_size)
        self.batch_size = batch_size
        self.device = device
        self._pinned = device.type == "cuda"
        self._copied: torch.cuda.Event | None = None  # recorded after the last copies out of staging
        self._sources: dict[str, np.ndarray] = {}
        """the buffer array each staging array was made for (a restored buffer has new arrays)"""
        self._arrays: dict[str, np.ndarray] = {}
        self._tensors: dict[str, torch.Tensor] = {}
        self._not_terminated = np.empty(batch_size, dtype=bool)
        self._discounts, self._discounts_t = self._new(np.dtype(np.float32), ())

    def _new(self, dtype: np.dtype, element_shape: tuple[int, ...]) -> tuple[np.ndarray, torch.Tensor]:
        tensor = torch.from_numpy(np.empty((self.batch_size, *element_shape), dtype=dtype))
        if self._pinned:
            tensor = tensor.pin_memory()
        return tensor.numpy(), tensor

    def begin(self) -> None:
        """Before gathering: wait until the previous sample's copies have left the staging memory."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None

    def end(self) -> None:
        """After the last gather of a sample: mark where its copies are (CUDA)."""
        if self._pinned:
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]  # torch leaves it untyped
            event.record()
            self._copied = event

    def _out(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(self.device, non_blocking=True) if self._pinned else tensor

    def gather(
        self, name: str, source: np.ndarray, indices: np.ndarray, *, as_obs: bool = False
    ) -> torch.Tensor:
        """``source[indices]`` through the staging array of field ``name``, as a tensor on the device.
        ``as_obs``: float64 becomes float32 (as :func:`~tshtrain.data.obs_to_torch` does)."""
        if self._sources.get(name) is not source:
            dtype = np.dtype(np.float32) if as_obs and source.dtype == np.float64 else source.dtype
            self._arrays[name], self._tensors[name] = self._new(dtype, source.shape[1:])
            self._sources[name] = source
        # mode="clip": the drawn indices are in range; it spares numpy the buffered "raise" mode
        source.take(indices, axis=0, out=self._arrays[name], mode="clip")
        return self._out(self._tensors[name])

    def gather_obs(
        self,
        prefix: str,
        flat: Mapping[str, np.ndarray],
        obs_keys: tuple[str, ...] | None,
        indices: np.ndarray,
    ) -> ObsTensor:
        """The observations of field ``prefix`` (``obs`` / ``obs_next``; dict observations key by key)."""
        if obs_keys is None:
            return self.gather(prefix, flat[prefix], indices, as_obs=True)
        return {
            key: self.gather(f"{prefix}/{key}", flat[f"{prefix}/{key}"], indices, as_obs=True)
            for key in obs_keys
        }

    def discounts(self, terminated: np.ndarray, indices: np.ndarray, gamma: float) -> torch.Tensor:
        """``gamma * (1 - terminated[indices])`` as float32 (exactly 0 or float32(gamma))."""
        not_terminated = self._not_terminated
        terminated.take(indices, out=not_terminated, mode="clip")
        np.logical_not(not_terminated, out=not_terminated)
        np.multiply(not_terminated, np.float32(gamma), out=self._discounts)
        return self._out(self._discounts_t)

    def to_device(self, array: np.ndarray) -> torch.Tensor:
        """A freshly computed array (n-step targets) on the device (:func:`~tshtrain.data.array_to_torch`)."""
        return array_to_torch(array, self.device)

    def obs_to_device(self, obs: np.ndarray | Mapping[str, np.ndarray]) -> ObsTensor:
        """Freshly computed observations on the device (:func:`~tshtrain.data.obs_to_torch`)."""
        return obs_to_torch(obs, self.device)
