"""What ``tshtrain train`` prints around a run, laid out for :data:`MESSAGE_COLUMNS` columns: the line
shown before the heavy imports, the result lines at the end, and the Ctrl-C message.

Prose is wrapped at spaces with an indented continuation; paths and commands are never broken, and a
command to copy stands on a line of its own. (The bars and the test-step lines are laid out by
:mod:`tshtrain.logger.console` for the terminal's own width.)
"""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tshtrain.trainer.stats import InfoStats

MESSAGE_COLUMNS = 80
"""the width these lines are laid out for: a terminal's default, so they fit any terminal at least as
wide (and read well in a log file)"""
LOADING_LINE = "tshtrain train: importing torch, then building the envs and the trainer..."
"""printed to a terminal's stderr before anything heavy is imported, so that the first seconds of a
run (torch's import alone takes seconds on a loaded machine) are not a blank screen"""


def wrap(text: str, *, first: str = "", indent: str = "  ") -> list[str]:
    """``first + text`` in lines of at most :data:`MESSAGE_COLUMNS` characters, continued with
    ``indent``, broken at spaces only (a path longer than a line keeps a line of its own)."""
    return textwrap.wrap(
        text,
        MESSAGE_COLUMNS,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _duration(seconds: float) -> str:
    """``21.3 s`` under a minute, ``m:ss`` under an hour, ``h:mm:ss`` from one hour on."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def result_lines(info: InfoStats, output_dir: Path) -> list[str]:
    """The lines printed when a run ends: its best test return, why and when it stopped, and (on a
    line of its own) where its results are::

        best test return 476.1 at epoch 6; stop: stop_fn after 6,144 env steps, 21.3 s
        results in runs/ppo-cartpole-v1-20260101-120000
    """
    best = "none" if info.best_reward is None else f"{info.best_reward:.1f}"
    summary = (
        f"best test return {best} at epoch {info.best_epoch}; stop: {info.stop_reason} after "
        f"{info.train_step:,} env steps, {_duration(info.timing.total_time)}"
    )
    return [*wrap(summary), f"results in {output_dir}"]


def interrupted_message(output_dir: Path, latest: Path | None, unsigned: str = "") -> str:
    """The message of a run stopped by Ctrl-C (after ``tshtrain train: error: ``, which the first line
    leaves room for): where it stopped and, each on a line of its own, the commands that continue it.

    Args:
        output_dir: the run directory.
        latest: the last periodic checkpoint; None: there is none yet.
        unsigned: why resuming from ``latest`` would not restore its pickled env snapshots ("" when it
            would).
    """
    first = " " * len("tshtrain train: error: ")
    if latest is None:
        text = (
            f"interrupted (Ctrl-C) before the first periodic checkpoint; nothing to resume in "
            f"{output_dir}: start the run again in a new directory."
        )
        return "\n".join(wrap(text, first=first)).lstrip()
    command = f"tshtrain train --resume {shlex.quote(str(output_dir))}"
    shown = latest.relative_to(output_dir) if latest.is_relative_to(output_dir) else latest
    lines = [f"{first}interrupted (Ctrl-C); the last checkpoint is", f"  {shown}"]
    if not unsigned:
        lines += ["  continue the run with:", f"  {command}"]
    else:
        lines += wrap(f"and {unsigned};", first="  ")
        lines += [
            "  continue the run with (its envs are then reset, so it is not bit-exact):",
            f"  {command}",
            "  or, as it is your own run, exactly with:",
            f"  {command} --trust",
        ]
    return "\n".join(lines).lstrip()


__all__ = ["LOADING_LINE", "MESSAGE_COLUMNS", "interrupted_message", "result_lines", "wrap"]
