"""Experiment files: validated YAML / TOML / JSON descriptions of a whole run, for the command line.

Python users build params objects directly (see examples/); the command line and config-driven users
write an experiment file, which :func:`load_experiment` turns into a complete :class:`Experiment` and
:func:`build_run` into a trainer ready to run. See docs/experiments.md.
"""

from tshtrain.config.algorithms import build_algorithm
from tshtrain.config.build import Run, build_policy_algorithm, build_run, make_any_envs, make_envs
from tshtrain.config.files import apply_overrides, dumps, read_file, write_atomic
from tshtrain.config.models import Experiment
from tshtrain.config.registry import SPECS, AlgorithmSpec, Family, get_spec
from tshtrain.config.resolve import (
    build_params,
    default_experiment,
    default_experiment_data,
    experiment_data,
    load_experiment,
    resolve_experiment,
)
from tshtrain.errors import ExperimentError

__all__ = [
    "SPECS",
    "AlgorithmSpec",
    "Experiment",
    "ExperimentError",
    "Family",
    "Run",
    "apply_overrides",
    "build_algorithm",
    "build_params",
    "build_policy_algorithm",
    "build_run",
    "default_experiment",
    "default_experiment_data",
    "dumps",
    "experiment_data",
    "get_spec",
    "load_experiment",
    "make_any_envs",
    "make_envs",
    "read_file",
    "resolve_experiment",
    "write_atomic",
]
