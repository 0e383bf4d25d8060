"""``tshtrain config ALGO|EXAMPLE [--format yaml|toml|json]``: a complete experiment to start from."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register the ``config`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "config",
        help="print a complete default experiment for an algorithm or a task example",
        description="Print the complete default experiment of ALGO (every key, with the settings of its "
        "example script), ready to save and edit: tshtrain config sac > sac.yaml; tshtrain train sac.yaml. "
        "A task example's name (e.g. mappo_simple_spread, see `tshtrain list`) prints that example with "
        "every key filled in, multi-agent env fields and the agents section included.",
    )
    parser.add_argument(
        "algorithm", metavar="ALGO", help="an algorithm or task example name (see `tshtrain list`)"
    )
    parser.add_argument(
        "--format", "-f", choices=["yaml", "toml", "json"], default="yaml", help="default: yaml"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the experiment."""
    from tshtrain.config import default_experiment_data, dumps, experiment_data, get_spec, resolve_experiment
    from tshtrain.config.defaults import TASK_EXAMPLES

    if args.algorithm in TASK_EXAMPLES:
        _, data = TASK_EXAMPLES[args.algorithm]
        experiment = resolve_experiment(dict(data), f"the task example {args.algorithm}")
        print(dumps(experiment_data(experiment), args.format), end="")
        return 0
    spec = get_spec(args.algorithm, where="ALGO")
    experiment = resolve_experiment(default_experiment_data(spec.name), f"the default {spec.name} experiment")
    print(dumps(experiment_data(experiment), args.format), end="")
    return 0
