"""File helpers shared by the file-based writers: a checked log directory and atomic rewrites."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tshtrain.errors import ConfigurationError


def prepare_log_dir(log_dir: str | os.PathLike[str], owner: str) -> Path:
    """Create ``log_dir`` if needed and check that files can be written in it.

    Raises:
        ConfigurationError: the directory cannot be created or written (the message names it).
    """
    path = Path(log_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-", delete=True):
            pass
    except OSError as error:
        raise ConfigurationError(
            f"{owner}: cannot write to the log directory {str(path)!r} ({error}); pass a writable log_dir."
        ) from error
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by a file holding ``data``: readers see the old or the new file, never a mix.

    The data go to a temporary file in the same directory, are flushed to disk, and the temporary file
    is renamed over ``path``.
    """
    # the temporary name must not look like a log file (TensorBoard reads every "*tfevents*" file)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tshtrain-rewrite-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
