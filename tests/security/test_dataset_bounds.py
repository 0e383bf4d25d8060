"""A small Tianshou HDF5 file cannot make tshtrain allocate a huge buffer, and its values are checked
(issue 30, items 1 and 5; needs the tianshou-io extra).

The files here declare their sizes with chunked, gzip-compressed datasets whose chunks are never written:
a few kilobytes on disk that h5py would expand to the declared size (zeros) when read."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.extras import need
from tshtrain.data import ReplayBuffer, load_tianshou_hdf5
from tshtrain.data.tianshou_io import DEFAULT_MAX_BYTES
from tshtrain.errors import BufferFormatError

pytestmark = pytest.mark.integration
h5py = need("h5py", "tianshou-io")


def _write(path: Path, rows: int, *, obs_dim: int = 4, values: dict[str, np.ndarray] | None = None) -> Path:
    """A single Tianshou buffer of ``rows`` transitions (all stored) in Tianshou's layout; fields in
    ``values`` are written as given, the others are declared (chunked + gzip) and never written."""
    shapes: dict[str, tuple[tuple[int, ...], Any]] = {
        "obs": ((rows, obs_dim), np.float32),
        "obs_next": ((rows, obs_dim), np.float32),
        "act": ((rows,), np.int64),
        "rew": ((rows,), np.float64),
        "terminated": ((rows,), np.bool_),
        "truncated": ((rows,), np.bool_),
    }
    with h5py.File(path, "w") as f:
        f.attrs.update({"maxsize": rows, "_size": rows, "_insertion_idx": 0, "_save_obs_next": True})
        meta = f.create_group("_meta")
        for name, (shape, dtype) in shapes.items():
            if values is not None and name in values:
                meta.create_dataset(name, data=values[name])
            else:
                meta.create_dataset(name, shape=shape, dtype=dtype, chunks=True, compression="gzip")
    return path


def test_the_default_limit_fits_real_datasets() -> None:
    assert 256 * 2**20 <= DEFAULT_MAX_BYTES <= 2**30


def test_ten_million_declared_rows_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "zeros.h5", 10_000_000, obs_dim=8)  # the attack: 820 MB when read, 10 KB on disk
    assert path.stat().st_size < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(BufferFormatError) as raised:
            load_tianshou_hdf5(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(raised.value)
    assert "\n" not in message
    assert str(path) in message and "max_bytes" in message and "10000000" in message
    assert peak < 50 * 2**20, peak  # nothing of the declared size was allocated


def test_a_declared_size_of_terabytes_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "huge.h5", 10**12, obs_dim=1)
    with pytest.raises(BufferFormatError, match=r"declares .* bytes, over the limit max_bytes="):
        load_tianshou_hdf5(path)


def test_the_limit_is_the_callers_to_raise_and_to_lower(tmp_path: Path) -> None:
    path = _write(tmp_path / "small.h5", 1000)  # 40 KB of observations
    assert len(load_tianshou_hdf5(path)) == 1000
    with pytest.raises(BufferFormatError, match=r"field '\w+'.* over the limit max_bytes=10000;"):
        load_tianshou_hdf5(path, max_bytes=10_000)
    assert len(load_tianshou_hdf5(path, max_bytes=10**6)) == 1000


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_bytes_must_be_a_positive_integer(bad: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        load_tianshou_hdf5(_write(tmp_path / "small.h5", 4), max_bytes=bad)


@pytest.mark.parametrize("field", ["rew", "obs", "obs_next", "act"])
def test_non_finite_values_are_refused_unless_asked(field: str, tmp_path: Path) -> None:
    rows = 6
    values = {
        "rew": np.ones(rows),
        "obs": np.ones((rows, 4), np.float32),
        "obs_next": np.ones((rows, 4), np.float32),
        "act": np.ones((rows, 1), np.float32),
    }
    values[field][2] = np.nan
    path = _write(tmp_path / "nan.h5", rows, values=values)
    with pytest.raises(BufferFormatError) as raised:
        load_tianshou_hdf5(path)
    message = str(raised.value)
    assert "\n" not in message
    for part in (str(path), f"field {field!r}", "nan", "row 2", "allow_nonfinite=True"):
        assert part in message, (part, message)
    assert len(load_tianshou_hdf5(path, allow_nonfinite=True)) == rows


def test_all_nan_rewards_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "nan.h5", 5, values={"rew": np.full(5, np.nan)})
    message = r"field 'rew' holds nan at row 0 \(5 of 5 stored rows are not finite\)"
    with pytest.raises(BufferFormatError, match=message):
        load_tianshou_hdf5(path)


def test_huge_discrete_actions_are_refused_when_the_dataset_meets_the_algorithm(tmp_path: Path) -> None:
    import torch
    from torch import nn

    from tshtrain.algorithm import DiscreteCQL, EpsilonSchedule, QValuePolicy, mlp
    from tshtrain.data import Collector
    from tshtrain.env import make_vector_env
    from tshtrain.errors import ConfigurationError
    from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

    act = np.zeros(6, np.int64)
    act[4] = 10**9
    path = _write(tmp_path / "big-actions.h5", 6, values={"act": act})
    buffer = load_tianshou_hdf5(path)
    assert isinstance(buffer, ReplayBuffer)
    torch.manual_seed(0)
    env = make_vector_env("CartPole-v1", 1)
    policy = QValuePolicy(mlp(4, 2, (8,), nn.ReLU), env.single_action_space, eps_schedule=EpsilonSchedule())
    algorithm = DiscreteCQL(policy=policy)
    params = OfflineTrainerParams(
        buffer=buffer, test_collector=Collector(policy, env, seed=0), max_epochs=1, epoch_num_steps=1
    )
    with pytest.raises(ConfigurationError) as raised:
        OfflineTrainer(algorithm, params)
    message = str(raised.value)
    assert message.startswith(f"dataset {path}: field 'act' holds 1000000000 at row 4"), message
    assert "Discrete(2)" in message and "[0, 1]" in message and "\n" not in message
