"""Provenance: recognise the files this user's tshtrain wrote, by an HMAC keyed with a per-user secret.

A checkpoint's manifest lists the size and SHA-256 of every file it holds; its signature
(``manifest.sig``, see :func:`signature_text`) is an HMAC-SHA256 over the manifest's bytes with the
user's **signing key**. A checkpoint whose signature verifies with this user's key was written by this
user (or by someone holding the key), so what only pickles can hold (the envs' snapshots) is restored
from it without ``trusted=True``. A checkpoint that is unsigned, signed with another key, or changed
since it was signed is a stranger's file: nothing from it is unpickled. The hashes alone prove
integrity, never origin: anyone can rewrite a manifest, only the key holder can sign one.

The key is 32 random bytes (:mod:`secrets`), in this order:

* ``TSHTRAIN_SIGNING_KEY`` (hex, at least 16 bytes; empty counts as unset): for clusters, where every
  node must verify every rank's files; set the same value on every node;
* the key file :func:`key_path` (``$XDG_CONFIG_HOME/tshtrain/signing.key``, by default
  ``~/.config/tshtrain/signing.key``), 64 hex digits, created with mode ``0600`` the first time a
  checkpoint is written. A key file that is not a regular file owned by this user with no group or
  other permissions is not used (loads are then untrusted; the message says why and how to fix it).

Standard library only (layer 0).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

KEY_ENV = "TSHTRAIN_SIGNING_KEY"
"""environment variable that holds the key (hex); overrides the key file"""
KEY_BYTES = 32
"""size of a new key"""
MIN_ENV_KEY_BYTES = 16
"""the shortest key accepted from ``TSHTRAIN_SIGNING_KEY``"""
ALGORITHM = "hmac-sha256"
_MAX_KEY_FILE_BYTES = 256
_MAX_SIGNATURE_BYTES = 4096
_warned: set[str] = set()
"""problems of the key already reported on a write (once per process each)"""


def key_path() -> Path:
    """Where the key file lives, read from the environment now: ``$XDG_CONFIG_HOME/tshtrain/signing.key``,
    or ``~/.config/tshtrain/signing.key`` when ``XDG_CONFIG_HOME`` is unset, empty or relative."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "tshtrain" / "signing.key"


@dataclass(frozen=True)
class SigningKey:
    """A usable key and where it came from."""

    secret: bytes = field(repr=False)
    source: str
    """``TSHTRAIN_SIGNING_KEY`` or the key file's path"""

    @property
    def key_id(self) -> str:
        """A short public name of the key (a hash of it; reveals nothing of the secret)."""
        return hashlib.sha256(b"tshtrain signing key id\n" + self.secret).hexdigest()[:12]

    def sign(self, data: bytes, purpose: str) -> str:
        """The hex HMAC-SHA256 of ``data``, separated by ``purpose`` from other uses of the key."""
        return hmac.new(self.secret, f"tshtrain {purpose}\n".encode() + data, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class KeyLookup:
    """The key, or why there is none to use."""

    key: SigningKey | None
    problem: str = ""
    """empty when ``key`` is set; else one sentence that says why and how to fix it"""


@dataclass(frozen=True)
class Provenance:
    """Whether a signed file was written with this user's key."""

    own: bool
    """the signature verifies with this user's key"""
    reason: str
    """why (or why not), one clause for messages"""


def read_key() -> KeyLookup:
    """The key to verify with: ``TSHTRAIN_SIGNING_KEY``, else the key file if it is safe to use.
    Never creates anything."""
    if os.environ.get(KEY_ENV):
        return _env_key(os.environ[KEY_ENV])
    path = key_path()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return KeyLookup(None, f"there is no signing key yet ({path}; written with the first checkpoint)")
    except OSError as error:
        return KeyLookup(None, f"the signing key {path} cannot be opened ({error.strerror})")
    with os.fdopen(fd, "rb") as handle:
        problem = _unsafe(os.fstat(handle.fileno()), path)
        raw = handle.read(_MAX_KEY_FILE_BYTES + 1) if not problem else b""
    if problem:
        return KeyLookup(None, problem)
    try:
        secret = bytes.fromhex(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) != KEY_BYTES:
        return KeyLookup(
            None,
            f"the signing key {path} is not {2 * KEY_BYTES} hex digits; remove it (a new one is made with "
            f"the next checkpoint, and the checkpoints signed with the old one are no longer recognised)",
        )
    return KeyLookup(SigningKey(secret, str(path)))


def write_key() -> KeyLookup:
    """The key to sign with: as :func:`read_key`, but a missing key file is created first (mode 0600,
    atomically: another process creating it at the same moment gets the same key)."""
    if os.environ.get(KEY_ENV) or key_path().exists() or key_path().is_symlink():
        return read_key()
    path = key_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _create_key_file(path)
    except OSError as error:
        return KeyLookup(None, f"the signing key {path} cannot be created ({error})")
    return read_key()


def _create_key_file(path: Path) -> None:
    """Write a new key to a private temporary file, then link it to ``path``: ``path`` appears complete
    or not at all, and an existing ``path`` (made meanwhile by another process) is kept."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES).hex().encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _env_key(text: str) -> KeyLookup:
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        secret = b""
    if len(secret) < MIN_ENV_KEY_BYTES:
        return KeyLookup(
            None,
            f"{KEY_ENV} is set but is not a hex string of at least {2 * MIN_ENV_KEY_BYTES} digits "
            f"(e.g. the content of {key_path()}, or the output of "
            f"`python -c 'import secrets; print(secrets.token_hex(32))'`)",
        )
    return KeyLookup(SigningKey(secret, KEY_ENV))


def _unsafe(st: os.stat_result, path: Path) -> str:
    """Why the opened key file must not be used ("" if it may)."""
    if not stat.S_ISREG(st.st_mode):
        return f"the signing key {path} is not a regular file; remove it"
    if st.st_uid != os.getuid():
        return (
            f"the signing key {path} belongs to user id {st.st_uid}, not to you ({os.getuid()}), so it is "
            f"not used; remove it (a new key is made with the next checkpoint)"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        return (
            f"the signing key {path} is readable or writable by others (mode {mode:04o}), so it is not used; "
            f"fix it with: chmod 600 {path}"
        )
    return ""


# ---------------------------------------------------------------------------- signatures
def signature_text(data: bytes, purpose: str) -> str | None:
    """The signature file's text for ``data`` (a small JSON object), or None when no key can be used
    (said once per process on the ``tshtrain.signing`` logger: the files are then written unsigned)."""
    lookup = write_key()
    if lookup.key is None:
        if lookup.problem not in _warned:
            _warned.add(lookup.problem)
            log.warning(
                "tshtrain writes checkpoints unsigned: %s; a resume of them restores no pickled env "
                "snapshots without --trust (trusted=True).",
                lookup.problem,
            )
        return None
    key = lookup.key
    record = {"algorithm": ALGORITHM, "key_id": key.key_id, "signature": key.sign(data, purpose)}
    return json.dumps(record) + "\n"


def check_signature(data: bytes, signature: bytes | None, purpose: str) -> Provenance:
    """Whether ``signature`` (the signature file's bytes, None if there is none) signs ``data`` with
    this user's key."""
    if signature is None:
        return Provenance(False, "it is not signed (written by another tool or an older tshtrain)")
    try:
        record = json.loads(signature[:_MAX_SIGNATURE_BYTES].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        record = None
    if not isinstance(record, dict) or record.get("algorithm") != ALGORITHM or "signature" not in record:
        return Provenance(False, "its signature file is not one tshtrain writes")
    mac, key_id = str(record["signature"]), str(record.get("key_id", "?"))[:40]
    lookup = read_key()
    if lookup.key is None:
        return Provenance(False, f"its signature cannot be checked: {lookup.problem}")
    key = lookup.key
    if hmac.compare_digest(mac.encode(), key.sign(data, purpose).encode()):
        return Provenance(True, f"signed with your key ({key.source})")
    if key_id != key.key_id:
        why = f"signed with another key (key id {key_id}; yours, from {key.source}, is {key.key_id})"
    else:
        why = "changed since it was signed (its signature does not match its manifest)"
    return Provenance(False, f"it is not your own: {why}")


__all__ = [
    "KEY_ENV",
    "KeyLookup",
    "Provenance",
    "SigningKey",
    "check_signature",
    "key_path",
    "read_key",
    "signature_text",
    "write_key",
]
