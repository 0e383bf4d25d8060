"""The ``tshtrain`` command line: ``tshtrain <command> ...``.

Each command lives in its own module with ``add_parser(subparsers)`` and ``run(args) -> int``; the
modules import only ``argparse`` at the top, and whatever a command needs (torch, matplotlib, ...) when
it runs, so ``tshtrain --help`` stays fast.

Every failure ends in one line on stderr, ``tshtrain <command>: error: ...``, and exit code 1 (2 for
bad usage, 130 for Ctrl-C); ``--debug`` (before or after the command) also prints the traceback.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from tshtrain.cli import eval, listing, plot, show_config, train
from tshtrain.cli.failure import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    DeferredErrors,
    describe_error,
    report_failure,
)

COMMANDS = (train, eval, listing, show_config, plot)
"""the command modules, in the order ``--help`` lists them"""

_DEBUG_HELP = "on failure, print the traceback too (not only the one-line error)"


def build_parser() -> argparse.ArgumentParser:
    """The parser of all commands."""
    parser = argparse.ArgumentParser(prog="tshtrain", description="Typed-parameter RL trainers.")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    for subparser in subparsers.choices.values():
        # SUPPRESS: an absent per-command flag must not overwrite a global `tshtrain --debug CMD`
        subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; returns the exit code (0: success, 1: the command failed, 2: bad usage,
    130: interrupted by Ctrl-C)."""
    args = build_parser().parse_args(argv)
    held = DeferredErrors(args.command)
    library_log = logging.getLogger("tshtrain")
    if not args.debug:  # errors logged on the way out join the one line; --debug: their tracebacks
        library_log.addHandler(held)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        report_failure(args.command, "interrupted (Ctrl-C)." + held.summary(), debug=args.debug)
        return EXIT_INTERRUPTED
    except Exception as error:  # the one place that turns any failure into one line
        report_failure(args.command, describe_error(error) + held.summary(), debug=args.debug)
        return EXIT_FAILURE
    finally:
        library_log.removeHandler(held)
    held.flush_held()
    return code


__all__ = ["build_parser", "describe_error", "main"]
