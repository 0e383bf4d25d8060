"""How a command reports a failure: one line ``tshtrain <command>: error: ...`` (and, with ``--debug``,
the traceback before it)."""

from __future__ import annotations

import errno
import logging
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

EXIT_FAILURE = 1
"""the command failed (bad experiment, unreadable file, failed run)"""
EXIT_USAGE = 2
"""bad command-line usage (argparse uses 2 as well)"""
EXIT_INTERRUPTED = 130
"""interrupted by Ctrl-C (128 + SIGINT, as shells report it)"""

MAX_MESSAGE_CHARS = 2000
"""longer messages are cut (``--debug`` prints the whole traceback)"""

_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""a write failed for lack of room: the disk is full, a file size limit (``ulimit -f``), a quota"""
_TORCH_WRITE_FAILURES = (
    "PytorchStreamWriter failed",
    "inline_container.cc",
    "iostream error",
    "file write failed",
)
"""what ``torch.save`` says when the OS refuses its writes (its C++ streams keep no errno)"""

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
    # one write with its newline: ranks sharing torchrun's stderr pipe must not interleave their lines
    sys.stderr.write(f"tshtrain {command}: error: {message}\n")
    sys.stderr.flush()


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the exceptions it was raised from or while handling (each once)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def write_failure(error: BaseException) -> BaseException | None:
    """The exception in ``error``'s chain that says a file could not be written for lack of room (disk
    full, ``ulimit -f``, quota; an ``OSError`` or ``torch.save``'s stream error), else None."""
    for link in _chain(error):
        if isinstance(link, OSError) and link.errno in _WRITE_ERRNOS:
            return link
    for link in _chain(error):
        if isinstance(link, RuntimeError) and any(text in str(link) for text in _TORCH_WRITE_FAILURES):
            return link
    return None


def write_failure_advice(cause: BaseException, output_dir: Path, latest: Path | None) -> str:
    """The one line for a run stopped by :func:`write_failure` ``cause``: what failed and what to do."""
    if latest is None:
        then = "nothing to resume yet: free some space, then start the run again in a new directory"
    else:
        then = (
            f"checkpoints written before are intact (the last: {latest.name}); free some space, then "
            f"continue the run with: tshtrain train --resume {output_dir}"
        )
    return (
        f"could not write the run's files in {output_dir} ({describe_error(cause)}): the disk is full, or a "
        f"file size limit (ulimit -f) or quota was reached; {then}."
    )


class DeferredErrors(logging.Handler):
    """Log records of ``tshtrain.*`` at WARNING and above without their tracebacks (installed unless
    ``--debug``). A record without an exception is printed as it is (as Python's last-resort handler
    would); one with an exception (e.g. a failing run's final checkpoint could not be written either)
    is held back: :meth:`summary` names it in the command's one error line, and after a success
    :meth:`flush_held` prints it as one warning line."""

    def __init__(self, command: str):
        super().__init__(logging.WARNING)
        self.command = command
        self.held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            message = " ".join(record.getMessage().split())
            self.held.append(f"{message} ({describe_error(record.exc_info[1])})")
            return
        print(record.getMessage(), file=sys.stderr, flush=True)

    def summary(self) -> str:
        """`` (also: ...)`` naming the held records, or ""."""
        if not self.held:
            return ""
        return f" (also: {'; '.join(self.held)[:MAX_MESSAGE_CHARS]}; --debug prints the tracebacks)"

    def flush_held(self) -> None:
        for message in self.held:
            print(f"tshtrain {self.command}: warning: {message}", file=sys.stderr, flush=True)
        self.held.clear()
