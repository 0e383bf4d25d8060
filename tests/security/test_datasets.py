"""Loading a saved buffer or a Minari dataset never unpickles, never imports what the file names, and
never reads outside the dataset's directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tshtrain.cli import main
from tshtrain.data import VectorReplayBuffer, load_buffer, load_buffer_into, save_buffer
from tshtrain.errors import BufferFormatError

from .conftest import assert_one_line_error, snapshot


class _Payload:
    """Unpickling this creates the directory ``marker``: proof that code from the file ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.marker,))


def _saved(tmp_path: Path) -> Path:
    buffer = VectorReplayBuffer(8, 2)
    for t in range(3):
        obs = np.full((2, 4), t, dtype=np.float32)
        buffer.add(
            obs=obs,
            act=np.array([0, 1]),
            rew=np.ones(2, np.float32),
            terminated=np.zeros(2, bool),
            truncated=np.zeros(2, bool),
            obs_next=obs + 1,
        )
    return save_buffer(buffer, tmp_path / "buf")


def _edit_manifest(path: Path, **changes: Any) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    for dotted, value in changes.items():
        node = manifest
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    (path / "manifest.json").write_text(json.dumps(manifest))


# ---------------------------------------------------------------------------- paths from the manifest
@pytest.mark.parametrize(
    "file",
    ["../outside.npy", "../../outside.npy", "ABSOLUTE", "sub/act.npy", "./act.npy", "", ".", "..", "rew.npy"],
)
def test_field_paths_cannot_leave_the_buffer_directory(file: str, tmp_path: Path) -> None:
    path = _saved(tmp_path)
    outside = tmp_path / "outside.npy"
    np.save(outside, np.zeros((4, 2), dtype=np.int64))  # a valid file: only the path check can refuse it
    given = str(outside) if file == "ABSOLUTE" else file
    _edit_manifest(path, fields__act__file=given)
    with pytest.raises(BufferFormatError, match="names the file") as raised:
        load_buffer(path)
    assert str(path / "manifest.json") in str(raised.value)
    assert repr(given) in str(raised.value)


def test_a_symlink_leading_out_of_the_buffer_directory_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    outside = tmp_path / "outside.npy"
    np.save(outside, np.load(path / "act.npy"))
    (path / "act.npy").unlink()
    (path / "act.npy").symlink_to(outside)
    with pytest.raises(BufferFormatError, match=r"act\.npy: a symbolic link to .*outside\.npy.* outside the"):
        load_buffer(path)


def test_a_symlink_inside_the_buffer_directory_is_fine(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    (path / "act.npy").rename(path / "act-copy.npy")
    (path / "act.npy").symlink_to(path / "act-copy.npy")
    assert len(load_buffer(path)) == 6


def test_the_priorities_path_cannot_leave_the_directory(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    _edit_manifest(path, priorities={"file": "../p.npy", "shape": [16], "dtype": "<f8", "alpha": 0.6,
                                     "beta": 0.4, "max_priority": 1.0})  # fmt: skip
    with pytest.raises(BufferFormatError, match=r"names the file '\.\./p\.npy' where 'priorities\.npy'"):
        load_buffer(path)


# ---------------------------------------------------------------------------- pickles
@pytest.mark.parametrize("field", ["act", "rew", "obs"])
def test_a_pickled_object_array_is_refused_and_never_unpickled(field: str, tmp_path: Path) -> None:
    path = _saved(tmp_path)
    marker = tmp_path / "pwned"
    shape = list(np.load(path / f"{field}.npy").shape)
    payload = np.empty(shape, dtype=object)
    payload.flat[0] = _Payload(marker)
    np.save(path / f"{field}.npy", payload, allow_pickle=True)
    _edit_manifest(path, **{f"fields__{field}__dtype": "|O"})
    target = VectorReplayBuffer(8, 2)
    with pytest.raises(BufferFormatError, match=rf"{field}\.npy: holds Python objects \(dtype object\)"):
        load_buffer(path)
    with pytest.raises(BufferFormatError, match="never unpickles"):
        load_buffer_into(target, path)
    assert not marker.exists()
    assert len(target) == 0


def test_a_structured_dtype_with_an_object_field_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    marker = tmp_path / "pwned"
    payload = np.zeros((4, 2), dtype=[("a", "<i8"), ("b", "O")])
    payload["b"][0, 0] = _Payload(marker)
    np.save(path / "act.npy", payload, allow_pickle=True)
    with pytest.raises(BufferFormatError, match="holds Python objects"):
        load_buffer(path)
    assert not marker.exists()


# ---------------------------------------------------------------------------- sizes the files do not hold
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"column_capacity": 10**12}, r"column_capacity 1000000000000 needs \d+ bytes for the empty rows"),
        ({"length": [2, 2]}, r"field '\w+' has shape \[3, 2, 4\]; a buffer of 2 columns with 2 filled rows"),
        ({"num_columns": 10**9}, "ptr must be a list of 1000000000 integers"),
        ({"column_capacity": True}, "column_capacity and num_columns must be positive integers"),
        ({"ptr": [0, 99]}, r"ptr \[0, 99\] outside 0..4"),
        ({"length": ["1", 2]}, "length must be a list of 2 integers"),
        (
            {"fields__act__shape": [3, 2, 10**9]},
            r"holds <i8\[3, 2\], the manifest says <i8\[3, 2, 1000000000\]",
        ),
        ({"fields__act__dtype": ["<i8"] * 1000}, "field 'act' has the invalid dtype"),
        (
            {"fields": {"__class__": {"file": "act.npy", "shape": [4, 2], "dtype": "<i8"}}},
            "unknown field '__class__'",
        ),
        ({"fields__act": "act.npy"}, "the entry of field 'act' is not a mapping"),
    ],
)
def test_manifest_values_are_checked_before_anything_is_allocated(
    changes: dict[str, Any], message: str, tmp_path: Path
) -> None:
    path = _saved(tmp_path)
    _edit_manifest(path, **changes)
    with pytest.raises(BufferFormatError, match=message):
        load_buffer(path)


def test_a_header_promising_more_than_the_file_holds_is_refused_before_allocating(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    shape = [3, 2, 10**6, 10**6]  # 24 TB promised by a file of a few hundred bytes
    header = {"descr": "<f4", "fortran_order": False, "shape": tuple(shape)}
    with open(path / "obs.npy", "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    _edit_manifest(path, fields__obs__shape=shape, fields__obs__dtype="<f4")
    with pytest.raises(
        BufferFormatError, match=r"obs\.npy: unreadable or truncated field file \(64 data bytes"
    ):
        load_buffer(path)


# ---------------------------------------------------------------------------- through the CLI
def test_an_offline_run_on_a_malicious_dataset_is_one_line_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _saved(tmp_path)
    marker = tmp_path / "pwned"
    payload = np.empty((4, 2), dtype=object)
    payload.flat[0] = _Payload(marker)
    np.save(path / "act.npy", payload, allow_pickle=True)
    _edit_manifest(path, fields__act__dtype="|O")
    run_dir = tmp_path / "run"
    before = snapshot(path)
    config = Path(__file__).resolve().parents[2] / "examples" / "configs" / "bc_cartpole.yaml"
    argv = ["train", str(config), "--set", f"dataset.path={path}", "-o", str(run_dir)]
    assert main(argv) == 1
    assert_one_line_error(capsys.readouterr().err, "train", "BufferFormatError: ", "holds Python objects")
    assert not marker.exists() and not run_dir.exists()
    assert snapshot(path) == before
