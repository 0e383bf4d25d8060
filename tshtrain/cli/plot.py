"""``tshtrain plot RUN_DIR... -o curves.png``: learning curves from CSV or TensorBoard logs."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

_BANDS = ("std", "ci", "minmax", "none")
"""tshtrain.logger.plot_bands.BANDS, spelled out so that ``tshtrain --help`` need not import numpy"""


def _window(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; give a window > 0 in steps of the x axis")
    return value


def _count(text: str) -> int | None:
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; give a number of runs >= 1, or all")
    return value


def _keys(text: str) -> tuple[str, ...]:
    keys = tuple(key.strip() for key in text.split(","))
    if not all(keys):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty key; give keys separated by commas")
    return keys


def add_parser(subparsers: Any) -> None:
    """Register the ``plot`` command (``subparsers``: what ``add_subparsers`` returned)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plot",
        help="plot learning curves from run directories",
        description=(
            "Plot learning curves (by default the mean test return against env steps) of the runs in "
            "the RUN_DIRs: run directories of `tshtrain train`, directories of CsvLogger or "
            "TensorboardLogger files, or directories holding such runs at any depth. A run logged by "
            "both writers is read once (CSV preferred). Runs are grouped by experiment (algorithm.name "
            "and env.id of their config.yaml; runs without one by their RUN_DIR), one curve per group: "
            "the mean over its runs up to the end of the longest (dashed where fewer runs have points; a "
            "strip under the curves counts the runs at each step), with a band that the legend names, "
            "kept inside the runs' range. Needs matplotlib: pip install 'tshtrain[plot]'."
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
    parser.add_argument(
        "--x",
        default=None,
        metavar="KEY",
        help="the x axis: another scalar of the same records, e.g. env_step for --scope update where the "
        "logs have it (default: the scope's step axis, env steps for test and training)",
    )
    parser.add_argument(
        "--group-by",
        type=_keys,
        default=None,
        metavar="KEYS",
        help="config.yaml keys that make a group, comma-separated, e.g. "
        "algorithm.name,env.id,algorithm.params.lr; 'path' is the RUN_DIR a run was found under "
        "(default: algorithm.name,env.id)",
    )
    parser.add_argument(
        "--average-all",
        action="store_true",
        help="average runs of different algorithms or envs (refused otherwise); without --group-by: one "
        "curve of all runs",
    )
    parser.add_argument(
        "--smooth",
        type=_window,
        default=None,
        metavar="K",
        help="smooth each run by a trailing moving mean over the last K steps of the x axis (env steps), "
        "before the runs are averaged (default: no smoothing)",
    )
    parser.add_argument(
        "--min-runs",
        type=_count,
        default=1,
        metavar="N",
        help="draw the mean wherever at least N runs of a group have points, dashed where not all have; "
        "'all': only the range all runs cover, the mean cut there (default: 1, every run to its end)",
    )
    parser.add_argument(
        "--per-seed", action="store_true", help="draw each run as a thin line under the mean, labelled seed N"
    )
    parser.add_argument(
        "--band",
        default="std",
        choices=_BANDS,
        help="the band around the mean, clipped to the runs' min and max at each step: one standard "
        "deviation, a 95%% percentile bootstrap confidence interval of the mean over runs (2000 "
        "resamples of the runs, as rliable reports intervals), min to max over the runs, or none "
        "(default: std)",
    )
    parser.add_argument("--title", default=None, help="the figure's title")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the curves, draw them, print the notes and where the image went."""
    from tshtrain.logger.base import LogScope
    from tshtrain.logger.plot import CurveParams, learning_curves, plot_learning_curves

    params = CurveParams(
        scope=LogScope(args.scope),
        key=args.key,
        x=args.x,
        group_by=args.group_by,
        average_all=args.average_all,
        smooth_window=args.smooth,
        min_runs=args.min_runs,
    )
    curves = learning_curves(args.run_dirs, params)
    default = (params.scope, params.key) == (LogScope.TEST, "returns/mean")
    ylabel = "test return" if default else f"{params.scope} {params.key}"
    xlabel = params.x_axis.replace("_", " ") + "s"
    if params.smooth_window is not None:
        ylabel += f" (trailing mean over {params.smooth_window:g} {xlabel})"
    output = plot_learning_curves(
        curves,
        args.output,
        title=args.title,
        xlabel=xlabel,
        ylabel=ylabel,
        per_seed=args.per_seed,
        band=args.band,
    )
    for note in curves.notes:
        print(f"tshtrain plot: note: {note}", file=sys.stderr)
    num_runs = sum(len(group.runs) for group in curves.groups)
    print(f"wrote {output} ({len(curves.groups)} curve(s), {num_runs} run(s))")
    return 0
