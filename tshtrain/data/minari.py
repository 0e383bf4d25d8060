"""Minari datasets as replay buffers for offline training.

`Minari <https://minari.farama.org>`_ stores episodes as ``observations`` (T + 1 of them), ``actions``,
``rewards``, ``terminations`` and ``truncations`` (T each). :func:`minari_to_buffer` lays the episodes
one after the other into a single-column :class:`~tshtrain.data.ReplayBuffer` of exactly the dataset's
size, with ``obs_next`` the following observation, so that ``next_index`` (n-step returns) never
crosses an episode boundary: an episode whose last step is neither terminated nor truncated (the
recording stopped) is stored as truncated.

Box actions are stored the way tshtrain's policies produce them, mapped linearly from the dataset's
action space ``[low, high]`` onto ``[-1, 1]`` (``action_scaling=True``, the default, which is what
:meth:`tshtrain.algorithm.Policy.map_action` inverts when the trained policy acts).

Minari is an optional dependency: ``pip install 'tshtrain[minari]'``. It is imported on first use.

A dataset named by id is untrusted input. The id must be a plain relative name (``name-v0``,
``namespace/name-v0``) of at most 255 characters inside Minari's datasets directory, and the dataset's
``metadata.json`` must describe its observation and action spaces: Minari otherwise builds the env
from the ``env_spec`` in the file, which imports and runs whatever entry point the file names, so such
a dataset is refused.
Minari stores arrays in HDF5 or Arrow files and never unpickles them.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from tshtrain.data.buffer import BufferLayout, ReplayBuffer
from tshtrain.errors import BufferFormatError, ConfigurationError, UnsupportedSpaceError, short_repr

_DATASET_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
"""a Minari dataset id: ``/``-separated names, none of them ``..`` or hidden, never absolute"""
_MAX_METADATA_BYTES = 1 << 24
_MAX_DATASET_ID_CHARS = 255
"""longest Minari id: one file name's worth (NAME_MAX), so that no id reaches the file system's limits"""


def _import_minari() -> Any:
    try:
        return importlib.import_module("minari")
    except ImportError as exc:
        raise ImportError(
            "tshtrain.data.minari needs the 'minari' package, which is not installed; install it with "
            "pip install 'tshtrain[minari]' (or pip install minari)."
        ) from exc


def _obs_fields(prefix: str, obs: Any, sl: slice) -> dict[str, np.ndarray]:
    if isinstance(obs, Mapping):
        return {f"{prefix}/{key}": np.asarray(value)[sl] for key, value in obs.items()}
    return {prefix: np.asarray(obs)[sl]}


def _scale_actions(act: np.ndarray, space: gym.Space[Any]) -> np.ndarray:
    assert isinstance(space, gym.spaces.Box)
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigurationError(
            f"minari_to_buffer: action_scaling=True needs finite Box bounds, got {space!r}; pass "
            f"action_scaling=False to store the actions unchanged."
        )
    return np.asarray((act - low) / ((high - low) / 2) - 1.0, dtype=np.float32)


def episodes_to_fields(episodes: Iterable[Any]) -> dict[str, np.ndarray]:
    """Concatenate Minari ``EpisodeData`` records into buffer fields of shape (num_steps, ...)."""
    parts: dict[str, list[np.ndarray]] = {}
    for episode in episodes:
        num_steps = len(episode.rewards)
        truncated = np.asarray(episode.truncations, dtype=bool).copy()
        terminated = np.asarray(episode.terminations, dtype=bool)
        if num_steps and not (terminated[-1] or truncated[-1]):
            truncated[-1] = True  # the recording stopped mid-episode: never chain into the next one
        fields = {
            **_obs_fields("obs", episode.observations, slice(0, num_steps)),
            "act": np.asarray(episode.actions),
            "rew": np.asarray(episode.rewards, dtype=np.float32),
            "terminated": terminated,
            "truncated": truncated,
            **_obs_fields("obs_next", episode.observations, slice(1, num_steps + 1)),
        }
        for name, value in fields.items():
            parts.setdefault(name, []).append(value)
    if not parts:
        raise ConfigurationError("minari_to_buffer: the dataset has no episodes; record some first.")
    return {name: np.concatenate(values) for name, values in parts.items()}


def check_local_dataset(dataset_id: str, datasets_root: Path) -> Path:
    """Check a dataset id and the dataset's metadata before Minari opens it (see the module
    docstring); the dataset's ``data`` directory.

    Raises:
        ConfigurationError: the id is not a plain relative name, or longer than 255 characters.
        BufferFormatError: the dataset lies outside ``datasets_root`` (a symbolic link), or its
            metadata would make Minari import code (no observation or action space).
    """
    if not _DATASET_ID.match(dataset_id) or any(part.startswith(".") for part in dataset_id.split("/")):
        raise ConfigurationError(
            f"minari_to_buffer: dataset id {short_repr(dataset_id)} is not a Minari id such as "
            f"'namespace/name-v0' (no '..', no absolute path, no hidden names)."
        )
    if len(dataset_id) > _MAX_DATASET_ID_CHARS:
        raise ConfigurationError(
            f"minari_to_buffer: dataset id {short_repr(dataset_id, limit=60)} is too long; a Minari id has "
            f"at most {_MAX_DATASET_ID_CHARS} characters."
        )
    data_dir = datasets_root / dataset_id / "data"
    if not data_dir.resolve().is_relative_to(datasets_root.resolve()):
        shown = short_repr(str(data_dir.resolve()), limit=300)
        raise BufferFormatError(
            f"{data_dir}: leads to {shown}, outside the Minari datasets directory {datasets_root}; refused."
        )
    metadata_file = data_dir / "metadata.json"
    if not metadata_file.is_file():
        return data_dir  # Minari reports the missing dataset itself
    try:
        with open(metadata_file, "rb") as handle:
            metadata = json.loads(handle.read(_MAX_METADATA_BYTES + 1)[:_MAX_METADATA_BYTES])
    except (OSError, ValueError, RecursionError) as error:
        raise BufferFormatError(f"{metadata_file}: unreadable Minari metadata ({error}).") from None
    if not isinstance(metadata, dict):
        raise BufferFormatError(f"{metadata_file}: not a Minari metadata object.")
    missing = [key for key in ("observation_space", "action_space") if not isinstance(metadata.get(key), str)]
    if missing:
        entry_point = _entry_point(metadata.get("env_spec"))
        raise BufferFormatError(
            f"{metadata_file}: no {' and no '.join(missing)}; Minari would build the env from the file's "
            f"env_spec instead, importing and running its entry point {short_repr(entry_point)}. "
            f"tshtrain refuses datasets that name code; record the dataset with its spaces."
        )
    return data_dir


def _entry_point(env_spec: Any) -> Any:
    try:
        spec = json.loads(env_spec) if isinstance(env_spec, str) else None
    except ValueError:
        return None
    return spec.get("entry_point") if isinstance(spec, dict) else None


def minari_to_buffer(
    dataset: Any,
    *,
    episode_indices: Iterable[int] | None = None,
    action_scaling: bool = True,
    seed: int | np.random.Generator | None = None,
) -> ReplayBuffer:
    """A :class:`ReplayBuffer` holding every transition of a Minari dataset.

    Args:
        dataset: a ``minari.MinariDataset`` or a dataset id, loaded with ``minari.load_dataset`` from
            the local datasets directory (``MINARI_DATASETS_PATH``; nothing is downloaded).
        episode_indices: the episodes to take (None: all).
        action_scaling: map Box actions from the dataset's bounds onto [-1, 1] (see the module docstring).
        seed: seed or generator of the buffer's sampling.

    Raises:
        ImportError: minari is not installed (``pip install 'tshtrain[minari]'``).
        ConfigurationError: a dataset id that is not a plain relative name.
        BufferFormatError: a dataset outside the datasets directory, or one that names code (see
            :func:`check_local_dataset`).
    """
    minari = _import_minari()
    if isinstance(dataset, str):
        check_local_dataset(dataset, Path(minari.storage.get_dataset_path()))
        dataset = minari.load_dataset(dataset)
    source = getattr(dataset, "id", None)
    space = dataset.action_space
    if not isinstance(space, gym.spaces.Box | gym.spaces.Discrete):
        raise UnsupportedSpaceError(f"minari_to_buffer: Box or Discrete actions only, got {space!r}.")
    episodes = dataset.iterate_episodes(None if episode_indices is None else list(episode_indices))
    fields = episodes_to_fields(episodes)
    if action_scaling and isinstance(space, gym.spaces.Box):
        fields["act"] = _scale_actions(fields["act"].astype(np.float32), space)
    num_steps = len(fields["rew"])
    buffer = ReplayBuffer(num_steps, seed=seed)
    arrays = {name: value.reshape(num_steps, 1, *value.shape[1:]) for name, value in fields.items()}
    buffer.restore(
        arrays, BufferLayout(column_capacity=num_steps, num_columns=1, ptr=(0,), length=(num_steps,))
    )
    buffer.source = f"minari:{source}" if isinstance(source, str) else None
    return buffer
