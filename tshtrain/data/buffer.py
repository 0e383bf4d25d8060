"""Replay buffers: preallocated structure-of-arrays, circular, in time x env (column) layout.

Every buffer has ``num_columns`` sub-buffers (one per env) of ``column_capacity`` rows each. Field
``f`` is one array of shape ``(column_capacity, num_columns, *element_shape)``; the transition of env
``e`` at row ``t`` has the flat index ``t * num_columns + e``. Adding a vector step writes one row per
field (a slice assignment when all envs add together); sampling is one fancy index per field into the
flattened view. Arrays are allocated on the first ``add`` (their shapes and dtypes come from that data)
and never grow.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, final

import numpy as np
import torch

from tshtrain.data.batch import ObsArray, RolloutBatch, TransitionBatch, obs_len
from tshtrain.data.ring import BufferLayout, RingPositions
from tshtrain.data.staging import StagedSample, StagingArrays
from tshtrain.env.groups import GroupView
from tshtrain.errors import ConfigurationError, require_positive
from tshtrain.functional.targets import nstep_indices, nstep_returns

_CORE_FIELDS = ("act", "rew", "terminated", "truncated")

__all__ = [
    "BaseReplayBuffer",
    "BufferLayout",
    "NStepTargets",
    "ReplayBuffer",
    "SavableBuffer",
    "VectorReplayBuffer",
    "flatten_obs",
]


@dataclass(frozen=True, kw_only=True)
class NStepTargets:
    """What an n-step TD target of N sampled transitions needs besides the bootstrap value."""

    returns: np.ndarray
    """shape (N,): sum_{k<m} gamma^k r_{t+k} along the episode, m <= n"""
    discounts: np.ndarray
    """shape (N,): gamma^m * (1 - terminated_{t+m-1}), the factor of the bootstrap value"""
    obs_next: ObsArray
    """o_{t+m}, the observation to bootstrap from"""


class SavableBuffer(Protocol):
    """What saving, loading and checkpointing need of a buffer (numpy buffers and
    :class:`~tshtrain.data.TensorReplayBuffer` implement it)."""

    @property
    def column_capacity(self) -> int:
        """Rows per column."""
        ...

    @property
    def num_columns(self) -> int:
        """Number of columns."""
        ...

    @property
    def capacity(self) -> int:
        """Total number of transitions."""
        ...

    @property
    def is_allocated(self) -> bool:
        """True once the first add fixed the shapes."""
        ...

    def __len__(self) -> int: ...

    def layout(self) -> BufferLayout:
        """Sizes and write positions."""
        ...

    def field_arrays(self, *, rows: int | None = None) -> dict[str, np.ndarray]:
        """The storage as numpy arrays by field name; with ``rows``, only the first rows of each."""
        ...

    def restore(self, arrays: Mapping[str, np.ndarray], layout: BufferLayout) -> None:
        """Take over arrays and write positions."""
        ...

    def sampler_state(self) -> Any:
        """The sampling generator's state (checkpoints)."""
        ...

    def load_sampler_state(self, state: Any) -> None:
        """Restore :meth:`sampler_state`."""
        ...


def flatten_obs(prefix: str, obs: ObsArray) -> dict[str, np.ndarray]:
    """Storage fields of an observation: ``{prefix: arr}`` or ``{prefix/key: arr}`` for dicts."""
    if isinstance(obs, np.ndarray):
        return {prefix: obs}
    return {f"{prefix}/{key}": np.asarray(value) for key, value in obs.items()}


class BaseReplayBuffer(ABC):
    """Machinery shared by all buffers; use :class:`ReplayBuffer` or :class:`VectorReplayBuffer`."""

    def __init__(self, *, column_capacity: int, num_columns: int, seed: int | np.random.Generator | None):
        cls = type(self).__name__
        require_positive(cls, "size", column_capacity)
        require_positive(cls, "buffer_num", num_columns)
        self.column_capacity = column_capacity
        """rows per column (per env)"""
        self.num_columns = num_columns
        """number of sub-buffers (columns); a collector with N envs needs at least N"""
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        """generator used by :meth:`sample`"""
        self._arrays: dict[str, np.ndarray] = {}
        self._flat: dict[str, np.ndarray] = {}
        self._obs_keys: tuple[str, ...] | None = None  # None: array observations
        self._ring = RingPositions(column_capacity, num_columns)
        self._view: GroupView | None = None  # what the active column_scope's learner sees
        self._staging: dict[tuple[int, torch.device], StagingArrays] = {}
        """the staging tensors of :meth:`sample_torch`, per batch size and device"""
        self.source: str | None = None
        """where the transitions were loaded from (a file, a directory, a Minari id), named in error
        messages; set by the dataset loaders, None for a buffer filled by a collector"""
        self.allow_nonfinite = False
        """the user accepts NaN or infinite observations and rewards in this buffer used as an offline
        dataset (refused when the trainer is built otherwise; actions are always checked); set it to
        True yourself, or load with ``load_tianshou_hdf5(..., allow_nonfinite=True)``"""

    # ------------------------------------------------------------------ sizes
    @property
    def capacity(self) -> int:
        """Total number of transitions the buffer can hold."""
        return self._ring.capacity

    def __len__(self) -> int:
        return self._ring.total()

    @property
    def column_lengths(self) -> np.ndarray:
        """Number of stored transitions per column (a copy)."""
        return self._ring.len.copy()

    @property
    def is_allocated(self) -> bool:
        """True once the first add has fixed the arrays' shapes."""
        return bool(self._arrays)

    @property
    def nbytes(self) -> int:
        """Bytes held by the field arrays."""
        return sum(a.nbytes for a in self._arrays.values())

    def layout(self) -> BufferLayout:
        """Sizes and write positions (for saving)."""
        return self._ring.layout()

    def reset(self, *, keep_statistics: bool = False) -> None:
        """Forget all stored transitions (arrays stay allocated).

        Args:
            keep_statistics: accepted for Tianshou compatibility; episode statistics live in the
                collector, so the buffer holds none to keep.
        """
        del keep_statistics
        self._ring.reset()

    # ------------------------------------------------------------------ writing
    def _allocate(self, fields: Mapping[str, np.ndarray], num_rows: int) -> None:
        for name, value in fields.items():
            element_shape = value.shape[1:]
            dtype = np.float32 if name == "rew" else value.dtype
            arr = np.zeros((self.column_capacity, self.num_columns, *element_shape), dtype=dtype)
            self._arrays[name] = arr
            self._flat[name] = arr.reshape(self.capacity, *element_shape)
        del num_rows

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
        """Add one vector step: row ``i`` of every argument is the transition of env ``env_ids[i]``.

        Args:
            env_ids: the columns to write; None means columns ``0..n-1`` for ``n`` rows.

        Returns:
            The flat indices written, one per row.
        """
        if (
            env_ids is None
            and self._ring.synced
            and self._obs_keys is None
            and self._arrays
            and isinstance(obs, np.ndarray)
            and isinstance(obs_next, np.ndarray)
            and len(obs) == self.num_columns
        ):
            # the hot path of the collector: every env adds one array-observation transition
            return self._add_all_columns(
                {
                    "obs": obs,
                    "act": act,
                    "rew": rew,
                    "terminated": terminated,
                    "truncated": truncated,
                    "obs_next": obs_next,
                }
            )
        num_rows = obs_len(obs)
        fields = {
            **flatten_obs("obs", obs),
            "act": act,
            "rew": rew,
            "terminated": terminated,
            "truncated": truncated,
            **flatten_obs("obs_next", obs_next),
        }
        if not self._arrays:
            self._obs_keys = None if isinstance(obs, np.ndarray) else tuple(obs.keys())
            self._allocate(fields, num_rows)
        elif set(fields) != set(self._arrays):
            raise ConfigurationError(
                f"{type(self).__name__}.add: fields {sorted(fields)} differ from the stored "
                f"fields {sorted(self._arrays)}."
            )
        columns = self._ring.target_columns(
            num_rows, env_ids, owner=type(self).__name__, vector_cls="VectorReplayBuffer"
        )
        if columns is None:
            return self._add_all_columns(fields)
        return self._add_columns(fields, columns)

    def add_single(
        self,
        *,
        obs: ObsArray,
        act: np.ndarray,
        rew: float,
        terminated: bool,
        truncated: bool,
        obs_next: ObsArray,
    ) -> int:
        """Add the transition of one env (the one-env collector's hot path): ``obs``, ``act`` and
        ``obs_next`` are batches of one row, ``rew`` / ``terminated`` / ``truncated`` plain scalars.

        Stores what :meth:`add` stores for the same transition as arrays of one row, but without
        building a field dict or checking the fields: the caller guarantees that they match the
        buffer's (the collector does). The first add (which fixes the arrays), buffers of several
        columns and subclasses that override :meth:`add` (prioritized buffers) go through :meth:`add`.

        Returns:
            The flat index written.
        """
        arrays = self._arrays
        if not arrays or self.num_columns != 1 or type(self).add is not BaseReplayBuffer.add:
            written = self.add(
                obs=obs,
                act=act,
                rew=np.array([rew], dtype=np.float64),
                terminated=np.array([terminated]),
                truncated=np.array([truncated]),
                obs_next=obs_next,
            )
            return int(written[0])
        ring = self._ring
        row = int(ring.ptr[0])
        if isinstance(obs, np.ndarray):
            arrays["obs"][row] = obs
            arrays["obs_next"][row] = obs_next
        else:
            assert isinstance(obs_next, Mapping)
            for key, value in obs.items():
                arrays["obs/" + key][row] = value
                arrays["obs_next/" + key][row] = obs_next[key]
        arrays["act"][row] = act
        arrays["rew"][row, 0] = rew  # scalar stores (the one column): cheaper than row broadcasts
        arrays["terminated"][row, 0] = terminated
        arrays["truncated"][row, 0] = truncated
        ring.advance_all(row)
        return row

    def _add_all_columns(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        ring = self._ring
        row = int(ring.ptr[0])
        for name, value in fields.items():
            self._arrays[name][row] = value
        ring.advance_all(row)
        return row * self.num_columns + ring.column_ids

    def _add_columns(self, fields: Mapping[str, np.ndarray], env_ids: np.ndarray) -> np.ndarray:
        rows = self._ring.ptr[env_ids]
        for name, value in fields.items():
            self._arrays[name][rows, env_ids] = value
        self._ring.advance_columns(env_ids, rows)
        return np.asarray(rows * self.num_columns + env_ids)

    def truncate_episodes(self, env_ids: np.ndarray) -> None:
        """Mark the newest transition of each given column as truncated, unless it already ends its
        episode; empty columns are skipped.

        The collector calls this when it resets envs in the middle of an episode, so that the cut
        episode's last stored transition ends it (its ``obs_next`` is the true next observation) and
        no episode-aware lookup (:meth:`next_index`, :meth:`rollout` boundaries) crosses into the
        episode that follows in the same column.
        """
        idx = self._ring.newest_indices(env_ids)
        if len(idx) == 0 or not self._arrays:
            return
        open_idx = idx[~(self._flat["terminated"][idx] | self._flat["truncated"][idx])]
        self._flat["truncated"][open_idx] = True

    # ------------------------------------------------------------------ reading
    def _require_data(self, what: str) -> None:
        if len(self) == 0:
            raise ConfigurationError(
                f"{type(self).__name__}.{what}: the buffer is empty; collect data first."
            )

    def sample_indices(self, batch_size: int) -> np.ndarray:
        """``batch_size`` flat indices drawn uniformly (with replacement) from the stored transitions
        (of the columns of the active :meth:`column_scope`, if any)."""
        require_positive(type(self).__name__ + ".sample", "batch_size", batch_size)
        return self._draw_indices(batch_size)

    def _draw_indices(self, batch_size: int) -> np.ndarray:
        """:meth:`sample_indices` without checking ``batch_size``."""
        ring = self._ring
        if ring.scope is not None:
            return self._sample_scoped(batch_size)
        lengths = ring.len
        if ring.synced:
            # rows 0..L-1 of every column are filled: they are the first L*E flat entries
            stored = int(lengths[0]) * self.num_columns
            if stored == 0:
                self._require_data("sample")
            return self.rng.integers(0, stored, size=batch_size)
        self._require_data("sample")
        cum = np.cumsum(lengths)
        draws = self.rng.integers(0, int(cum[-1]), size=batch_size)
        cols = np.searchsorted(cum, draws, side="right")
        rows = draws - (cum[cols] - lengths[cols])
        return rows * self.num_columns + cols

    def _sample_scoped(self, batch_size: int) -> np.ndarray:
        ring = self._ring
        first, stop = ring.scope_bounds()
        lengths = ring.len[first:stop]
        if ring.synced:
            width = stop - first
            draws = self.rng.integers(0, int(lengths[0]) * width, size=batch_size)
            rows, cols = np.divmod(draws, width)
            return rows * self.num_columns + cols + first
        cum = np.cumsum(lengths)
        if cum[-1] == 0:
            raise ConfigurationError(
                f"{type(self).__name__}.sample: columns {first}..{stop - 1} (the active column scope) hold "
                f"no transitions yet; collect data for them first."
            )
        draws = self.rng.integers(0, int(cum[-1]), size=batch_size)
        cols = np.searchsorted(cum, draws, side="right")
        rows = draws - (cum[cols] - lengths[cols])
        return rows * self.num_columns + cols + first

    @contextmanager
    def column_scope(self, columns: slice | None, *, view: GroupView | None = None) -> Iterator[None]:
        """Within the block, :meth:`sample` draws only from the contiguous ``columns`` (None: all), and
        :attr:`scoped_len` counts them: how a learner of a multi-agent algorithm samples its own
        agents' transitions from a buffer shared by every agent (``tshtrain.algorithm.multi_agent``).
        Indices stay flat indices of the whole buffer, so ``get``, ``next_index`` and n-step targets
        work unchanged. With a ``view`` (a grouped env's learner, :mod:`tshtrain.env.groups`) the
        observations and actions that ``get``, ``sample``, ``sample_torch`` and ``nstep_targets`` return
        are the view's."""
        ring = self._ring
        previous, previous_view = ring.scope, self._view
        ring.set_scope(columns, owner=f"{type(self).__name__}.column_scope")
        self._view = view
        try:
            yield
        finally:
            ring.scope, self._view = previous, previous_view

    @property
    def scoped_len(self) -> int:
        """Stored transitions in the active :meth:`column_scope` (all of them without one)."""
        return self._ring.scoped_total()

    def sample(self, batch_size: int) -> TransitionBatch:
        """A uniform random batch of transitions."""
        return self.get(self.sample_indices(batch_size))

    def sample_torch(
        self, batch_size: int, device: torch.device, *, gamma: float, n_step: int
    ) -> StagedSample:
        """What ``sample(batch_size)`` draws (the same indices from the same generator state), with its
        (n-step) returns and discounts (:meth:`nstep_targets`; ``n_step = 1``: the reward and
        ``gamma * (1 - terminated)``), as tensors on ``device``, gathered field by field into staging
        tensors allocated once per batch size and device (pinned on CUDA; :mod:`tshtrain.data.staging`).

        On the CPU the tensors are those staging tensors: the next ``sample_torch`` with the same batch
        size and device overwrites them. Subclasses that sample otherwise (prioritized, HER) are
        sampled with :meth:`sample` instead (``sample_replay`` decides).
        """
        staging = self._staging.get((batch_size, device))
        if staging is None:
            staging = self._staging[(batch_size, device)] = StagingArrays(batch_size, device)
        indices = self._draw_indices(batch_size)
        flat, keys = self._flat, self._obs_keys
        staging.begin()
        obs = staging.gather_obs("obs", flat, keys, indices)
        act = staging.gather("act", flat["act"], indices)
        if n_step == 1:
            returns = staging.gather("rew", flat["rew"], indices)
            discounts = staging.discounts(flat["terminated"], indices, gamma)
            obs_next = staging.gather_obs("obs_next", flat, keys, indices)
        else:
            targets = self.nstep_targets(indices, n_step=n_step, gamma=gamma)
            returns, discounts = staging.to_device(targets.returns), staging.to_device(targets.discounts)
            obs_next = staging.obs_to_device(targets.obs_next)
        staging.end()
        view = self._view
        if view is not None:
            obs, act = view.obs(obs), view.act(act)
            if n_step == 1:  # n-step observations come through _obs_from, already seen by the view
                obs_next = view.obs(obs_next)
        return StagedSample(obs, act, returns, discounts, obs_next, indices)

    def _obs_from(self, prefix: str, idx: np.ndarray) -> ObsArray:
        if self._obs_keys is None:
            return np.asarray(self._flat[prefix][idx])
        obs = {key: self._flat[f"{prefix}/{key}"][idx] for key in self._obs_keys}
        return obs if self._view is None else self._view.obs(obs)

    def get(self, indices: np.ndarray) -> TransitionBatch:
        """The transitions at the given flat indices."""
        flat = self._flat
        return TransitionBatch(
            obs=self._obs_from("obs", indices),
            act=flat["act"][indices] if self._view is None else self._view.act(flat["act"][indices]),
            rew=flat["rew"][indices],
            terminated=flat["terminated"][indices],
            truncated=flat["truncated"][indices],
            obs_next=self._obs_from("obs_next", indices),
            indices=indices,
        )

    def chronological_indices(self) -> np.ndarray:
        """Flat indices of all stored transitions, oldest first (time-major, then column)."""
        return self._ring.chronological_indices()

    def sample_all(self) -> TransitionBatch:
        """All stored transitions in chronological order (see :meth:`chronological_indices`)."""
        return self.get(self.chronological_indices())

    def rollout(self) -> RolloutBatch:
        """All stored transitions as a time-major (T, E) :class:`RolloutBatch` (for on-policy updates).

        When every column holds the same number of steps written from row 0 (the usual on-policy
        case), the arrays are views of the buffer (no copy).
        """
        self._require_data("rollout")
        if self._ring.is_contiguous_from_zero():
            steps = int(self._ring.len[0])
            fields = {name: arr[:steps] for name, arr in self._arrays.items()}
            valid_TE = np.ones((steps, self.num_columns), dtype=bool)
        else:
            row_TE, valid_TE = self._ring.rows_TE()
            cols = np.arange(self.num_columns)
            fields = {name: arr[row_TE, cols] for name, arr in self._arrays.items()}
            fields["rew"] = np.where(valid_TE, fields["rew"], np.float32(0.0))
        return self._make_rollout(fields, valid_TE)

    def _make_rollout(self, fields: Mapping[str, np.ndarray], valid_TE: np.ndarray) -> RolloutBatch:
        terminated, truncated = fields["terminated"], fields["truncated"]
        last_TE = np.zeros_like(valid_TE)
        lengths = valid_TE.sum(axis=0)
        has_data = lengths > 0
        last_TE[lengths[has_data] - 1, np.flatnonzero(has_data)] = True
        boundary = terminated | truncated | last_TE | ~valid_TE

        def obs_of(prefix: str) -> ObsArray:
            if self._obs_keys is None:
                return fields[prefix]
            return {key: fields[f"{prefix}/{key}"] for key in self._obs_keys}

        return RolloutBatch(
            obs=obs_of("obs"),
            act=fields["act"],
            rew=fields["rew"],
            terminated=terminated & valid_TE,
            truncated=truncated & valid_TE,
            obs_next=obs_of("obs_next"),
            boundary=boundary,
            valid=valid_TE,
        )

    # ------------------------------------------------------------------ episode-aware neighbours
    def next_index(self, indices: np.ndarray) -> np.ndarray:
        """The index of the following transition of the same episode; an episode's last stored
        transition (or the newest transition of its column) maps to itself."""
        rows, cols = np.divmod(indices, self.num_columns)
        flat = self._flat
        stop = flat["terminated"][indices] | flat["truncated"][indices]
        stop |= rows == self._ring.newest_rows_E()[cols]
        nxt_rows = np.where(stop, rows, (rows + 1) % self.column_capacity)
        return nxt_rows * self.num_columns + cols

    def prev_index(self, indices: np.ndarray) -> np.ndarray:
        """The index of the preceding transition of the same episode; an episode's first stored
        transition (or the oldest transition of its column) maps to itself."""
        rows, cols = np.divmod(indices, self.num_columns)
        prev_rows = (rows - 1) % self.column_capacity
        oldest = rows == self._ring.oldest_rows_E()[cols]
        prev_flat = prev_rows * self.num_columns + cols
        stop = oldest | self._flat["terminated"][prev_flat] | self._flat["truncated"][prev_flat]
        return np.where(stop, indices, prev_flat)

    def nstep_targets(self, indices: np.ndarray, *, n_step: int, gamma: float) -> NStepTargets:
        """The n-step returns, discounts and bootstrap observations of the transitions at ``indices``
        (vectorised: one :meth:`next_index` call per step along the chains, see
        :func:`tshtrain.functional.nstep_indices`)."""
        indices_KN, valid_KN = nstep_indices(indices, self.next_index, n_step)
        last_N = indices_KN[-1]
        returns, gamma_pow = nstep_returns(self._flat["rew"][indices_KN], valid_KN, gamma)
        return NStepTargets(
            returns=returns,
            discounts=gamma_pow * ~self._flat["terminated"][last_N],
            obs_next=self._obs_from("obs_next", last_N),
        )

    def field_at(self, name: str, indices: np.ndarray) -> np.ndarray:
        """The stored values of field ``name`` at flat ``indices`` (a copy)."""
        return np.asarray(self._flat[name][indices])

    def new_indices(self, before: BufferLayout, n_collected: int) -> np.ndarray:
        """Flat indices of the transitions written since the layout ``before``, when
        ``n_collected`` transitions were added (grouped by column, oldest first).

        Exact unless a column received its whole capacity or more at once; then all rows of the full
        columns are returned (the newest data is among them).
        """
        return self._ring.new_indices(before, n_collected)

    def new_transitions(self, before: BufferLayout, n_collected: int) -> TransitionBatch:
        """The transitions of :meth:`new_indices` (a copy)."""
        return self.get(self.new_indices(before, n_collected))

    # ------------------------------------------------------------------ raw access (save / load)
    def field_arrays(self, *, rows: int | None = None) -> dict[str, np.ndarray]:
        """The storage arrays by field name (``obs/key`` for dict observations); with ``rows``, only
        the first rows of each (what :func:`tshtrain.data.save_buffer` writes). Not copies."""
        if rows is None:
            return dict(self._arrays)
        return {name: arr[:rows] for name, arr in self._arrays.items()}

    def sampler_state(self) -> Any:
        """The sampling generator's state (``rng.bit_generator.state``), for checkpoints."""
        return self.rng.bit_generator.state

    def load_sampler_state(self, state: Any) -> None:
        """Restore :meth:`sampler_state`."""
        self.rng.bit_generator.state = dict(state)

    def restore(self, arrays: Mapping[str, np.ndarray], layout: BufferLayout) -> None:
        """Take over arrays and write positions (used by :func:`tshtrain.data.load_buffer`)."""
        self._arrays = dict(arrays)
        self._flat = {k: a.reshape(self.capacity, *a.shape[2:]) for k, a in self._arrays.items()}
        obs_keys = [k.split("/", 1)[1] for k in self._arrays if k.startswith("obs/")]
        self._obs_keys = tuple(obs_keys) if obs_keys else None
        self._ring.restore(layout)


@final
class ReplayBuffer(BaseReplayBuffer):
    """A single circular buffer of ``size`` transitions (one env, or data added env by env)."""

    def __init__(self, size: int, *, seed: int | np.random.Generator | None = None):
        """Args:
        size: maximum number of transitions; the oldest are overwritten when full.
        seed: seed or generator for sampling.
        """
        super().__init__(column_capacity=size, num_columns=1, seed=seed)


@final
class VectorReplayBuffer(BaseReplayBuffer):
    """``buffer_num`` equally sized circular sub-buffers, one per env, sharing ``total_size``."""

    def __init__(self, total_size: int, buffer_num: int, *, seed: int | np.random.Generator | None = None):
        """Args:
        total_size: total number of transitions; each sub-buffer holds total_size // buffer_num.
        buffer_num: number of sub-buffers, at least the number of envs that add to it.
        seed: seed or generator for sampling.
        """
        require_positive("VectorReplayBuffer", "buffer_num", buffer_num)
        if total_size < buffer_num:
            raise ConfigurationError(
                f"VectorReplayBuffer.total_size={total_size} is smaller than buffer_num={buffer_num}; "
                f"each sub-buffer needs room for at least one transition."
            )
        super().__init__(column_capacity=total_size // buffer_num, num_columns=buffer_num, seed=seed)
