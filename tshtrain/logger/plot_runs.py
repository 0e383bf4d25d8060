"""Finding the runs behind the paths given to ``tshtrain plot``, and grouping them by experiment.

**A run** is one of:

* a run directory of ``tshtrain train`` (it holds the marker ``.tshtrain-run`` and ``config.yaml``); its
  logs are in ``csv/`` and ``tensorboard/``;
* a directory holding the files of a CsvLogger (``test.csv``, ...) or a TensorboardLogger
  (``events.out.tfevents.*``) itself, or in ``csv/`` / ``tensorboard/`` below it (logs written from
  Python; both writers may share one directory).

A run is read from **one** source: its CSV files when it has any, else its TensorBoard event files; so a
run logged by both writers is one run, never two. Below a path, runs are found at any depth; the search
does not descend into a run.

**Groups.** Runs are grouped by experiment: the values of :data:`DEFAULT_GROUP_BY` (algorithm name and
env id) in each run's ``config.yaml``, or of chosen keys (dotted, e.g. ``algorithm.params.lr``; ``path``
is the path argument the run was found under). Runs without ``config.yaml`` are grouped by the path
argument they were found under. A group whose runs have different algorithms or envs is refused unless
averaging across experiments is asked for (``average_all``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogScope
from tshtrain.rundir import RUN_MARKER

CONFIG_FILE = "config.yaml"
"""the resolved experiment a ``tshtrain train`` run writes into its run directory"""
DEFAULT_GROUP_BY = ("algorithm.name", "env.id")
"""the config keys that name an experiment: runs that agree on them are averaged into one curve"""
PATH_KEY = "path"
"""the group-by key meaning "the path argument the run was found under\""""
IGNORED_DIFFERENCES = frozenset({"seed", "output_dir"})
"""config keys in which the runs of one curve are expected to differ (not reported)"""

LogKind = Literal["csv", "tensorboard"]


@dataclass(frozen=True, kw_only=True)
class RunLogs:
    """One run: where it is, the one log directory read for it, and its experiment."""

    run_dir: Path
    log_dir: Path
    """the directory whose logs are read (``run_dir/csv``, ``run_dir/tensorboard`` or ``run_dir``)"""
    kind: LogKind
    """which writer's files are read: ``csv`` when there are any, else ``tensorboard``"""
    config: Mapping[str, object] | None
    """``config.yaml`` flattened to dotted keys (``algorithm.name``, ``env.id``, ...); None: no file"""
    found_under: Path
    """the path argument the run was found under"""


@dataclass(frozen=True, kw_only=True)
class RunGroup:
    """Runs that make one curve, and the label of that curve."""

    label: str
    runs: tuple[RunLogs, ...]


def has_csv(path: Path) -> bool:
    """Does ``path`` hold a CsvLogger file?"""
    return any((path / f"{scope}.csv").is_file() for scope in LogScope)


def has_events(path: Path) -> bool:
    """Does ``path`` hold a TensorBoard event file?"""
    return path.is_dir() and any(p.is_file() and "tfevents" in p.name for p in path.iterdir())


def log_source(run_dir: Path) -> tuple[Path, LogKind] | None:
    """The log directory read for the run ``run_dir`` and its kind (None: no CSV or TensorBoard logs)."""
    for path in (run_dir / "csv", run_dir):
        if has_csv(path):
            return path, "csv"
    for path in (run_dir / "tensorboard", run_dir):
        if has_events(path):
            return path, "tensorboard"
    return None


def _is_run(path: Path) -> bool:
    return (path / RUN_MARKER).is_file() or log_source(path) is not None


def _flatten(data: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{key}."))
        else:
            flat[key] = value
    return flat


def read_config(run_dir: Path) -> dict[str, object] | None:
    """``run_dir/config.yaml`` flattened to dotted keys; None when there is no such file.

    Raises:
        ConfigurationError: the file is not a YAML mapping.
    """
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ConfigurationError(
            f"{path}: cannot read the run's experiment ({type(error).__name__})."
        ) from None
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"{path}: not a mapping of experiment keys; is this a tshtrain run?")
    return _flatten(data)


def find_runs(path: str | os.PathLike[str]) -> list[Path]:
    """``path`` itself if it is a run (or the run whose ``csv/`` or ``tensorboard/`` it is), else every
    run below it (sorted; runs without CSV or TensorBoard logs included).

    Raises:
        ConfigurationError: ``path`` is not a directory, or holds no run.
    """
    path = Path(path)
    if not path.is_dir():
        raise ConfigurationError(
            f"{str(path)!r} is not a directory; give run directories of CSV or TensorBoard logs."
        )
    if path.name in ("csv", "tensorboard") and (path.parent / RUN_MARKER).is_file():
        return [path.parent]  # the log directory of a train run: the run is its parent
    if _is_run(path):
        return [path]
    runs: list[Path] = []
    for parent, dirs, _ in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # hidden: temporary files of writers
        found = [d for d in dirs if _is_run(Path(parent, d))]
        runs.extend(Path(parent, d) for d in found)
        dirs[:] = [d for d in dirs if d not in found]  # do not descend into a run
    if not runs:
        raise ConfigurationError(
            f"{str(path)!r} holds no logs: no <scope>.csv files (CsvLogger) or events.out.tfevents.* "
            f"files (TensorboardLogger) in it or below it."
        )
    return sorted(runs)


def locate_runs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[RunLogs], list[str]]:
    """The runs below ``paths`` (each once, in order) and notes on the runs skipped for having no CSV
    or TensorBoard logs.

    Raises:
        ConfigurationError: a path is not a directory or holds no run; no run has CSV or TensorBoard logs.
    """
    runs: list[RunLogs] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for path in paths:
        for run_dir in find_runs(path):
            if run_dir.resolve() in seen:
                continue
            seen.add(run_dir.resolve())
            source = log_source(run_dir)
            if source is None:
                notes.append(f"skipped {run_dir}: a run without CSV or TensorBoard logs (nothing to plot)")
                continue
            runs.append(
                RunLogs(
                    run_dir=run_dir,
                    log_dir=source[0],
                    kind=source[1],
                    config=read_config(run_dir),
                    found_under=Path(path),
                )
            )
    if not runs:
        raise ConfigurationError(
            f"{', '.join(repr(str(p)) for p in paths)}: no run there has CSV or TensorBoard logs "
            f"(a run logged only to W&B or MLflow cannot be plotted by tshtrain plot)."
        )
    return runs, notes


def _show(value: object) -> str:
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def _path_label(path: Path) -> str:
    return path.resolve().name or str(path)


def _experiment(run: RunLogs) -> str | None:
    if run.config is None:
        return None
    return " ".join(_show(run.config.get(key, "?")) for key in DEFAULT_GROUP_BY)


def _group_label(run: RunLogs, keys: Sequence[str]) -> str:
    if run.config is None:
        return _path_label(run.found_under)
    if tuple(keys) == DEFAULT_GROUP_BY:
        return " ".join(_show(run.config.get(key, "?")) for key in keys)
    parts = []
    for key in keys:
        if key == PATH_KEY:
            parts.append(_path_label(run.found_under))
        else:
            parts.append(f"{key}={_show(run.config[key]) if key in run.config else 'unset'}")
    return " ".join(parts)


def _check_keys(runs: Sequence[RunLogs], keys: Sequence[str]) -> None:
    known = {key for run in runs if run.config is not None for key in run.config}
    for key in keys:
        if key != PATH_KEY and key not in known:
            examples = ", ".join(
                k for k in ("algorithm.name", "env.id", "seed", "algorithm.params.lr") if k in known
            )
            hint = f"e.g. {examples}" if examples else f"no run there has a {CONFIG_FILE}"
            raise ConfigurationError(
                f"--group-by {key!r}: not a key of the runs' {CONFIG_FILE} ({hint}) nor {PATH_KEY!r}."
            )


def _count(runs: Sequence[RunLogs]) -> str:
    counts: dict[str, int] = {}
    for run in runs:
        name = _experiment(run) or f"{_path_label(run.found_under)} (no {CONFIG_FILE})"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name}: {n} run{'s' if n > 1 else ''}" for name, n in counts.items())


def _differences(runs: Sequence[RunLogs]) -> list[str]:
    """The config keys (besides seed and output_dir) in which the runs with a config differ."""
    configs = [run.config for run in runs if run.config is not None]
    keys = sorted({key for config in configs for key in config} - IGNORED_DIFFERENCES)
    return [key for key in keys if len({_show(config.get(key, "unset")) for config in configs}) > 1]


def group_runs(
    runs: Sequence[RunLogs], *, group_by: Sequence[str] | None = None, average_all: bool = False
) -> tuple[list[RunGroup], list[str]]:
    """Group ``runs`` into curves (see the module docstring); returns the groups and notes on them.

    Args:
        group_by: config keys whose values define a group; None: :data:`DEFAULT_GROUP_BY`, or with
            ``average_all`` one group of all runs.
        average_all: allow a group to average runs of different algorithms or envs.

    Raises:
        ConfigurationError: a ``group_by`` key is in no run's config; a group mixes algorithms or envs
            and ``average_all`` is off.
    """
    keys = tuple(group_by) if group_by is not None else DEFAULT_GROUP_BY
    if group_by is not None:
        _check_keys(runs, keys)
    by_label: dict[str, list[RunLogs]] = {}
    for run in runs:
        label = "all runs" if average_all and group_by is None else _group_label(run, keys)
        by_label.setdefault(label, []).append(run)
    groups = [RunGroup(label=label, runs=tuple(members)) for label, members in by_label.items()]
    notes: list[str] = []
    for group in groups:
        experiments = {e for e in map(_experiment, group.runs) if e is not None}
        if len(experiments) > 1:
            if not average_all:
                raise ConfigurationError(
                    f"--group-by {','.join(keys)}: the curve {group.label!r} would average runs of "
                    f"different experiments ({_count(group.runs)}); group by "
                    f"{','.join(DEFAULT_GROUP_BY)} too, or pass --average-all to average them anyway."
                )
            notes.append(f"{group.label}: averages runs of different experiments ({_count(group.runs)})")
        differing = [key for key in _differences(group.runs) if key not in keys]
        if differing and len(experiments) <= 1:
            shown = ", ".join(differing[:3]) + (
                f" and {len(differing) - 3} more" if len(differing) > 3 else ""
            )
            notes.append(
                f"{group.label}: its {len(group.runs)} runs differ in {shown}; to split them, "
                f"--group-by {','.join((*keys, differing[0]))}"
            )
    return groups, notes


__all__ = [
    "CONFIG_FILE",
    "DEFAULT_GROUP_BY",
    "PATH_KEY",
    "RunGroup",
    "RunLogs",
    "find_runs",
    "group_runs",
    "locate_runs",
    "log_source",
    "read_config",
]
