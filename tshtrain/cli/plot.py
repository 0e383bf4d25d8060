"""``tshtrain plot RUN_DIR... -o curves.png``: learning curves from CSV or TensorBoard logs."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register the ``plot`` command (``subparsers``: what ``add_subparsers`` returned)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plot",
        help="plot learning curves from run directories",
        description=(
            "Plot a learning curve (by default the mean test return against env steps) for each "
            "RUN_DIR. A RUN_DIR holds the files of a CsvLogger or TensorboardLogger; a directory of "
            "several runs (e.g. one per seed) is drawn as their mean with a band of one standard "
            "deviation. Needs matplotlib: pip install 'tshtrain[plot]'."
        ),
    )
    parser.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory, or a directory of runs"
    )
    parser.add_argument("-o", "--output", required=True, help="the image to write (format from the suffix)")
    parser.add_argument(
        "--scope", default="test", choices=["training", "test", "update", "info"], help="default: test"
    )
    parser.add_argument("--key", default="returns/mean", help="the scalar to plot (default: returns/mean)")
    parser.add_argument("--title", default=None, help="the figure's title")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the curves, draw them, print where the image went."""
    from tshtrain.logger.base import LogScope
    from tshtrain.logger.plot import learning_curves, plot_learning_curves

    scope = LogScope(args.scope)
    groups = learning_curves(args.run_dirs, scope=scope, key=args.key)
    ylabel = f"{scope} {args.key}" if (scope, args.key) != (LogScope.TEST, "returns/mean") else "test return"
    output = plot_learning_curves(
        groups, args.output, title=args.title, xlabel=scope.step_axis.replace("_", " ") + "s", ylabel=ylabel
    )
    print(f"wrote {output} ({len(groups)} curve(s), {sum(len(g.runs) for g in groups)} run(s))")
    return 0
