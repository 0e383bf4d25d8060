"""Buffers against a pure-Python reference: one circular deque per column.

Every transition carries a unique tag (its ``act``), so the buffer's contents and orders can be compared
with the reference's tag by tag.
"""

from __future__ import annotations

import tempfile
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tshtrain.data import (
    PrioritizedVectorReplayBuffer,
    VectorReplayBuffer,
    load_buffer,
    save_buffer,
)
from tshtrain.data.buffer import BaseReplayBuffer


@dataclass
class Reference:
    """Per-column deques of (tag, done)."""

    column_capacity: int
    num_columns: int
    columns: list[deque[tuple[int, bool]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.columns = [deque(maxlen=self.column_capacity) for _ in range(self.num_columns)]

    def add(self, env_ids: list[int], tags: list[int], done: list[bool]) -> None:
        for env_id, tag, d in zip(env_ids, tags, done, strict=True):
            self.columns[env_id].append((tag, d))

    def __len__(self) -> int:
        return sum(len(c) for c in self.columns)

    def chronological(self) -> list[int]:
        longest = max(len(c) for c in self.columns)
        return [c[t][0] for t in range(longest) for c in self.columns if t < len(c)]

    def neighbours(self) -> tuple[dict[int, int], dict[int, int]]:
        """tag -> tag of the next / previous transition of the same episode (itself at the ends)."""
        nxt: dict[int, int] = {}
        prv: dict[int, int] = {}
        for col in self.columns:
            items = list(col)
            for k, (tag, done) in enumerate(items):
                nxt[tag] = tag if done or k == len(items) - 1 else items[k + 1][0]
                prv[tag] = tag if k == 0 or items[k - 1][1] else items[k - 1][0]
        return nxt, prv


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, int, list[tuple[list[int] | None, list[bool]]], bool]:
    column_capacity = draw(st.integers(1, 5))
    num_columns = draw(st.integers(1, 4))
    ops = []
    for _ in range(draw(st.integers(1, 25))):
        if draw(st.booleans()):
            env_ids = None  # a whole vector step
            n = num_columns
        else:
            env_ids = draw(st.lists(st.integers(0, num_columns - 1), unique=True, max_size=num_columns))
            n = len(env_ids)
        done = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        ops.append((env_ids, done))
    prioritized = draw(st.booleans())
    return column_capacity, num_columns, ops, prioritized


def build(column_capacity: int, num_columns: int, prioritized: bool) -> BaseReplayBuffer:
    total = column_capacity * num_columns
    if prioritized:
        return PrioritizedVectorReplayBuffer(total, num_columns, seed=0)
    return VectorReplayBuffer(total, num_columns, seed=0)


def run(buf: BaseReplayBuffer, ref: Reference, ops: list[tuple[list[int] | None, list[bool]]]) -> None:
    next_tag = 0
    for env_ids, done in ops:
        ids = list(range(ref.num_columns)) if env_ids is None else env_ids
        tags = list(range(next_tag, next_tag + len(ids)))
        next_tag += len(ids)
        tag_arr = np.array(tags, dtype=np.int64)
        obs = np.stack([tag_arr, tag_arr * 2], axis=1).astype(np.float32)
        buf.add(
            obs=obs,
            act=tag_arr,
            rew=tag_arr.astype(np.float32),
            terminated=np.array(done, dtype=bool) & (tag_arr % 2 == 0),
            truncated=np.array(done, dtype=bool) & (tag_arr % 2 == 1),
            obs_next=obs + 1,
            env_ids=None if env_ids is None else np.array(env_ids, dtype=np.int64),
        )
        ref.add(ids, tags, done)
        assert len(buf) == len(ref) <= buf.capacity
        assert buf.column_lengths.tolist() == [len(c) for c in ref.columns]


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_buffer_matches_reference(
    scenario: tuple[int, int, list[tuple[list[int] | None, list[bool]]], bool],
) -> None:
    column_capacity, num_columns, ops, prioritized = scenario
    buf = build(column_capacity, num_columns, prioritized)
    ref = Reference(column_capacity, num_columns)
    run(buf, ref, ops)
    if len(ref) == 0:
        return

    # chronological order
    batch = buf.sample_all()
    assert batch.act.tolist() == ref.chronological()
    assert isinstance(batch.obs, np.ndarray) and isinstance(batch.obs_next, np.ndarray)
    np.testing.assert_array_equal(batch.obs[:, 0], batch.act)
    np.testing.assert_array_equal(batch.obs_next[:, 1], 2 * batch.act + 1)
    tag_of_index = dict(zip(batch.indices.tolist(), batch.act.tolist(), strict=True))
    index_of_tag = {tag: idx for idx, tag in tag_of_index.items()}

    # samples only hit stored transitions
    sampled = buf.sample(64)
    assert set(sampled.indices.tolist()) <= set(tag_of_index)
    np.testing.assert_array_equal(sampled.act, [tag_of_index[i] for i in sampled.indices.tolist()])

    # episode-aware neighbours
    nxt, prv = ref.neighbours()
    tags = list(index_of_tag)
    idx = np.array([index_of_tag[t] for t in tags])
    assert [tag_of_index[i] for i in buf.next_index(idx).tolist()] == [nxt[t] for t in tags]
    assert [tag_of_index[i] for i in buf.prev_index(idx).tolist()] == [prv[t] for t in tags]

    # rollout: per column, the valid entries in reference order, a boundary after each episode end
    roll = buf.rollout()
    for col, dq in enumerate(ref.columns):
        valid = roll.valid[:, col]
        assert roll.act[valid, col].tolist() == [tag for tag, _ in dq]
        expected_boundary = [d for _, d in dq]
        if expected_boundary:
            expected_boundary[-1] = True
        assert roll.boundary[valid, col].tolist() == expected_boundary
        assert roll.boundary[~valid, col].all()

    # save / load round trip
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_buffer(save_buffer(buf, f"{tmp}/buf"), seed=0)
    assert type(loaded) is type(buf)
    assert loaded.layout() == buf.layout()
    for key, arr in buf.field_arrays().items():
        np.testing.assert_array_equal(loaded.field_arrays()[key], arr)
    assert loaded.sample_all().act.tolist() == ref.chronological()


@settings(max_examples=30, deadline=None)
@given(scenarios(), st.integers(1, 6))
def test_reset_then_refill_matches_a_fresh_reference(
    scenario: tuple[int, int, list[tuple[list[int] | None, list[bool]]], bool], refill: int
) -> None:
    column_capacity, num_columns, ops, prioritized = scenario
    buf = build(column_capacity, num_columns, prioritized)
    run(buf, Reference(column_capacity, num_columns), ops)
    buf.reset()
    assert len(buf) == 0
    ref = Reference(column_capacity, num_columns)
    run(buf, ref, [(None, [False] * num_columns)] * refill)
    assert buf.sample_all().act.tolist() == ref.chronological()
    assert set(buf.sample(32).indices.tolist()) <= set(buf.chronological_indices().tolist())
