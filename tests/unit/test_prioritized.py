"""SegmentTree against a brute-force reference; prioritized sampling, weights and priorities."""

from __future__ import annotations

import numpy as np
import pytest

from tshtrain.data import PrioritizedReplayBuffer, PrioritizedVectorReplayBuffer, SegmentTree
from tshtrain.data.prioritized import BasePrioritizedBuffer
from tshtrain.errors import ConfigurationError


def add_steps(buf: BasePrioritizedBuffer, num_steps: int, num_envs: int = 1) -> None:
    for t in range(num_steps):
        tag = np.arange(num_envs, dtype=np.int64) + 10 * t
        obs = tag[:, None].astype(np.float32)
        buf.add(
            obs=obs,
            act=tag,
            rew=np.zeros(num_envs),
            terminated=np.zeros(num_envs, dtype=bool),
            truncated=np.zeros(num_envs, dtype=bool),
            obs_next=obs + 1,
        )


# ---------------------------------------------------------------------------- SegmentTree


def reference_prefix(leaves: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Smallest i with sum(leaves[:i+1]) > v, by brute force."""
    cum = np.cumsum(leaves)
    return np.array([int(np.flatnonzero(cum > v)[0]) for v in values], dtype=np.int64)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 64, 100])
def test_segment_tree_against_brute_force(size: int) -> None:
    rng = np.random.default_rng(size)
    tree = SegmentTree(size)
    leaves = np.zeros(size)
    is_set = np.zeros(size, dtype=bool)
    assert tree.total == 0.0 and tree.min == np.inf
    for _ in range(30):
        k = int(rng.integers(1, 2 * size + 1))
        idx = rng.integers(0, size, size=k)
        values = rng.random(k) * 10
        tree.set(idx, values)
        for i, v in zip(idx, values, strict=True):  # later duplicates win
            leaves[i] = v
            is_set[i] = True
        np.testing.assert_allclose(tree.get(np.arange(size)), leaves)
        assert tree.total == pytest.approx(leaves.sum())
        assert tree.min == leaves[is_set].min()
        queries = rng.random(50) * leaves.sum()
        np.testing.assert_array_equal(tree.find_prefix(queries), reference_prefix(leaves, queries))


def test_segment_tree_min_tracks_every_set_leaf() -> None:
    tree = SegmentTree(5)
    tree.set(np.array([0, 3]), np.array([4.0, 2.0]))
    assert tree.min == 2.0
    tree.set(np.array([3]), np.array([7.0]))
    assert tree.min == 4.0
    tree.set(np.array([4]), np.array([0.5]))
    assert tree.min == 0.5
    assert tree.total == pytest.approx(11.5)


def test_segment_tree_hand_worked_prefix() -> None:
    tree = SegmentTree(4)
    tree.set(np.arange(4), np.array([1.0, 0.0, 2.0, 3.0]))
    # cumulative sums 1, 1, 3, 6: v in [0,1) -> 0, [1,3) -> 2, [3,6) -> 3; leaf 1 (zero) is never found
    np.testing.assert_array_equal(
        tree.find_prefix(np.array([0.0, 0.99, 1.0, 2.9, 3.0, 5.99])), [0, 0, 2, 2, 3, 3]
    )


def test_segment_tree_prefix_beyond_total_never_returns_an_empty_leaf() -> None:
    tree = SegmentTree(5)
    tree.set(np.array([0, 2]), np.array([1.0, 2.0]))  # leaves 3, 4 (and the padding) are empty
    np.testing.assert_array_equal(tree.find_prefix(np.array([3.0, 3.0 + 1e-12, 100.0])), [2, 2, 2])


def test_segment_tree_set_nothing_is_a_no_op() -> None:
    tree = SegmentTree(4)
    tree.set(np.array([1]), np.array([2.0]))
    tree.set(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert tree.total == 2.0


def test_segment_tree_clear() -> None:
    tree = SegmentTree(3)
    tree.set(np.arange(3), np.ones(3))
    tree.clear()
    assert tree.total == 0.0 and tree.min == np.inf
    np.testing.assert_array_equal(tree.get(np.arange(3)), np.zeros(3))


# ---------------------------------------------------------------------------- buffer


def test_new_transitions_get_the_max_priority() -> None:
    buf = PrioritizedReplayBuffer(8, alpha=0.5, beta=0.4, seed=0)
    add_steps(buf, 2)
    np.testing.assert_allclose(buf.priorities()[:2], [1.0, 1.0])
    buf.update_priorities(np.array([0, 1]), np.array([-3.0, 0.0]))  # |error| + 1e-6
    np.testing.assert_allclose(buf.priorities()[:2], np.sqrt([3.0 + 1e-6, 1e-6]))
    add_steps(buf, 1)
    assert buf.priorities()[2] == pytest.approx(np.sqrt(3.0 + 1e-6))


def test_sampling_frequencies_follow_priorities() -> None:
    buf = PrioritizedReplayBuffer(8, alpha=1.0, beta=0.5, seed=0)
    add_steps(buf, 4)
    buf.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    idx = np.concatenate([buf.sample_indices(64) for _ in range(400)])
    freq = np.bincount(idx, minlength=8) / len(idx)
    np.testing.assert_allclose(freq[:4], [0.1, 0.2, 0.3, 0.4], atol=0.01)
    assert freq[4:].sum() == 0.0


def test_alpha_flattens_priorities() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=0.5, beta=0.5, seed=1)
    add_steps(buf, 2)
    buf.update_priorities(np.arange(2), np.array([1.0, 9.0]))  # p^0.5 = 1, 3 -> P = 0.25, 0.75
    idx = np.concatenate([buf.sample_indices(50) for _ in range(200)])
    assert np.mean(idx == 1) == pytest.approx(0.75, abs=0.015)


def test_weights_are_normalised_by_the_smallest_priority() -> None:
    buf = PrioritizedReplayBuffer(8, alpha=0.5, beta=0.4, seed=0)
    add_steps(buf, 4)
    buf.update_priorities(np.arange(4), np.array([1.0, 4.0, 9.0, 16.0]))  # p^alpha ~ 1, 2, 3, 4
    weights = buf.weights(np.arange(4))
    np.testing.assert_allclose(weights, [1.0, 0.757858, 0.644394, 0.574349], rtol=1e-5)
    assert weights.dtype == np.float32
    assert weights.max() == pytest.approx(1.0)
    buf.set_beta(1.0)
    np.testing.assert_allclose(buf.weights(np.arange(4)), [1.0, 1 / 2, 1 / 3, 1 / 4], rtol=1e-5)
    buf.set_beta(0.0)
    np.testing.assert_allclose(buf.weights(np.arange(4)), np.ones(4))


def test_sample_returns_weights_of_its_indices() -> None:
    buf = PrioritizedVectorReplayBuffer(8, 2, alpha=1.0, beta=1.0, seed=0)
    add_steps(buf, 3, num_envs=2)
    buf.update_priorities(np.arange(6), np.arange(1.0, 7.0))
    batch = buf.sample(32)
    assert batch.weight is not None
    np.testing.assert_allclose(batch.weight, 1.0 / (batch.indices + 1.0), rtol=1e-4)
    rows, cols = np.divmod(batch.indices, 2)
    np.testing.assert_array_equal(batch.act, 10 * rows + cols)
    assert set(batch.indices.tolist()) <= set(range(6))


def test_prioritized_sampling_is_reproducible() -> None:
    def run(seed: int) -> np.ndarray:
        buf = PrioritizedReplayBuffer(8, seed=seed)
        add_steps(buf, 5)
        buf.update_priorities(np.arange(5), np.array([0.5, 2.0, 1.0, 3.0, 0.1]))
        return buf.sample_indices(3)

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_overwritten_slots_get_the_max_priority_again() -> None:
    buf = PrioritizedReplayBuffer(2, alpha=1.0, beta=1.0, seed=0)
    add_steps(buf, 2)
    buf.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    add_steps(buf, 1)  # overwrites slot 0
    assert buf.priorities()[0] == pytest.approx(5.0 + 1e-6)


def test_reset_clears_priorities() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=1.0, seed=0)
    add_steps(buf, 3)
    buf.update_priorities(np.array([0]), np.array([10.0]))
    buf.reset()
    assert len(buf) == 0 and buf.priorities().sum() == 0.0
    add_steps(buf, 1)
    assert buf.priorities().sum() == pytest.approx(1.0)


def test_add_nothing_with_empty_env_ids() -> None:
    buf = PrioritizedVectorReplayBuffer(4, 2, seed=0)
    add_steps(buf, 1, num_envs=2)
    empty = np.zeros((0, 1), dtype=np.float32)
    indices = buf.add(
        obs=empty,
        act=np.zeros(0, dtype=np.int64),
        rew=np.zeros(0),
        terminated=np.zeros(0, dtype=bool),
        truncated=np.zeros(0, dtype=bool),
        obs_next=empty,
        env_ids=np.zeros(0, dtype=np.int64),
    )
    assert len(indices) == 0 and len(buf) == 2


@pytest.mark.parametrize("beta", [-0.1, 1.5])
def test_beta_outside_unit_interval(beta: float) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"PrioritizedReplayBuffer\.beta must lie in \[0, 1\], got {beta}"
    ):
        PrioritizedReplayBuffer(8, beta=beta)
    buf = PrioritizedVectorReplayBuffer(8, 2)
    with pytest.raises(ConfigurationError, match=rf"PrioritizedVectorReplayBuffer\.beta .* got {beta}"):
        buf.set_beta(beta)
    assert buf.beta == 0.4


def test_non_positive_alpha() -> None:
    with pytest.raises(
        ConfigurationError, match=r"PrioritizedReplayBuffer\.alpha must be a positive number, got 0"
    ):
        PrioritizedReplayBuffer(8, alpha=0)


def test_non_finite_td_errors() -> None:
    buf = PrioritizedReplayBuffer(4)
    add_steps(buf, 2)
    with pytest.raises(ConfigurationError, match=r"update_priorities: non-finite TD errors"):
        buf.update_priorities(np.array([0, 1]), np.array([1.0, np.nan]))


def test_update_no_priorities_is_a_no_op() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=1.0)
    add_steps(buf, 2)
    buf.update_priorities(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert buf.priorities().sum() == pytest.approx(2.0)


def test_prioritized_vector_buffer_sizes() -> None:
    with pytest.raises(ConfigurationError, match=r"total_size=1 is smaller than buffer_num=2"):
        PrioritizedVectorReplayBuffer(1, 2)
    buf = PrioritizedVectorReplayBuffer(9, 2)
    assert (buf.column_capacity, buf.num_columns) == (4, 2)
