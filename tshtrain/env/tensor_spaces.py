"""Gymnasium action spaces on the torch path: random actions drawn on a device and per-step shape
checks, for :class:`tshtrain.data.TensorCollector`.

Value-range checks of actions would need a host sync every vector step (``bool(tensor)``), so the
tensor path checks only shapes and dtypes per step (free: they are metadata); see
:func:`make_tensor_action_checker`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from tshtrain.env.spaces import action_spec
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

_SUPPORTED = "Box, Discrete, MultiDiscrete or MultiBinary"


def torch_dtype(dtype: np.dtype[Any] | type[Any]) -> torch.dtype:
    """The torch dtype of a numpy dtype (e.g. a space's ``dtype``)."""
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def sample_actions_torch(
    space: gym.Space[Any], num: int, generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """``num`` uniformly random actions from ``space`` as a tensor on ``device``, drawn with
    ``generator`` (which must live on ``device``). Infinite Box bounds become the finite one -/+ 1
    (or -1 / +1), as in :func:`tshtrain.env.sample_actions`."""
    if isinstance(space, gym.spaces.Discrete):
        start, n = int(space.start), int(space.n)
        return torch.randint(start, start + n, (num,), generator=generator, device=device, dtype=torch.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(np.asarray(space.nvec), device=device, dtype=torch.float64)
        start_t = torch.as_tensor(np.asarray(space.start), device=device, dtype=torch.float64)
        draws = torch.rand((num, *nvec.shape), generator=generator, device=device, dtype=torch.float64)
        return (start_t + torch.floor(draws * nvec)).to(torch_dtype(space.dtype))
    if isinstance(space, gym.spaces.MultiBinary):
        assert space.shape is not None
        bits = torch.randint(0, 2, (num, *space.shape), generator=generator, device=device)
        return bits.to(torch_dtype(space.dtype))
    if isinstance(space, gym.spaces.Box):
        return _sample_box(space, num, generator, device)
    raise UnsupportedSpaceError(f"Unsupported action space {space!r}; the tensor path supports {_SUPPORTED}.")


def sample_legal_actions_torch(mask_NA: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """:func:`tshtrain.env.spaces.sample_legal_actions` on tensors (on ``mask_NA``'s device, int64)."""
    draws = torch.rand(mask_NA.shape, generator=generator, device=mask_NA.device)
    draws = draws.masked_fill(mask_NA == 0, -1.0)
    return draws.argmax(dim=-1)


def _sample_box(
    space: gym.spaces.Box, num: int, generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    size = (num, *space.shape)
    dtype = torch_dtype(space.dtype)
    if np.issubdtype(space.dtype, np.integer):
        low_i = torch.as_tensor(space.low.astype(np.int64), device=device)
        span = torch.as_tensor(space.high.astype(np.int64) - space.low.astype(np.int64) + 1, device=device)
        draws = torch.rand(size, generator=generator, device=device, dtype=torch.float64)
        return (low_i + torch.floor(draws * span).to(torch.int64)).to(dtype)
    low_finite, high_finite = np.isfinite(space.low), np.isfinite(space.high)
    low = np.where(low_finite, space.low, np.where(high_finite, space.high - 1.0, -1.0))
    high = np.where(high_finite, space.high, np.where(low_finite, space.low + 1.0, 1.0))
    low_t = torch.as_tensor(low, device=device, dtype=torch.float64)
    high_t = torch.as_tensor(high, device=device, dtype=torch.float64)
    draws = torch.rand(size, generator=generator, device=device, dtype=torch.float64)
    return (low_t + draws * (high_t - low_t)).to(dtype)


def make_tensor_action_checker(space: gym.Space[Any], num_envs: int) -> Callable[[torch.Tensor], None]:
    """A per-step check of an env-action batch: its shape ``(num_envs, *action_shape)`` and its dtype
    kind (integer for Discrete / MultiDiscrete / MultiBinary, floating for float Boxes). It reads only
    tensor metadata, so it never synchronises with the device; values are not range-checked (the
    env sees what the policy's :meth:`map_action_torch` produced)."""
    spec = action_spec(space)
    expected = (num_envs, *spec.shape)
    integral = not (isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating))

    def check(act: torch.Tensor) -> None:
        wrong_kind = act.dtype.is_floating_point == integral or act.dtype.is_complex
        if tuple(act.shape) != expected or wrong_kind:
            kind = "integer" if integral else "floating"
            raise ConfigurationError(
                f"TensorCollector: the policy produced actions of shape {tuple(act.shape)} and dtype "
                f"{act.dtype} for the action space {space!r} with {num_envs} envs; expected shape "
                f"{expected} and a {kind} dtype."
            )

    return check
