"""The on-disk checkpoint format: a directory of files plus a manifest, written atomically.

A checkpoint directory holds

* ``manifest.json``: format name and version, creation time, counters, the params as text, and for
  every other file its size and SHA-256;
* ``state.pt``: algorithm, trainer, collector and RNG state (``torch.save``; loaded with
  ``weights_only=True``), or ``state.dcp/`` with the ``torch.distributed.checkpoint`` backend;
* ``buffers/<name>/``: replay buffers in the streaming buffer format (optional);
* ``envs/<name>.pkl``: pickled sub-environments, where the env allows it (optional; trusted input);
* ``manifest.sig``: the manifest's signature with this user's key (:mod:`tshtrain.signing`), when
  there is a usable key. It covers every file, through the hashes the manifest lists.

Writing goes through :func:`tshtrain.atomic.atomic_directory`: a hidden temporary directory next to
the target, every file fsync'ed, the manifest and its signature written last, the directory renamed into
place. A reader checks the manifest, the version, and every file's size and hash *before* it loads
anything, so a truncated, corrupted or foreign checkpoint raises :class:`~tshtrain.errors.CheckpointError`
naming the file and the problem and never loads half a state. The manifest's signature is checked
against the very bytes that are parsed; :attr:`CheckpointManifest.provenance` says whether the
checkpoint is the user's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tshtrain.atomic import atomic_directory
from tshtrain.errors import CheckpointError
from tshtrain.signing import Provenance, check_signature, signature_text

CHECKPOINT_FORMAT = "tshtrain-checkpoint"
CHECKPOINT_FORMAT_VERSION = 2
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
"""the manifest's signature (not listed in the manifest)"""
_SIGNED = "checkpoint manifest"
"""what the signature's HMAC is separated as (see :meth:`tshtrain.signing.SigningKey.sign`)"""
_MAX_SIGNATURE_BYTES = 4096


FileWriter = Callable[[Path], None]
"""Writes one entry (a file or a directory) at the given path."""


@dataclass(frozen=True, kw_only=True)
class CheckpointManifest:
    """The parsed manifest of a checkpoint directory."""

    path: Path
    """the checkpoint directory"""
    version: int
    """format version"""
    created: float
    """creation time (seconds since the epoch)"""
    info: dict[str, Any]
    """counters, params text, backend ... (see ``Trainer.save_checkpoint``)"""
    files: dict[str, dict[str, Any]]
    """relative path -> {"size": int, "sha256": str}"""
    provenance: Provenance
    """whether the manifest is signed with this user's key (its files are verified separately)"""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _files_of(root: Path) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            files[rel] = {"size": full.stat().st_size, "sha256": _sha256(full)}
    return files


def write_checkpoint_dir(target: Path, entries: Mapping[str, FileWriter], info: Mapping[str, Any]) -> Path:
    """Write ``entries`` (relative name -> writer) and a manifest atomically to the directory ``target``.

    An existing directory at ``target`` is replaced only once the new one is complete.
    """
    with atomic_directory(target) as tmp:
        for name, write in entries.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            write(tmp / name)
        manifest = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_FORMAT_VERSION,
            "created": time.time(),
            "info": dict(info),
            "files": _files_of(tmp),
        }
        data = json.dumps(manifest, indent=1, default=str).encode()
        (tmp / MANIFEST).write_bytes(data)
        signature = signature_text(data, _SIGNED)
        if signature is not None:
            (tmp / SIGNATURE).write_text(signature)
    return Path(target)


def read_manifest(path: str | os.PathLike[str]) -> CheckpointManifest:
    """Parse and check the manifest of the checkpoint directory ``path`` (files not yet verified)."""
    root = Path(path)
    manifest_path = root / MANIFEST
    if not root.is_dir():
        raise CheckpointError(f"{root}: no checkpoint directory there.")
    try:
        data = manifest_path.read_bytes()
        raw = json.loads(data)
    except FileNotFoundError:
        raise CheckpointError(
            f"{manifest_path}: missing; the checkpoint was not completely written (an interrupted save "
            f"leaves only a hidden .tmp directory) or this is not a tshtrain checkpoint."
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{manifest_path}: corrupt manifest ({exc}).") from None
    if not isinstance(raw, dict) or raw.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{manifest_path}: not a tshtrain checkpoint manifest.")
    if raw.get("version") != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(
            f"{manifest_path}: checkpoint format version {raw.get('version')!r}; this tshtrain reads "
            f"version {CHECKPOINT_FORMAT_VERSION}. Load it with the tshtrain version that wrote it."
        )
    return CheckpointManifest(
        path=root,
        version=int(raw["version"]),
        created=float(raw.get("created", 0.0)),
        info=dict(raw.get("info", {})),
        files=dict(raw.get("files", {})),
        provenance=check_signature(data, _read_signature(root / SIGNATURE), _SIGNED),
    )


def _read_signature(path: Path) -> bytes | None:
    """The signature file's first bytes (bounded; a link is not followed), None if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(_MAX_SIGNATURE_BYTES)


def verify_checkpoint_dir(
    path: str | os.PathLike[str], *, skip_prefixes: tuple[str, ...] = ()
) -> CheckpointManifest:
    """Check the manifest and every listed file's size and SHA-256 (except under ``skip_prefixes``)."""
    manifest = read_manifest(path)
    for rel, meta in manifest.files.items():
        if rel.startswith(skip_prefixes):
            continue
        file = manifest.path / rel
        if not file.is_file():
            raise CheckpointError(f"{file}: listed in the manifest but missing.")
        size = file.stat().st_size
        if size != meta["size"]:
            raise CheckpointError(
                f"{file}: {size} bytes, the manifest says {meta['size']} (truncated or replaced)."
            )
        if _sha256(file) != meta["sha256"]:
            raise CheckpointError(f"{file}: content hash differs from the manifest (corrupted).")
    return manifest
