"""Sizes an experiment file chooses, checked before anything is allocated or written.

* :func:`checked_output_dir`: an experiment's ``output_dir`` names a place under the working directory
  (a relative path that does not climb out with ``..``); anywhere else needs the command line's
  ``--output-dir`` / ``-o``.
* :func:`check_network_memory`: the parameters of the ``*hidden_sizes`` layers (with the gradients and
  the optimizer's moments) fit in this machine's memory.
* :func:`check_buffer_memory`: a replay buffer of ``size`` transitions (bytes per transition from the
  env's spaces) fits in this machine's memory.

Every failure is one :class:`~tshtrain.errors.ExperimentError` naming the field, the value, the estimate
and the limit. Estimates are lower bounds (the layers' weight matrices, the stored fields), so a refused
experiment would certainly not have fitted.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Final

import gymnasium as gym
import numpy as np

from tshtrain.errors import ExperimentError, short_repr

BYTES_PER_PARAMETER: Final = 16
"""float32 weights, their gradients and Adam's two moments"""
TRANSITION_OVERHEAD_BYTES: Final = 32
"""reward, terminated, truncated, done and bookkeeping per stored transition"""


def memory_bytes() -> int:
    """This machine's physical memory (``SC_PHYS_PAGES * SC_PAGE_SIZE``); 0 when it cannot be read."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def human_bytes(num_bytes: float) -> str:
    """``1.5 GB``-style (powers of 1000)."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if num_bytes < 1000 or unit == "PB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1000
    raise AssertionError("unreachable")


def checked_output_dir(output_dir: str | None, source: str | None) -> str | None:
    """``output_dir`` of the experiment read from ``source`` (None: the default experiment), refused
    outside the working directory: an experiment file may only name a directory under it (a relative
    path without a leading ``..``); anywhere else needs the command line's ``-o DIR``.

    Raises:
        ExperimentError: an absolute path (or ``~...``), or a relative one that leaves the working
            directory, naming ``source``, the value and what is allowed.
    """
    if output_dir is None:
        return None
    parts: list[str] = []
    escapes = PurePath(output_dir).is_absolute() or output_dir.startswith("~")
    for part in PurePath(output_dir).parts:
        if part == ".." and not parts:
            escapes = True
        elif part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    if escapes:
        raise ExperimentError(
            f"{source or 'the default experiment'}: output_dir {short_repr(output_dir, 400)} is outside the "
            f"working directory; an experiment file may only name a relative path under it (no leading "
            f"'..'); to write elsewhere, give the directory on the command line: -o DIR"
        )
    return output_dir


def check_network_memory(network: Mapping[str, Any], field: str, obs_dim: int, act_dim: int) -> None:
    """Refuse ``*hidden_sizes`` layers whose parameters cannot fit in memory.

    Args:
        network: the resolved ``algorithm.network`` section.
        field: where ``network`` is in the experiment (``algorithm.network``), for the message.
        obs_dim: the flat size of an observation (the first layer's input).
        act_dim: the flat size of an action (the last layer's output, at least).

    Raises:
        ExperimentError: naming the largest ``*hidden_sizes`` field, the estimate and the limit.
    """
    limit = memory_bytes()
    counts = {
        name: _mlp_parameters(sizes, obs_dim, act_dim) * _copies(network, name)
        for name, sizes in network.items()
        if name.endswith("hidden_sizes") and isinstance(sizes, list)
    }
    total = sum(counts.values()) * BYTES_PER_PARAMETER
    if limit and total > limit:
        name = max(counts, key=lambda key: counts[key])
        parameters = sum(counts.values())
        raise ExperimentError(
            f"{field}.{name} {short_repr(network[name])}: the networks would have about {parameters:.3g} "
            f"parameters, {human_bytes(total)} with gradients and optimizer state, more than this machine's "
            f"{human_bytes(limit)} of memory; use smaller layers"
        )


def _mlp_parameters(sizes: list[Any], obs_dim: int, act_dim: int) -> int:
    widths = [obs_dim, *(int(size) for size in sizes), act_dim]
    return sum(a * b + b for a, b in itertools.pairwise(widths))


def _copies(network: Mapping[str, Any], name: str) -> int:
    """How many networks of the ``name`` layers there are (an ensemble of ``num_critics`` critics)."""
    critics = network.get("num_critics")
    if "critic" in name or (name == "hidden_sizes" and "critic_hidden_sizes" in network):
        return int(critics) if isinstance(critics, int) and critics > 0 else 1
    return 1


def space_bytes(space: gym.Space[Any]) -> int:
    """Bytes one sample of ``space`` takes in a buffer (at least; 8 for spaces of unknown layout)."""
    if isinstance(space, gym.spaces.Dict):
        return sum(space_bytes(sub) for sub in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return sum(space_bytes(sub) for sub in space.spaces)
    if isinstance(space, gym.spaces.Discrete):
        return 8
    shape, dtype = space.shape, space.dtype
    if shape is None or dtype is None:
        return 8
    return int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize


def flat_size(space: gym.Space[Any]) -> int:
    """The number of numbers in one sample of ``space`` (1 where that is not known)."""
    try:
        return max(1, int(gym.spaces.flatdim(space)))
    except (NotImplementedError, ValueError, TypeError):
        return 1


def check_buffer_memory(field: str, size: int, obs_space: gym.Space[Any], act_space: gym.Space[Any]) -> None:
    """Refuse a buffer of ``size`` transitions that cannot fit in memory (``field`` names the setting).

    A transition stores the observation, the next observation, the action and
    :data:`TRANSITION_OVERHEAD_BYTES` more.

    Raises:
        ExperimentError: naming ``field``, ``size``, the estimate and the limit.
    """
    limit = memory_bytes()
    per_transition = 2 * space_bytes(obs_space) + space_bytes(act_space) + TRANSITION_OVERHEAD_BYTES
    total = size * per_transition
    if limit and total > limit:
        raise ExperimentError(
            f"{field} {size}: the replay buffer would need about {human_bytes(total)} ({size} transitions x "
            f"{per_transition} bytes), more than this machine's {human_bytes(limit)} of memory; lower {field}"
        )


__all__ = [
    "check_buffer_memory",
    "check_network_memory",
    "checked_output_dir",
    "flat_size",
    "human_bytes",
    "memory_bytes",
    "space_bytes",
]
