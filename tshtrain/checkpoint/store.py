"""Checkpoints that resume a run exactly: writing and reading them, and the automatic checkpoints.

This module knows a trainer only through the narrow :class:`Checkpointable` contract
(``Trainer._state_view()`` gives one, a
:class:`~tshtrain.checkpoint.trainer_state.TrainerState`). A checkpoint holds
everything a resumed run needs to continue as if it had never stopped:

* ``state.pt``: the trainer's ``state_dict()`` -- the algorithm's state (weights, optimizers, schedules,
  target networks, normaliser statistics, generators), the run state (counters, best result, timing,
  open epoch, episode windows, logger position), the callbacks' state, the collectors' state
  (generator, current observations, unfinished-episode accumulators), the buffers' generators and the
  global RNG states of Python, NumPy and torch;
* ``buffers/<role>/``: replay buffers (optional);
* ``envs/<role>.pkl``: the sub-envs themselves when they can be pickled (in-process ``SyncVectorEnv``);
  otherwise a resumed run resets those envs (documented: not bitwise exact then).

Loading verifies every listed file (size and SHA-256) and refuses files the manifest does not list,
then checks the state against the trainer, and only then changes anything (validate, then apply).
What only pickles can hold (env snapshots, ``"dcp"`` metadata) is read from the user's own checkpoints,
those whose manifest is signed with the user's key (:mod:`tshtrain.signing`), or with ``trusted=True``.
Layout and integrity checks: :mod:`tshtrain.checkpoint.files`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import torch

from tshtrain.algorithm.base import Algorithm
from tshtrain.checkpoint.files import (
    MANIFEST,
    SIGNATURE,
    STATE_FILE,
    CheckpointManifest,
    FileWriter,
    open_checkpoint_file,
    read_manifest,
    verify_checkpoint_dir,
    write_checkpoint_dir,
)
from tshtrain.checkpoint.params import Backend, CheckpointParams
from tshtrain.checkpoint.state_check import check_algorithm_state
from tshtrain.counters import Counters
from tshtrain.data.buffer import SavableBuffer
from tshtrain.data.buffer_io import load_buffer_into, save_buffer
from tshtrain.data.buffer_io import read_manifest as read_buffer_manifest
from tshtrain.data.collector_base import EnvSnapshot, EnvSnapshotFormat
from tshtrain.errors import CheckpointError, short_repr

log = logging.getLogger(__name__)

_STATE_FILE = STATE_FILE
_SNAPSHOT_SUFFIXES: dict[EnvSnapshotFormat, str] = {"pickle": ".pkl", "torch": ".pt"}
"""file suffix of an env snapshot in ``envs/`` by its format"""
_DCP_DIR = "state.dcp"


class Checkpointable(Protocol):
    """What this module needs of a trainer."""

    def describe(self) -> dict[str, Any]:
        """Plain values for the manifest: ``algorithm`` and ``trainer`` class names, ``counters``, ..."""
        ...

    def counters(self) -> Counters:
        """The run's counters now (names of periodic checkpoints, due checks)."""
        ...

    def buffers(self) -> Mapping[str, SavableBuffer]:
        """The buffers whose arrays a checkpoint may hold, by role."""
        ...

    def env_snapshots(self) -> Mapping[str, EnvSnapshot]:
        """The envs by collector role, where they can be saved."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything else, as plain values and tensors (``torch.load(weights_only=True)``-loadable)."""
        ...

    def check_state_dict(self, state: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` if ``state`` does not fit; change nothing."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Apply a checked ``state`` (transactional)."""
        ...

    def restore_envs(self, snapshots: Mapping[str, EnvSnapshot | None]) -> None:
        """Put the envs back (None, or a snapshot in another format than the collector's: reset them)."""
        ...

    def rewind_logger(self) -> None:
        """Drop the logger's records past the restored point."""
        ...


# ---------------------------------------------------------------------------- writing
def _entries(
    target: Checkpointable, state: dict[str, Any], include_buffers: bool, backend: Backend
) -> dict[str, FileWriter]:
    def write_state(path: Path) -> None:
        if backend == "torch":
            torch.save(state, path)
        else:
            _dcp_save(state, path)

    entries: dict[str, FileWriter] = {_STATE_FILE if backend == "torch" else _DCP_DIR: write_state}
    if include_buffers:
        for name, buffer in target.buffers().items():
            if buffer.is_allocated:
                entries[f"buffers/{name}"] = _buffer_writer(buffer)
    for name, snapshot in target.env_snapshots().items():
        entries[f"envs/{name}{_SNAPSHOT_SUFFIXES[snapshot.format]}"] = _bytes_writer(snapshot.data)
    return entries


def _buffer_writer(buffer: SavableBuffer) -> FileWriter:
    def write(path: Path) -> None:
        save_buffer(buffer, path)

    return write


def _bytes_writer(data: bytes) -> FileWriter:
    def write(path: Path) -> None:
        path.write_bytes(data)

    return write


def save_checkpoint(
    target: Checkpointable,
    path: str | Path,
    *,
    include_buffers: bool = True,
    backend: Backend = "torch",
    reason: str = "manual",
) -> Path:
    """Write a checkpoint of ``target`` to the directory ``path`` (atomically; see the module doc)."""
    state = target.state_dict()
    info = {"reason": reason, "backend": backend, **target.describe()}
    return write_checkpoint_dir(Path(path), _entries(target, state, include_buffers, backend), info)


# ---------------------------------------------------------------------------- reading
def _verify(path: str | Path, *, skip_prefixes: tuple[str, ...]) -> CheckpointManifest:
    """Verify the listed files and refuse unlisted ones (nothing unlisted is ever read)."""
    manifest = verify_checkpoint_dir(path, skip_prefixes=skip_prefixes)
    listed = set(manifest.files)
    for file in sorted(manifest.path.rglob("*")):
        rel = file.relative_to(manifest.path).as_posix()
        if (
            file.is_file()
            and rel not in (MANIFEST, SIGNATURE)
            and rel not in listed
            and not rel.startswith(skip_prefixes)
        ):
            raise CheckpointError(
                f"{file}: not listed in the checkpoint's manifest; a checkpoint holds only the files its "
                f"manifest lists (remove the file, or load another checkpoint)."
            )
    return manifest


def _check_saved_by(manifest: CheckpointManifest, expected: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    def shown(key: str, value: Any) -> str:
        if value is None and key in ("world_size", "rank"):
            return "none (one process)"
        return short_repr(value)

    for key in keys:
        if manifest.info.get(key) != expected.get(key):
            raise CheckpointError(
                f"{manifest.path}: saved by {key} {shown(key, manifest.info.get(key))}, this is "
                f"{shown(key, expected.get(key))}; "
                f"build the same {key} to resume"
                + (
                    " (a data-parallel run resumes with the same number of ranks; rank r > 0 reads "
                    "rank<r>/ beside rank 0's checkpoint)."
                    if key in ("world_size", "rank")
                    else "."
                )
            )


def check_saved_world_size(path: str | Path, target: Checkpointable) -> None:
    """Refuse, from rank 0's manifest at ``path``, a checkpoint saved by another number of ranks.

    Every rank of a data-parallel run reads this same file before it looks for its own directory, so
    a resume on another number of ranks fails on every rank with the same cause (not, on a rank the
    old run did not have, with a missing ``rank<r>/`` directory that depends on which rank speaks first).
    """
    _check_saved_by(read_manifest(path), target.describe(), ("world_size",))


def load_checkpoint(
    target: Checkpointable, path: str | Path, *, load_buffers: bool = True, trusted: bool = False
) -> CheckpointManifest:
    """Restore ``target`` (built like the one that saved) from the checkpoint directory ``path``.

    Every file is verified and the state checked against ``target`` before anything changes. The state
    is read with ``weights_only=True`` and buffers as plain arrays. Pickled env snapshots and a
    ``"dcp"`` checkpoint's metadata (a pickle) are read only from the user's own checkpoint (its
    manifest signed with the user's key, :mod:`tshtrain.signing`) or with ``trusted=True``; otherwise
    nothing is unpickled: the envs are reset, with a warning that says why (the resumed run is then
    not bit-exact), and a ``"dcp"`` checkpoint is refused.

    Raises:
        CheckpointError: a missing, truncated, corrupted or other-version checkpoint, one saved by
            another algorithm or trainer, one with files its manifest does not list, an untrusted
            ``"dcp"`` checkpoint, or one that does not fit (e.g. another number of envs); nothing is
            changed then.
    """
    manifest = _verify(path, skip_prefixes=() if load_buffers else ("buffers/",))
    trusted = trusted or manifest.provenance.own  # own: every file just verified against the signed manifest
    _check_saved_by(manifest, target.describe(), ("algorithm", "trainer", "world_size", "rank"))
    state = _read_state(manifest, trusted=trusted)
    try:
        target.check_state_dict(state)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(
            f"{_state_path(manifest)}: does not fit this trainer: {str(error)[:1000]}."
        ) from None
    buffers = _saved_buffers(manifest, target) if load_buffers else {}
    snapshots = _env_snapshots(manifest, state, trusted=trusted)
    try:
        target.load_state_dict(state)
    except (ValueError, KeyError, TypeError, RuntimeError) as error:
        raise CheckpointError(f"{manifest.path}: could not be applied (nothing changed): {error}") from None
    for directory, buffer in buffers.items():  # checked above: only I/O can fail here
        load_buffer_into(buffer, directory)
    target.restore_envs(snapshots)
    target.rewind_logger()
    return manifest


def _saved_buffers(manifest: CheckpointManifest, target: Checkpointable) -> dict[Path, SavableBuffer]:
    """The saved buffers to load, each checked against its live buffer's sizes (nothing loaded yet)."""
    found: dict[Path, SavableBuffer] = {}
    for name, buffer in target.buffers().items():
        directory = manifest.path / "buffers" / name
        if not directory.is_dir():
            continue
        try:
            saved = read_buffer_manifest(directory)
            sizes = (int(saved["column_capacity"]), int(saved["num_columns"]))
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointError(f"{directory}: {error}") from None
        if sizes != (buffer.column_capacity, buffer.num_columns):
            raise CheckpointError(
                f"{directory}: the saved {name} buffer has {sizes[1]} sub-buffers of {sizes[0]} rows, this "
                f"trainer's has {buffer.num_columns} of {buffer.column_capacity}; build it with the saved "
                f"sizes (nothing changed)."
            )
        found[directory] = buffer
    return found


def _env_snapshots(
    manifest: CheckpointManifest, state: Mapping[str, Any], *, trusted: bool
) -> dict[str, EnvSnapshot | None]:
    """The listed env snapshots to restore (missing: reset those envs). ``torch``-format snapshots
    (tensors and plain values, read with ``weights_only=True``) are always restored; pickles only when
    ``trusted`` (by the caller or by the signature), else those envs are reset, with a warning. The
    bytes returned are the bytes hashed here, so a file swapped after the verification is refused."""
    found: dict[str, EnvSnapshot | None] = {}
    skipped = []
    for name in state.get("collectors", {}):
        for fmt, suffix in _SNAPSHOT_SUFFIXES.items():
            rel = f"envs/{name}{suffix}"
            if rel not in manifest.files:
                continue
            if fmt == "pickle" and not trusted:
                skipped.append(name)
                continue
            data = (manifest.path / rel).read_bytes()
            if hashlib.sha256(data).hexdigest() != manifest.files[rel].get("sha256"):
                raise CheckpointError(f"{manifest.path / rel}: changed while the checkpoint was loaded.")
            if fmt == "torch":  # parsed here, before anything is applied: a bad file changes nothing
                try:
                    torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
                except Exception as error:
                    raise CheckpointError(
                        f"{manifest.path / rel}: not a tensor env snapshot (read with weights_only=True; "
                        f"nothing was loaded): {short_repr(str(error))}"
                    ) from None
            found[name] = EnvSnapshot(data, fmt)
    if skipped:
        log.warning(
            "%s: the envs of %s were not restored: %s, and their snapshots are pickles, which are loaded "
            "(unpickling can run code) only from your own signed checkpoints or with trusted=True "
            "(tshtrain: --trust, for a source you trust); they are reset, so the resumed run is not "
            "bit-exact.",
            manifest.path,
            ", ".join(skipped),
            manifest.provenance.reason,
        )
    return found


def load_algorithm_checkpoint(
    algorithm: Algorithm[Any], path: str | Path, *, trusted: bool = False
) -> CheckpointManifest:
    """Restore only the algorithm (weights, optimizers, policy state) from the checkpoint directory
    ``path``, e.g. to evaluate ``best/``; buffers and env snapshots are neither read nor verified.

    Raises:
        CheckpointError: the checkpoint is missing, truncated, corrupted, of another format version,
            was saved by another algorithm class, or is an untrusted ``"dcp"`` checkpoint (see
            :func:`load_checkpoint`); nothing is changed then.
    """
    manifest = _verify(path, skip_prefixes=("buffers/", "envs/"))
    _check_saved_by(manifest, {"algorithm": type(algorithm).__name__}, ("algorithm",))
    state = _algorithm_state(manifest, _read_state(manifest, trusted=trusted or manifest.provenance.own))
    before = copy.deepcopy(algorithm.state_dict())
    try:
        check_algorithm_state(before, state)
    except ValueError as error:
        raise CheckpointError(
            f"{_state_path(manifest)}: does not fit this algorithm: {str(error)[:1000]}."
        ) from None
    try:
        algorithm.load_state_dict(state)
    except (ValueError, KeyError, TypeError, RuntimeError) as error:
        algorithm.load_state_dict(before)
        raise CheckpointError(f"{manifest.path}: could not be applied (nothing changed): {error}") from None
    return manifest


def read_algorithm_state(path: str | Path, *, trusted: bool = False) -> tuple[CheckpointManifest, Any]:
    """The saved algorithm state of the checkpoint directory ``path`` (its ``state_dict()``), read as
    :func:`load_algorithm_checkpoint` reads it (every listed file verified, unlisted files refused,
    ``weights_only=True``), for taking parts of it, such as one learner's policy weights. The manifest
    names the algorithm class that saved it (``manifest.info["algorithm"]``).

    Raises:
        CheckpointError: as :func:`load_algorithm_checkpoint`.
    """
    manifest = _verify(path, skip_prefixes=("buffers/", "envs/"))
    state = _read_state(manifest, trusted=trusted or manifest.provenance.own)
    return manifest, _algorithm_state(manifest, state)


def _state_path(manifest: CheckpointManifest) -> Path:
    """The file (or ``"dcp"`` directory) that holds the state, as named in messages."""
    return manifest.path / (_DCP_DIR if manifest.info.get("backend") == "dcp" else _STATE_FILE)


def _algorithm_state(manifest: CheckpointManifest, state: Mapping[str, Any]) -> Any:
    if "algorithm" not in state:
        raise CheckpointError(
            f"{_state_path(manifest)}: holds no 'algorithm' (its keys: {short_repr(sorted(state), 200)}); "
            f"not a checkpoint of a trainer or algorithm."
        )
    return state["algorithm"]


def _read_state(manifest: CheckpointManifest, *, trusted: bool) -> dict[str, Any]:
    """The saved state (backend checked by the manifest's reader), checked to be a mapping with string
    keys, read with ``weights_only=True`` from the verified file (a link is not followed)."""
    if manifest.info.get("backend", "torch") == "dcp":
        if not trusted:
            raise CheckpointError(
                f"{manifest.path}: a 'dcp' (torch.distributed.checkpoint) checkpoint; reading it unpickles "
                f"its metadata file, which can run code, and {manifest.provenance.reason}. Load it only "
                f"from a source you trust, with trusted=True (tshtrain: --trust)."
            )
        state: Any = _dcp_load(manifest.path / _DCP_DIR)
    else:
        file = manifest.path / _STATE_FILE
        with open(open_checkpoint_file(file), "rb") as handle:
            try:
                state = torch.load(handle, weights_only=True, map_location="cpu")
            except Exception as exc:  # verified bytes that still do not load: a foreign or broken file
                raise CheckpointError(
                    f"{file}: cannot be loaded ({type(exc).__name__}: {short_repr(str(exc), 500)})."
                ) from None
    if not isinstance(state, dict):
        raise CheckpointError(
            f"{_state_path(manifest)}: holds a {type(state).__name__}, not a mapping of the state's parts "
            f"('algorithm', 'run', ...); not a tshtrain checkpoint state."
        )
    if not all(isinstance(key, str) for key in state):
        raise CheckpointError(
            f"{_state_path(manifest)}: the state's keys must be strings, got {short_repr(list(state), 200)}."
        )
    return state


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
            tensors: dict[str, torch.Tensor] = torch.load(
                Path(tmp) / "state.pt", weights_only=True, map_location="cpu"
            )
        other: Any = torch.load(path / "non_tensor.pt", weights_only=True, map_location="cpu")
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


# ---------------------------------------------------------------------------- ranks
def rank_path(path: Path, ranks: Mapping[str, int] | None) -> Path:
    """Where rank ``r`` of a data-parallel run (``ranks``: world_size and rank) keeps the checkpoint that
    rank 0 keeps at ``path``: ``<parent>/rank<r>/<name>``; ``path`` itself on rank 0 or in one process."""
    if not ranks or ranks["rank"] == 0:
        return path
    return path.parent / f"rank{ranks['rank']}" / path.name


def for_rank(params: CheckpointParams, ranks: Mapping[str, int] | None) -> CheckpointParams:
    """The automatic checkpoints of rank ``r > 0``: in ``<directory>/rank<r>``, without ``best/`` (rank 0
    tests); ``params`` themselves on rank 0 or in one process."""
    if not ranks or ranks["rank"] == 0:
        return params
    directory = Path(params.directory) / f"rank{ranks['rank']}"
    return dataclasses.replace(params, directory=str(directory), save_best=False)


# ---------------------------------------------------------------------------- automatic checkpoints
class CheckpointManager:
    """Writes the automatic checkpoints of :class:`CheckpointParams` for a trainer."""

    def __init__(self, params: CheckpointParams):
        self.params = params
        self.directory = Path(params.directory)
        self.env_step_mark = 0

    def periodic(self, target: Checkpointable, *, epoch_closed: bool) -> Path | None:
        """Save a periodic checkpoint if one is due after this training step."""
        p, c = self.params, target.counters()
        due_epoch = epoch_closed and p.every_num_epochs is not None and c.epoch % p.every_num_epochs == 0
        mark = c.env_step // p.every_num_env_steps if p.every_num_env_steps else 0
        due_steps = p.every_num_env_steps is not None and mark > self.env_step_mark
        if not (due_epoch or due_steps):
            return None
        self.env_step_mark = mark
        path = save_checkpoint(
            target,
            self.directory / f"periodic-{c.epoch:06d}-{c.env_step:012d}",
            include_buffers=p.include_buffers,
            backend=p.backend,
            reason="periodic",
        )
        self._rotate()
        return path

    def best(self, target: Checkpointable) -> Path | None:
        """Save ``best/`` (called on a new best score)."""
        if not self.params.save_best:
            return None
        return save_checkpoint(
            target,
            self.directory / "best",
            include_buffers=False,
            backend=self.params.backend,
            reason="best",
        )

    def final(self, target: Checkpointable, reason: str) -> Path | None:
        """Save ``final/`` at the end of a run."""
        if not self.params.save_on_exit:
            return None
        return save_checkpoint(
            target,
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
