"""The ``tshtrain`` command line: ``tshtrain <command> ...``.

Each command lives in its own module with ``add_parser(subparsers)`` and ``run(args) -> int``; the
modules import only ``argparse`` at the top, and whatever a command needs (torch, matplotlib, ...) when
it runs, so ``tshtrain --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tshtrain.cli import eval, listing, plot, show_config, train

COMMANDS = (train, eval, listing, show_config, plot)
"""the command modules, in the order ``--help`` lists them"""


def build_parser() -> argparse.ArgumentParser:
    """The parser of all commands."""
    parser = argparse.ArgumentParser(prog="tshtrain", description="Typed-parameter RL trainers.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; returns the exit code (0: success, 1: the command failed, 2: bad usage)."""
    from tshtrain.errors import ConfigurationError

    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except ConfigurationError as error:
        print(f"tshtrain {args.command}: error: {error}", file=sys.stderr)
        return 1
    return code


__all__ = ["build_parser", "main"]
