"""How a command reports a failure: one line ``tshtrain <command>: error: ...`` (and, with ``--debug``,
the traceback before it)."""

from __future__ import annotations

import sys
import traceback

EXIT_FAILURE = 1
"""the command failed (bad experiment, unreadable file, failed run)"""
EXIT_USAGE = 2
"""bad command-line usage (argparse uses 2 as well)"""
EXIT_INTERRUPTED = 130
"""interrupted by Ctrl-C (128 + SIGINT, as shells report it)"""

MAX_MESSAGE_CHARS = 2000
"""longer messages are cut (``--debug`` prints the whole traceback)"""

_WITHOUT_TYPE_NAME = ("ConfigurationError", "ExperimentError")
"""errors whose message alone is the report (they name the file and field already)"""


def describe_error(error: BaseException) -> str:
    """One line describing ``error``: ``TypeName: message (notes)`` (tshtrain's configuration errors:
    the message only), whitespace and newlines collapsed, cut to :data:`MAX_MESSAGE_CHARS`."""
    if isinstance(error, RecursionError):
        return "RecursionError: the input is nested too deeply to process (maximum recursion depth)."
    if isinstance(error, MemoryError):
        return "MemoryError: out of memory (is the input too large?)."
    message = _message(error)
    notes = [" ".join(str(note).split()) for note in getattr(error, "__notes__", ())]
    if notes:  # e.g. the collector's note naming the sub-env whose step raised
        message = f"{message} ({'; '.join(notes)[:MAX_MESSAGE_CHARS]})"
    if not any(cls.__name__ in _WITHOUT_TYPE_NAME for cls in type(error).__mro__):
        message = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return message


def _message(error: BaseException) -> str:
    """``str(error)`` on one line, at most :data:`MAX_MESSAGE_CHARS` long."""
    try:
        text = str(error)
    except Exception:  # a broken __str__ must not hide the failure
        return ""
    one_line = " ".join(text[: 2 * MAX_MESSAGE_CHARS].split())
    if len(text) > 2 * MAX_MESSAGE_CHARS or len(one_line) > MAX_MESSAGE_CHARS:
        return f"{one_line[:MAX_MESSAGE_CHARS]}... ({len(text)} characters in all; --debug prints them)"
    return one_line


def report_failure(command: str, message: str, *, debug: bool) -> None:
    """Print the traceback of the exception being handled (with ``debug``), then the one line."""
    if debug:
        traceback.print_exc(file=sys.stderr)
    print(f"tshtrain {command}: error: {message}", file=sys.stderr, flush=True)
