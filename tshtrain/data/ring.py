"""Write positions of a circular buffer in time x env (column) layout, kept on the host.

Both replay buffers (:class:`~tshtrain.data.BaseReplayBuffer` on numpy arrays and
:class:`~tshtrain.data.TensorReplayBuffer` on tensors) own one :class:`RingPositions`: the next row to
write and the number of stored transitions of each column, and the index arithmetic that follows
from them alone (which rows are the oldest / newest, the chronological order, which flat indices an
add wrote). The storage itself, and everything that looks at the stored data, stays in the buffers.

A flat index is ``row * num_columns + column``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import numpy as np

from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class BufferLayout:
    """Sizes and write positions of a buffer (what a saved buffer needs besides its arrays)."""

    column_capacity: int
    num_columns: int
    ptr: tuple[int, ...]
    """next row to write, per column"""
    length: tuple[int, ...]
    """number of stored transitions, per column"""


@final
class RingPositions:
    """The host-side write positions of ``num_columns`` circular columns of ``column_capacity`` rows."""

    __slots__ = ("column_capacity", "column_ids", "len", "num_columns", "ptr", "scope", "synced")

    def __init__(self, column_capacity: int, num_columns: int):
        """Args:
        column_capacity: rows per column.
        num_columns: number of columns.
        """
        self.column_capacity = column_capacity
        """rows per column"""
        self.num_columns = num_columns
        """number of columns"""
        self.ptr = np.zeros(num_columns, dtype=np.int64)
        """next row to write, per column"""
        self.len = np.zeros(num_columns, dtype=np.int64)
        """number of stored transitions, per column"""
        self.synced = True
        """all columns share ``ptr`` and ``len`` (the buffers' fast paths apply)"""
        self.column_ids = np.arange(num_columns)
        """``0..num_columns-1``"""
        self.scope: slice | None = None
        """the columns that sampling draws from (None: all); see :func:`sample_flat_indices`"""

    # ------------------------------------------------------------------ sizes and state
    @property
    def capacity(self) -> int:
        """Total number of rows of all columns."""
        return self.column_capacity * self.num_columns

    def total(self) -> int:
        """Number of stored transitions of all columns."""
        return int(self.len.sum())

    def layout(self) -> BufferLayout:
        """Sizes and write positions (for saving)."""
        return BufferLayout(
            column_capacity=self.column_capacity,
            num_columns=self.num_columns,
            ptr=tuple(int(p) for p in self.ptr),
            length=tuple(int(n) for n in self.len),
        )

    def reset(self) -> None:
        """Forget all positions: every column empty, writing at row 0."""
        self.ptr[:] = 0
        self.len[:] = 0
        self.synced = True

    def restore(self, layout: BufferLayout) -> None:
        """Take over the write positions of ``layout`` (copied)."""
        self.ptr = np.asarray(layout.ptr, dtype=np.int64).copy()
        self.len = np.asarray(layout.length, dtype=np.int64).copy()
        self._update_synced()

    def _update_synced(self) -> None:
        self.synced = bool(np.all(self.ptr == self.ptr[0]) and np.all(self.len == self.len[0]))

    def scope_bounds(self) -> tuple[int, int]:
        """``(first, stop)`` of the columns in :attr:`scope` (all columns without one)."""
        if self.scope is None:
            return 0, self.num_columns
        first, stop, _ = self.scope.indices(self.num_columns)
        return first, stop

    def scoped_total(self) -> int:
        """Number of stored transitions in the columns of :attr:`scope`."""
        if self.scope is None:
            return self.total()
        first, stop = self.scope_bounds()
        return int(self.len[first:stop].sum())

    def set_scope(self, columns: slice | None, *, owner: str) -> None:
        """Restrict sampling to the contiguous ``columns`` (None: lift the restriction)."""
        if columns is not None:
            first, stop, step = columns.indices(self.num_columns)
            if step != 1 or not 0 <= first < stop <= self.num_columns:
                raise ValueError(
                    f"{owner}: a column scope is a contiguous slice inside 0..{self.num_columns - 1}, got "
                    f"{columns!r}."
                )
            if first == 0 and stop == self.num_columns:
                columns = None
        self.scope = columns

    # ------------------------------------------------------------------ advancing
    def target_columns(
        self, num_rows: int, env_ids: np.ndarray | None, *, owner: str, vector_cls: str
    ) -> np.ndarray | None:
        """The checked columns that an add of ``num_rows`` rows writes, or None when it writes every
        column at one shared row (then :meth:`advance_all` applies).

        Args:
            env_ids: the columns the caller names; None means ``0..num_rows-1``.
            owner: the buffer's class name, for error messages.
            vector_cls: the buffer class to suggest when there are too few columns.

        Raises:
            ConfigurationError: more rows than columns, column ids out of range, or repeated.
        """
        if env_ids is None:
            if num_rows > self.num_columns:
                raise ConfigurationError(
                    f"{owner} has {self.num_columns} sub-buffers but {num_rows} envs add at once; use "
                    f"{vector_cls}(total_size, buffer_num={num_rows}) or more."
                )
            if self.synced and num_rows == self.num_columns:
                return None
            env_ids = np.arange(num_rows)
        env_ids = np.asarray(env_ids, dtype=np.int64)
        if len(env_ids) and (env_ids.min() < 0 or env_ids.max() >= self.num_columns):
            raise ConfigurationError(
                f"{owner}.add: env ids {env_ids.tolist()} outside 0..{self.num_columns - 1}."
            )
        if len(np.unique(env_ids)) != len(env_ids):  # two rows for one column would lose a transition
            raise ConfigurationError(
                f"{owner}.add: env ids {env_ids.tolist()} contain duplicates; add each env's "
                f"transitions in separate calls."
            )
        return env_ids

    def advance_all(self, row: int) -> None:
        """Every column was written at ``row`` (its shared write position): move them all on."""
        self.ptr.fill(row + 1 if row + 1 < self.column_capacity else 0)
        length = int(self.len[0])
        if length < self.column_capacity:
            self.len.fill(length + 1)

    def advance_columns(self, env_ids: np.ndarray, rows: np.ndarray) -> None:
        """Columns ``env_ids`` were written at ``rows`` (their write positions): move them on."""
        self.ptr[env_ids] = (rows + 1) % self.column_capacity
        self.len[env_ids] = np.minimum(self.len[env_ids] + 1, self.column_capacity)
        self._update_synced()

    # ------------------------------------------------------------------ index arithmetic
    def newest_rows_E(self) -> np.ndarray:
        """The row of each column's newest transition (meaningless for empty columns)."""
        return np.asarray((self.ptr - 1) % self.column_capacity)

    def oldest_rows_E(self) -> np.ndarray:
        """The row of each column's oldest transition."""
        return np.asarray((self.ptr - self.len) % self.column_capacity)

    def newest_indices(self, env_ids: np.ndarray) -> np.ndarray:
        """Flat indices of the newest transitions of the non-empty columns among ``env_ids``."""
        cols = np.asarray(env_ids, dtype=np.int64)
        cols = cols[self.len[cols] > 0]
        return np.asarray(((self.ptr[cols] - 1) % self.column_capacity) * self.num_columns + cols)

    def is_contiguous_from_zero(self) -> bool:
        """True when every column holds the same steps written from row 0 in order (rows ``0..L-1``
        are the chronological order, so a rollout can be a view)."""
        length, ptr = int(self.len[0]), int(self.ptr[0])
        return (
            self.synced
            and ptr == length % self.column_capacity
            and (length < self.column_capacity or ptr == 0)
        )

    def rows_TE(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows of all stored transitions in time-major order, and which of them are stored:
        ``row_TE[t, e]`` is the row of column ``e``'s ``t``-th oldest transition, valid where
        ``t < len[e]``."""
        t_max = int(self.len.max())
        start_E = self.oldest_rows_E()
        step_T = np.arange(t_max)[:, None]
        row_TE = (start_E[None, :] + step_T) % self.column_capacity
        return row_TE, step_T < self.len[None, :]

    def chronological_indices(self) -> np.ndarray:
        """Flat indices of all stored transitions, oldest first (time-major, then column)."""
        if self.total() == 0:
            return np.zeros(0, dtype=np.int64)
        row_TE, valid_TE = self.rows_TE()
        flat_TE = row_TE * self.num_columns + np.arange(self.num_columns)
        return np.asarray(flat_TE[valid_TE])

    def new_indices(self, before: BufferLayout, n_collected: int) -> np.ndarray:
        """Flat indices written since ``before`` (see :meth:`tshtrain.data.BaseReplayBuffer.new_indices`)."""
        cap = self.column_capacity
        ptr_before = np.asarray(before.ptr, dtype=np.int64)
        added = (self.ptr - ptr_before) % cap
        if int(added.sum()) < n_collected:  # some column wrapped around completely
            added = np.where((self.len == cap) & (added == 0), cap, added)
        columns = [
            ((self.ptr[e] - added[e] + np.arange(added[e])) % cap) * self.num_columns + e
            for e in np.flatnonzero(added)
        ]
        return np.concatenate(columns) if columns else np.zeros(0, dtype=np.int64)
