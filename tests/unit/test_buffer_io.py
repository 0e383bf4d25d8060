"""save_buffer / load_buffer: round trips, format errors, atomic saves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tshtrain.data import (
    PrioritizedReplayBuffer,
    PrioritizedVectorReplayBuffer,
    ReplayBuffer,
    VectorReplayBuffer,
    load_buffer,
    load_buffer_into,
    save_buffer,
)
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.prioritized import BasePrioritizedBuffer
from tshtrain.errors import BufferFormatError


def fill(
    buf: BaseReplayBuffer, num_steps: int, envs: list[int], *, start: int = 0, dict_obs: bool = False
) -> None:
    for t in range(start, start + num_steps):
        tag = np.array([10 * t + e for e in envs], dtype=np.int64)
        obs: Any = tag[:, None].astype(np.float32) * np.ones((1, 3), np.float32)
        if dict_obs:
            obs = {"vec": obs, "id": tag.copy()}
            obs_next: Any = {"vec": obs["vec"] + 1, "id": tag + 1}
        else:
            obs_next = obs + 1
        buf.add(
            obs=obs,
            act=tag,
            rew=tag / 7.0,
            terminated=tag % 3 == 0,
            truncated=tag % 5 == 0,
            obs_next=obs_next,
            env_ids=np.array(envs),
        )


def assert_same_contents(a: BaseReplayBuffer, b: BaseReplayBuffer) -> None:
    assert type(a) is type(b)
    assert a.layout() == b.layout()
    assert len(a) == len(b)
    arrays_a, arrays_b = a.field_arrays(), b.field_arrays()
    assert arrays_a.keys() == arrays_b.keys()
    for key, value in arrays_a.items():
        assert value.dtype == arrays_b[key].dtype, key
        np.testing.assert_array_equal(value, arrays_b[key], err_msg=key)
    if len(a):
        batch_a, batch_b = a.sample_all(), b.sample_all()
        np.testing.assert_array_equal(batch_a.indices, batch_b.indices)
        np.testing.assert_array_equal(batch_a.act, batch_b.act)


def tree_leaves(buf: BasePrioritizedBuffer) -> np.ndarray:
    return buf.priorities()


# ---------------------------------------------------------------------------- round trips


def test_vector_buffer_round_trip_with_wrap_and_unequal_columns(tmp_path: Path) -> None:
    buf = VectorReplayBuffer(6, 2, seed=0)
    fill(buf, 4, [0, 1])
    fill(buf, 2, [1], start=4)  # column 1 wraps again, column 0 does not move
    path = save_buffer(buf, tmp_path / "buf")
    assert path == tmp_path / "buf"
    assert (path / "manifest.json").is_file()
    loaded = load_buffer(path, seed=0)
    assert isinstance(loaded, VectorReplayBuffer)
    assert_same_contents(buf, loaded)
    np.testing.assert_array_equal(loaded.sample(8).indices, buf.sample(8).indices)
    # both continue identically
    fill(buf, 2, [0, 1], start=6)
    fill(loaded, 2, [0, 1], start=6)
    assert_same_contents(buf, loaded)


def test_single_buffer_round_trip(tmp_path: Path) -> None:
    buf = ReplayBuffer(5)
    fill(buf, 7, [0])
    loaded = load_buffer(save_buffer(buf, tmp_path / "single"))
    assert isinstance(loaded, ReplayBuffer)
    assert_same_contents(buf, loaded)
    assert [int(a) for a in loaded.sample_all().act] == [20, 30, 40, 50, 60]


def test_dict_obs_round_trip(tmp_path: Path) -> None:
    buf = VectorReplayBuffer(8, 2)
    fill(buf, 3, [0, 1], dict_obs=True)
    loaded = load_buffer(save_buffer(buf, tmp_path / "dict"))
    assert_same_contents(buf, loaded)
    batch = loaded.sample_all()
    assert isinstance(batch.obs, dict) and isinstance(batch.obs_next, dict)
    assert set(batch.obs) == {"vec", "id"}
    np.testing.assert_array_equal(batch.obs["id"], [0, 1, 10, 11, 20, 21])
    np.testing.assert_array_equal(batch.obs_next["id"], [1, 2, 11, 12, 21, 22])


def test_empty_buffer_round_trip(tmp_path: Path) -> None:
    loaded = load_buffer(save_buffer(VectorReplayBuffer(4, 2), tmp_path / "empty"))
    assert isinstance(loaded, VectorReplayBuffer)
    assert len(loaded) == 0 and not loaded.is_allocated
    fill(loaded, 1, [0, 1])
    assert len(loaded) == 2


def test_only_filled_rows_are_written_and_load_back_at_full_capacity(tmp_path: Path) -> None:
    buf = VectorReplayBuffer(2_000, 2, seed=0)  # 1,000 rows per column
    fill(buf, 3, [0, 1])
    fill(buf, 2, [1], start=3)  # column 1 is two rows ahead
    path = save_buffer(buf, tmp_path / "partial")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["version"] == 2
    assert manifest["fields"]["obs"]["shape"] == [5, 2, 3]
    assert np.load(path / "obs.npy").shape == (5, 2, 3)
    assert (path / "obs.npy").stat().st_size < 1_000  # not 1,000 rows x 2 x 3 float32
    loaded = load_buffer(path, seed=0)
    assert loaded.field_arrays()["obs"].shape == (1_000, 2, 3)
    assert_same_contents(buf, loaded)
    fill(buf, 4, [0, 1], start=10)  # both continue identically
    fill(loaded, 4, [0, 1], start=10)
    assert_same_contents(buf, loaded)


def test_a_version_1_buffer_with_every_row_still_loads(tmp_path: Path) -> None:
    buf = VectorReplayBuffer(8, 2, seed=0)
    fill(buf, 3, [0, 1])
    path = tmp_path / "v1"
    path.mkdir()
    fields = {}
    for name, arr in buf.field_arrays().items():  # what version 1 wrote: all rows
        file = name.replace("/", "__") + ".npy"
        np.save(path / file, arr)
        fields[name] = {"file": file, "shape": list(arr.shape), "dtype": arr.dtype.str}
    layout = buf.layout()
    manifest = {
        "format": "tshtrain-buffer",
        "version": 1,
        "class": "VectorReplayBuffer",
        "column_capacity": 4,
        "num_columns": 2,
        "ptr": list(layout.ptr),
        "length": list(layout.length),
        "fields": fields,
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert_same_contents(buf, load_buffer(path, seed=0))


@pytest.mark.parametrize("vector", [False, True])
def test_prioritized_round_trip_keeps_priorities_and_exponents(tmp_path: Path, vector: bool) -> None:
    buf: BasePrioritizedBuffer
    if vector:
        buf = PrioritizedVectorReplayBuffer(8, 2, alpha=0.7, beta=0.3, seed=1)
        fill(buf, 3, [0, 1])
    else:
        buf = PrioritizedReplayBuffer(8, alpha=0.7, beta=0.3, seed=1)
        fill(buf, 6, [0])
    stored = buf.chronological_indices()
    buf.update_priorities(stored, np.linspace(0.5, 8.0, len(stored)))
    loaded = load_buffer(save_buffer(buf, tmp_path / "per"), seed=1)
    assert type(loaded) is type(buf)
    assert isinstance(loaded, BasePrioritizedBuffer)
    assert (loaded.alpha, loaded.beta) == (0.7, 0.3)
    assert_same_contents(buf, loaded)
    np.testing.assert_allclose(tree_leaves(loaded), tree_leaves(buf))
    np.testing.assert_allclose(loaded.weights(stored), buf.weights(stored))
    np.testing.assert_array_equal(loaded.sample_indices(16), buf.sample_indices(16))
    # new transitions get the same (max) priority in both
    fill(buf, 1, [0], start=9)
    fill(loaded, 1, [0], start=9)
    np.testing.assert_allclose(tree_leaves(loaded), tree_leaves(buf))


def test_prioritized_into_other_alpha_converts_priorities(tmp_path: Path) -> None:
    buf = PrioritizedReplayBuffer(4, alpha=1.0, seed=0)
    fill(buf, 2, [0])
    buf.update_priorities(np.array([0, 1]), np.array([4.0, 9.0]))
    target = PrioritizedReplayBuffer(4, alpha=0.5)
    load_buffer_into(target, save_buffer(buf, tmp_path / "per"))
    np.testing.assert_allclose(tree_leaves(target)[:2], np.sqrt([4.0 + 1e-6, 9.0 + 1e-6]))


def test_plain_buffer_into_prioritized_target_starts_at_max_priority(tmp_path: Path) -> None:
    buf = ReplayBuffer(4)
    fill(buf, 3, [0])
    target = PrioritizedReplayBuffer(4)
    load_buffer_into(target, save_buffer(buf, tmp_path / "plain"))
    np.testing.assert_allclose(tree_leaves(target), [1.0, 1.0, 1.0, 0.0])


def test_load_into_existing_buffer_and_size_mismatch(tmp_path: Path) -> None:
    buf = VectorReplayBuffer(6, 2)
    fill(buf, 2, [0, 1])
    path = save_buffer(buf, tmp_path / "buf")
    target = VectorReplayBuffer(6, 2)
    assert load_buffer_into(target, path) is target
    assert_same_contents(buf, target)
    with pytest.raises(
        BufferFormatError, match=r"saved buffer has 2 sub-buffers of 3 rows; the target has 3 of 2"
    ):
        load_buffer_into(VectorReplayBuffer(6, 3), path)


def test_save_replaces_an_existing_buffer(tmp_path: Path) -> None:
    path = tmp_path / "buf"
    old = ReplayBuffer(4)
    fill(old, 1, [0])
    save_buffer(old, path)
    new = ReplayBuffer(4)
    fill(new, 3, [0], start=5)
    save_buffer(new, path)
    assert_same_contents(new, load_buffer(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buf"]


# ---------------------------------------------------------------------------- format errors


def saved(tmp_path: Path) -> Path:
    buf = VectorReplayBuffer(6, 2)
    fill(buf, 2, [0, 1])
    return save_buffer(buf, tmp_path / "buf")


def test_other_format_version(tmp_path: Path) -> None:
    path = saved(tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        BufferFormatError,
        match=r"buf/manifest\.json: buffer format version 99; this tshtrain reads versions 1, 2",
    ):
        load_buffer(path)


def test_not_a_buffer_manifest(tmp_path: Path) -> None:
    path = saved(tmp_path)
    (path / "manifest.json").write_text(json.dumps({"format": "something-else", "version": 1}))
    with pytest.raises(BufferFormatError, match=r"manifest\.json: not a tshtrain buffer manifest"):
        load_buffer(path)


def test_corrupt_manifest(tmp_path: Path) -> None:
    path = saved(tmp_path)
    (path / "manifest.json").write_text('{"format": "tshtrain-buf')
    with pytest.raises(BufferFormatError, match=r"manifest\.json: corrupt manifest"):
        load_buffer(path)


def test_missing_manifest(tmp_path: Path) -> None:
    path = saved(tmp_path)
    (path / "manifest.json").unlink()
    with pytest.raises(
        BufferFormatError, match=r"buf: not a tshtrain buffer directory \(no manifest\.json\)"
    ):
        load_buffer(path)
    with pytest.raises(BufferFormatError, match=r"nowhere: not a tshtrain buffer directory"):
        load_buffer(tmp_path / "nowhere")


def test_path_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BufferFormatError, match=r"file: not a tshtrain buffer directory"):
        load_buffer(tmp_path / "file")


def test_truncated_field_file_names_the_file_and_leaves_target_unchanged(tmp_path: Path) -> None:
    path = saved(tmp_path)
    act_file = path / "act.npy"
    data = act_file.read_bytes()
    act_file.write_bytes(data[: len(data) - 8])
    with pytest.raises(BufferFormatError, match=r"act\.npy: unreadable or truncated field file"):
        load_buffer(path)
    target = VectorReplayBuffer(6, 2)
    fill(target, 1, [0, 1], start=7)
    before = {k: v.copy() for k, v in target.field_arrays().items()}
    with pytest.raises(BufferFormatError, match=r"act\.npy"):
        load_buffer_into(target, path)
    assert len(target) == 2
    for key, value in before.items():
        np.testing.assert_array_equal(target.field_arrays()[key], value)


def test_truncated_header(tmp_path: Path) -> None:
    path = saved(tmp_path)
    (path / "rew.npy").write_bytes((path / "rew.npy").read_bytes()[:20])
    with pytest.raises(BufferFormatError, match=r"rew\.npy: unreadable or truncated"):
        load_buffer(path)


def test_missing_field_file(tmp_path: Path) -> None:
    path = saved(tmp_path)
    (path / "terminated.npy").unlink()
    with pytest.raises(BufferFormatError, match=r"terminated\.npy: unreadable"):
        load_buffer(path)


def test_field_file_disagreeing_with_manifest(tmp_path: Path) -> None:
    path = saved(tmp_path)
    np.save(path / "act.npy", np.zeros((2, 2), dtype=np.int32))
    with pytest.raises(
        BufferFormatError, match=r"act\.npy: holds <i4\[2, 2\], the manifest says <i8\[2, 2\]"
    ):
        load_buffer(path)


# ---------------------------------------------------------------------------- atomic saves


def failing_np_save(monkeypatch: pytest.MonkeyPatch, fail_at_call: int) -> None:
    real_save = np.save
    calls = {"n": 0}

    def save(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == fail_at_call:
            raise OSError("disk full (simulated)")
        real_save(*args, **kwargs)

    monkeypatch.setattr(np, "save", save)


def test_failed_save_keeps_the_previous_buffer_and_leaves_no_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "buf"
    old = VectorReplayBuffer(6, 2)
    fill(old, 2, [0, 1])
    save_buffer(old, path)
    new = VectorReplayBuffer(6, 2)
    fill(new, 3, [0, 1], start=4)
    failing_np_save(monkeypatch, fail_at_call=3)
    with pytest.raises(OSError, match="disk full"):
        save_buffer(new, path)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buf"]
    assert_same_contents(old, load_buffer(path))


def test_failed_first_save_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buf = ReplayBuffer(4)
    fill(buf, 2, [0])
    failing_np_save(monkeypatch, fail_at_call=2)
    with pytest.raises(OSError, match="disk full"):
        save_buffer(buf, tmp_path / "buf")
    assert list(tmp_path.iterdir()) == []


def test_failed_swap_restores_the_previous_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "buf"
    old = ReplayBuffer(4)
    fill(old, 2, [0])
    save_buffer(old, path)
    new = ReplayBuffer(4)
    fill(new, 3, [0], start=3)
    real_rename = Path.rename

    def rename(self: Path, target: Any) -> Any:
        if self.name.startswith(".buf.tmp"):
            raise OSError("rename failed (simulated)")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        save_buffer(new, path)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buf"]
    assert_same_contents(old, load_buffer(path))


def test_save_survives_leftovers_of_a_crashed_save(tmp_path: Path) -> None:
    import os

    path = tmp_path / "buf"
    buf = ReplayBuffer(4)
    fill(buf, 2, [0])
    save_buffer(buf, path)
    pid = os.getpid()
    for leftover in (f".buf.tmp-{pid}", f".buf.old-{pid}"):
        (tmp_path / leftover).mkdir()
        (tmp_path / leftover / "junk").write_text("x")
    save_buffer(buf, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buf"]
    assert_same_contents(buf, load_buffer(path))
