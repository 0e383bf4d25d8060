"""Helpers that describe Gymnasium spaces as arrays tshtrain can store and act in.

Supported action and observation spaces: ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``;
observations may also be a flat ``Dict`` of those (stored as a dict of arrays, one per key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from tshtrain.errors import PolicyOutputError, UnsupportedSpaceError, short_repr

_SUPPORTED = "Box, Discrete, MultiDiscrete or MultiBinary (and, for observations, a flat Dict of these)"


@dataclass(frozen=True, kw_only=True)
class ArraySpec:
    """Shape (without batch dimensions) and dtype of one stored array."""

    shape: tuple[int, ...]
    """shape of a single element"""
    dtype: np.dtype[np.generic]
    """numpy dtype of the stored array"""


def array_spec(space: gym.Space[object], *, role: str = "space") -> ArraySpec:
    """The array layout of one element of a non-Dict space.

    Args:
        space: a Box, Discrete, MultiDiscrete or MultiBinary space.
        role: what the space is used for, for the error message ("observation space", ...).

    Raises:
        UnsupportedSpaceError: for any other space, naming it.
    """
    if isinstance(space, gym.spaces.Discrete):
        return ArraySpec(shape=(), dtype=np.dtype(np.int64))
    if isinstance(space, gym.spaces.Box | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        assert space.shape is not None
        return ArraySpec(shape=tuple(space.shape), dtype=np.dtype(space.dtype))
    raise UnsupportedSpaceError(f"Unsupported {role} {space!r}; tshtrain supports {_SUPPORTED}.")


def observation_specs(space: gym.Space[object]) -> ArraySpec | dict[str, ArraySpec]:
    """Array layout of an observation space: one spec, or one per key of a flat Dict space.

    Raises:
        UnsupportedSpaceError: for nested Dict, Tuple, Graph, Text, Sequence ... spaces.
    """
    if isinstance(space, gym.spaces.Dict):
        specs: dict[str, ArraySpec] = {}
        for key, sub in space.spaces.items():
            if isinstance(sub, gym.spaces.Dict):
                raise UnsupportedSpaceError(
                    f"Unsupported observation space: key {key!r} holds a nested Dict ({sub!r}); "
                    f"tshtrain supports flat Dict observations only. Flatten it with "
                    f"gymnasium.wrappers.FlattenObservation or a custom wrapper."
                )
            specs[str(key)] = array_spec(sub, role=f"observation space (key {key!r})")
        return specs
    return array_spec(space, role="observation space")


def action_spec(space: gym.Space[object]) -> ArraySpec:
    """Array layout of an action space (Dict actions are not supported)."""
    return array_spec(space, role="action space")


def sample_actions(space: gym.Space[object], num: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``num`` uniformly random actions from ``space`` with the given generator.

    Unlike ``space.sample()``, this uses the caller's generator (explicit randomness) and draws a
    whole batch at once.
    """
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(int(space.start), int(space.start) + int(space.n), size=num, dtype=np.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        draws = rng.random(size=(num, *nvec.shape))
        return np.asarray(np.asarray(space.start) + np.floor(draws * nvec), dtype=space.dtype)
    if isinstance(space, gym.spaces.MultiBinary):
        assert space.shape is not None
        return rng.integers(0, 2, size=(num, *space.shape)).astype(space.dtype)
    if isinstance(space, gym.spaces.Box):
        return _sample_box(space, num, rng)
    raise UnsupportedSpaceError(f"Unsupported action space {space!r}; tshtrain supports {_SUPPORTED}.")


def sample_legal_actions(mask_NA: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row drawn uniformly among the legal ones of ``mask_NA`` (shape (N, num_actions),
    nonzero = legal); a row without a legal action gives 0 (such rows belong to agents whose episode
    ended, and their actions are never used)."""
    draws = rng.random(mask_NA.shape)
    draws[mask_NA == 0] = -1.0
    return np.asarray(draws.argmax(axis=-1), dtype=np.int64)


def _sample_box(space: gym.spaces.Box, num: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform draws from a Box; an infinite bound becomes the finite one -/+ 1 (or -1 / +1)."""
    size = (num, *space.shape)
    if np.issubdtype(space.dtype, np.integer):  # both bounds are finite for integer Boxes
        low_int, high_int = space.low.astype(np.int64), space.high.astype(np.int64)
        return rng.integers(low_int, high_int, size=size, endpoint=True).astype(space.dtype)
    low_finite, high_finite = np.isfinite(space.low), np.isfinite(space.high)
    low = np.where(low_finite, space.low, np.where(high_finite, space.high - 1.0, -1.0))
    high = np.where(high_finite, space.high, np.where(low_finite, space.low + 1.0, 1.0))
    return rng.uniform(low, high, size=size).astype(space.dtype)


def _require_integral(space: gym.Space[object], act: np.ndarray) -> None:
    if not np.issubdtype(act.dtype, np.integer) and np.any(act != np.round(act)):
        raise PolicyOutputError(
            f"The policy returned non-integer actions {short_repr(act.tolist())} for {space!r}; return "
            f"integer indices (e.g. argmax) instead."
        )


def check_actions(space: gym.Space[object], act: np.ndarray, num_envs: int) -> None:
    """Raise a clear error if a batch of actions does not fit ``space``.

    The check is O(batch) and runs once per vector step in the collector.

    Raises:
        PolicyOutputError: wrong shape, or values outside the space.
    """
    spec = action_spec(space)
    expected = (num_envs, *spec.shape)
    if act.shape != expected:
        raise PolicyOutputError(
            f"The policy returned actions of shape {act.shape}; the action space {space!r} with "
            f"{num_envs} envs needs shape {expected}."
        )
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
        _require_integral(space, act)
    if isinstance(space, gym.spaces.Discrete):
        low, high = int(space.start), int(space.start) + int(space.n) - 1
        if act.min() < low or act.max() > high:
            raise PolicyOutputError(
                f"The policy returned discrete actions {short_repr(act.tolist())}; {space!r} allows "
                f"{low}..{high}."
            )
    elif isinstance(space, gym.spaces.Box):
        if not np.all(np.isfinite(act)):
            raise PolicyOutputError(
                f"The policy returned non-finite actions {short_repr(act.tolist())} for {space!r}."
            )
        if np.any(act < space.low) or np.any(act > space.high):
            raise PolicyOutputError(
                f"The policy returned actions outside {space!r}: min {act.min()}, max {act.max()}. "
                f"Map them into the space (Policy.map_action) or clip them."
            )
    elif isinstance(space, gym.spaces.MultiDiscrete):
        start = np.asarray(space.start)
        if np.any(act < start) or np.any(act >= start + np.asarray(space.nvec)):
            raise PolicyOutputError(
                f"The policy returned actions {short_repr(act.tolist())} outside {space!r}."
            )
    elif isinstance(space, gym.spaces.MultiBinary) and np.any((act != 0) & (act != 1)):
        raise PolicyOutputError(f"The policy returned actions {short_repr(act.tolist())} outside {space!r}.")


_SMALL_BATCH = 32
"""up to this many discrete actions, the per-step range check runs in Python"""


def make_action_checker(space: gym.Space[object], num_envs: int) -> Callable[[np.ndarray], None]:
    """A per-step action check for ``space`` with everything that does not depend on the actions
    computed once: a cheap test per call, and :func:`check_actions` (for its exact error message)
    only when that test fails."""
    spec = action_spec(space)
    expected = (num_envs, *spec.shape)
    if isinstance(space, gym.spaces.Discrete):
        low, high = int(space.start), int(space.start) + int(space.n) - 1

        def fast_ok(act: np.ndarray) -> bool:
            if act.dtype.kind not in "iu":
                return False
            if act.size == 1:  # one env
                return bool(low <= act.item() <= high)
            if act.size <= _SMALL_BATCH:  # Python's min / max of a short list beat two numpy reductions
                values = act.tolist()
                return bool(low <= min(values) and max(values) <= high)
            return bool(low <= act.min()) and bool(act.max() <= high)

    elif isinstance(space, gym.spaces.Box):
        box_low, box_high = np.asarray(space.low), np.asarray(space.high)
        bounds = list(zip(box_low.ravel().tolist(), box_high.ravel().tolist(), strict=True))

        def fast_ok(act: np.ndarray) -> bool:  # NaN fails both comparisons
            if act.size == 1 == len(bounds) and act.dtype.kind == "f":  # one env, one dimension
                lo, hi = bounds[0]
                return bool(lo <= act.item() <= hi)
            if 0 < act.size <= _SMALL_BATCH and act.dtype.kind == "f":  # Python floats beat four numpy ops
                rows = act.reshape(-1, len(bounds)).tolist()
                return all(lo <= v <= hi for row in rows for v, (lo, hi) in zip(row, bounds, strict=True))
            return bool(((act >= box_low) & (act <= box_high)).all())

    else:

        def fast_ok(act: np.ndarray) -> bool:
            return False  # rarely used spaces: always the full check

    def check(act: np.ndarray) -> None:
        if act.shape != expected or not fast_ok(act):
            check_actions(space, act, num_envs)

    return check
