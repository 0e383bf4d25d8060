"""Checkpoints that resume a run exactly: what is saved, automatic checkpoints, restoring.

A checkpoint holds everything a resumed run needs to continue as if it had never stopped:

* the algorithm's ``state_dict()``: weights, optimizers, schedules, target networks, normaliser
  statistics, and the states of the generators the algorithm and its policy hold;
* the trainer: counters, best result, done flag, timing, the open epoch's progress and statistics, the
  rolling episode windows, and the logger position (the last step written per scope);
* the collectors: generator, current observations, unfinished-episode returns and lengths, counters,
  and the sub-envs themselves when they can be pickled (in-process ``SyncVectorEnv`` of picklable
  envs); otherwise a resumed run resets those envs (documented: not bitwise exact then);
* replay buffers (optional) with their sampling generator and priorities;
* the global RNG states of Python's ``random``, NumPy's legacy ``np.random`` and torch;
* the state of the trainer's hooks and events (``Trainer.extension_state()``).

Layout and integrity checks: :mod:`tshtrain.trainer.checkpoint_io`.
"""

from __future__ import annotations

import importlib
import io
import random
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.buffer_io import load_buffer_into, save_buffer
from tshtrain.data.collector import Collector
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogScope, RewindableLogger
from tshtrain.trainer.checkpoint_io import (
    CheckpointError,
    CheckpointManifest,
    FileWriter,
    verify_checkpoint_dir,
    write_checkpoint_dir,
)

if TYPE_CHECKING:
    from tshtrain.trainer.base import Trainer

Backend = Literal["torch", "dcp"]
_STATE_FILE = "state.pt"
_DCP_DIR = "state.dcp"


@dataclass(frozen=True, kw_only=True)
class CheckpointParams:
    """Automatic checkpoints (``TrainerParams.checkpoint``)."""

    directory: str | Path
    """where checkpoints go: ``periodic-<epoch>-<env_step>/``, ``best/`` and ``final/``"""
    every_num_epochs: int | None = 1
    """save after every this many epochs (None: not by epoch)"""
    every_num_env_steps: int | None = None
    """save after the training step that crosses every this many env steps (None: not by env steps)"""
    keep_last: int = 3
    """periodic checkpoints kept (older ones are deleted)"""
    save_best: bool = True
    """save ``best/`` after each test step that reaches a new best score"""
    save_on_exit: bool = True
    """save ``final/`` when the run ends: normally, by a stop, by KeyboardInterrupt or by an exception
    (the manifest records which; after an exception the last periodic checkpoint is the safe one)"""
    include_buffers: bool = True
    """save the training replay buffer (large for off-policy runs; needed for an exact resume)"""
    backend: Backend = "torch"
    """``"torch"``: one ``torch.save`` file loaded with ``weights_only=True``; ``"dcp"``:
    ``torch.distributed.checkpoint`` (sharded-ready tensors)"""

    def __post_init__(self) -> None:
        for name in ("every_num_epochs", "every_num_env_steps", "keep_last"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(
                    f"CheckpointParams.{name} must be an int >= 1 or None, got {value!r}."
                )
        if self.every_num_epochs is None and self.every_num_env_steps is None and not self.save_on_exit:
            raise ConfigurationError(
                "CheckpointParams: every_num_epochs and every_num_env_steps are None and save_on_exit is "
                "False, so no checkpoint would ever be written; set one of them."
            )
        if self.backend not in ("torch", "dcp"):
            raise ConfigurationError(
                f"CheckpointParams.backend must be 'torch' or 'dcp', got {self.backend!r}."
            )


# ---------------------------------------------------------------------------- plain-value conversion
def checkpoint_collect_stats(stat: CollectStats) -> dict[str, Any]:
    return {
        "n_collected_steps": stat.n_collected_steps,
        "n_collected_episodes": stat.n_collected_episodes,
        "returns": torch.from_numpy(np.array(stat.returns)),
        "lens": torch.from_numpy(np.array(stat.lens)),
        "collect_time": stat.collect_time,
        "env_info": dict(stat.env_info),
        "env_info_counts": dict(stat.env_info_counts),
    }


def restore_collect_stats(state: Mapping[str, Any]) -> CollectStats:
    return CollectStats(
        n_collected_steps=int(state["n_collected_steps"]),
        n_collected_episodes=int(state["n_collected_episodes"]),
        returns=state["returns"].numpy(),
        lens=state["lens"].numpy(),
        collect_time=float(state["collect_time"]),
        env_info=dict(state["env_info"]),
        env_info_counts=dict(state["env_info_counts"]),
    )


def checkpoint_training_stats(stat: TrainingStats) -> dict[str, Any]:
    cls = type(stat)
    return {
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "fields": {f.name: getattr(stat, f.name) for f in fields(stat)},
    }


def restore_training_stats(state: Mapping[str, Any]) -> TrainingStats:
    module_name, qualname = str(state["class"]).split(":")
    if not module_name.startswith("tshtrain.") and not re.fullmatch(r"[\w.]+", module_name):
        raise CheckpointError(f"checkpoint names an invalid statistics class {state['class']!r}.")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError:
        if not module_name.startswith("tshtrain.algorithm."):
            raise
        # checkpoints written before the algorithms moved into tshtrain.algorithm.algos / .blocks
        target = importlib.import_module("tshtrain.algorithm")
    for part in qualname.split("."):
        target = getattr(target, part)
    if not (isinstance(target, type) and issubclass(target, TrainingStats)):
        raise CheckpointError(f"checkpoint names {state['class']!r}, which is not a TrainingStats class.")
    stat: TrainingStats = target(**state["fields"])
    return stat


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


# ---------------------------------------------------------------------------- trainer state
def _collectors(trainer: Trainer[Any, Any]) -> dict[str, Collector]:
    found: dict[str, Collector] = {}
    training = getattr(trainer.params, "training_collector", None)
    if isinstance(training, Collector):
        found["training"] = training
    if trainer.params.test_collector is not None:
        found["test"] = trainer.params.test_collector
    return found


def _buffers(trainer: Trainer[Any, Any]) -> dict[str, BaseReplayBuffer]:
    found: dict[str, BaseReplayBuffer] = {}
    for name, collector in _collectors(trainer).items():
        if collector.buffer is not None:
            found[name] = collector.buffer
    dataset = getattr(trainer.params, "buffer", None)
    if isinstance(dataset, BaseReplayBuffer):
        found["dataset"] = dataset
    return found


def capture_state(trainer: Trainer[Any, Any]) -> dict[str, Any]:
    """Everything but the buffers' arrays and the env snapshots, as plain values and tensors."""
    state: dict[str, Any] = {
        "algorithm": trainer.algorithm.state_dict(),
        "trainer": trainer.checkpoint_state(),
        "collectors": {name: c.state_dict() for name, c in _collectors(trainer).items()},
        "buffer_rngs": {name: b.rng.bit_generator.state for name, b in _buffers(trainer).items()},
        "rng": global_rng_state(),
    }
    state["extensions"] = trainer.extension_state()
    return state


def _state_writer(state: dict[str, Any], backend: Backend) -> FileWriter:
    def write(path: Path) -> None:
        if backend == "torch":
            torch.save(state, path)
        else:
            _dcp_save(state, path)

    return write


def _buffer_writer(buffer: BaseReplayBuffer) -> FileWriter:
    def write(path: Path) -> None:
        save_buffer(buffer, path)

    return write


def _bytes_writer(data: bytes) -> FileWriter:
    def write(path: Path) -> None:
        path.write_bytes(data)

    return write


def _entries(
    trainer: Trainer[Any, Any], state: dict[str, Any], include_buffers: bool, backend: Backend
) -> dict[str, FileWriter]:
    entries = {_STATE_FILE if backend == "torch" else _DCP_DIR: _state_writer(state, backend)}
    if include_buffers:
        for name, buffer in _buffers(trainer).items():
            if name != "dataset" and buffer.is_allocated:  # the dataset is the user's own file
                entries[f"buffers/{name}"] = _buffer_writer(buffer)
    for name, collector in _collectors(trainer).items():
        snapshot = collector.env_snapshot()
        if snapshot is not None:
            entries[f"envs/{name}.pkl"] = _bytes_writer(snapshot)
    return entries


def save_trainer_checkpoint(
    trainer: Trainer[Any, Any],
    path: str | Path,
    *,
    include_buffers: bool = True,
    backend: Backend = "torch",
    reason: str = "manual",
) -> Path:
    """Write a checkpoint of ``trainer`` to the directory ``path`` (atomically; see the module doc)."""
    state = capture_state(trainer)
    c = trainer.counters
    info = {
        "reason": reason,
        "backend": backend,
        "counters": {
            "epoch": c.epoch,
            "env_step": c.env_step,
            "gradient_step": c.gradient_step,
            "update_step": c.update_step,
        },
        "params": str(trainer.params),
        "algorithm": type(trainer.algorithm).__name__,
        "trainer": type(trainer).__name__,
    }
    return write_checkpoint_dir(Path(path), _entries(trainer, state, include_buffers, backend), info)


def load_trainer_checkpoint(
    trainer: Trainer[Any, Any], path: str | Path, *, load_buffers: bool = True
) -> CheckpointManifest:
    """Restore ``trainer`` (built like the one that saved) from the checkpoint directory ``path``.

    Every file is verified before anything changes. Raises :class:`CheckpointError` for a missing,
    truncated, corrupted or other-version checkpoint, or one saved by another algorithm or trainer.
    """
    manifest = verify_checkpoint_dir(path, skip_prefixes=() if load_buffers else ("buffers/",))
    for key, actual in (("algorithm", type(trainer.algorithm).__name__), ("trainer", type(trainer).__name__)):
        if manifest.info.get(key) != actual:
            raise CheckpointError(
                f"{manifest.path}: saved by {key} {manifest.info.get(key)!r}, this is {actual!r}; build the "
                f"same {key} to resume."
            )
    state = _read_state(manifest)
    trainer.algorithm.load_state_dict(state["algorithm"])
    trainer.load_checkpoint_state(state["trainer"])
    buffers = _buffers(trainer)
    for name, collector in _collectors(trainer).items():
        collector.load_state_dict(state["collectors"][name])
        env_file = manifest.path / "envs" / f"{name}.pkl"
        collector.restore_env_snapshot(env_file.read_bytes() if env_file.exists() else None)
    if load_buffers:
        for name, buffer in buffers.items():
            if (manifest.path / "buffers" / name).is_dir():
                load_buffer_into(buffer, manifest.path / "buffers" / name)
            if name in state["buffer_rngs"]:
                buffer.rng.bit_generator.state = dict(state["buffer_rngs"][name])
    if "extensions" in state:
        trainer.load_extension_state(state["extensions"])
    set_global_rng_state(state["rng"])
    _rewind_logger(trainer)
    return manifest


def load_algorithm_checkpoint(algorithm: Algorithm[Any], path: str | Path) -> CheckpointManifest:
    """Restore only the algorithm (weights, optimizers, policy state) from the checkpoint directory
    ``path``, e.g. to evaluate ``best/``; buffers and env snapshots are neither read nor verified.

    Raises:
        CheckpointError: the checkpoint is missing, truncated, corrupted, of another format version, or
            was saved by another algorithm class.
    """
    manifest = verify_checkpoint_dir(path, skip_prefixes=("buffers/", "envs/"))
    saved_by = manifest.info.get("algorithm")
    if saved_by != type(algorithm).__name__:
        raise CheckpointError(
            f"{manifest.path}: saved by algorithm {saved_by!r}, this is {type(algorithm).__name__!r}; "
            f"build the same algorithm to load it."
        )
    algorithm.load_state_dict(_read_state(manifest)["algorithm"])
    return manifest


def _read_state(manifest: CheckpointManifest) -> dict[str, Any]:
    if manifest.info.get("backend", "torch") == "dcp":
        return _dcp_load(manifest.path / _DCP_DIR)
    file = manifest.path / _STATE_FILE
    try:
        state: dict[str, Any] = torch.load(file, weights_only=True)
    except Exception as exc:  # verified bytes that still do not load: a foreign or broken file
        raise CheckpointError(f"{file}: cannot be loaded ({type(exc).__name__}: {exc}).") from None
    return state


def _rewind_logger(trainer: Trainer[Any, Any]) -> None:
    """Drop what the logger wrote after the checkpoint, so that curves continue without duplicates."""
    logger = trainer.logger
    if isinstance(logger, RewindableLogger):
        positions = trainer.checkpoint_state()["last_logged"]
        logger.discard_after({LogScope(k): v for k, v in positions.items() if v is not None})


# ---------------------------------------------------------------------------- torch.distributed.checkpoint
def _dcp_save(state: dict[str, Any], path: Path) -> None:
    from torch.distributed.checkpoint.filesystem import FileSystemWriter
    from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

    path.mkdir(parents=True, exist_ok=True)
    tensors, other = _split_tensors(state)
    dcp_save(tensors, storage_writer=FileSystemWriter(str(path)))
    buffer = io.BytesIO()
    torch.save(other, buffer)
    (path / "non_tensor.pt").write_bytes(buffer.getvalue())


def _dcp_load(path: Path) -> dict[str, Any]:
    """Read a DCP checkpoint without a template: converted to a temporary torch.save file (the
    public ``dcp_to_torch_save``), then loaded with ``weights_only=True``."""
    import tempfile

    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    try:
        with tempfile.TemporaryDirectory() as tmp:
            dcp_to_torch_save(str(path), Path(tmp) / "state.pt")
            tensors: dict[str, torch.Tensor] = torch.load(Path(tmp) / "state.pt", weights_only=True)
        other: Any = torch.load(path / "non_tensor.pt", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"{path}: cannot be loaded with torch.distributed.checkpoint ({exc})."
        ) from None
    joined: dict[str, Any] = _join_tensors(tensors, other)
    return joined


def _split_tensors(state: Any, prefix: str = "") -> tuple[dict[str, torch.Tensor], Any]:
    """Flatten the tensors of a nested dict to ``{"a/b/c": tensor}``; the rest keeps its shape with
    placeholders where tensors were."""
    tensors: dict[str, torch.Tensor] = {}
    if isinstance(state, torch.Tensor):
        return {prefix: state}, {"__tensor__": prefix}
    if isinstance(state, dict):
        rest: dict[Any, Any] = {}
        for key, value in state.items():
            sub_tensors, sub_rest = _split_tensors(value, f"{prefix}/{key}")
            tensors.update(sub_tensors)
            rest[key] = sub_rest
        return tensors, rest
    if isinstance(state, list | tuple):
        items = [_split_tensors(v, f"{prefix}/{i}") for i, v in enumerate(state)]
        for sub_tensors, _ in items:
            tensors.update(sub_tensors)
        return tensors, type(state)(r for _, r in items)
    return tensors, state


def _join_tensors(tensors: Mapping[str, torch.Tensor], rest: Any) -> Any:
    if isinstance(rest, dict):
        if set(rest) == {"__tensor__"}:
            return tensors[rest["__tensor__"]]
        return {k: _join_tensors(tensors, v) for k, v in rest.items()}
    if isinstance(rest, list | tuple):
        return type(rest)(_join_tensors(tensors, v) for v in rest)
    return rest


# ---------------------------------------------------------------------------- automatic checkpoints
class CheckpointManager:
    """Writes the automatic checkpoints of :class:`CheckpointParams` for a trainer."""

    def __init__(self, params: CheckpointParams):
        self.params = params
        self.directory = Path(params.directory)
        self.env_step_mark = 0

    def periodic(self, trainer: Trainer[Any, Any], *, epoch_closed: bool) -> Path | None:
        """Save a periodic checkpoint if one is due after this training step."""
        p, c = self.params, trainer.counters
        due_epoch = epoch_closed and p.every_num_epochs is not None and c.epoch % p.every_num_epochs == 0
        mark = c.env_step // p.every_num_env_steps if p.every_num_env_steps else 0
        due_steps = p.every_num_env_steps is not None and mark > self.env_step_mark
        if not (due_epoch or due_steps):
            return None
        self.env_step_mark = mark
        path = save_trainer_checkpoint(
            trainer,
            self.directory / f"periodic-{c.epoch:06d}-{c.env_step:012d}",
            include_buffers=p.include_buffers,
            backend=p.backend,
            reason="periodic",
        )
        self._rotate()
        return path

    def best(self, trainer: Trainer[Any, Any]) -> Path | None:
        """Save ``best/`` (called on a new best score)."""
        if not self.params.save_best:
            return None
        return save_trainer_checkpoint(
            trainer,
            self.directory / "best",
            include_buffers=False,
            backend=self.params.backend,
            reason="best",
        )

    def final(self, trainer: Trainer[Any, Any], reason: str) -> Path | None:
        """Save ``final/`` at the end of a run."""
        if not self.params.save_on_exit:
            return None
        return save_trainer_checkpoint(
            trainer,
            self.directory / "final",
            include_buffers=self.params.include_buffers,
            backend=self.params.backend,
            reason=reason,
        )

    def _rotate(self) -> None:
        periodic = sorted(self.directory.glob("periodic-*"))
        for old in periodic[: -self.params.keep_last]:
            shutil.rmtree(old, ignore_errors=True)

    def latest(self) -> Path | None:
        """The newest complete periodic checkpoint (hidden temporary directories are ignored)."""
        periodic = sorted(p for p in self.directory.glob("periodic-*") if (p / "manifest.json").exists())
        return periodic[-1] if periodic else None
