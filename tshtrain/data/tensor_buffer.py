"""The replay buffer of the torch path: :class:`TensorReplayBuffer`, the tensor twin of
:class:`~tshtrain.data.VectorReplayBuffer`.

Same layout (see :mod:`tshtrain.data.buffer`): ``num_columns`` circular sub-buffers of
``column_capacity`` rows, field ``f`` one tensor of shape ``(column_capacity, num_columns,
*element_shape)`` on ``device``, flat index ``t * num_columns + e``; dtypes are kept as the first
``add`` gives them (uint8 images stay uint8), except ``rew`` (float32); the flags are bool. Dict
observations are one tensor per key (``obs/KEY``, ``obs_next/KEY``).

The write positions (``ptr``, lengths per column) live on the host: they follow from which columns
are written, which the collector knows without looking at the data, so adding and sampling never wait
for the device. Everything the data decides (episode ends, rewards) stays on the device.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, final

import numpy as np
import torch

from tshtrain.data.batch import ObsTensor, TensorRolloutBatch, TorchTransitionBatch
from tshtrain.data.ring import BufferLayout, RingPositions
from tshtrain.devices import component_device
from tshtrain.env.groups import GroupView
from tshtrain.errors import ConfigurationError, require_positive

_LOGP = "logp"
_VALUE = "value"
_POLICY_FIELDS = (_LOGP, _VALUE)
"""optional per-row fields the collecting policy may give (kept only while every stored row has them)"""


def _flatten_obs(prefix: str, obs: ObsTensor) -> dict[str, torch.Tensor]:
    if isinstance(obs, torch.Tensor):
        return {prefix: obs}
    return {f"{prefix}/{key}": value for key, value in obs.items()}


def _seed_generator(generator: torch.Generator, seed: int | None) -> None:
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))


class TensorNStepTargets:
    """n-step returns, bootstrap discounts and bootstrap observations of sampled transitions
    (tensors; the torch twin of :class:`tshtrain.data.buffer.NStepTargets`)."""

    def __init__(self, returns: torch.Tensor, discounts: torch.Tensor, obs_next: ObsTensor):
        self.returns = returns
        """shape (N,), float32: sum_{k<m} gamma^k r_{t+k}"""
        self.discounts = discounts
        """shape (N,), float32: gamma^m * (1 - terminated_{t+m-1})"""
        self.obs_next = obs_next
        """o_{t+m}"""


@final
class TensorReplayBuffer:
    """``buffer_num`` circular sub-buffers of ``total_size // buffer_num`` rows, tensors on ``device``
    (see the module docstring)."""

    def __init__(
        self, total_size: int, buffer_num: int, *, device: torch.device | str, seed: int | None = None
    ):
        """Args:
        total_size: total number of transitions; each sub-buffer holds total_size // buffer_num.
        buffer_num: number of sub-buffers, at least the number of envs that add to it.
        device: where the tensors live (the env's device, usually).
        seed: seeds the sampling generator (on ``device``).
        """
        require_positive("TensorReplayBuffer", "buffer_num", buffer_num)
        require_positive("TensorReplayBuffer", "total_size", total_size)
        if total_size < buffer_num:
            raise ConfigurationError(
                f"TensorReplayBuffer.total_size={total_size} is smaller than buffer_num={buffer_num}; "
                f"each sub-buffer needs room for at least one transition."
            )
        self.column_capacity = total_size // buffer_num
        """rows per column (per env)"""
        self.num_columns = buffer_num
        """number of sub-buffers (columns)"""
        self.device = component_device(device, owner="TensorReplayBuffer")
        """where the tensors live (``cuda`` resolved to ``cuda:N``, as ``tensor.device`` says)"""
        self.rng = torch.Generator(device=self.device)
        """the sampling generator"""
        _seed_generator(self.rng, seed)
        self._arrays: dict[str, torch.Tensor] = {}
        self._flat: dict[str, torch.Tensor] = {}
        self._obs_keys: tuple[str, ...] | None = None
        self._ring = RingPositions(self.column_capacity, buffer_num)
        self._view: GroupView | None = None  # what the active column_scope's learner sees
        self._complete: dict[str, bool] = dict.fromkeys(_POLICY_FIELDS, False)
        """per optional field (``logp``, ``value``): every stored row has the value the collecting
        policy gave (see :meth:`add`)"""

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
        """True once the first add has fixed the tensors' shapes."""
        return bool(self._arrays)

    @property
    def nbytes(self) -> int:
        """Bytes held by the field tensors."""
        return sum(t.numel() * t.element_size() for t in self._arrays.values())

    def layout(self) -> BufferLayout:
        """Sizes and write positions (for saving)."""
        return self._ring.layout()

    def reset(self, *, keep_statistics: bool = False) -> None:
        """Forget all stored transitions (tensors stay allocated); ``keep_statistics`` as in
        :meth:`tshtrain.data.BaseReplayBuffer.reset`."""
        del keep_statistics
        self._ring.reset()
        self._complete = {name: name in self._arrays for name in _POLICY_FIELDS}

    # ------------------------------------------------------------------ writing
    def _allocate(self, fields: Mapping[str, torch.Tensor]) -> None:
        for name, value in fields.items():
            dtype = torch.float32 if name == "rew" else value.dtype
            shape = (self.column_capacity, self.num_columns, *value.shape[1:])
            arr = torch.zeros(shape, dtype=dtype, device=self.device)
            self._arrays[name] = arr
            self._flat[name] = arr.view(self.capacity, *value.shape[1:])

    def add(
        self,
        *,
        obs: ObsTensor,
        act: torch.Tensor,
        rew: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        obs_next: ObsTensor,
        env_ids: np.ndarray | None = None,
        logp: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
    ) -> None:
        """Add one vector step: row ``i`` of every tensor is the transition of env ``env_ids[i]``.

        Args:
            env_ids: the columns to write (host integers); None means columns ``0..n-1``.
            logp: log pi(act | obs) of the policy that chose the actions, shape (n,), if it gave them
                (:meth:`tshtrain.algorithm.Policy.actions_with_log_prob`). :meth:`rollout` returns
                them only while every stored row has one (an on-policy rollout of one policy);
                otherwise an update recomputes them.
            value: V(obs) of the critic when the collector was asked to compute values while
                collecting (``TensorCollector(values=...)``), shape (n,); kept like ``logp``.
        """
        fields = {
            **_flatten_obs("obs", obs),
            "act": act,
            "rew": rew,
            "terminated": terminated,
            "truncated": truncated,
            **_flatten_obs("obs_next", obs_next),
        }
        if not self._arrays:
            self._obs_keys = None if isinstance(obs, torch.Tensor) else tuple(obs.keys())
            self._allocate(fields)
        elif fields.keys() != self._arrays.keys() - set(_POLICY_FIELDS):
            raise ConfigurationError(
                f"TensorReplayBuffer.add: fields {sorted(fields)} differ from the stored fields "
                f"{sorted(self._arrays.keys() - set(_POLICY_FIELDS))}."
            )
        for name, given in ((_LOGP, logp), (_VALUE, value)):
            if given is None:
                self._complete[name] = False
                continue
            if name not in self._arrays:  # the first rows with this field
                self._allocate({name: given})
                self._complete[name] = len(self) == 0
            fields[name] = given
        columns = self._ring.target_columns(
            len(rew), env_ids, owner="TensorReplayBuffer", vector_cls="TensorReplayBuffer"
        )
        if columns is None:
            self._add_all_columns(fields)
        else:
            self._add_columns(fields, columns)

    def _add_all_columns(self, fields: Mapping[str, torch.Tensor]) -> None:
        row = int(self._ring.ptr[0])
        for name, value in fields.items():
            self._arrays[name][row] = value
        self._ring.advance_all(row)

    def _add_columns(self, fields: Mapping[str, torch.Tensor], env_ids: np.ndarray) -> None:
        rows = self._ring.ptr[env_ids]
        flat = torch.from_numpy(rows * self.num_columns + env_ids).to(self.device)
        for name, value in fields.items():
            self._flat[name][flat] = value.to(self._flat[name].dtype)
        self._ring.advance_columns(env_ids, rows)

    def truncate_episodes(self, env_ids: np.ndarray) -> None:
        """Mark the newest transition of each given column truncated unless it already ends its
        episode (see :meth:`tshtrain.data.BaseReplayBuffer.truncate_episodes`)."""
        idx_np = self._ring.newest_indices(env_ids)
        if len(idx_np) == 0 or not self._arrays:
            return
        idx = torch.from_numpy(idx_np).to(self.device)
        open_ = ~(self._flat["terminated"][idx] | self._flat["truncated"][idx])
        self._flat["truncated"][idx] = self._flat["truncated"][idx] | open_

    # ------------------------------------------------------------------ reading
    def _require_data(self, what: str) -> None:
        if len(self) == 0:
            raise ConfigurationError(f"TensorReplayBuffer.{what}: the buffer is empty; collect data first.")

    def sample_indices(self, batch_size: int) -> torch.Tensor:
        """``batch_size`` flat indices (on ``device``) drawn uniformly with replacement."""
        require_positive("TensorReplayBuffer.sample", "batch_size", batch_size)
        if self._ring.scope is not None:
            return self._sample_scoped(batch_size)
        self._require_data("sample")
        lengths = self._ring.len
        if self._ring.synced:
            high = int(lengths[0]) * self.num_columns
            return torch.randint(0, high, (batch_size,), generator=self.rng, device=self.device)
        cum_np = np.cumsum(lengths)
        cum = torch.from_numpy(cum_np).to(self.device)
        lens = torch.from_numpy(lengths).to(self.device)
        draws = torch.randint(0, int(cum_np[-1]), (batch_size,), generator=self.rng, device=self.device)
        cols = torch.searchsorted(cum, draws, right=True)
        rows = draws - (cum[cols] - lens[cols])
        return rows * self.num_columns + cols

    def _sample_scoped(self, batch_size: int) -> torch.Tensor:
        ring = self._ring
        first, stop = ring.scope_bounds()
        lengths = ring.len[first:stop]
        cum_np = np.cumsum(lengths)
        if cum_np[-1] == 0:
            raise ConfigurationError(
                f"TensorReplayBuffer.sample: columns {first}..{stop - 1} (the active column scope) hold no "
                f"transitions yet; collect data for them first."
            )
        draws = torch.randint(0, int(cum_np[-1]), (batch_size,), generator=self.rng, device=self.device)
        if ring.synced:
            width = stop - first
            rows, cols = draws // width, draws % width
        else:
            cum = torch.from_numpy(cum_np).to(self.device)
            lens = torch.from_numpy(lengths).to(self.device)
            cols = torch.searchsorted(cum, draws, right=True)
            rows = draws - (cum[cols] - lens[cols])
        return rows * self.num_columns + cols + first

    @contextmanager
    def column_scope(self, columns: slice | None, *, view: GroupView | None = None) -> Iterator[None]:
        """See :meth:`tshtrain.data.buffer.BaseReplayBuffer.column_scope`."""
        ring = self._ring
        previous, previous_view = ring.scope, self._view
        ring.set_scope(columns, owner="TensorReplayBuffer.column_scope")
        self._view = view
        try:
            yield
        finally:
            ring.scope, self._view = previous, previous_view

    @property
    def scoped_len(self) -> int:
        """Stored transitions in the active :meth:`column_scope` (all of them without one)."""
        return self._ring.scoped_total()

    def sample(self, batch_size: int) -> TorchTransitionBatch:
        """A uniform random batch of transitions (tensors on ``device``, ``indices`` set)."""
        return self.get(self.sample_indices(batch_size))

    def _obs_from(self, prefix: str, idx: torch.Tensor) -> ObsTensor:
        if self._obs_keys is None:
            return self._flat[prefix][idx]
        obs = {key: self._flat[f"{prefix}/{key}"][idx] for key in self._obs_keys}
        return obs if self._view is None else self._view.obs(obs)

    def get(self, indices: torch.Tensor) -> TorchTransitionBatch:
        """The transitions at the given flat indices (a tensor on ``device``)."""
        flat = self._flat
        return TorchTransitionBatch(
            obs=self._obs_from("obs", indices),
            act=flat["act"][indices] if self._view is None else self._view.act(flat["act"][indices]),
            rew=flat["rew"][indices],
            terminated=flat["terminated"][indices],
            truncated=flat["truncated"][indices],
            obs_next=self._obs_from("obs_next", indices),
            indices=indices,
        )

    def rollout(self) -> TensorRolloutBatch:
        """All stored transitions as a time-major (T, E) :class:`TensorRolloutBatch`; views of the
        buffer when every column holds the same steps written from row 0 (the on-policy case)."""
        self._require_data("rollout")
        if self._ring.is_contiguous_from_zero():
            length = int(self._ring.len[0])
            fields = {name: arr[:length] for name, arr in self._arrays.items()}
            valid_TE = torch.ones((length, self.num_columns), dtype=torch.bool, device=self.device)
        else:
            row_np, valid_np = self._ring.rows_TE()
            row_TE = torch.from_numpy(row_np).to(self.device)
            valid_TE = torch.from_numpy(valid_np).to(self.device)
            cols_E = torch.arange(self.num_columns, device=self.device)
            fields = {name: arr[row_TE, cols_E] for name, arr in self._arrays.items()}
            fields["rew"] = torch.where(valid_TE, fields["rew"], torch.zeros_like(fields["rew"]))
        return self._make_rollout(fields, valid_TE)

    def _make_rollout(self, fields: Mapping[str, torch.Tensor], valid_TE: torch.Tensor) -> TensorRolloutBatch:
        terminated, truncated = fields["terminated"], fields["truncated"]
        last_TE = torch.zeros_like(valid_TE)
        lengths = self._ring.len
        has_data = np.flatnonzero(lengths > 0)
        last_rows = torch.from_numpy(lengths[has_data] - 1).to(self.device)
        last_TE[last_rows, torch.from_numpy(has_data).to(self.device)] = True
        boundary = terminated | truncated | last_TE | ~valid_TE

        def obs_of(prefix: str) -> ObsTensor:
            if self._obs_keys is None:
                return fields[prefix]
            return {key: fields[f"{prefix}/{key}"] for key in self._obs_keys}

        return TensorRolloutBatch(
            obs=obs_of("obs"),
            act=fields["act"],
            logp=fields[_LOGP] if self._complete[_LOGP] else None,
            value=fields[_VALUE] if self._complete[_VALUE] else None,
            rew=fields["rew"],
            terminated=terminated & valid_TE,
            truncated=truncated & valid_TE,
            obs_next=obs_of("obs_next"),
            boundary=boundary,
            valid=valid_TE,
            num_valid=len(self),
        )

    # ------------------------------------------------------------------ episode-aware neighbours
    def next_index(self, indices: torch.Tensor) -> torch.Tensor:
        """The index of the following transition of the same episode (tensor ops); an episode's last
        stored transition (or the newest of its column) maps to itself."""
        cols = indices % self.num_columns
        rows = indices // self.num_columns
        newest_E = torch.from_numpy(self._ring.newest_rows_E()).to(self.device)
        stop = self._flat["terminated"][indices] | self._flat["truncated"][indices]
        stop = stop | (rows == newest_E[cols])
        nxt_rows = torch.where(stop, rows, (rows + 1) % self.column_capacity)
        return nxt_rows * self.num_columns + cols

    def nstep_targets(self, indices: torch.Tensor, *, n_step: int, gamma: float) -> TensorNStepTargets:
        """n-step returns, discounts and bootstrap observations (the tensor twin of
        :meth:`tshtrain.data.BaseReplayBuffer.nstep_targets`; the same numbers in float32)."""
        require_positive("TensorReplayBuffer.nstep_targets", "n_step", n_step)
        idx_N = indices
        alive_N = torch.ones(len(indices), dtype=torch.bool, device=self.device)
        returns_N = self._flat["rew"][idx_N].to(torch.float64)
        num_valid_N = torch.ones(len(indices), dtype=torch.float64, device=self.device)
        for k in range(1, n_step):
            nxt_N = self.next_index(idx_N)
            alive_N = alive_N & (nxt_N != idx_N)
            idx_N = torch.where(alive_N, nxt_N, idx_N)
            step_rew = self._flat["rew"][idx_N].to(torch.float64) * float(gamma) ** k
            returns_N = returns_N + torch.where(alive_N, step_rew, torch.zeros_like(step_rew))
            num_valid_N = num_valid_N + alive_N.to(torch.float64)
        discount_N = torch.pow(torch.full_like(num_valid_N, float(gamma)), num_valid_N)
        not_terminal = ~self._flat["terminated"][idx_N]
        return TensorNStepTargets(
            returns=returns_N.to(torch.float32),
            discounts=discount_N.to(torch.float32) * not_terminal,
            obs_next=self._obs_from("obs_next", idx_N),
        )

    def new_indices(self, before: BufferLayout, n_collected: int) -> np.ndarray:
        """Flat indices (host integers) of the transitions written since the layout ``before``, as
        :meth:`tshtrain.data.BaseReplayBuffer.new_indices` (layout arithmetic only, no device sync)."""
        return self._ring.new_indices(before, n_collected)

    def new_transitions(self, before: BufferLayout, n_collected: int) -> TorchTransitionBatch:
        """The transitions of :meth:`new_indices` (copies, on ``device``)."""
        return self.get(torch.from_numpy(self.new_indices(before, n_collected)).to(self.device))

    # ------------------------------------------------------------------ save / load
    def field_arrays(self, *, rows: int | None = None) -> dict[str, np.ndarray]:
        """The storage as numpy arrays by field name (views on the CPU, host copies elsewhere), for
        :func:`tshtrain.data.save_buffer`; with ``rows``, only the first rows of each (only those are
        copied off a device); without the collecting policy's log-probabilities, which a loaded
        buffer does not use."""
        return {
            name: (arr if rows is None else arr[:rows]).detach().cpu().numpy()
            for name, arr in self._arrays.items()
            if name not in _POLICY_FIELDS
        }

    def restore(self, arrays: Mapping[str, np.ndarray], layout: BufferLayout) -> None:
        """Take over arrays (copied to ``device``) and write positions (used by
        :func:`tshtrain.data.load_buffer_into`)."""
        self._arrays = {name: torch.from_numpy(np.asarray(a)).to(self.device) for name, a in arrays.items()}
        self._flat = {k: a.view(self.capacity, *a.shape[2:]) for k, a in self._arrays.items()}
        obs_keys = [k.split("/", 1)[1] for k in self._arrays if k.startswith("obs/")]
        self._obs_keys = tuple(obs_keys) if obs_keys else None
        self._ring.restore(layout)
        self._complete = dict.fromkeys(_POLICY_FIELDS, False)  # an update recomputes them

    def sampler_state(self) -> Any:
        """The sampling generator's state (a CPU uint8 tensor)."""
        return self.rng.get_state()

    def load_sampler_state(self, state: Any) -> None:
        """Restore :meth:`sampler_state`."""
        self.rng.set_state(state)
