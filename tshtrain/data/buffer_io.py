"""Saving and loading replay buffers: one ``.npy`` file per field plus a JSON manifest.

Only the rows that hold transitions are written: a field file has ``max(length)`` rows (all
``column_capacity`` rows once a column has wrapped), so a checkpoint of a 1M-transition buffer after a
thousand steps takes a thousand rows on disk; loading puts them back into arrays of the full capacity.
(Format version 1 wrote every row; it still loads.)

The format streams: arrays are written straight from the buffer's storage and read back through a
memory map into freshly allocated arrays, so neither direction needs twice the buffer's RAM. A save
goes through :func:`tshtrain.atomic.atomic_directory`: a temporary directory that is renamed into place
only when complete (fsync'ed); a failed save leaves nothing behind, and an existing buffer directory of
the same name is replaced only at the end.
Prioritized buffers add ``priorities.npy`` and their exponents to the manifest, so that a loaded buffer
samples exactly as the saved one did.

A saved buffer is untrusted input: loading never unpickles (object arrays are refused, ``np.save`` is
called with ``allow_pickle=False``), every file the manifest names must be the field's own file inside
the buffer directory (no ``..``, no absolute path, no symbolic link leading out), and sizes, shapes and
write positions are checked against the files before anything is allocated or changed.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import numpy as np

from tshtrain.atomic import atomic_directory
from tshtrain.data import prioritized
from tshtrain.data.buffer import (
    BaseReplayBuffer,
    BufferLayout,
    ReplayBuffer,
    SavableBuffer,
    VectorReplayBuffer,
)
from tshtrain.errors import BufferFormatError, short_repr

BUFFER_FORMAT = "tshtrain-buffer"
BUFFER_FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)  # version 1 stored every row, version 2 only the filled ones
_MANIFEST = "manifest.json"
_PRIORITIES = "priorities"  # manifest key and file stem (field files never clash: see _field_file)
_CORE_FIELDS = ("act", "rew", "terminated", "truncated")
_MAX_PATH_REPR = 300  # paths from a manifest are shown whole up to this length, cut beyond
_FIELD_NAMES = "act, rew, terminated, truncated, obs[/KEY] and obs_next[/KEY]"
_TBuffer = TypeVar("_TBuffer", bound=SavableBuffer)
_FIELD_NAME = re.compile(r"^(act|rew|terminated|truncated|(obs|obs_next)(/[^\x00]+)?)$")


def _field_file(name: str) -> str:
    return name.replace("/", "__") + ".npy"


def _write_array(directory: Path, file: str, arr: np.ndarray) -> dict[str, Any]:
    """Write ``arr`` to ``directory/file``; its manifest entry."""
    with open(directory / file, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)
    return {"file": file, "shape": list(arr.shape), "dtype": arr.dtype.str}


def save_buffer(buffer: SavableBuffer, path: str | os.PathLike[str]) -> Path:
    """Write ``buffer`` to the directory ``path`` atomically (see the module docstring). A
    :class:`~tshtrain.data.TensorReplayBuffer` is written as numpy arrays (copied to the host first
    when it lives on another device) and reads back into numpy or tensor buffers alike.

    Prioritized buffers also store their priorities, ``alpha``, ``beta`` and max priority.
    """
    target = Path(path)
    layout = buffer.layout()
    with atomic_directory(target) as tmp:
        fields: dict[str, Any] = {}
        for name, arr in buffer.field_arrays(rows=_stored_rows(layout)).items():
            fields[name] = _write_array(tmp, _field_file(name), arr)
        manifest = {
            "format": BUFFER_FORMAT,
            "version": BUFFER_FORMAT_VERSION,
            "class": type(buffer).__name__,
            "column_capacity": layout.column_capacity,
            "num_columns": layout.num_columns,
            "ptr": list(layout.ptr),
            "length": list(layout.length),
            "fields": fields,
        }
        if isinstance(buffer, prioritized.BasePrioritizedBuffer):
            manifest[_PRIORITIES] = {
                **_write_array(tmp, _PRIORITIES + ".npy", buffer.priorities()),
                "alpha": buffer.alpha,
                "beta": buffer.beta,
                "max_priority": buffer.max_priority,
            }
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1))
    return target


def _stored_rows(layout: BufferLayout) -> int:
    """Rows a field file holds: every row written so far (a column fills rows 0..length-1 until it
    wraps, then all of them)."""
    return max(layout.length, default=0)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a saved buffer, checked for format and version."""
    manifest_path = Path(path) / _MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (FileNotFoundError, NotADirectoryError):
        raise BufferFormatError(f"{path}: not a tshtrain buffer directory (no {_MANIFEST}).") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BufferFormatError(f"{manifest_path}: corrupt manifest ({exc}).") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUFFER_FORMAT:
        raise BufferFormatError(f"{manifest_path}: not a tshtrain buffer manifest.")
    if manifest.get("version") not in _READABLE_VERSIONS:
        raise BufferFormatError(
            f"{manifest_path}: buffer format version {short_repr(manifest.get('version'))}; this tshtrain "
            f"reads versions {', '.join(map(str, _READABLE_VERSIONS))}. Re-save the buffer with a matching "
            f"tshtrain version."
        )
    return manifest


def _checked_layout(manifest: dict[str, Any], where: Path) -> BufferLayout:
    """The manifest's sizes and write positions, checked for type and range."""
    raw_cap, raw_cols = manifest.get("column_capacity"), manifest.get("num_columns")
    if not (_is_int(raw_cap) and _is_int(raw_cols) and raw_cap >= 1 and raw_cols >= 1):
        raise BufferFormatError(
            f"{where}: column_capacity and num_columns must be positive integers, got "
            f"{short_repr(raw_cap)} and {short_repr(raw_cols)}."
        )
    cap, cols = raw_cap, raw_cols
    positions: dict[str, tuple[int, ...]] = {}
    for key in ("ptr", "length"):
        values = manifest.get(key)
        if not (isinstance(values, list) and len(values) == cols and all(_is_int(v) for v in values)):
            raise BufferFormatError(
                f"{where}: {key} must be a list of {cols} integers, got {short_repr(values)}."
            )
        if not all(0 <= v <= cap for v in values):
            raise BufferFormatError(f"{where}: {key} {short_repr(values)} outside 0..{cap}.")
        positions[key] = tuple(int(v) for v in values)
    if not isinstance(manifest.get("fields"), dict):
        raise BufferFormatError(f"{where}: fields must be a mapping of field names to files.")
    return BufferLayout(
        column_capacity=cap, num_columns=cols, ptr=positions["ptr"], length=positions["length"]
    )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_spec(directory: Path, name: Any, spec: Any, layout: BufferLayout, rows: int) -> dict[str, Any]:
    """The manifest entry of field ``name``, checked: a known field name, its own file, and a shape of
    (rows, num_columns, ...)."""
    where = directory / _MANIFEST
    if not isinstance(name, str) or not _FIELD_NAME.match(name):
        raise BufferFormatError(f"{where}: unknown field {short_repr(name)}; a buffer stores {_FIELD_NAMES}.")
    if not isinstance(spec, dict):
        raise BufferFormatError(f"{where}: the entry of field {name!r} is not a mapping.")
    _check_file_name(directory, spec.get("file"), _field_file(name))
    if not isinstance(spec.get("dtype"), str) or len(spec["dtype"]) > 64:
        raise BufferFormatError(
            f"{where}: field {name!r} has the invalid dtype {short_repr(spec.get('dtype'))}."
        )
    shape = spec.get("shape")
    if not (isinstance(shape, list) and len(shape) >= 2 and all(_is_int(n) and n >= 0 for n in shape)):
        raise BufferFormatError(f"{where}: field {name!r} has the invalid shape {short_repr(shape)}.")
    if tuple(shape[:2]) != (rows, layout.num_columns):
        raise BufferFormatError(
            f"{where}: field {name!r} has shape {shape}; a buffer of {layout.num_columns} columns with "
            f"{rows} filled rows (of {layout.column_capacity}) stores ({rows}, {layout.num_columns}, ...)."
        )
    return spec


def _check_file_name(directory: Path, given: Any, expected: str) -> None:
    """Raise unless the manifest names exactly the expected file, which stays inside ``directory``."""
    if given != expected:
        shown = short_repr(given, limit=_MAX_PATH_REPR)
        raise BufferFormatError(
            f"{directory / _MANIFEST}: names the file {shown} where {expected!r} belongs; a buffer only "
            f"reads its own files inside its directory (no '..', no absolute path)."
        )
    file = directory / expected
    if file.is_symlink() and not file.resolve().is_relative_to(directory.resolve()):
        shown = short_repr(str(file.resolve()), limit=_MAX_PATH_REPR)
        raise BufferFormatError(f"{file}: a symbolic link to {shown} outside the buffer directory; refused.")


def _checked_manifest(path: str | os.PathLike[str]) -> tuple[dict[str, Any], BufferLayout]:
    """The manifest and its layout, with every field entry (and the priorities entry) checked."""
    manifest = read_manifest(path)
    directory = Path(path)
    layout = _checked_layout(manifest, directory / _MANIFEST)
    rows = layout.column_capacity if manifest["version"] == 1 else _stored_rows(layout)
    for name, spec in manifest["fields"].items():
        _field_spec(directory, name, spec, layout, rows)
    missing = [name for name in _CORE_FIELDS if name not in manifest["fields"]]
    if manifest["fields"] and missing:  # an empty buffer has no fields at all
        raise BufferFormatError(f"{directory / _MANIFEST}: the fields {missing} are missing.")
    per = manifest.get(_PRIORITIES)
    if per is not None:
        if not isinstance(per, dict):
            raise BufferFormatError(f"{directory / _MANIFEST}: {_PRIORITIES} is not a mapping.")
        _check_file_name(directory, per.get("file"), _PRIORITIES + ".npy")
        for key in ("alpha", "beta", "max_priority"):
            if not isinstance(per.get(key), int | float) or isinstance(per.get(key), bool):
                raise BufferFormatError(
                    f"{directory / _MANIFEST}: {_PRIORITIES}.{key} must be a number, got "
                    f"{short_repr(per.get(key))}."
                )
    return manifest, layout


def load_buffer_into(buffer: _TBuffer, path: str | os.PathLike[str]) -> _TBuffer:
    """Fill ``buffer`` (which must have the saved sizes) from the directory ``path``.

    Every file is checked before the buffer changes, so a failed load leaves it as it was.
    """
    manifest, layout = _checked_manifest(path)
    if (layout.column_capacity, layout.num_columns) != (buffer.column_capacity, buffer.num_columns):
        raise BufferFormatError(
            f"{path}: saved buffer has {layout.num_columns} sub-buffers of {layout.column_capacity} rows; "
            f"the target has {buffer.num_columns} of {buffer.column_capacity}. Build the target with "
            f"the saved sizes, or use load_buffer({str(path)!r})."
        )
    for spec in manifest["fields"].values():  # every file as its manifest entry says, read or not
        _check_file(Path(path), spec)
    _check_memory(Path(path), manifest["fields"], layout.column_capacity)
    arrays = {
        name: _read_array(Path(path), spec, layout.column_capacity)
        for name, spec in manifest["fields"].items()
    }
    saved_per = manifest.get(_PRIORITIES)
    per_state: tuple[np.ndarray, float, float] | None = None
    if isinstance(buffer, prioritized.BasePrioritizedBuffer) and saved_per is not None:
        priorities = _read_array(Path(path), saved_per)
        if priorities.shape != (buffer.capacity,):
            raise BufferFormatError(
                f"{Path(path) / saved_per['file']}: holds {priorities.shape} priorities for a buffer of "
                f"{buffer.capacity} transitions."
            )
        per_state = (priorities, float(saved_per["alpha"]), float(saved_per["max_priority"]))
    buffer.restore(arrays, layout)
    if isinstance(buffer, prioritized.BasePrioritizedBuffer) and per_state is not None:
        buffer.restore_priorities(per_state[0], alpha=per_state[1], max_priority=per_state[2])
    return buffer


def _check_memory(directory: Path, fields: dict[str, Any], rows: int) -> None:
    """Refuse a buffer whose empty rows would not fit in this machine's memory. A field file holds
    only the filled rows (their size is checked against the file when it is read), so the manifest's
    ``column_capacity`` alone sets how many zeroed rows loading adds."""
    total = 0
    for spec in fields.values():
        itemsize = np.dtype(spec["dtype"]).itemsize  # the file's own dtype (checked against it)
        total += (rows - spec["shape"][0]) * math.prod(spec["shape"][1:]) * itemsize
    memory = _physical_memory()
    if memory is not None and total > memory:
        raise BufferFormatError(
            f"{directory / _MANIFEST}: column_capacity {rows} needs {total} bytes for the empty rows; "
            f"this machine has {memory} bytes of memory. Save the buffer with a smaller size."
        )


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every platform
        return None


def _read_array(directory: Path, spec: dict[str, Any], rows: int | None = None) -> np.ndarray:
    """Read one array file described by a (checked) manifest entry, checked against it; with ``rows``,
    into the first rows of a zeroed array of ``rows`` rows (a field file holds only the filled rows).

    The header is parsed without unpickling; object arrays are refused, and the file must hold
    exactly the bytes its header promises before the array is allocated.
    """
    file = directory / spec["file"]
    try:
        with open(file, "rb") as fh:
            shape, dtype = _checked_header(fh, file, spec)
            if rows is None or rows == shape[0]:
                arr = np.empty(shape, dtype=dtype)
                _read_into(fh, arr, file)
            else:
                arr = np.zeros((rows, *shape[1:]), dtype=dtype)
                _read_into(fh, arr[: shape[0]], file)
    except (OSError, ValueError, EOFError) as exc:
        if isinstance(exc, BufferFormatError):
            raise
        raise BufferFormatError(f"{file}: unreadable or truncated field file ({exc}).") from None
    return arr


def _check_file(directory: Path, spec: dict[str, Any]) -> None:
    """Check one array file's header and size against its manifest entry, reading no data."""
    file = directory / spec["file"]
    try:
        with open(file, "rb") as fh:
            _checked_header(fh, file, spec)
    except (OSError, ValueError, EOFError) as exc:
        if isinstance(exc, BufferFormatError):
            raise
        raise BufferFormatError(f"{file}: unreadable or truncated field file ({exc}).") from None


def _checked_header(fh: Any, file: Path, spec: dict[str, Any]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype of the open ``.npy`` file ``fh`` (left at its data), checked against the
    manifest entry and the file's size."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    if dtype.hasobject:
        raise BufferFormatError(
            f"{file}: holds Python objects (dtype {dtype}), which only unpickling could read; "
            f"tshtrain never unpickles a buffer. Save numeric arrays."
        )
    if list(shape) != spec["shape"] or dtype.str != spec.get("dtype") or fortran:
        raise BufferFormatError(
            f"{file}: holds {dtype.str}{list(shape)}, the manifest says {spec['dtype']}{spec['shape']}."
        )
    num_bytes = math.prod(shape) * dtype.itemsize
    present = os.fstat(fh.fileno()).st_size - fh.tell()
    if present != num_bytes:
        raise BufferFormatError(
            f"{file}: unreadable or truncated field file ({present} data bytes, the header "
            f"promises {num_bytes})."
        )
    return tuple(shape), dtype


def _read_into(fh: Any, arr: np.ndarray, file: Path, chunk: int = 1 << 24) -> None:
    """Read the array's bytes straight into it, in chunks (no second copy, no memory map)."""
    view = arr.reshape(-1).view(np.uint8).data
    done = 0
    while done < len(view):
        got = fh.readinto(view[done : done + chunk])
        if not got:
            raise BufferFormatError(
                f"{file}: unreadable or truncated field file ({done} of {len(view)} data bytes present)."
            )
        done += got


def load_buffer(
    path: str | os.PathLike[str], *, seed: int | np.random.Generator | None = None
) -> BaseReplayBuffer:
    """Load a saved buffer as a new :class:`ReplayBuffer` / :class:`VectorReplayBuffer` (or the
    prioritized variant it was saved from, with the saved alpha, beta and priorities)."""
    manifest, layout = _checked_manifest(path)
    cap, cols = layout.column_capacity, layout.num_columns
    kind = manifest.get("class")
    per = manifest.get(_PRIORITIES) or {}
    alpha, beta = float(per.get("alpha", 0.6)), float(per.get("beta", 0.4))
    buffer: BaseReplayBuffer
    if kind == "PrioritizedReplayBuffer":
        buffer = prioritized.PrioritizedReplayBuffer(cap, alpha, beta, seed=seed)
    elif kind == "PrioritizedVectorReplayBuffer":
        buffer = prioritized.PrioritizedVectorReplayBuffer(cap * cols, cols, alpha, beta, seed=seed)
    elif cols == 1 and kind == "ReplayBuffer":
        buffer = ReplayBuffer(cap, seed=seed)
    else:
        buffer = VectorReplayBuffer(cap * cols, cols, seed=seed)
    load_buffer_into(buffer, path)
    buffer.source = str(path)
    return buffer
