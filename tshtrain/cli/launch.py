"""``tshtrain train --nproc N``: run torchrun and turn how its ranks ended into one line.

torchrun (``torch.distributed.run``) ends a failed run with a multi-line ``ChildFailedError`` block,
and each rank prints its own ``tshtrain train: error: ...`` line; a torchrun killed by a signal ends
silently. Here torchrun's stderr (shared with its ranks) is read line by line: lines of the ranks other
than their error lines pass through (with ``--debug``: every line), torchrun's own log lines and its
traceback block are held back, and a failed run ends in one line naming the rank and the cause:

* a rank killed by a signal (from the block's root cause): ``rank R (pid P) was killed by SIGKILL``;
* a rank that failed with an error: the error line of the first rank that is not only reporting
  another rank's failure, prefixed with its rank where it does not name one;
* torchrun itself killed: ``the torchrun launcher (pid P) was killed by SIGKILL``.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from tshtrain.cli.failure import EXIT_FAILURE, EXIT_INTERRUPTED
from tshtrain.logger.console import TERMINAL_ENV, terminal_width

_ERROR_PREFIX = "tshtrain train: error: "
_TORCHRUN_LOG = re.compile(r"^[WEIF]\d{4} |^\*{20,}|^Setting OMP_NUM_THREADS")
"""torchrun's own log lines (glog-style ``W0612 10:00:00 ...``) and its thread-count banner"""
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+) \(pid: (\d+)\)")
_CONSEQUENCE = re.compile(r"rank \d+ stops: rank \d+")
"""a rank's line that only reports another rank's failure (``DistributedRunError``)"""


@dataclass
class RankOutcome:
    """What torchrun's stderr said about the ranks (see :func:`summarize`)."""

    error_lines: list[str] = field(default_factory=list)
    """the ranks' ``tshtrain train: error:`` lines, in order"""
    root_rank: int | None = None
    """the rank of the block's root cause"""
    root_exitcode: int | None = None
    """its exit code (negative: killed by that signal)"""
    root_pid: int | None = None
    """its process id"""
    in_root_cause: bool = False
    """past the block's ``Root Cause`` line"""
    traceback_seen: bool = False
    """past torchrun's traceback (ranks print none without ``--debug``): the block follows it"""

    def feed(self, line: str) -> bool:
        """Take one line; True if it is the ranks' own output to show (not torchrun's, not an error)."""
        text = line.rstrip("\n")
        if text.startswith(_ERROR_PREFIX):  # two ranks' lines may still meet on one (a long line)
            pieces = text.split(_ERROR_PREFIX)[1:]
            self.error_lines += [piece for piece in pieces if piece]
            return False
        if text.startswith("Root Cause"):
            self.in_root_cause = True
        if self.in_root_cause:
            rank, exit_ = _ROOT_RANK.match(text), _ROOT_EXIT.match(text)
            if rank:
                self.root_rank = int(rank.group(1))
            if exit_:
                self.root_exitcode, self.root_pid = int(exit_.group(1)), int(exit_.group(2))
        return bool(text.strip()) and not (_TORCHRUN_LOG.match(text) or self.in_traceback(text))

    def in_traceback(self, text: str) -> bool:
        """True from torchrun's traceback on."""
        if text.startswith("Traceback (most recent call last):"):
            self.traceback_seen = True
        return self.traceback_seen


def summarize(outcome: RankOutcome, returncode: int, launcher_pid: int, resume: str) -> str:
    """The one line (without ``tshtrain train: error: ``) for a run whose torchrun ended with
    ``returncode``; ``resume`` is the command that continues the run."""
    if returncode < 0:
        killed = _signal_name(-returncode)
        return (
            f"the torchrun launcher (pid {launcher_pid}) was killed by {killed}, so the run stopped; "
            f"continue it from its last checkpoint with: {resume}"
        )
    if outcome.root_exitcode is not None and outcome.root_exitcode < 0:
        return (
            f"rank {outcome.root_rank} (pid {outcome.root_pid}) was killed by "
            f"{_signal_name(-outcome.root_exitcode)}; the other ranks were stopped"
        )
    causes = [line for line in outcome.error_lines if not _CONSEQUENCE.search(line)]
    if causes or outcome.error_lines:
        line = (causes or outcome.error_lines)[0]
        named = re.search(r"\brank \d+\b", line)
        if named or outcome.root_rank is None:
            return line
        return f"rank {outcome.root_rank}: {line}"
    if outcome.root_rank is not None:
        return f"rank {outcome.root_rank} (pid {outcome.root_pid}) exited with code {outcome.root_exitcode}"
    return f"torchrun exited with code {returncode}"


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def rank_environment() -> dict[str, str]:
    """The ranks' environment: this one, plus the terminal's width when this stderr is a terminal, so that
    rank 0 still shows its progress bars through the pipe (``tshtrain.logger.console.TERMINAL_ENV``)."""
    env = dict(os.environ)
    if sys.stderr.isatty():
        env[TERMINAL_ENV] = str(terminal_width(sys.stderr) or 80)
    return env


def run_torchrun(command: Sequence[str], *, debug: bool, resume: str) -> int:
    """Run ``command`` (a torchrun command line); 0 when every rank succeeded, else print one error line
    and return 1 (130 when torchrun was interrupted). ``resume``: the command that continues the run."""
    outcome = RankOutcome()
    with subprocess.Popen(command, stderr=subprocess.PIPE, env=rank_environment()) as process:
        assert process.stderr is not None
        # newline="": a bar's "\r" redraws end a piece and pass through as they are, not as new lines
        stream = io.TextIOWrapper(process.stderr, errors="replace", newline="")
        try:
            for line in stream:
                if outcome.feed(line) or debug:
                    sys.stderr.write(line)
                    sys.stderr.flush()
        except KeyboardInterrupt:  # torchrun got the Ctrl-C too and stops its ranks
            process.wait()
            raise
        returncode = process.wait()
    if returncode == 0:
        return 0
    print(
        f"{_ERROR_PREFIX}{summarize(outcome, returncode, process.pid, resume)}", file=sys.stderr, flush=True
    )
    return EXIT_INTERRUPTED if returncode == -signal.SIGINT else EXIT_FAILURE


__all__ = ["RankOutcome", "rank_environment", "run_torchrun", "summarize"]
