"""What ``tshtrain train`` does for one run and for a batch of seeds alike (:mod:`tshtrain.cli.train`,
:mod:`tshtrain.cli.seeds`): build a run from an experiment, announce it, write its config."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tshtrain.config import Experiment, Run

CONFIG_FILE = "config.yaml"
INFO_FILE = "info_stats.json"
_MAX_KEY_CHARS = 200


def _build(
    source: str, experiment: Experiment, output_dir: Path, *, prefill: bool, args: argparse.Namespace
) -> Run:
    """Build the run (this checks everything before anything is written), naming ``source`` in errors."""
    from tshtrain.config import ExperimentError, build_run

    try:
        return build_run(
            experiment,
            output_dir,
            prefill=prefill,
            allowed_modules=args.allowed_modules,
            check_finite=args.check_finite,
            distributed=args.distributed,
        )
    except ExperimentError as error:
        raise ExperimentError(f"{source}: {error}") from None


def _announce(experiment: Experiment, output_dir: Path, resumed_from: Path | None) -> None:
    """The run's first line (docs/cli.md promises it first): printed before the run is built, since
    building it starts the loggers and W&B prints its own banner then."""
    print(
        f"tshtrain: {experiment.algorithm.name} on {experiment.env.id}, writing to {output_dir}"
        + (f" (resumed from {resumed_from.name})" if resumed_from else ""),
        flush=True,
    )


def _check_override_keys(overrides: list[str]) -> None:
    """Refuse ``--set`` keys that cannot name a setting, before the value is parsed (short messages
    for huge or binary arguments)."""
    import re

    from tshtrain.errors import ConfigurationError, short_repr

    for text in overrides:
        key = text.partition("=")[0].strip()
        if len(key) > _MAX_KEY_CHARS or not re.fullmatch(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*", key):
            raise ConfigurationError(
                f"--set {short_repr(text)}: expected KEY.PATH=VALUE with a dotted key of at most "
                f"{_MAX_KEY_CHARS} characters, e.g. --set trainer.max_epochs=5."
            )


def _write_config(experiment: Experiment, output_dir: Path) -> None:
    from tshtrain.config import dumps, experiment_data, write_atomic

    header = "# the resolved experiment of this run; `tshtrain train config.yaml -o NEW_DIR` runs it again\n"
    write_atomic(output_dir / CONFIG_FILE, header + dumps(experiment_data(experiment)))


def _default_output_dir(experiment: Experiment) -> str:
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    # "tshtrain.env.atari:ALE/Breakout-v5" -> "ale-breakout-v5": no module prefix, one directory level
    env_name = experiment.env.id.rpartition(":")[2].replace("/", "-").lower()
    return f"runs/{experiment.algorithm.name}-{env_name}-{stamp}"
