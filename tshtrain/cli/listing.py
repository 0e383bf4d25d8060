"""``tshtrain list [ALGO]``: the algorithms and their hyperparameters."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tshtrain.config.spec import AlgorithmSpec


def add_parser(subparsers: Any) -> None:
    """Register the ``list`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "list",
        help="list the algorithms and their hyperparameters",
        description="List the algorithms an experiment file can name, with their trainer family and "
        "every hyperparameter (algorithm.params) of their default experiment: the values `tshtrain config "
        "ALGO` prints and an experiment file that leaves them out gets. The last line names the keys in "
        "which the params class's own defaults (Python, e.g. PPOParams()) differ.",
    )
    parser.add_argument("algorithms", nargs="*", metavar="ALGO", help="only these algorithms")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the listing."""
    from tshtrain.config import SPECS, get_spec
    from tshtrain.config.defaults import TASK_EXAMPLES
    from tshtrain.config.models import AGENT_LAYOUTS, ENV_TYPES, RETURN_REDUCTIONS

    names = args.algorithms or list(SPECS)
    for name in names:
        spec = get_spec(name, where="ALGO")
        print(f"{spec.name:<13} {spec.family:<11} {spec.summary}")
        params = default_params(spec.name)
        fields = ", ".join(f"{key}={value!r}" for key, value in params.items())
        print(f"{'':<13} algorithm.params (default experiment, `tshtrain config {spec.name}`): {fields}")
        differ = class_default_differences(spec, params)
        if differ:
            print(f"{'':<13} {spec.params_cls.__name__}() in Python differs in: {', '.join(differ)}")
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


def default_params(name: str) -> dict[str, Any]:
    """``algorithm.params`` of the algorithm's default experiment, resolved: what ``tshtrain config
    NAME`` prints under ``algorithm.params``."""
    from tshtrain.config import default_experiment, experiment_data

    params: dict[str, Any] = experiment_data(default_experiment(name))["algorithm"]["params"]
    return params


def class_default_differences(spec: AlgorithmSpec, params: dict[str, Any]) -> list[str]:
    """The keys of ``params`` whose value is not the params class's own default (schedules: None,
    shown as ``constant`` or None)."""
    from tshtrain.config.schema import value_fields

    defaults = {key: default for key, (_, default) in value_fields(spec.params_cls).items()}
    constant = (None, "constant")
    return [
        key
        for key, value in params.items()
        if key in defaults
        and value != defaults[key]
        and not (value in constant and defaults[key] in constant)
    ]
