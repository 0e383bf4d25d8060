"""ReplayBuffer / VectorReplayBuffer against hand-worked layouts.

Transitions are tagged: the transition of env ``e`` at vector step ``t`` has ``act = 10 * t + e`` and
``obs = [10 t + e, -(10 t + e)]``, so every expected value below can be written down by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from tshtrain.data import ReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError


def step(
    t: int, envs: Sequence[int], *, terminated: Sequence[int] = (), truncated: Sequence[int] = ()
) -> dict[str, Any]:
    """The add() arguments of vector step ``t`` for the given envs (rows in the order of ``envs``)."""
    tag = np.array([10 * t + e for e in envs], dtype=np.int64)
    obs = np.stack([tag, -tag], axis=1).astype(np.float32)
    return {
        "obs": obs,
        "act": tag,
        "rew": tag.astype(np.float64) / 100.0,
        "terminated": np.array([e in terminated for e in envs]),
        "truncated": np.array([e in truncated for e in envs]),
        "obs_next": obs + 0.5,
    }


def add(
    buf: BaseReplayBuffer, t: int, envs: Sequence[int], explicit_ids: bool = True, **kw: Any
) -> np.ndarray:
    ids = np.asarray(envs) if explicit_ids else None
    return buf.add(**step(t, envs, **kw), env_ids=ids)


def acts(buf: BaseReplayBuffer) -> list[int]:
    return [int(a) for a in buf.sample_all().act]


# ---------------------------------------------------------------------------- adding


def test_add_whole_vector_step_returns_flat_indices() -> None:
    buf = VectorReplayBuffer(12, 3)
    assert buf.column_capacity == 4 and buf.num_columns == 3 and buf.capacity == 12
    np.testing.assert_array_equal(add(buf, 0, [0, 1, 2], explicit_ids=False), [0, 1, 2])
    np.testing.assert_array_equal(add(buf, 1, [0, 1, 2], explicit_ids=False), [3, 4, 5])
    assert len(buf) == 6
    assert buf.column_lengths.tolist() == [2, 2, 2]
    batch = buf.get(np.array([4, 2]))
    np.testing.assert_array_equal(batch.act, [11, 2])
    np.testing.assert_array_equal(batch.obs, [[11, -11], [2, -2]])
    np.testing.assert_array_equal(batch.obs_next, [[11.5, -10.5], [2.5, -1.5]])
    np.testing.assert_allclose(batch.rew, [0.11, 0.02], rtol=1e-6)
    assert batch.rew.dtype == np.float32
    np.testing.assert_array_equal(batch.indices, [4, 2])


def test_total_size_not_a_multiple_of_buffer_num_rounds_down() -> None:
    buf = VectorReplayBuffer(10, 3)
    assert (buf.column_capacity, buf.capacity) == (3, 9)


def test_add_env_id_subsets() -> None:
    buf = VectorReplayBuffer(12, 3)
    np.testing.assert_array_equal(add(buf, 0, [0, 2]), [0, 2])  # row 0 of columns 0 and 2
    np.testing.assert_array_equal(add(buf, 1, [1]), [1])  # row 0 of column 1
    np.testing.assert_array_equal(add(buf, 2, [2, 0]), [5, 3])  # row 1 of columns 2 and 0
    np.testing.assert_array_equal(add(buf, 3, [2]), [8])  # row 2 of column 2
    assert buf.column_lengths.tolist() == [2, 1, 3]
    assert len(buf) == 6
    # chronological: the t-th oldest of every column, t = 0, 1, 2
    assert acts(buf) == [0, 11, 2, 20, 22, 32]


def test_fewer_rows_than_columns_without_env_ids_go_to_the_first_columns() -> None:
    buf = VectorReplayBuffer(6, 3)
    np.testing.assert_array_equal(add(buf, 0, [0, 1], explicit_ids=False), [0, 1])
    assert buf.column_lengths.tolist() == [1, 1, 0]


def test_wrap_around_keeps_newest_and_len_at_most_capacity() -> None:
    buf = VectorReplayBuffer(6, 3)  # 2 rows per column
    lengths = []
    for t in range(5):
        add(buf, t, [0, 1, 2], explicit_ids=False)
        lengths.append(len(buf))
    assert lengths == [3, 6, 6, 6, 6]
    # step 4 overwrote row 0, step 3 sits in row 1: oldest first
    assert acts(buf) == [30, 31, 32, 40, 41, 42]
    np.testing.assert_array_equal(buf.chronological_indices(), [3, 4, 5, 0, 1, 2])


def test_wrap_around_with_unequal_columns() -> None:
    buf = VectorReplayBuffer(6, 2)  # 3 rows per column
    for t in range(5):
        add(buf, t, [0])
    add(buf, 5, [1])
    assert buf.column_lengths.tolist() == [3, 1]
    assert len(buf) == 4
    # column 0 holds steps 2, 3, 4 (step 3 in row 0, step 4 in row 1, step 2 in row 2)
    assert acts(buf) == [20, 51, 30, 40]


def test_single_replay_buffer() -> None:
    buf = ReplayBuffer(3)
    for t in range(4):
        np.testing.assert_array_equal(add(buf, t, [0], explicit_ids=False), [t % 3])
    assert len(buf) == 3
    assert acts(buf) == [10, 20, 30]


# ---------------------------------------------------------------------------- sampling


def test_sample_indices_point_at_stored_transitions_synced() -> None:
    buf = VectorReplayBuffer(12, 3, seed=0)
    add(buf, 0, [0, 1, 2], explicit_ids=False)
    add(buf, 1, [0, 1, 2], explicit_ids=False)
    idx = buf.sample_indices(500)
    assert set(idx.tolist()) == {0, 1, 2, 3, 4, 5}


def test_sample_indices_point_at_stored_transitions_unsynced_and_are_uniform() -> None:
    buf = VectorReplayBuffer(12, 3, seed=0)
    add(buf, 0, [0, 2])
    add(buf, 1, [2])
    add(buf, 2, [2])
    # stored: column 0 row 0 (index 0); column 2 rows 0, 1, 2 (indices 2, 5, 8)
    idx = buf.sample_indices(8000)
    values, counts = np.unique(idx, return_counts=True)
    assert values.tolist() == [0, 2, 5, 8]
    np.testing.assert_allclose(counts / 8000, 0.25, atol=0.02)


def test_sample_is_reproducible_with_the_same_seed() -> None:
    def sampled(seed: int) -> np.ndarray:
        buf = VectorReplayBuffer(8, 2, seed=seed)
        for t in range(3):
            add(buf, t, [0, 1], explicit_ids=False)
        return buf.sample(16).act

    np.testing.assert_array_equal(sampled(1), sampled(1))
    assert not np.array_equal(sampled(1), sampled(2))


def test_sample_accepts_a_generator() -> None:
    buf = ReplayBuffer(4, seed=np.random.default_rng(3))
    add(buf, 0, [0])
    assert buf.sample(3).act.tolist() == [0, 0, 0]


def test_sample_batch_fields_match_indices() -> None:
    buf = VectorReplayBuffer(8, 2, seed=0)
    for t in range(3):
        add(buf, t, [0, 1], explicit_ids=False)
    batch = buf.sample(10)
    rows, cols = np.divmod(batch.indices, 2)
    np.testing.assert_array_equal(batch.act, 10 * rows + cols)
    assert isinstance(batch.obs, np.ndarray)
    np.testing.assert_array_equal(batch.obs[:, 0], 10 * rows + cols)
    assert batch.weight is None


def test_sample_empty_buffer_and_bad_batch_size() -> None:
    buf = ReplayBuffer(4)
    with pytest.raises(
        ConfigurationError, match=r"ReplayBuffer\.sample: the buffer is empty; collect data first"
    ):
        buf.sample(1)
    add(buf, 0, [0])
    with pytest.raises(
        ConfigurationError, match=r"ReplayBuffer\.sample\.batch_size must be a positive number"
    ):
        buf.sample(0)


# ---------------------------------------------------------------------------- rollout


def test_rollout_equal_columns() -> None:
    buf = VectorReplayBuffer(8, 2)
    add(buf, 0, [0, 1], explicit_ids=False)
    add(buf, 1, [0, 1], explicit_ids=False, terminated=[0])
    add(buf, 2, [0, 1], explicit_ids=False, truncated=[1])
    roll = buf.rollout()
    assert roll.shape == (3, 2)
    assert roll.num_steps == 6
    np.testing.assert_array_equal(roll.act, [[0, 1], [10, 11], [20, 21]])
    assert isinstance(roll.obs, np.ndarray)
    assert roll.obs.shape == (3, 2, 2)
    np.testing.assert_array_equal(roll.obs[..., 0], roll.act)
    np.testing.assert_array_equal(roll.valid, np.ones((3, 2), dtype=bool))
    np.testing.assert_array_equal(roll.terminated, [[False, False], [True, False], [False, False]])
    np.testing.assert_array_equal(roll.truncated, [[False, False], [False, False], [False, True]])
    np.testing.assert_array_equal(roll.boundary, [[False, False], [True, False], [True, True]])


def test_rollout_unequal_columns_is_padded() -> None:
    buf = VectorReplayBuffer(8, 2)
    add(buf, 0, [0, 1])
    add(buf, 1, [0], terminated=[0])
    add(buf, 2, [0])
    roll = buf.rollout()
    assert roll.shape == (3, 2)
    assert roll.num_steps == 4
    np.testing.assert_array_equal(roll.valid, [[True, True], [True, False], [True, False]])
    np.testing.assert_array_equal(roll.act[:, 0], [0, 10, 20])
    assert roll.act[0, 1] == 1
    np.testing.assert_array_equal(roll.rew, np.array([[0.0, 0.01], [0.1, 0.0], [0.2, 0.0]], np.float32))
    # column 0: episode end at t=1, last step t=2; column 1: its only step, then padding
    np.testing.assert_array_equal(roll.boundary, [[False, True], [True, True], [True, True]])
    assert not roll.terminated[:, 1].any() and not roll.truncated.any()


def test_rollout_after_wrap_is_chronological() -> None:
    buf = VectorReplayBuffer(4, 2)  # 2 rows per column
    for t in range(3):
        add(buf, t, [0, 1], explicit_ids=False, terminated=[1] if t == 1 else [])
    roll = buf.rollout()
    np.testing.assert_array_equal(roll.act, [[10, 11], [20, 21]])
    np.testing.assert_array_equal(roll.boundary, [[False, True], [True, True]])
    np.testing.assert_array_equal(roll.valid, np.ones((2, 2), dtype=bool))


def test_rollout_empty_buffer() -> None:
    with pytest.raises(ConfigurationError, match=r"VectorReplayBuffer\.rollout: the buffer is empty"):
        VectorReplayBuffer(4, 2).rollout()


# ---------------------------------------------------------------------------- neighbours


def test_next_and_prev_index_stop_at_episode_boundaries_and_ends() -> None:
    buf = ReplayBuffer(10)
    for t in range(5):
        add(buf, t, [0], terminated=[0] if t == 1 else [], truncated=[0] if t == 3 else [])
    idx = np.arange(5)
    # episodes: [0, 1] (terminated), [2, 3] (truncated), [4] (unfinished, newest)
    np.testing.assert_array_equal(buf.next_index(idx), [1, 1, 3, 3, 4])
    np.testing.assert_array_equal(buf.prev_index(idx), [0, 0, 2, 2, 4])


def test_next_and_prev_index_after_wrap() -> None:
    buf = ReplayBuffer(4)
    for t in range(6):
        add(buf, t, [0])
    # rows: 0 -> step 4, 1 -> step 5 (newest), 2 -> step 2 (oldest), 3 -> step 3
    np.testing.assert_array_equal(buf.next_index(np.array([2, 3, 0, 1])), [3, 0, 1, 1])
    np.testing.assert_array_equal(buf.prev_index(np.array([2, 3, 0, 1])), [2, 2, 3, 0])


def test_next_and_prev_index_stay_in_their_column() -> None:
    buf = VectorReplayBuffer(6, 2)  # 3 rows per column
    add(buf, 0, [0, 1], explicit_ids=False, terminated=[1])
    add(buf, 1, [0, 1], explicit_ids=False)
    add(buf, 2, [0])
    # column 0: indices 0, 2, 4 (one episode); column 1: indices 1 (ended), 3 (newest)
    np.testing.assert_array_equal(buf.next_index(np.array([0, 2, 4, 1, 3])), [2, 4, 4, 1, 3])
    np.testing.assert_array_equal(buf.prev_index(np.array([0, 2, 4, 1, 3])), [0, 0, 2, 1, 3])


# ---------------------------------------------------------------------------- reset


def test_reset_forgets_everything_but_keeps_arrays() -> None:
    buf = VectorReplayBuffer(6, 2, seed=0)
    for t in range(4):
        add(buf, t, [0, 1], explicit_ids=False)
    add(buf, 4, [1])
    nbytes = buf.nbytes
    buf.reset()
    assert len(buf) == 0
    assert buf.column_lengths.tolist() == [0, 0]
    assert buf.is_allocated and buf.nbytes == nbytes
    assert buf.chronological_indices().tolist() == []
    with pytest.raises(ConfigurationError, match="empty"):
        buf.sample(1)
    np.testing.assert_array_equal(add(buf, 7, [0, 1], explicit_ids=False), [0, 1])
    assert acts(buf) == [70, 71]
    roll = buf.rollout()
    assert roll.shape == (1, 2)


# ---------------------------------------------------------------------------- dict obs


def dict_step(t: int, n: int) -> dict[str, Any]:
    obs: dict[str, np.ndarray] = {
        "pos": np.arange(2 * n, dtype=np.float32).reshape(n, 2) + 100 * t,
        "mode": np.arange(n, dtype=np.int64) + 10 * t,
    }
    obs_next = {"pos": obs["pos"] + 0.5, "mode": obs["mode"] + 1}
    return {
        "obs": obs,
        "act": np.zeros(n, dtype=np.int64),
        "rew": np.ones(n),
        "terminated": np.zeros(n, dtype=bool),
        "truncated": np.zeros(n, dtype=bool),
        "obs_next": obs_next,
    }


def test_dict_observations_round_trip() -> None:
    buf = VectorReplayBuffer(6, 2)
    buf.add(**dict_step(0, 2))
    buf.add(**dict_step(1, 2))
    assert set(buf.field_arrays()) == {
        "obs/pos",
        "obs/mode",
        "obs_next/pos",
        "obs_next/mode",
        "act",
        "rew",
        "terminated",
        "truncated",
    }
    batch = buf.sample_all()
    assert isinstance(batch.obs, dict) and isinstance(batch.obs_next, dict)
    np.testing.assert_array_equal(batch.obs["pos"], [[0, 1], [2, 3], [100, 101], [102, 103]])
    np.testing.assert_array_equal(batch.obs["mode"], [0, 1, 10, 11])
    assert batch.obs["mode"].dtype == np.int64
    np.testing.assert_array_equal(batch.obs_next["mode"], [1, 2, 11, 12])
    roll = buf.rollout()
    assert isinstance(roll.obs, dict)
    assert roll.obs["pos"].shape == (2, 2, 2)
    np.testing.assert_array_equal(roll.obs["mode"], [[0, 1], [10, 11]])


def test_dict_observations_with_other_keys_are_rejected() -> None:
    buf = ReplayBuffer(4)
    buf.add(**dict_step(0, 1))
    bad = dict_step(1, 1)
    bad["obs"] = {"pos": bad["obs"]["pos"]}
    bad["obs_next"] = {"pos": bad["obs_next"]["pos"]}
    with pytest.raises(
        ConfigurationError, match=r"ReplayBuffer\.add: fields .* differ from the stored fields"
    ):
        buf.add(**bad)


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("size", [0, -3])
def test_non_positive_size(size: int) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"ReplayBuffer\.size must be a positive number, got {size}"
    ):
        ReplayBuffer(size)


def test_non_positive_buffer_num() -> None:
    with pytest.raises(
        ConfigurationError, match=r"VectorReplayBuffer\.buffer_num must be a positive number, got 0"
    ):
        VectorReplayBuffer(10, 0)


def test_total_size_smaller_than_buffer_num() -> None:
    with pytest.raises(ConfigurationError, match=r"total_size=2 is smaller than buffer_num=3"):
        VectorReplayBuffer(2, 3)


def test_more_envs_than_sub_buffers() -> None:
    buf = VectorReplayBuffer(8, 2)
    with pytest.raises(ConfigurationError, match=r"has 2 sub-buffers but 3 envs add at once.*buffer_num=3"):
        add(buf, 0, [0, 1, 2], explicit_ids=False)
    single = ReplayBuffer(8)
    with pytest.raises(ConfigurationError, match=r"ReplayBuffer has 1 sub-buffers but 2 envs"):
        add(single, 0, [0, 1], explicit_ids=False)


def test_env_ids_out_of_range() -> None:
    buf = VectorReplayBuffer(8, 2)
    with pytest.raises(ConfigurationError, match=r"env ids \[0, 2\] outside 0\.\.1"):
        add(buf, 0, [0, 2])
    assert len(buf) == 0


def test_duplicate_env_ids_are_rejected() -> None:
    buf = VectorReplayBuffer(8, 2)
    with pytest.raises(ConfigurationError, match=r"env ids \[1, 1\] contain duplicates"):
        add(buf, 0, [1, 1])
    assert len(buf) == 0


# ---------------------------------------------------------------------------- truncate_episodes


def test_truncate_episodes_marks_the_newest_open_transition_of_each_column() -> None:
    buf = VectorReplayBuffer(9, 3)  # 3 rows per column
    add(buf, 0, [0, 1, 2], explicit_ids=False)
    add(buf, 1, [0, 1], terminated=[1])
    add(buf, 2, [0])
    add(buf, 3, [0])  # column 0 wraps: newest is row 0
    buf.truncate_episodes(np.array([0, 1, 2]))
    trunc = buf.field_arrays()["truncated"]
    # column 0: step 3 (row 0) cut; column 1: step 1 already terminated, untouched; column 2: step 0 cut
    np.testing.assert_array_equal(trunc[:, 0], [True, False, False])
    np.testing.assert_array_equal(trunc[:, 1], [False, False, False])
    np.testing.assert_array_equal(trunc[:, 2], [True, False, False])
    np.testing.assert_array_equal(buf.next_index(np.array([0])), [0])


def test_truncate_episodes_skips_empty_columns() -> None:
    buf = VectorReplayBuffer(4, 2)
    buf.truncate_episodes(np.array([0, 1]))  # not even allocated
    add(buf, 0, [1])
    buf.truncate_episodes(np.array([0, 1]))
    assert buf.field_arrays()["truncated"].tolist() == [[False, True], [False, False]]
    buf.reset()
    buf.truncate_episodes(np.array([1]))
    add(buf, 1, [0, 1], explicit_ids=False)
    assert not buf.sample_all().truncated.any()


def test_new_indices_new_transitions_and_field_at_read_what_a_collection_step_wrote() -> None:
    from tshtrain.data import VectorReplayBuffer

    buffer = VectorReplayBuffer(8, 2)  # 4 rows per column
    rng = np.random.default_rng(0)

    def add(num_steps: int) -> None:
        for _ in range(num_steps):
            buffer.add(
                obs=rng.normal(size=(2, 3)).astype(np.float32),
                act=np.zeros(2, dtype=np.int64),
                rew=rng.normal(size=2).astype(np.float32),
                terminated=np.zeros(2, dtype=bool),
                truncated=np.zeros(2, dtype=bool),
                obs_next=rng.normal(size=(2, 3)).astype(np.float32),
            )

    add(3)
    before = buffer.layout()
    add(2)  # wraps around: rows 3 and 0 of both columns
    idx = buffer.new_indices(before, 4)
    assert idx.tolist() == [6, 0, 7, 1]
    np.testing.assert_array_equal(
        buffer.field_at("rew", idx), buffer.field_arrays()["rew"][[3, 0, 3, 0], [0, 0, 1, 1]]
    )
    np.testing.assert_array_equal(buffer.new_transitions(before, 4).rew, buffer.field_at("rew", idx))
