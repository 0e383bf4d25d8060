"""A trainer's whole state for checkpoints: :class:`TrainerState`, the trainer's side of the narrow
contract :class:`tshtrain.checkpoint.store.Checkpointable`.

It aggregates the algorithm's ``state_dict()``, the :class:`~tshtrain.trainer.run_state.RunState`, the
callbacks' state, the collectors' state, the buffers' generators, the global RNG states and the
automatic checkpoints' position; the buffers' arrays and the envs are files of their own. A load is
transactional: everything is parsed and checked first, the live objects are changed after, and if
applying still fails halfway, what was applied is put back before the error is raised.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from tshtrain.algorithm.base import Algorithm
from tshtrain.checkpoint.state_check import check_algorithm_state
from tshtrain.checkpoint.store import CheckpointManager
from tshtrain.counters import Counters
from tshtrain.data.collector_base import AnyReplayBuffer, BaseCollector, EnvSnapshot
from tshtrain.errors import short_repr
from tshtrain.logger.base import Logger, LogScope, RewindableLogger


class RunStateLike(Protocol):
    """The run state (``tshtrain.trainer.RunState``), as far as checkpoints go."""

    counters: Counters
    last_logged: dict[LogScope, int | None]

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def check_state_dict(self, state: Mapping[str, Any]) -> None: ...


class HasRunState(Protocol):
    """The trainer, as far as its run state goes."""

    @property
    def state(self) -> RunStateLike: ...


class HasCollectors(Protocol):
    """The step strategy, as far as its collectors and buffers go."""

    def collectors(self) -> dict[str, BaseCollector]: ...

    def buffers(self) -> dict[str, AnyReplayBuffer]: ...


class StatefulCallbacks(Protocol):
    """The trainer's callbacks, as far as their state goes."""

    def state_dict(self) -> dict[str, Any]: ...

    def check_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None: ...

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None: ...


# ---------------------------------------------------------------------------- global RNG
def global_rng_state() -> dict[str, Any]:
    """States of Python's ``random``, NumPy's legacy global generator and torch's CPU generator."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(np.array(keys)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }


def set_global_rng_state(state: Mapping[str, Any]) -> None:
    """Restore :func:`global_rng_state`."""
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    legacy = state["numpy"]
    np.random.set_state(
        (legacy["kind"], legacy["keys"].numpy(), legacy["pos"], legacy["has_gauss"], legacy["cached"])
    )
    torch.set_rng_state(state["torch"])


@dataclass(frozen=True, kw_only=True)
class TrainerState:
    """A view of one trainer's state (see the module docstring); built by ``Trainer._state_view``."""

    algorithm: Algorithm[Any]
    trainer_name: str
    params: object
    """the trainer's params (their text goes into the manifest)"""
    run: HasRunState
    strategy: HasCollectors
    callbacks: StatefulCallbacks
    checkpoints: CheckpointManager | None
    logger: Logger
    ranks: Mapping[str, int] | None = None
    """a data-parallel run's ``world_size`` and ``rank`` (recorded in manifests, checked on load)"""

    # ------------------------------------------------------------------ the Checkpointable contract
    def counters(self) -> Counters:
        """The run's counters now."""
        return self.run.state.counters

    def describe(self) -> dict[str, Any]:
        """What a checkpoint's manifest says of its trainer (checked again on load)."""
        c = self.run.state.counters
        return {
            "counters": {
                "epoch": c.epoch,
                "env_step": c.env_step,
                "gradient_step": c.gradient_step,
                "update_step": c.update_step,
            },
            "params": str(self.params),
            "algorithm": type(self.algorithm).__name__,
            "trainer": self.trainer_name,
            **(self.ranks or {}),
        }

    def buffers(self) -> dict[str, AnyReplayBuffer]:
        """The buffers a checkpoint may hold the arrays of (not the dataset: it is the user's file)."""
        return {name: b for name, b in self.strategy.buffers().items() if name != "dataset"}

    def env_snapshots(self) -> dict[str, EnvSnapshot]:
        """The collectors' envs where they can be saved, each in its collector's format."""
        found: dict[str, EnvSnapshot] = {}
        for name, collector in self.strategy.collectors().items():
            snapshot = collector.env_snapshot()
            if snapshot is not None:
                found[name] = EnvSnapshot(snapshot, collector.env_snapshot_format)
        return found

    def state_dict(self) -> dict[str, Any]:
        """Everything but the buffers' arrays and the env snapshots, as plain values and tensors."""
        return {
            "algorithm": self.algorithm.state_dict(),
            "run": self.run.state.state_dict(),
            "callbacks": self.callbacks.state_dict(),
            "collectors": {name: c.state_dict() for name, c in self.strategy.collectors().items()},
            "buffer_rngs": {name: b.sampler_state() for name, b in self.strategy.buffers().items()},
            "rng": global_rng_state(),
            "env_step_mark": 0 if self.checkpoints is None else self.checkpoints.env_step_mark,
        }

    def check_state_dict(self, state: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming what does not fit this trainer; changes nothing."""
        missing = {"algorithm", "run", "callbacks", "collectors", "buffer_rngs", "rng"} - set(state)
        if missing:
            raise ValueError(f"the state has no {sorted(missing)}")
        check_algorithm_state(self.algorithm.state_dict(), state["algorithm"])
        self.run.state.check_state_dict(state["run"])
        mark = state.get("env_step_mark", 0)
        if isinstance(mark, bool) or not isinstance(mark, int) or mark < 0:
            raise ValueError(f"env_step_mark is {short_repr(mark)}; allowed: an int >= 0")
        self.callbacks.check_state_dict(state["callbacks"])
        collectors = self.strategy.collectors()
        saved = dict(state["collectors"])
        if set(saved) != set(collectors):
            raise ValueError(f"the state has collectors {sorted(saved)}, this trainer {sorted(collectors)}")
        for name, collector in collectors.items():
            num_envs = int(saved[name]["ep_return"].shape[0])
            if num_envs != collector.num_envs:
                raise ValueError(
                    f"the {name} collector was saved with {num_envs} envs, this one has "
                    f"{collector.num_envs}; build it with the same number of envs"
                )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check :meth:`check_state_dict`, then apply; put everything back if applying fails."""
        self.check_state_dict(state)
        before = copy.deepcopy(self.state_dict())
        try:
            self._apply(state)
        except BaseException:
            self._apply(before)
            raise

    def restore_envs(self, snapshots: Mapping[str, EnvSnapshot | None]) -> None:
        """Put the collectors' envs back; a collector without a snapshot, or whose snapshot is in
        another format than its own (the checkpoint is of another kind of env), resets its envs."""
        for name, collector in self.strategy.collectors().items():
            snapshot = snapshots.get(name)
            fits = snapshot is not None and snapshot.format == collector.env_snapshot_format
            collector.restore_env_snapshot(snapshot.data if fits and snapshot is not None else None)

    def rewind_logger(self) -> None:
        """Drop what the logger wrote after the restored point, so that curves continue without
        duplicates."""
        if isinstance(self.logger, RewindableLogger):
            positions = self.run.state.last_logged
            self.logger.discard_after({LogScope(k): v for k, v in positions.items() if v is not None})

    # ------------------------------------------------------------------ internals
    def _apply(self, state: Mapping[str, Any]) -> None:
        self.algorithm.load_state_dict(state["algorithm"])
        self.run.state.load_state_dict(state["run"])
        self.callbacks.load_state_dict(state["callbacks"])
        for name, collector in self.strategy.collectors().items():
            collector.load_state_dict(state["collectors"][name])
        for name, buffer in self.strategy.buffers().items():
            if name in state["buffer_rngs"]:
                buffer.load_sampler_state(state["buffer_rngs"][name])
        if self.checkpoints is not None:
            self.checkpoints.env_step_mark = int(state.get("env_step_mark", 0))
        set_global_rng_state(state["rng"])
