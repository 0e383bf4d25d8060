"""load_tianshou_hdf5: Tianshou 2.x ``save_hdf5`` files -> tshtrain buffers; malformed files refused.

``tianshou_hdf5/vector_wrapped.h5`` was written once by Tianshou 2.0.1 (not imported here)::

    v = VectorReplayBuffer(6, 2)
    for i in range(5):
        v.add(Batch(obs=np.array([[i, 0], [i, 1]], np.float32), act=np.array([i % 2, (i + 1) % 2]),
                    rew=np.array([float(i), -float(i)]), terminated=np.array([i == 1, False]),
                    truncated=np.array([False, i == 2]),
                    obs_next=np.array([[i + 1, 0], [i + 1, 1]], np.float32), info=[{}, {}]))
    v.save_hdf5("vector_wrapped.h5")

The other files are written here with h5py in Tianshou's layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.extras import need
from tshtrain.data import ReplayBuffer, VectorReplayBuffer, load_tianshou_hdf5
from tshtrain.errors import BufferFormatError

pytestmark = pytest.mark.integration
h5py = need("h5py", "tianshou-io")

FIXTURE = Path(__file__).parent / "tianshou_hdf5" / "vector_wrapped.h5"


def _write(
    path: Path, meta: dict[str, Any], attrs: dict[str, Any], datasets: dict[str, Any] | None = None
) -> Path:
    """A file in Tianshou's layout: ``_meta`` datasets (dicts become groups), attributes, extra datasets."""
    with h5py.File(path, "w") as f:
        for key, value in attrs.items():
            f.attrs[key] = value
        group = f.create_group("_meta")
        group.attrs["__data_type__"] = "Batch"
        for name, value in meta.items():
            if isinstance(value, dict):
                sub = group.create_group(name)
                for key, arr in value.items():
                    sub.create_dataset(key, data=arr)
            else:
                group.create_dataset(name, data=value)
        group.create_group("info")
        f.create_dataset("_random_state", data=np.frombuffer(b"\x80\x04not a pickle to read", dtype=np.int8))
        f["_random_state"].attrs["__data_type__"] = "RandomState"
        for name, value in (datasets or {}).items():
            f.create_dataset(name, data=value)
    return path


def _single_meta(maxsize: int = 6, stored: int = 4) -> dict[str, Any]:
    obs = np.zeros((maxsize, 3), np.float32)
    obs[:stored] = np.arange(stored)[:, None]
    terminated = np.zeros(maxsize, bool)
    terminated[1] = True
    truncated = np.zeros(maxsize, bool)
    truncated[3] = True
    return {
        "obs": obs,
        "act": np.arange(maxsize, dtype=np.int64) % 2,
        "rew": np.arange(maxsize, dtype=np.float64),
        "terminated": terminated,
        "truncated": truncated,
        "done": terminated | truncated,
        "obs_next": obs + 1,
    }


def _single_attrs(maxsize: int = 6, stored: int = 4) -> dict[str, Any]:
    return {"maxsize": maxsize, "_size": stored, "_insertion_idx": stored % maxsize, "_save_obs_next": True}


def test_a_vector_buffer_saved_by_tianshou_keeps_its_sub_buffers_and_order() -> None:
    buffer = load_tianshou_hdf5(FIXTURE, seed=0)
    assert isinstance(buffer, VectorReplayBuffer)
    layout = buffer.layout()
    assert (layout.column_capacity, layout.num_columns, layout.ptr, layout.length) == (3, 2, (2, 2), (3, 3))
    idx = buffer.chronological_indices()
    data = buffer.get(idx)
    # oldest first, the two sub-buffers side by side: steps 2, 3, 4 of env 0 and env 1
    assert isinstance(data.obs, np.ndarray) and isinstance(data.obs_next, np.ndarray)
    np.testing.assert_array_equal(data.obs[:, 0], [2, 2, 3, 3, 4, 4])
    np.testing.assert_array_equal(data.obs[:, 1], [0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(data.obs_next[:, 0], [3, 3, 4, 4, 5, 5])
    np.testing.assert_array_equal(data.act, [0, 1, 1, 0, 0, 1])
    np.testing.assert_array_equal(data.rew, [2, -2, 3, -3, 4, -4])
    assert data.rew.dtype == np.float32
    np.testing.assert_array_equal(data.truncated, [False, True, False, False, False, False])
    assert not data.terminated.any()  # env 0's termination at step 1 was overwritten
    # episode-aware neighbours: env 1's truncation at step 2 ends its chain, env 0's step 2 continues
    np.testing.assert_array_equal(buffer.next_index(idx[:2]), [idx[2], idx[1]])


def test_a_single_buffer_and_its_fields(tmp_path: Path) -> None:
    path = _write(tmp_path / "single.h5", _single_meta(), _single_attrs())
    buffer = load_tianshou_hdf5(path)
    assert isinstance(buffer, ReplayBuffer) and len(buffer) == 4 and buffer.capacity == 6
    data = buffer.sample_all()
    assert isinstance(data.obs, np.ndarray)
    np.testing.assert_array_equal(data.obs[:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(data.terminated, [False, True, False, False])
    np.testing.assert_array_equal(data.truncated, [False, False, False, True])


def test_a_full_single_buffer_starts_at_the_insertion_index(tmp_path: Path) -> None:
    meta = _single_meta(4, 4)
    meta["obs"][:, 0] = [4, 5, 2, 3]  # written 0..5 into 4 rows: 4 and 5 overwrote 0 and 1
    meta["terminated"][:] = False
    meta["truncated"][:] = False
    meta["done"][:] = False
    path = _write(tmp_path / "full.h5", meta, {**_single_attrs(4, 4), "_insertion_idx": 2})
    data = load_tianshou_hdf5(path).sample_all()
    assert isinstance(data.obs, np.ndarray)
    np.testing.assert_array_equal(data.obs[:, 0], [2, 3, 4, 5])


def test_dict_observations(tmp_path: Path) -> None:
    meta = _single_meta()
    meta["obs"] = {"pos": meta["obs"], "id": np.arange(6, dtype=np.int64)}
    meta["obs_next"] = {"pos": meta["obs_next"], "id": np.arange(6, dtype=np.int64) + 1}
    data = load_tianshou_hdf5(_write(tmp_path / "dict.h5", meta, _single_attrs())).sample_all()
    assert isinstance(data.obs, dict)
    np.testing.assert_array_equal(data.obs["id"], [0, 1, 2, 3])
    assert isinstance(data.obs_next, dict)
    np.testing.assert_array_equal(data.obs_next["pos"][:, 0], [1, 2, 3, 4])


def _malformed(tmp_path: Path, change: str) -> Path:  # noqa: PLR0912 - one branch per case, read as a table
    meta, attrs, extra = _single_meta(), _single_attrs(), None
    path = tmp_path / f"{change}.h5"
    if change == "no obs_next":
        del meta["obs_next"]
    elif change == "string rewards":
        meta["rew"] = np.array([b"1"] * 6, dtype=object)
    elif change == "compound actions":
        meta["act"] = np.zeros(6, dtype=[("a", np.int64), ("b", np.float32)])
    elif change == "short act":
        meta["act"] = np.zeros(5, np.int64)
    elif change == "float terminated":
        meta["terminated"] = np.zeros(6, np.float32)
    elif change == "done disagrees":
        meta["done"][2] = True
    elif change == "size beyond maxsize":
        attrs["_size"] = 7
    elif change == "insertion index off":
        attrs["_insertion_idx"] = 1
    elif change == "no maxsize":
        del attrs["maxsize"]
    elif change == "obs_next not saved":
        attrs["_save_obs_next"] = False
    elif change == "nested dict":
        meta["obs"] = {"a": np.zeros((6, 2), np.float32)}
        _write(path, meta, attrs)
        with h5py.File(path, "a") as f:
            f["_meta/obs"].create_group("deeper")
        return path
    elif change in ("soft link", "external link", "external storage"):
        _write(path, meta, attrs)
        with h5py.File(path, "a") as f:
            del f["_meta/rew"]
            if change == "soft link":
                f["_meta/rew"] = h5py.SoftLink("/_meta/act")
            elif change == "external link":
                f["_meta/rew"] = h5py.ExternalLink("/etc/other.h5", "/rew")
            else:
                raw = tmp_path / "raw.bin"
                raw.write_bytes(np.zeros(6, np.float64).tobytes())
                f["_meta"].create_dataset("rew", shape=(6,), dtype=np.float64, external=[(str(raw), 0, 48)])
        return path
    elif change == "vector lengths":
        extra = {"_offset": np.array([0, 3]), "_lengths": np.array([2, 4]), "last_index": np.array([1, 4])}
        attrs["buffer_num"] = 2
    elif change == "vector offsets":
        extra = {"_offset": np.array([0, 2]), "_lengths": np.array([2, 2]), "last_index": np.array([1, 4])}
        attrs["buffer_num"] = 2
    elif change == "vector last index":
        extra = {"_offset": np.array([0, 3]), "_lengths": np.array([2, 1]), "last_index": np.array([1, 4])}
        attrs["buffer_num"] = 2
    else:
        raise AssertionError(change)
    return _write(path, meta, attrs, extra)


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ("no obs_next", "obs_next", "is missing"),
        ("string rewards", "rew", "has dtype object; only bool, integer and float arrays are read"),
        ("compound actions", "act", "only bool, integer and float arrays are read"),
        ("short act", "act", "has 5 rows, but the buffer's maxsize is 6"),
        ("float terminated", "terminated", "expected bool"),
        ("done disagrees", "done", "differs from terminated | truncated at row 2"),
        ("size beyond maxsize", "_size", "inconsistent with maxsize 6"),
        ("insertion index off", "_size", "is 4 with _insertion_idx 1"),
        ("no maxsize", "maxsize", "is missing from the file's attributes"),
        ("obs_next not saved", "_meta/obs_next", "ignore_obs_next=True"),
        ("nested dict", "obs/deeper", "is a nested group"),
        ("soft link", "rew", "is a SoftLink; only data stored in the file itself is read"),
        ("external link", "rew", "is a ExternalLink"),
        ("external storage", "rew", "outside the file (virtual or external storage)"),
        ("vector lengths", "_lengths", "expected values in [0, 3]"),
        ("vector offsets", "_offset", "expected equal sub-buffers at [0, 3]"),
        ("vector last index", "last_index", "inconsistent with _lengths [2, 1]"),
    ],
)
def test_malformed_files_are_refused_naming_the_file_and_field(
    tmp_path: Path, change: str, field: str, problem: str
) -> None:
    path = _malformed(tmp_path, change)
    with pytest.raises(BufferFormatError) as caught:
        load_tianshou_hdf5(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: field {field!r} "), message
    assert problem in message, message


def test_a_file_that_is_not_hdf5_or_is_empty(tmp_path: Path) -> None:
    pickle_file = tmp_path / "buffer.pkl"
    pickle_file.write_bytes(b"\x80\x04\x95 a pickle, never loaded")
    with pytest.raises(BufferFormatError, match="not a readable HDF5 file"):
        load_tianshou_hdf5(pickle_file)
    empty = tmp_path / "empty.h5"
    with h5py.File(empty, "w") as f:
        f.attrs["maxsize"] = 4
        f.create_group("_meta")
    with pytest.raises(BufferFormatError, match="saved before anything was added"):
        load_tianshou_hdf5(empty)
