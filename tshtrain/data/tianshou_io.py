"""Replay buffers that Tianshou 2.x saved with ``ReplayBuffer.save_hdf5`` / ``VectorReplayBuffer.save_hdf5``.

Tianshou writes the buffer object's attributes into an HDF5 file: the transitions as datasets under the
group ``_meta`` (``obs``, ``act``, ``rew``, ``terminated``, ``truncated``, ``done``, ``obs_next``,
``info``; a Dict observation is a group of datasets), the write positions as file attributes
(``maxsize``, ``_size``, ``_insertion_idx``) and, for a vector buffer, the datasets ``_offset``,
``_lengths`` and ``last_index`` (sub-buffer ``i`` holds rows ``_offset[i]`` to ``_offset[i+1]`` of
every array). Other attributes (the sampling ``RandomState``, the sub-buffers, ``info`` values of
non-numeric types) are pickles inside the file.

:func:`load_tianshou_hdf5` treats the file as untrusted input: it never unpickles, reads only the
datasets named above (numeric or boolean dtypes, no object / string / compound dtypes, no external,
virtual or linked storage), checks every shape and size against the file's own bookkeeping before
building anything, and names the file and the field in every error. The sizes the datasets declare are
added up before any of them is read: a compressed file of a few kilobytes can declare gigabytes of
zeros, so a file declaring more than ``max_bytes`` (default :data:`DEFAULT_MAX_BYTES`, 512 MiB) is
refused unread. Observations, actions and rewards must be finite on the stored rows unless
``allow_nonfinite=True``. ``info`` and ``policy`` entries
and the pickled attributes are ignored. Stored actions are taken as they are: Tianshou, like
tshtrain, stores Box actions before ``map_action`` (in [-1, 1] for a policy with ``action_scaling``).

h5py is an optional dependency: ``pip install 'tshtrain[tianshou-io]'``; it is imported on first use.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tshtrain.data.buffer import BufferLayout, ReplayBuffer, VectorReplayBuffer
from tshtrain.errors import BufferFormatError

_NUMERIC_KINDS = frozenset("biuf")
"""bool, signed and unsigned integers, floats"""
DEFAULT_MAX_BYTES = 512 * 2**20
"""largest buffer :func:`load_tianshou_hdf5` reads unless told otherwise (the bytes the file's datasets
declare, all together): 512 MiB, e.g. a million transitions of 60 float32 observation dimensions"""


def _import_h5py() -> Any:
    try:
        return importlib.import_module("h5py")
    except ImportError as exc:
        raise ImportError(
            "load_tianshou_hdf5 needs the 'h5py' package, which is not installed; install it with "
            "pip install 'tshtrain[tianshou-io]' (or pip install h5py)."
        ) from exc


class _Reader:
    """Checked reads from one open file; every error names the file and the field."""

    def __init__(self, h5py: Any, handle: Any, path: Path, max_bytes: int):
        self.h5py = h5py
        self.handle = handle
        self.path = path
        self.max_bytes = max_bytes
        self.declared_bytes = 0
        """bytes declared by the datasets counted so far (:meth:`reserve`)"""

    def fail(self, field: str, problem: str) -> BufferFormatError:
        return BufferFormatError(
            f"{self.path}: field {field!r} {problem}; not a Tianshou 2.x HDF5 replay buffer."
        )

    def entry(self, group: Any, name: str, field: str, *, required: bool = True) -> Any:
        """The member ``name`` of ``group`` through a hard link (soft and external links are refused)."""
        link = group.get(name, getlink=True)
        if link is None:
            if required:
                raise self.fail(field, "is missing")
            return None
        if not isinstance(link, self.h5py.HardLink):
            raise self.fail(field, f"is a {type(link).__name__}; only data stored in the file itself is read")
        return group[name]

    def array(
        self, group: Any, name: str, field: str, *, required: bool = True, rows: int | None = None
    ) -> np.ndarray | None:
        """A numeric dataset read whole, or None if absent and not required; its number of rows
        checked against ``rows`` (if given) before it is read."""
        dataset = self.entry(group, name, field, required=required)
        if dataset is None:
            return None
        if not isinstance(dataset, self.h5py.Dataset):
            raise self.fail(field, "is a group, expected an array")
        if dataset.dtype.kind not in _NUMERIC_KINDS or dataset.dtype.fields is not None:
            raise self.fail(field, f"has dtype {dataset.dtype}; only bool, integer and float arrays are read")
        if dataset.is_virtual or dataset.external:
            raise self.fail(field, "keeps its data outside the file (virtual or external storage); refused")
        if dataset.shape is None or dataset.ndim == 0:
            raise self.fail(field, f"has shape {dataset.shape}, expected an array")
        if rows is not None and dataset.shape[0] != rows:
            raise self.fail(field, f"has {dataset.shape[0]} rows, but the buffer's maxsize is {rows}")
        return np.asarray(dataset[()])

    def reserve(self, group: Any, name: str, field: str) -> None:
        """Count the bytes that the dataset ``name`` (every dataset of it, for a group) declares against
        ``max_bytes``, reading none of them."""
        node = self.entry(group, name, field, required=False)
        if isinstance(node, self.h5py.Group):
            for key in node:
                self.reserve(node, key, f"{field}/{key}")
            return
        if not isinstance(node, self.h5py.Dataset) or node.shape is None:
            return  # absent or not an array: refused or skipped when read
        shape, dtype = tuple(node.shape), node.dtype
        nbytes = math.prod(shape) * dtype.itemsize
        self.declared_bytes += nbytes
        if self.declared_bytes > self.max_bytes:
            raise BufferFormatError(
                f"{self.path}: field {field!r} declares {dtype}{list(shape)} ({nbytes} bytes), which brings "
                f"the buffer to {self.declared_bytes} bytes, over the limit max_bytes={self.max_bytes}; "
                f"pass load_tianshou_hdf5(..., max_bytes=N) to read a larger file you trust."
            )

    def int_attr(self, name: str, *, minimum: int) -> int:
        value = self.handle.attrs.get(name)
        if value is None:
            raise self.fail(name, "is missing from the file's attributes")
        scalar = np.asarray(value)
        if scalar.shape != () or scalar.dtype.kind not in "iu" or int(scalar) < minimum:
            raise self.fail(name, f"is {value!r}, expected an integer >= {minimum}")
        return int(scalar)

    def observation(self, meta: Any, name: str, rows: int) -> dict[str, np.ndarray]:
        """``{name: arr}`` or, for a Dict observation (a group), ``{name/key: arr}``."""
        node = self.entry(meta, name, name)
        if isinstance(node, self.h5py.Group):
            if len(node) == 0:
                raise self.fail(name, "is an empty group")
            fields: dict[str, np.ndarray] = {}
            for key in node:
                sub = self.entry(node, key, f"{name}/{key}")
                if isinstance(sub, self.h5py.Group):
                    raise self.fail(f"{name}/{key}", "is a nested group; one level of Dict keys is supported")
                arr = self.array(node, key, f"{name}/{key}", rows=rows)
                assert arr is not None
                fields[f"{name}/{key}"] = arr
            return fields
        arr = self.array(meta, name, name, rows=rows)
        assert arr is not None
        return {name: arr}


_META_FIELDS = ("obs", "obs_next", "act", "rew", "terminated", "truncated", "done")
"""the datasets of ``_meta`` that are read"""
_VECTOR_FIELDS = ("_offset", "_lengths", "last_index")
"""the datasets of a vector buffer's bookkeeping"""


def _meta_group(reader: _Reader) -> Any:
    meta = reader.entry(reader.handle, "_meta", "_meta")
    if not isinstance(meta, reader.h5py.Group):
        raise reader.fail("_meta", "is not a group")
    return meta


def _check_declared_size(reader: _Reader) -> None:
    """Every dataset that will be read counted against ``max_bytes`` before any of them is read."""
    meta = _meta_group(reader)
    for name in _META_FIELDS:
        reader.reserve(meta, name, name)
    for name in _VECTOR_FIELDS:
        reader.reserve(reader.handle, name, name)


def _read_fields(reader: _Reader, maxsize: int) -> dict[str, np.ndarray]:
    meta = _meta_group(reader)
    if "obs" not in meta:
        raise reader.fail("_meta/obs", "is missing: the buffer was saved before anything was added to it")
    if not bool(np.asarray(reader.handle.attrs.get("_save_obs_next", True))):
        raise reader.fail(
            "_meta/obs_next", "was not saved (ignore_obs_next=True); tshtrain needs the next observations"
        )
    fields = {**reader.observation(meta, "obs", maxsize), **reader.observation(meta, "obs_next", maxsize)}
    for name in ("act", "rew", "terminated", "truncated"):
        arr = reader.array(meta, name, name, rows=maxsize)
        assert arr is not None
        fields[name] = arr
    for name in ("terminated", "truncated"):
        if fields[name].dtype != np.bool_ or fields[name].ndim != 1:
            raise reader.fail(
                name, f"has dtype {fields[name].dtype} and shape {fields[name].shape}, expected bool (N,)"
            )
    if fields["rew"].ndim != 1 or fields["rew"].dtype.kind == "b":
        raise reader.fail(
            "rew", f"has dtype {fields['rew'].dtype} and shape {fields['rew'].shape}, expected numbers (N,)"
        )
    if fields["act"].dtype.kind == "b":
        raise reader.fail("act", "is boolean, expected integer (Discrete) or float (Box) actions")
    fields["rew"] = fields["rew"].astype(np.float32)
    done = reader.array(meta, "done", "done", required=False, rows=maxsize)
    if done is not None and (done.shape != (maxsize,) or done.dtype != np.bool_):
        raise reader.fail(
            "done", f"has dtype {done.dtype} and shape {done.shape}, expected bool ({maxsize},)"
        )
    return fields if done is None else {**fields, "done": done}


def _positions(reader: _Reader, maxsize: int) -> tuple[int, list[int], list[int]]:
    """(number of sub-buffers, write position and stored length per sub-buffer)."""
    if "buffer_num" not in reader.handle.attrs:
        size = reader.int_attr("_size", minimum=0)
        ptr = reader.int_attr("_insertion_idx", minimum=0)
        if size > maxsize or ptr >= maxsize or (size < maxsize and ptr != size):
            raise reader.fail(
                "_size", f"is {size} with _insertion_idx {ptr}, inconsistent with maxsize {maxsize}"
            )
        return 1, [ptr], [size]
    return _vector_positions(reader, maxsize)


def _vector_positions(reader: _Reader, maxsize: int) -> tuple[int, list[int], list[int]]:
    """:func:`_positions` of a vector buffer: ``_offset``, ``_lengths`` and ``last_index`` checked."""
    num = reader.int_attr("buffer_num", minimum=1)
    if maxsize % num:
        raise reader.fail("buffer_num", f"is {num}, which does not divide maxsize {maxsize}")
    sub = maxsize // num
    offset = reader.array(reader.handle, "_offset", "_offset")
    lengths = reader.array(reader.handle, "_lengths", "_lengths")
    last = reader.array(reader.handle, "last_index", "last_index")
    assert offset is not None and lengths is not None and last is not None
    expected = np.arange(num) * sub
    if offset.shape != (num,) or offset.dtype.kind not in "iu" or not np.array_equal(offset, expected):
        raise reader.fail(
            "_offset", f"is {offset.tolist()[:8]}, expected equal sub-buffers at {expected.tolist()[:8]}"
        )
    for name, arr in (("_lengths", lengths), ("last_index", last)):
        if arr.shape != (num,) or arr.dtype.kind not in "iu":
            raise reader.fail(
                name, f"has dtype {arr.dtype} and shape {arr.shape}, expected integers ({num},)"
            )
    if np.any(lengths < 0) or np.any(lengths > sub):
        raise reader.fail("_lengths", f"is {lengths.tolist()[:8]}, expected values in [0, {sub}]")
    local = last - offset
    if np.any(local < 0) or np.any(local >= sub):
        raise reader.fail("last_index", f"is {last.tolist()[:8]}, outside the sub-buffers")
    ptr_E = np.where(lengths == 0, 0, (local + 1) % sub)
    partial = lengths < sub
    if np.any(ptr_E[partial] != lengths[partial]):
        raise reader.fail(
            "last_index", f"is {last.tolist()[:8]}, inconsistent with _lengths {lengths.tolist()[:8]}"
        )
    return num, [int(p) for p in ptr_E], [int(n) for n in lengths]


def _columns(fields: Mapping[str, np.ndarray], num: int) -> dict[str, np.ndarray]:
    """Tianshou's sub-buffer-after-sub-buffer rows -> tshtrain's (row, column) arrays."""
    out: dict[str, np.ndarray] = {}
    for name, arr in fields.items():
        sub = arr.shape[0] // num
        out[name] = np.ascontiguousarray(arr.reshape(num, sub, *arr.shape[1:]).swapaxes(0, 1))
    return out


def load_tianshou_hdf5(
    path: str | Path,
    *,
    seed: int | np.random.Generator | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_nonfinite: bool = False,
) -> ReplayBuffer | VectorReplayBuffer:
    """A tshtrain buffer holding the transitions of a Tianshou 2.x ``save_hdf5`` file.

    A Tianshou ``ReplayBuffer`` becomes a :class:`ReplayBuffer` of its ``maxsize``; a
    ``VectorReplayBuffer`` (equal sub-buffers) a :class:`VectorReplayBuffer` with the same sub-buffers,
    write positions and order, so that n-step returns and episode ends read the same. ``done`` is
    checked to equal ``terminated | truncated`` on the stored rows. See the module docstring for what
    is read and checked.

    Args:
        path: the HDF5 file.
        seed: seed or generator of the buffer's sampling (Tianshou's ``RandomState`` is a pickle and
            is not read).
        max_bytes: the most bytes the file's datasets may declare, all together (default
            :data:`DEFAULT_MAX_BYTES`, 512 MiB); checked before anything is read. Raise it for a larger
            file you trust.
        allow_nonfinite: load NaN or infinite observations, actions and rewards (refused by default).

    Raises:
        ImportError: h5py is not installed (``pip install 'tshtrain[tianshou-io]'``).
        ValueError: ``max_bytes`` is not a positive integer.
        BufferFormatError: the file is not a readable HDF5 file, or a field is missing, has another
            dtype or shape, is stored outside the file, disagrees with the buffer's bookkeeping,
            declares more than ``max_bytes``, or holds non-finite values (unless allowed).
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"load_tianshou_hdf5: max_bytes must be a positive integer, got {max_bytes!r}.")
    h5py = _import_h5py()
    path = Path(path)
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise BufferFormatError(f"{path}: not a readable HDF5 file ({error}).") from None
    with handle:
        reader = _Reader(h5py, handle, path, max_bytes)
        maxsize = reader.int_attr("maxsize", minimum=1)
        _check_declared_size(reader)
        fields = _read_fields(reader, maxsize)
        vector = "buffer_num" in handle.attrs
        num, ptr, length = _positions(reader, maxsize)
    done = fields.pop("done", None)
    stored = _stored_mask(maxsize, num, ptr, length)
    if done is not None:
        bad = np.flatnonzero(stored & (done != (fields["terminated"] | fields["truncated"])))
        if len(bad):
            raise reader.fail("done", f"differs from terminated | truncated at row {int(bad[0])}")
    if not allow_nonfinite:
        _check_finite(path, fields, stored)
    arrays = _columns(fields, num)
    layout = BufferLayout(
        column_capacity=maxsize // num, num_columns=num, ptr=tuple(ptr), length=tuple(length)
    )
    buffer = VectorReplayBuffer(maxsize, num, seed=seed) if vector else ReplayBuffer(maxsize, seed=seed)
    buffer.restore(arrays, layout)
    buffer.source = str(path)
    buffer.allow_nonfinite = allow_nonfinite  # asked for here: not refused again when the trainer is built
    return buffer


def _check_finite(path: Path, fields: Mapping[str, np.ndarray], stored: np.ndarray) -> None:
    """Raise at the first stored row of a float field holding NaN or an infinity."""
    for name, arr in fields.items():
        if arr.dtype.kind != "f":
            continue
        bad = stored & ~np.isfinite(arr).reshape(len(arr), -1).all(axis=1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            values = arr[row].reshape(-1)
            shown = values[~np.isfinite(values)][0]
            raise BufferFormatError(
                f"{path}: field {name!r} holds {shown} at row {row} ({int(bad.sum())} of "
                f"{int(stored.sum())} stored rows are not finite); pass load_tianshou_hdf5(..., "
                f"allow_nonfinite=True) to load them anyway."
            )


def _stored_mask(maxsize: int, num: int, ptr: list[int], length: list[int]) -> np.ndarray:
    """Which of Tianshou's flat rows hold a transition."""
    sub = maxsize // num
    mask = np.zeros((num, sub), dtype=bool)
    for i, (p, n) in enumerate(zip(ptr, length, strict=True)):
        rows = (np.arange(p - n, p)) % sub
        mask[i, rows] = True
    return mask.reshape(maxsize)
