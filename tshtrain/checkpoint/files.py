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

Whoever wrote it, a manifest is parsed as untrusted input: it is read only if it is a regular file of at
most :data:`MAX_MANIFEST_BYTES`, its shape is checked (``created`` a finite number, ``info`` and
``files`` mappings, every entry a size and a SHA-256, the backend from an allow-list), and every file it
lists must be a plain relative path inside the checkpoint directory (no ``..``, no ``.``, no absolute
path). A checkpoint holds no symbolic links at all: a link anywhere in the directory is refused before
any file is read, so nothing outside the directory is ever opened through it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from tshtrain.atomic import atomic_directory
from tshtrain.errors import CheckpointError, short_repr
from tshtrain.signing import Provenance, check_signature, signature_text

CHECKPOINT_FORMAT = "tshtrain-checkpoint"
CHECKPOINT_FORMAT_VERSION = 2
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
"""the manifest's signature (not listed in the manifest)"""
_SIGNED = "checkpoint manifest"
"""what the signature's HMAC is separated as (see :meth:`tshtrain.signing.SigningKey.sign`)"""
_MAX_SIGNATURE_BYTES = 4096
MAX_MANIFEST_BYTES = 16 << 20
"""the largest manifest read (a manifest of a real run is a few KiB: counters, params text, hashes)"""
BACKENDS = ("torch", "dcp")
"""the allowed values of the manifest's ``info.backend``"""
STATE_FILE = "state.pt"
"""the state of the ``"torch"`` backend"""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MAX_PATH_CHARS = 4096
_PLAIN_PATH = (
    "a checkpoint lists only plain relative paths inside its directory (no '..', no '.', no empty part, "
    "no absolute path, no backslash)"
)


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
    with os.fdopen(open_checkpoint_file(path), "rb") as fh:
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
    """Parse and check the manifest of the checkpoint directory ``path`` (files not yet verified).

    Raises:
        CheckpointError: one line naming the manifest and what is wrong (see the module docstring).
    """
    root = Path(path)
    manifest_path = root / MANIFEST
    if not root.is_dir():
        raise CheckpointError(f"{root}: no checkpoint directory there.")
    data = _read_manifest_bytes(manifest_path)
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{manifest_path}: corrupt manifest ({short_repr(str(exc), 200)}).") from None
    except RecursionError:
        raise CheckpointError(
            f"{manifest_path}: nested too deeply to be a checkpoint manifest (a real one is 3 levels deep)."
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{manifest_path}: not a tshtrain checkpoint manifest.")
    if raw.get("version") != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(
            f"{manifest_path}: checkpoint format version {short_repr(raw.get('version'))}; this tshtrain "
            f"reads version {CHECKPOINT_FORMAT_VERSION}. Load it with the tshtrain version that wrote it."
        )
    created, info, files = _checked_fields(raw, manifest_path)
    return CheckpointManifest(
        path=root,
        version=CHECKPOINT_FORMAT_VERSION,
        created=created,
        info=info,
        files=files,
        provenance=check_signature(data, _read_signature(root / SIGNATURE), _SIGNED),
    )


def _read_manifest_bytes(manifest_path: Path) -> bytes:
    """The manifest's bytes: a regular file (not a link) of at most :data:`MAX_MANIFEST_BYTES`."""
    try:
        fd = os.open(manifest_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CheckpointError(
            f"{manifest_path}: missing; the checkpoint was not completely written (an interrupted save "
            f"leaves only a hidden .tmp directory) or this is not a tshtrain checkpoint."
        ) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _link_error(manifest_path) from None
        raise CheckpointError(f"{manifest_path}: cannot be read ({error.strerror}).") from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{manifest_path}: not a regular file; a checkpoint manifest is one.")
        if st.st_size > MAX_MANIFEST_BYTES:
            raise CheckpointError(
                f"{manifest_path}: {st.st_size} bytes; a checkpoint manifest has at most "
                f"{MAX_MANIFEST_BYTES >> 20} MiB (refused unread)."
            )
        return handle.read(MAX_MANIFEST_BYTES + 1)[:MAX_MANIFEST_BYTES]


def _checked_fields(
    raw: dict[str, Any], manifest_path: Path
) -> tuple[float, dict[str, Any], dict[str, dict[str, Any]]]:
    """``created``, ``info`` and ``files`` of a parsed manifest, each checked for type and range."""
    created = raw.get("created", 0.0)
    if not _is_number(created) or not math.isfinite(created):
        raise CheckpointError(
            f"{manifest_path}: 'created' must be a finite number (seconds since the epoch), got "
            f"{short_repr(created)}."
        )
    info, files = raw.get("info", {}), raw.get("files", {})
    for key, value in (("info", info), ("files", files)):
        if not isinstance(value, dict):
            raise CheckpointError(
                f"{manifest_path}: {key!r} must be a mapping, got a {type(value).__name__} "
                f"({short_repr(value)})."
            )
    backend = info.get("backend", "torch")
    if backend not in BACKENDS:
        raise CheckpointError(
            f"{manifest_path}: unknown backend {short_repr(backend, 40)}; allowed: 'torch', 'dcp'."
        )
    for rel, meta in files.items():
        _check_entry(manifest_path, rel, meta)
    if backend == "torch" and STATE_FILE not in files:
        raise CheckpointError(
            f"{manifest_path}: lists no {STATE_FILE!r}; a checkpoint of the 'torch' backend holds its state "
            f"there (this one is incomplete or not a tshtrain checkpoint)."
        )
    return float(created), info, files


def _check_entry(manifest_path: Path, rel: Any, meta: Any) -> None:
    """Raise unless ``rel`` is a plain relative path and ``meta`` its size and SHA-256."""
    parts = rel.split("/") if isinstance(rel, str) else []
    if (
        not isinstance(rel, str)
        or not 0 < len(rel) <= _MAX_PATH_CHARS
        or "\x00" in rel
        or "\\" in rel
        or any(part in ("", ".", "..") for part in parts)
    ):
        shown = short_repr(rel, 300)
        raise CheckpointError(f"{manifest_path}: lists the file {shown}; {_PLAIN_PATH}.")
    if not isinstance(meta, dict):
        raise CheckpointError(
            f"{manifest_path}: the entry of {rel!r} must be a mapping with 'size' and 'sha256', got "
            f"{short_repr(meta)}."
        )
    size, sha = meta.get("size"), meta.get("sha256")
    if not _is_int(size) or size < 0:
        raise CheckpointError(
            f"{manifest_path}: {rel!r} has the size {short_repr(size)}; allowed: an int >= 0."
        )
    if not isinstance(sha, str) or not _SHA256.match(sha):
        raise CheckpointError(
            f"{manifest_path}: {rel!r} has the sha256 {short_repr(sha)}; allowed: 64 lowercase hex digits."
        )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _link_error(path: Path) -> CheckpointError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return CheckpointError(
        f"{path}: a symbolic link (to {short_repr(target, 300)}); a checkpoint holds only regular files and "
        f"directories, no links (copy it with the files themselves, e.g. cp -rL), refused."
    )


def open_checkpoint_file(path: Path) -> int:
    """Open a verified checkpoint file for reading without following a link (a descriptor)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _link_error(path) from None
        raise CheckpointError(f"{path}: cannot be read ({error.strerror}).") from None


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
    """Check the manifest, that the directory holds no symbolic link, and every listed file's size and
    SHA-256 (except under ``skip_prefixes``)."""
    manifest = read_manifest(path)
    _refuse_links(manifest.path)
    for rel, meta in manifest.files.items():
        if rel.startswith(skip_prefixes):
            continue
        file = manifest.path / rel
        try:
            st = file.lstat()
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{file}: listed in the manifest but missing (or not a regular file).")
        if st.st_size != meta["size"]:
            raise CheckpointError(
                f"{file}: {st.st_size} bytes, the manifest says {meta['size']} (truncated or replaced)."
            )
        if _sha256(file) != meta["sha256"]:
            raise CheckpointError(f"{file}: content hash differs from the manifest (corrupted).")
    return manifest


def _refuse_links(root: Path) -> None:
    """Raise at the first symbolic link inside ``root`` (``root`` itself, the user's path, may be one)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            entry = Path(dirpath) / name
            if entry.is_symlink():
                raise _link_error(entry)
