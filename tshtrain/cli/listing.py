"""``tshtrain list [ALGO]``: the algorithms and their hyperparameters."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register the ``list`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "list",
        help="list the algorithms and their hyperparameters",
        description="List the algorithms an experiment file can name, with their trainer family, params "
        "class and every hyperparameter with its default (the class default, not the tuned one of `tshtrain "
        "config ALGO`).",
    )
    parser.add_argument("algorithms", nargs="*", metavar="ALGO", help="only these algorithms")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the listing."""
    from tshtrain.config import SPECS, get_spec
    from tshtrain.config.defaults import TASK_EXAMPLES
    from tshtrain.config.models import AGENT_LAYOUTS, ENV_TYPES, RETURN_REDUCTIONS
    from tshtrain.config.schema import value_fields

    names = args.algorithms or list(SPECS)
    for name in names:
        spec = get_spec(name, where="ALGO")
        print(f"{spec.name:<13} {spec.family:<11} {spec.summary}")
        fields = ", ".join(
            f"{key}={default!r}" for key, (_, default) in value_fields(spec.params_cls).items()
        )
        print(f"{'':<13} {spec.params_cls.__name__}: {fields}")
        print(f"{'':<13} example: {spec.example or spec.example_config}")
    if args.algorithms:
        return 0
    print()
    print(f"env.type (alias env.kind): {', '.join(ENV_TYPES)}")
    print(
        "multi-agent envs (pettingzoo; vmas with env.agent_layout: columns): env.agent_id, env.global_state, "
        "env.pettingzoo_api (parallel | aec)"
    )
    print(
        f"agents: layout {' | '.join(AGENT_LAYOUTS)}, update_mode sequential | parallel, agents_scope "
        f"(scopes), members (NAME: algorithm | policy: random | policy: frozen, checkpoint, learner), "
        f"return_reduction {' | '.join(RETURN_REDUCTIONS)}"
    )
    print()
    print("task examples (tshtrain config NAME prints one; examples/configs/NAME.yaml):")
    for stem, (summary, _) in TASK_EXAMPLES.items():
        print(f"  {stem:<22} {summary}")
    return 0
