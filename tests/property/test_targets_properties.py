"""n-step targets against a pure-Python reference on random episode layouts, and their invariants.

Each column of the reference is a list of (reward, terminated, truncated) in chronological order, as a
deque of the column's capacity would hold it; the n-step return of a transition is computed by walking
that list.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tshtrain.algorithm.blocks.offpolicy import sample_replay
from tshtrain.data import PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.functional import nstep_indices, nstep_returns

Step = tuple[int, float, bool, bool]
"""(tag, reward, terminated, truncated)"""


@st.composite
def layouts(draw: st.DrawFn) -> tuple[int, int, list[list[Step]]]:
    """(column capacity, number of columns, steps added per vector step, one entry per column)."""
    capacity = draw(st.integers(1, 8))
    num_columns = draw(st.integers(1, 3))
    num_adds = draw(st.integers(1, 25))
    rows: list[list[Step]] = []
    tag = 0
    for _ in range(num_adds):
        row = []
        for _ in range(num_columns):
            end = draw(st.sampled_from(["open", "open", "terminated", "truncated"]))
            reward = draw(st.floats(-10, 10, allow_nan=False, width=32))
            row.append((tag, reward, end == "terminated", end == "truncated"))
            tag += 1
        rows.append(row)
    return capacity, num_columns, rows


def build(capacity: int, num_columns: int, rows: list[list[Step]], prioritized: bool) -> BaseReplayBuffer:
    buffer: BaseReplayBuffer = (
        PrioritizedVectorReplayBuffer(capacity * num_columns, num_columns, seed=0)
        if prioritized
        else VectorReplayBuffer(capacity * num_columns, num_columns, seed=0)
    )
    for row in rows:
        buffer.add(
            obs=np.array([[s[0]] for s in row], dtype=np.float32),
            act=np.array([s[0] for s in row], dtype=np.int64),
            rew=np.array([s[1] for s in row], dtype=np.float32),
            terminated=np.array([s[2] for s in row]),
            truncated=np.array([s[3] for s in row]),
            obs_next=np.array([[s[0] + 0.5] for s in row], dtype=np.float32),
        )
    return buffer


def reference(
    capacity: int, num_columns: int, rows: list[list[Step]], n_step: int, gamma: float
) -> dict[int, tuple[float, float, int]]:
    """tag -> (return, discount incl. terminal, tag of the transition to bootstrap from)."""
    columns: list[deque[Step]] = [deque(maxlen=capacity) for _ in range(num_columns)]
    for row in rows:
        for col, step in zip(columns, row, strict=True):
            col.append(step)
    out: dict[int, tuple[float, float, int]] = {}
    for col in columns:
        steps = list(col)
        for start in range(len(steps)):
            total, discount, last = 0.0, 1.0, steps[start]
            for k in range(n_step):
                if start + k >= len(steps):
                    break
                last = steps[start + k]
                total += discount * float(np.float32(last[1]))
                discount *= gamma
                if last[2] or last[3]:
                    break
            out[steps[start][0]] = (total, 0.0 if last[2] else discount, last[0])
    return out


@settings(max_examples=60, deadline=None)
@given(
    layout=layouts(),
    n_step=st.integers(1, 5),
    gamma=st.floats(0.0, 1.0),
    prioritized=st.booleans(),
)
def test_sample_replay_matches_the_reference(
    layout: tuple[int, int, list[list[Step]]], n_step: int, gamma: float, prioritized: bool
) -> None:
    capacity, num_columns, rows = layout
    buffer = build(capacity, num_columns, rows, prioritized)
    expected = reference(capacity, num_columns, rows, n_step, gamma)
    batch = sample_replay(buffer, 32, gamma=gamma, n_step=n_step, device=torch.device("cpu"))
    tags = batch.act.numpy()
    want = np.array([expected[int(t)] for t in tags])
    np.testing.assert_allclose(batch.returns.numpy(), want[:, 0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(batch.discounts.numpy(), want[:, 1], rtol=1e-5, atol=1e-7)
    assert isinstance(batch.obs_next, torch.Tensor)
    np.testing.assert_allclose(batch.obs_next.numpy()[:, 0], want[:, 2] + 0.5)
    assert (batch.weight is not None) == prioritized


@settings(max_examples=60, deadline=None)
@given(layout=layouts(), n_step=st.integers(1, 6))
def test_chain_invariants(layout: tuple[int, int, list[list[Step]]], n_step: int) -> None:
    capacity, num_columns, rows = layout
    buffer = build(capacity, num_columns, rows, prioritized=False)
    stored = buffer.chronological_indices()
    indices_KN, valid_KN = nstep_indices(stored, buffer.next_index, n_step)
    # row 0 is the sample itself; validity only ever switches off; invalid entries repeat the last index
    assert np.array_equal(indices_KN[0], stored) and valid_KN[0].all()
    assert not (valid_KN[1:] & ~valid_KN[:-1]).any()
    steps_N = valid_KN.sum(axis=0)
    assert np.array_equal(indices_KN[-1], indices_KN[steps_N - 1, np.arange(len(stored))])
    # chains stay in their column
    assert (indices_KN % num_columns == stored % num_columns).all()
    # with unit rewards and gamma = 1, the return counts the steps and the discount is 1
    returns, discounts = nstep_returns(np.ones(indices_KN.shape, dtype=np.float32), valid_KN, 1.0)
    assert np.array_equal(returns, steps_N.astype(np.float32)) and (discounts == 1.0).all()
    # the discount is gamma ** steps
    _, discounts = nstep_returns(np.zeros(indices_KN.shape, dtype=np.float32), valid_KN, 0.5)
    np.testing.assert_allclose(discounts, 0.5**steps_N)
