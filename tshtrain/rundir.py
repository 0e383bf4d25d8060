"""Run directories: the directory a ``tshtrain train`` run writes into, claimed for the life of the run.

A run directory is recognised by its **marker** ``.tshtrain-run`` (JSON: format name and version), the
first file a new run writes. While a process trains there it holds an **exclusive lock**
(``fcntl.flock`` on ``.tshtrain-lock``); the operating system releases it when the process ends, also
when it is killed, so a stale lock never blocks a later run. Hence:

* a new run starts only in a new or empty directory; one that holds a run is refused (resume it
  instead), and a non-empty directory without the marker (foreign content) is refused;
* ``--resume`` only opens a directory with a valid marker;
* two processes never train in one directory at once: the second is refused with a lock message;
* when a run (re)starts, the leftovers of writes that a killed process left half done are removed with
  :func:`tshtrain.atomic.remove_interrupted_writes` (the hidden temporary directories and files of the
  atomic writers; a replaced directory whose replacement died half way is put back).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path
from types import TracebackType
from typing import final

from tshtrain.atomic import remove_entry, remove_interrupted_writes
from tshtrain.errors import RunDirectoryError

RUN_MARKER = ".tshtrain-run"
"""the marker file of a run directory"""
LOCK_FILE = ".tshtrain-lock"
"""the file whose ``flock`` a training process holds"""
RUN_FORMAT = "tshtrain-run"
RUN_FORMAT_VERSION = 1
_MAX_MARKER_BYTES = 4096


@final
class RunDirectory:
    """A claimed run directory: holds the lock until :meth:`release` (or the end of a ``with`` block)."""

    def __init__(self, path: Path, lock_fd: int, *, created: bool):
        self.path = path
        self._lock_fd: int | None = lock_fd
        self._created = created

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> RunDirectory:
        """Claim a new or empty directory for a new run: lock it and write the marker.

        Raises:
            RunDirectoryError: ``path`` holds a run (or one is running there) or other content.
        """
        path = Path(path)
        _check_fresh(path)  # before anything is created, so that a refused directory stays untouched
        created = not path.exists()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RunDirectoryError(f"{path}: cannot create the output directory ({error}).") from None
        claimed = cls(path, _lock(path), created=created)
        try:
            _check_fresh(path)  # again under the lock: another process may have written meanwhile
        except BaseException:
            claimed.release()  # what is there now is not ours: touch nothing
            raise
        try:
            _write_marker(path)
        except BaseException:
            claimed.abandon()
            raise
        return claimed

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str]) -> tuple[RunDirectory, list[Path]]:
        """Claim the run directory ``path`` to continue its run: check the marker, lock it, and remove
        the leftovers of interrupted writes. Returns the directory and what was cleaned up.

        Raises:
            RunDirectoryError: no valid marker, or another process runs there.
        """
        path = Path(path)
        read_marker(path)
        claimed = cls(path, _lock(path), created=False)
        try:
            cleaned = remove_interrupted_writes(path)
        except BaseException:
            claimed.release()
            raise
        return claimed, cleaned

    def release(self) -> None:
        """Release the lock (idempotent). The files stay."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the only descriptor releases the flock
            self._lock_fd = None

    def abandon(self) -> None:
        """Undo :meth:`create` after a failure before training started: remove what the run wrote
        (the directory was empty when claimed) and the directory itself if :meth:`create` made it."""
        try:
            for entry in list(self.path.iterdir()):
                if entry.name != LOCK_FILE:
                    remove_entry(entry)
            if self._created:
                (self.path / LOCK_FILE).unlink(missing_ok=True)
                self.path.rmdir()
        except OSError:
            pass  # best effort: the original error is the one to report
        finally:
            self.release()

    def __enter__(self) -> RunDirectory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def read_marker(path: Path) -> dict[str, object]:
    """The parsed marker of the run directory ``path``.

    Raises:
        RunDirectoryError: no marker, or not one this tshtrain reads.
    """
    marker = path / RUN_MARKER
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(_MAX_MARKER_BYTES + 1)
    except FileNotFoundError:
        kind = "a directory" if path.is_dir() else "no directory"
        raise RunDirectoryError(
            f"{path}: {kind} without the run marker {RUN_MARKER}, so not a run directory of `tshtrain "
            f"train`; give the output directory of a run."
        ) from None
    except OSError as error:
        raise RunDirectoryError(f"{marker}: cannot read the run marker ({error.strerror}).") from None
    try:
        data = json.loads(raw.decode("utf-8")) if len(raw) <= _MAX_MARKER_BYTES else None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        data = None
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        raise RunDirectoryError(f"{marker}: not a tshtrain run marker.")
    if data.get("version") != RUN_FORMAT_VERSION:
        raise RunDirectoryError(
            f"{marker}: run directory format version {data.get('version')!r}; this tshtrain reads "
            f"version {RUN_FORMAT_VERSION}."
        )
    return data


def _check_fresh(path: Path) -> None:
    """Raise unless ``path`` does not exist or is an empty directory (a lock file aside)."""
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        raise RunDirectoryError(f"{path}: not a directory; choose another --output-dir.")
    entries = sorted(entry.name for entry in path.iterdir() if entry.name != LOCK_FILE)
    if RUN_MARKER in entries:
        _refuse_if_locked(path)
        raise RunDirectoryError(
            f"{path} holds a run already ({RUN_MARKER}); continue it with `tshtrain train --resume "
            f"{path}` or choose another --output-dir."
        )
    if entries:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise RunDirectoryError(
            f"{path} is not empty ({shown}) and is not a tshtrain run directory (no {RUN_MARKER}); a new "
            f"run starts only in a new or empty directory: choose another --output-dir."
        )


def _lock(path: Path) -> int:
    """Take the run lock of ``path``; its file descriptor."""
    lock = path / LOCK_FILE
    try:
        # no O_TRUNC and no writing: a planted lock file (even a link to another file) stays unchanged
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise RunDirectoryError(f"{lock}: cannot open the run lock ({error.strerror}).") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise RunDirectoryError(_locked_message(path)) from None
        raise RunDirectoryError(f"{lock}: cannot lock ({error.strerror}).") from None
    return fd


def _refuse_if_locked(path: Path) -> None:
    """Raise the lock message if a process holds the lock of ``path`` (probes without creating it)."""
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # no lock file: nobody runs there
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise RunDirectoryError(_locked_message(path)) from None
    finally:
        os.close(fd)


def _locked_message(path: Path) -> str:
    return (
        f"{path} is locked by another tshtrain process training there ({LOCK_FILE}); wait for it to "
        f"end or choose another --output-dir. (A killed process releases the lock by itself.)"
    )


def _write_marker(path: Path) -> None:
    data = {"format": RUN_FORMAT, "version": RUN_FORMAT_VERSION, "created": time.time()}
    fd = os.open(path / RUN_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


__all__ = [
    "LOCK_FILE",
    "RUN_MARKER",
    "RunDirectory",
    "read_marker",
]
