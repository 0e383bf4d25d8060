"""An offline dataset checked against the env's spaces where it meets the algorithm.

:meth:`tshtrain.algorithm.OfflineAlgorithm.check_dataset` calls :func:`check_dataset_spaces` when the
trainer is built, so that a dataset of another env (observations of another shape, actions of another
kind) or with actions the action space does not hold fails at once, in one line naming the dataset, the
field, the value and what the env expects, instead of an ``IndexError`` or a shape error after the first
test epoch. The values are checked on the stored rows only, once (O(dataset), never per step).

Checked: the shape of every observation field (``obs`` and ``obs_next``; ``obs/KEY`` for a Dict
space) against the observation space when it is known; the actions' dtype and shape against the
action space; Discrete (and MultiDiscrete, MultiBinary) actions inside the space; Box actions finite.
Box actions are not checked against the bounds: they are stored before ``map_action``, which clips.
Rewards and float observations (``rew``, ``obs``, ``obs_next``, ``obs/KEY``) must be finite too, unless
the user opts in with ``buffer.allow_nonfinite = True`` (``load_tianshou_hdf5(..., allow_nonfinite=True)``
sets it): a NaN reward would otherwise make every loss NaN without a word.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError, short_repr

_FIX = "give a dataset recorded on this env"


def check_dataset_spaces(
    buffer: BaseReplayBuffer,
    *,
    observation_space: gym.Space[Any] | None,
    action_space: gym.Space[Any],
    name: str,
) -> None:
    """Raise if ``buffer`` does not fit the spaces (see the module docstring).

    Args:
        buffer: the dataset, filled.
        observation_space: the env's single observation space (None: observations are not checked).
        action_space: the env's single action space.
        name: the dataset as named in messages (a path, a Minari id, a params field).

    Raises:
        ConfigurationError: a field does not fit the spaces, or a stored reward or observation is NaN or
            infinite (unless ``buffer.allow_nonfinite``); the message names ``name``, the field, the
            value (and row) and what the env expects.
    """
    arrays = buffer.field_arrays()
    if not arrays:
        return
    rows = buffer.chronological_indices()
    flat = {key: arr.reshape(-1, *arr.shape[2:]) for key, arr in arrays.items()}
    if observation_space is not None:
        for prefix in ("obs", "obs_next"):
            _check_obs(flat, prefix, observation_space, name)
    _check_act(flat["act"], rows, action_space, name)
    if not buffer.allow_nonfinite:
        _check_finite(flat, rows, name)


def _fail(name: str, field: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"dataset {name}: field {field!r} {problem}; {_FIX}.")


def _check_obs(flat: dict[str, np.ndarray], prefix: str, space: gym.Space[Any], name: str) -> None:
    if isinstance(space, gym.spaces.Dict):
        stored = sorted(key.split("/", 1)[1] for key in flat if key.startswith(f"{prefix}/"))
        expected = sorted(str(key) for key in space.spaces)
        if stored != expected:
            shown = stored if stored else "one array"
            raise _fail(name, prefix, f"holds the keys {short_repr(shown)}, but the env's Dict observation "
                        f"space has the keys {short_repr(expected)}")  # fmt: skip
        for key, sub in space.spaces.items():
            _check_shape(flat[f"{prefix}/{key}"], f"{prefix}/{key}", sub, name)
        return
    if prefix not in flat:
        raise _fail(name, prefix, f"is a Dict of arrays, but the env's observation space is {space!r}")
    _check_shape(flat[prefix], prefix, space, name)


def _check_shape(arr: np.ndarray, field: str, space: gym.Space[Any], name: str) -> None:
    if space.shape is not None and arr.shape[1:] != tuple(space.shape):
        raise _fail(name, field, f"has shape {arr.shape[1:]} per row, but the env's observation space "
                    f"{space!r} expects {tuple(space.shape)}")  # fmt: skip


def _check_act(act: np.ndarray, rows: np.ndarray, space: gym.Space[Any], name: str) -> None:
    box = isinstance(space, gym.spaces.Box)
    kinds, takes = ("f", "float") if box else ("iu", "integer")
    expected = tuple(space.shape) if space.shape is not None else act.shape[1:]
    if act.dtype.kind not in kinds or act.shape[1:] != expected:
        raise _fail(name, "act", f"holds {act.dtype} actions of shape {act.shape[1:]}, but the env's action "
                    f"space {space!r} takes {takes} actions of shape {expected}")  # fmt: skip
    stored = act[rows]
    if box:
        allowed = f"the env's action space {space!r} takes finite values"
        _first_bad(stored, ~np.isfinite(stored), rows, name, allowed)
    elif isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        low, high = _integer_bounds(space)
        allowed = f"the env's action space {space!r} allows integers in [{low}, {high}]"
        _first_bad(stored, (stored < low) | (stored > high), rows, name, allowed)


def _integer_bounds(space: gym.Space[Any]) -> tuple[Any, Any]:
    """Lowest and highest allowed action (scalars, or arrays of the action's shape)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start), int(space.start + space.n - 1)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return space.start, space.start + space.nvec - 1
    return 0, 1


def _first_bad(stored: np.ndarray, bad: np.ndarray, rows: np.ndarray, name: str, allowed: str) -> None:
    """Raise naming the first stored row whose action is ``bad`` (any element of it)."""
    bad_rows = bad.reshape(len(bad), -1).any(axis=1)
    if not bad_rows.any():
        return
    first = int(np.flatnonzero(bad_rows)[0])
    value = stored[first]
    shown = short_repr(value.item() if value.ndim == 0 else value.tolist())
    count = int(bad_rows.sum())
    raise _fail(name, "act", f"holds {shown} at row {int(rows[first])} ({count} of {len(rows)} stored "
                f"actions like it), but {allowed}")  # fmt: skip


def _check_finite(flat: dict[str, np.ndarray], rows: np.ndarray, name: str) -> None:
    """Raise at the first stored row of a float reward or observation field holding NaN or an inf."""
    for field in sorted(flat):
        if field not in ("rew", "obs", "obs_next") and not field.startswith(("obs/", "obs_next/")):
            continue
        if flat[field].dtype.kind not in "fc":
            continue
        stored = flat[field][rows]
        bad_rows = ~np.isfinite(stored.reshape(len(stored), -1)).all(axis=1)
        if not bad_rows.any():
            continue
        first = int(np.flatnonzero(bad_rows)[0])
        values = stored[first].reshape(-1)
        shown = short_repr(values[~np.isfinite(values)][0].item())
        raise ConfigurationError(
            f"dataset {name}: field {field!r} holds {shown} at row {int(rows[first])} "
            f"({int(bad_rows.sum())} of {len(rows)} stored rows like it); rewards and observations must "
            f"be finite: clean the dataset, or set buffer.allow_nonfinite = True (load_tianshou_hdf5(..., "
            f"allow_nonfinite=True)) to train on it anyway."
        )
