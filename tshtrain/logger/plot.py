"""Learning curves from the logs of finished runs (CSV or TensorBoard), and a plot of them.

:func:`learning_curves` reads the curves and is what a test compares with the logs;
:func:`plot_learning_curves` draws them with matplotlib (optional extra:
``pip install 'tshtrain[plot]'``), which ``tshtrain plot`` calls.

A *run directory* holds the files of one CsvLogger (``test.csv``, ...) or TensorboardLogger
(``events.out.tfevents.*``). Each path given to :func:`learning_curves` is one curve: a run directory,
or a directory whose run directories (found at any depth, e.g. one per seed) are averaged, drawn as
their mean with a band of one standard deviation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogScope
from tshtrain.logger.csv import Record, read_csv_log
from tshtrain.logger.tensorboard import read_tensorboard_log


@dataclass(frozen=True, kw_only=True)
class Curve:
    """One run's values of a scalar over its scope's steps."""

    run_dir: Path
    steps: np.ndarray
    """the steps (int64, increasing)"""
    values: np.ndarray
    """the scalar at each step (float64)"""


@dataclass(frozen=True, kw_only=True)
class CurveGroup:
    """The runs of one path, and their mean and standard deviation on a common grid of steps."""

    label: str
    runs: tuple[Curve, ...]
    steps: np.ndarray
    """the steps all runs cover: the union of their steps from the largest first step to the smallest
    last step (just the steps, when all runs share them)"""
    mean: np.ndarray
    std: np.ndarray
    """population standard deviation over runs (0 for a single run)"""


def _has_csv(path: Path) -> bool:
    return any((path / f"{scope}.csv").is_file() for scope in LogScope)


def _has_events(path: Path) -> bool:
    return any(p.is_file() and "tfevents" in p.name for p in path.iterdir())


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` hold the files of a CsvLogger or TensorboardLogger?"""
    path = Path(path)
    return path.is_dir() and (_has_csv(path) or _has_events(path))


def find_runs(path: str | os.PathLike[str]) -> list[Path]:
    """``path`` itself if it is a run directory, else every run directory below it (sorted)."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigurationError(
            f"{str(path)!r} is not a directory; give run directories of CSV or TensorBoard logs."
        )
    if is_run_dir(path):
        return [path]
    runs = sorted(p for p in path.rglob("*") if is_run_dir(p))
    if not runs:
        raise ConfigurationError(
            f"{str(path)!r} holds no logs: no <scope>.csv files (CsvLogger) or events.out.tfevents.* "
            f"files (TensorboardLogger) in it or below it."
        )
    return runs


def read_run(run_dir: str | os.PathLike[str]) -> dict[LogScope, list[Record]]:
    """The records of a run directory, per scope (CSV files are preferred when both kinds are there)."""
    path = Path(run_dir)
    return read_csv_log(path) if _has_csv(path) else read_tensorboard_log(path)


def load_curve(run_dir: str | os.PathLike[str], *, scope: LogScope, key: str) -> Curve:
    """The scalar ``key`` of ``scope`` in one run directory (records without it are skipped)."""
    points = sorted((step, data[key]) for step, data in read_run(run_dir)[scope] if key in data)
    if not points:
        raise ConfigurationError(f"{str(run_dir)!r} has no {key!r} in its {scope} records.")
    steps, values = zip(*points, strict=True)
    return Curve(
        run_dir=Path(run_dir),
        steps=np.asarray(steps, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
    )


def mean_and_std(curves: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, std) of several curves; runs with other steps are interpolated linearly."""
    first = curves[0]
    if all(np.array_equal(c.steps, first.steps) for c in curves):
        grid = first.steps
        stacked = np.stack([c.values for c in curves])
    else:
        low = max(int(c.steps[0]) for c in curves)
        high = min(int(c.steps[-1]) for c in curves)
        if low > high:
            raise ConfigurationError(
                f"the runs {[str(c.run_dir) for c in curves]} share no range of steps; plot them separately."
            )
        grid = np.unique(np.concatenate([c.steps[(c.steps >= low) & (c.steps <= high)] for c in curves]))
        stacked = np.stack([np.interp(grid, c.steps, c.values) for c in curves])
    return grid, stacked.mean(axis=0), stacked.std(axis=0)


def learning_curves(
    paths: Sequence[str | os.PathLike[str]], *, scope: LogScope = LogScope.TEST, key: str = "returns/mean"
) -> list[CurveGroup]:
    """One :class:`CurveGroup` per path (see the module docstring), labelled with the path's name."""
    groups = []
    for path in paths:
        runs = tuple(load_curve(run, scope=scope, key=key) for run in find_runs(path))
        steps, mean, std = mean_and_std(runs)
        label = Path(path).resolve().name or str(path)
        groups.append(CurveGroup(label=label, runs=runs, steps=steps, mean=mean, std=std))
    return groups


def plot_learning_curves(
    groups: Sequence[CurveGroup],
    output: str | os.PathLike[str],
    *,
    title: str | None = None,
    xlabel: str = "env steps",
    ylabel: str = "test return",
) -> Path:
    """Draw each group's mean with a band of one std and save the figure (format from the suffix).

    Raises:
        ConfigurationError: matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ConfigurationError(
            "plotting needs matplotlib, which is not installed; install it with "
            "pip install 'tshtrain[plot]' (or pip install matplotlib)."
        ) from error
    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot()
    for group in groups:
        label = group.label if len(group.runs) == 1 else f"{group.label} ({len(group.runs)} runs)"
        (line,) = axes.plot(group.steps, group.mean, label=label, linewidth=1.8)
        if len(group.runs) > 1:
            axes.fill_between(
                group.steps, group.mean - group.std, group.mean + group.std, color=line.get_color(), alpha=0.2
            )
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    return output
