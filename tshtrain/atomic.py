"""Atomic writes: a file or a directory is replaced whole or not at all, also when the process is killed.

The one place that knows how tshtrain writes safely and what an interrupted write leaves behind:

* :func:`atomic_write_bytes` writes a file: the data go to a hidden ``.tshtrain-rewrite-*.tmp`` file in
  the same directory, are fsync'ed, and the file is renamed over the target.
* :func:`atomic_directory` writes a directory (checkpoints, saved buffers): the caller fills a hidden
  ``.NAME.tmp-PID`` directory next to the target ``NAME``; when the ``with`` block ends without an
  exception every file and directory in it is fsync'ed and it is renamed into place. An existing
  ``NAME`` is first renamed to ``.NAME.old-PID`` and removed only once the new one is in place (put back
  if that rename fails). An exception in the block removes the temporary directory and leaves
  ``NAME`` as it was.
* :func:`probe_writable` checks that a directory takes files, with a ``.write-check-*`` file.
* :func:`remove_interrupted_writes` removes what a killed process left of these writes (used when a
  run directory is opened again, see :mod:`tshtrain.rundir`): the ``.NAME.tmp-PID`` directories and the
  temporary files; a ``.NAME.old-PID`` directory is put back as ``NAME`` if the write that was replacing
  it died before the new ``NAME`` was in place, and removed otherwise.

Readers therefore see the old or the complete new version, never half of one. Standard library only.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

_FILE_PREFIX, _FILE_SUFFIX = ".tshtrain-rewrite-", ".tmp"
"""the temporary file of :func:`atomic_write_bytes`; it must not look like a log file (TensorBoard
reads every ``*tfevents*`` file)"""
_PROBE_PREFIX = ".write-check-"
"""the probe file of :func:`probe_writable`"""
_TEMP_DIR = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-\d+$")
"""``.NAME.tmp-PID`` / ``.NAME.old-PID`` of :func:`atomic_directory`"""
_TEMP_FILE = re.compile(
    rf"^({re.escape(_FILE_PREFIX)}.*{re.escape(_FILE_SUFFIX)}|{re.escape(_PROBE_PREFIX)}.*)$"
)
"""temporary files of :func:`atomic_write_bytes` and :func:`probe_writable`"""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by a file holding ``data``: readers see the old or the new file, never a mix.

    The data go to a temporary file in the same directory, are flushed to disk, and the temporary file
    is renamed over ``path``. The file gets the permissions ``open(path, "w")`` would give it: those of
    the file it replaces, else ``0o666`` less the process's umask (``-rw-r--r--`` under the usual
    umask 022; ``tempfile.mkstemp`` would make it ``-rw-------``).
    """
    fd, tmp_name = _create_temp_file(path.parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            _keep_mode_of(path, tmp.fileno())
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _create_temp_file(directory: Path) -> tuple[int, str]:
    """Create a new, empty temporary file of :func:`atomic_write_bytes` in ``directory``: its file
    descriptor and name. Created with mode ``0o666``, which the kernel reduces by the umask as for
    any new file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        name = str(directory / f"{_FILE_PREFIX}{secrets.token_hex(8)}{_FILE_SUFFIX}")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory}: no free temporary file name after 100 tries")


def _keep_mode_of(path: Path, fd: int) -> None:
    """Give the file ``fd`` the permission bits of the regular file ``path``, if there is one."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))


@contextmanager
def atomic_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Write the directory ``target`` atomically: yields an empty temporary directory to fill.

    When the ``with`` block ends normally the temporary directory is fsync'ed (every file and directory
    in it) and renamed to ``target``, replacing an existing ``target`` only then; the parent directory
    is fsync'ed too. When the block raises, the temporary directory is removed and ``target`` is left
    as it was. Parent directories of ``target`` are created.

    Example::

        with atomic_directory(path) as tmp:
            (tmp / "manifest.json").write_text(text)
    """
    target = Path(target)
    tmp = _temp_dir(target, "tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left over by a crashed write of this process id
    tmp.mkdir(parents=True)
    try:
        yield tmp
        fsync_tree(tmp)
        _replace_dir(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def fsync_tree(root: Path) -> None:
    """Flush every file and directory under ``root`` (and ``root`` itself) to disk."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            with open(Path(dirpath) / name, "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(Path(dirpath))


def probe_writable(directory: Path) -> None:
    """Create and remove a probe file in ``directory``; raises ``OSError`` if it cannot be written."""
    with tempfile.NamedTemporaryFile(dir=directory, prefix=_PROBE_PREFIX, delete=True):
        pass


def remove_interrupted_writes(root: Path) -> list[Path]:
    """Remove (or put back, see the module docstring) what interrupted atomic writes left under
    ``root``; symbolic links are not followed. Returns the paths removed or restored."""
    done: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in list(dirnames):
            match = _TEMP_DIR.match(name)
            if match is None:
                continue
            dirnames.remove(name)  # do not descend into it
            target = here / match["name"]
            if match["kind"] == "old" and not os.path.lexists(target):
                (here / name).rename(target)  # the replacement died before the new one was in place
            else:
                remove_entry(here / name)
            done.append(here / name)
        for name in filenames:
            if _TEMP_FILE.match(name) or _TEMP_DIR.match(name):
                (here / name).unlink(missing_ok=True)
                done.append(here / name)
    return done


def remove_entry(entry: Path) -> None:
    """Remove the file, link or directory tree ``entry`` (a link is removed, never followed)."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink(missing_ok=True)


def _temp_dir(target: Path, kind: Literal["tmp", "old"]) -> Path:
    """``.NAME.tmp-PID`` / ``.NAME.old-PID`` next to ``target`` (matched by ``_TEMP_DIR``)."""
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}")


def _replace_dir(tmp: Path, target: Path) -> None:
    """Move the finished ``tmp`` to ``target``, replacing an existing ``target`` only on success."""
    if not target.exists():
        tmp.rename(target)
        return
    old = _temp_dir(target, "old")
    shutil.rmtree(old, ignore_errors=True)  # left over by a crashed write of this process id
    target.rename(old)
    try:
        tmp.rename(target)
    except BaseException:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "atomic_directory",
    "atomic_write_bytes",
    "fsync_tree",
    "probe_writable",
    "remove_entry",
    "remove_interrupted_writes",
]
