"""Prioritized experience replay (Schaul et al. 2016): proportional sampling with a vectorised sum tree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import numpy as np
from typing_extensions import override

from tshtrain.data.batch import ObsArray, TransitionBatch
from tshtrain.data.buffer import BaseReplayBuffer, BufferLayout
from tshtrain.errors import ConfigurationError, require_positive


@final
class SegmentTree:
    """Sum and min over ``size`` leaves; batch updates and batch prefix-sum queries in O(k log n)."""

    def __init__(self, size: int):
        self.size = size
        self._leaf0 = 1 << max(0, (size - 1).bit_length())
        self._sum = np.zeros(2 * self._leaf0, dtype=np.float64)
        self._min = np.full(2 * self._leaf0, np.inf, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._sum[1])

    @property
    def min(self) -> float:
        """Smallest set leaf (inf if none is set)."""
        return float(self._min[1])

    def get(self, leaves: np.ndarray) -> np.ndarray:
        """Values at the given leaves."""
        return np.asarray(self._sum[leaves + self._leaf0])

    def set(self, leaves: np.ndarray, values: np.ndarray) -> None:
        """Set leaves (later duplicates win) and refresh their ancestors."""
        nodes = np.asarray(leaves, dtype=np.int64) + self._leaf0
        if len(nodes) == 0:
            return
        self._sum[nodes] = values
        self._min[nodes] = values
        nodes = np.unique(nodes >> 1)
        while nodes[0] >= 1:
            self._sum[nodes] = self._sum[2 * nodes] + self._sum[2 * nodes + 1]
            self._min[nodes] = np.minimum(self._min[2 * nodes], self._min[2 * nodes + 1])
            if nodes[0] == 1:
                break
            nodes = np.unique(nodes >> 1)

    def clear(self) -> None:
        """Set every leaf to zero (sum) / unset (min)."""
        self._sum[:] = 0.0
        self._min[:] = np.inf

    def find_prefix(self, values: np.ndarray) -> np.ndarray:
        """For each v, the smallest leaf i with sum(leaves[:i+1]) > v.

        A v at or beyond the total (which rounding can produce) maps to the last positive leaf, so
        that a query never returns an empty (zero) leaf while the total is positive.
        """
        remaining = np.asarray(values, dtype=np.float64).copy()
        nodes = np.ones(len(remaining), dtype=np.int64)
        while len(nodes) and nodes[0] < self._leaf0:
            left = 2 * nodes
            left_sum = self._sum[left]
            go_right = (remaining >= left_sum) & (self._sum[left + 1] > 0.0)
            remaining -= np.where(go_right, left_sum, 0.0)
            nodes = left + go_right
        return np.minimum(nodes - self._leaf0, self.size - 1)


class BasePrioritizedBuffer(BaseReplayBuffer):
    """Proportional prioritized replay on top of the column layout of :class:`BaseReplayBuffer`."""

    def __init__(
        self,
        *,
        column_capacity: int,
        num_columns: int,
        alpha: float,
        beta: float,
        seed: int | np.random.Generator | None,
    ):
        super().__init__(column_capacity=column_capacity, num_columns=num_columns, seed=seed)
        cls = type(self).__name__
        require_positive(cls, "alpha", alpha)
        if not 0.0 <= beta <= 1.0:
            raise ConfigurationError(f"{cls}.beta must lie in [0, 1], got {beta!r}.")
        self.alpha = alpha
        """priority exponent: P(i) ~ p_i ** alpha"""
        self.beta = beta
        """importance-sampling exponent; anneal it towards 1 with :meth:`set_beta`"""
        self._tree = SegmentTree(self.capacity)
        self._max_priority = 1.0

    def set_beta(self, beta: float) -> None:
        """Change the importance-sampling exponent (e.g. annealed by a hook)."""
        if not 0.0 <= beta <= 1.0:
            raise ConfigurationError(f"{type(self).__name__}.beta must lie in [0, 1], got {beta!r}.")
        self.beta = beta

    @override
    def add(
        self,
        *,
        obs: ObsArray,
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: ObsArray,
        env_ids: np.ndarray | None = None,
    ) -> np.ndarray:
        indices = super().add(
            obs=obs,
            act=act,
            rew=rew,
            terminated=terminated,
            truncated=truncated,
            obs_next=obs_next,
            env_ids=env_ids,
        )
        self._tree.set(indices, np.full(len(indices), self._max_priority**self.alpha))
        return indices

    @override
    def reset(self, *, keep_statistics: bool = False) -> None:
        super().reset(keep_statistics=keep_statistics)
        self._tree.clear()
        self._max_priority = 1.0

    @override
    def sample_indices(self, batch_size: int) -> np.ndarray:
        require_positive(type(self).__name__ + ".sample", "batch_size", batch_size)
        if self._ring.scope is not None:
            raise ConfigurationError(
                f"{type(self).__name__}.sample: prioritized sampling inside a column scope "
                f"({self._ring.scope!r}) is not supported; give each learner of a multi-agent algorithm "
                f"a uniform buffer (VectorReplayBuffer)."
            )
        self._require_data("sample")
        total = self._tree.total
        # stratified: one draw in each of batch_size equal segments of the priority mass
        draws = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
        return self._tree.find_prefix(draws)

    def weights(self, indices: np.ndarray) -> np.ndarray:
        """Importance-sampling weights (N * P(i)) ** -beta, divided by their maximum over the buffer."""
        prob = self._tree.get(indices)
        return np.asarray((prob / self._tree.min) ** (-self.beta), dtype=np.float32)

    @override
    def sample(self, batch_size: int) -> TransitionBatch:
        indices = self.sample_indices(batch_size)
        batch = self.get(indices)
        return TransitionBatch(
            obs=batch.obs,
            act=batch.act,
            rew=batch.rew,
            terminated=batch.terminated,
            truncated=batch.truncated,
            obs_next=batch.obs_next,
            indices=indices,
            weight=self.weights(indices),
        )

    def update_priorities(self, indices: np.ndarray, errors: np.ndarray) -> None:
        """Set priorities from absolute TD errors (a small epsilon keeps every priority positive)."""
        priority = np.abs(np.asarray(errors, dtype=np.float64)) + 1e-6
        if priority.size == 0:
            return
        if not np.all(np.isfinite(priority)):
            raise ConfigurationError(
                f"{type(self).__name__}.update_priorities: non-finite TD errors {errors!r}."
            )
        self._max_priority = max(self._max_priority, float(priority.max()))
        self._tree.set(indices, priority**self.alpha)

    @property
    def max_priority(self) -> float:
        """The largest priority seen so far; new transitions get ``max_priority ** alpha``."""
        return self._max_priority

    def priorities(self) -> np.ndarray:
        """The sampling weights ``p_i ** alpha`` of all ``capacity`` flat indices (0 where nothing is
        stored), a copy (for saving)."""
        return self._tree.get(np.arange(self.capacity))

    @override
    def restore(self, arrays: Mapping[str, np.ndarray], layout: BufferLayout) -> None:
        # every stored transition starts at the max priority; restore_priorities() may follow
        super().restore(arrays, layout)
        self._tree.clear()
        stored = self.chronological_indices()
        if len(stored):
            self._tree.set(stored, np.full(len(stored), self._max_priority**self.alpha))

    def restore_priorities(self, priorities: np.ndarray, *, alpha: float, max_priority: float) -> None:
        """Take over saved :meth:`priorities` (computed with exponent ``alpha``) after :meth:`restore`.

        Raises:
            ConfigurationError: if ``priorities`` does not hold one value per flat index.
        """
        values = np.asarray(priorities, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ConfigurationError(
                f"{type(self).__name__}.restore_priorities: got shape {values.shape}, the buffer needs "
                f"({self.capacity},)."
            )
        self._max_priority = float(max_priority)
        self._tree.clear()
        stored = self.chronological_indices()
        if len(stored):
            self._tree.set(stored, values[stored] ** (self.alpha / alpha))


@final
class PrioritizedReplayBuffer(BasePrioritizedBuffer):
    """A single prioritized circular buffer of ``size`` transitions."""

    def __init__(
        self,
        size: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        *,
        seed: int | np.random.Generator | None = None,
    ):
        super().__init__(column_capacity=size, num_columns=1, alpha=alpha, beta=beta, seed=seed)


@final
class PrioritizedVectorReplayBuffer(BasePrioritizedBuffer):
    """``buffer_num`` prioritized sub-buffers (one per env) sharing one sum tree."""

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        *,
        seed: int | np.random.Generator | None = None,
    ):
        require_positive("PrioritizedVectorReplayBuffer", "buffer_num", buffer_num)
        if total_size < buffer_num:
            raise ConfigurationError(
                f"PrioritizedVectorReplayBuffer.total_size={total_size} is smaller than "
                f"buffer_num={buffer_num}."
            )
        super().__init__(
            column_capacity=total_size // buffer_num,
            num_columns=buffer_num,
            alpha=alpha,
            beta=beta,
            seed=seed,
        )
