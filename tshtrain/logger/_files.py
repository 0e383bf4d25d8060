"""The checked log directory of the file-based writers (their atomic rewrites: :mod:`tshtrain.atomic`)."""

from __future__ import annotations

import os
from pathlib import Path

from tshtrain.atomic import probe_writable
from tshtrain.errors import ConfigurationError


def prepare_log_dir(log_dir: str | os.PathLike[str], owner: str) -> Path:
    """Create ``log_dir`` if needed and check that files can be written in it.

    Raises:
        ConfigurationError: the directory cannot be created or written (the message names it).
    """
    path = Path(log_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe_writable(path)
    except OSError as error:
        raise ConfigurationError(
            f"{owner}: cannot write to the log directory {str(path)!r} ({error}); pass a writable log_dir."
        ) from error
    return path
