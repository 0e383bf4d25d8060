"""Learning curves from the logs of finished runs (CSV or TensorBoard).

:func:`learning_curves` finds the runs below the given paths, groups them by experiment and returns one
:class:`CurveGroup` per curve (what a test compares with the logs); :mod:`tshtrain.logger.plot` draws
them. Which directories are runs, which log of a run is read and how runs are grouped:
:mod:`tshtrain.logger.plot_runs`.

How a group's curve is made (:class:`CurveParams` holds the choices):

1. each run's scalar is read against its x axis (the scope's step axis, e.g. env steps for the test
   scope) and, with ``smooth_window``, replaced by a **trailing moving mean**: the value at x is the
   mean of the run's values logged at steps in (x - window, x], a window in x units (env steps), so it
   does not depend on how often a run logged;
2. the runs are aligned on the union of their x values, each interpolated linearly inside its own
   range (never extrapolated);
3. the mean, std (population), min and max are taken where at least ``min_runs`` runs have points
   (default 1: every run is shown to its end, and :attr:`CurveGroup.num_runs` says how many runs make
   the mean at each step). With ``min_runs=None`` (all runs) or a larger count, the mean is **cut** to
   the range that many runs cover, and says so: :attr:`CurveGroup.cut`, a note, and a mark in the
   legend.

The band around the mean (std, bootstrap confidence interval, min to max) is computed by
:mod:`tshtrain.logger.plot_bands` from :meth:`CurveGroup.aligned_values`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tshtrain.constraints import PositiveFloat, PositiveInt, validate_fields
from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogScope
from tshtrain.logger.csv import Record, read_csv_log
from tshtrain.logger.plot_runs import RunLogs, find_runs, group_runs, locate_runs, log_source
from tshtrain.logger.tensorboard import read_tensorboard_log


@dataclass(frozen=True, kw_only=True)
class Curve:
    """One run's values of a scalar over its x axis."""

    run_dir: Path
    steps: np.ndarray
    """the x values (int64, increasing)"""
    values: np.ndarray
    """the scalar at each step, as logged (float64)"""
    smoothed: np.ndarray | None = None
    """the values after the trailing moving mean; None: not smoothed"""
    name: str = ""
    """what a per-run line is labelled: ``seed <n>`` from the run's ``config.yaml``, else the run
    directory's name"""

    @property
    def drawn(self) -> np.ndarray:
        """What is averaged and drawn: the smoothed values, else the logged ones."""
        return self.values if self.smoothed is None else self.smoothed


@dataclass(frozen=True, kw_only=True)
class CurveGroup:
    """The runs of one curve, and their mean and spread on a common grid of steps."""

    label: str
    runs: tuple[Curve, ...]
    steps: np.ndarray
    """the x values where the mean is taken: the union of the runs' x values where at least
    ``min_runs`` of them have points"""
    mean: np.ndarray
    std: np.ndarray
    """population standard deviation over the runs at each step (0 for a single run)"""
    low: np.ndarray | None = None
    """the smallest run value at each step; None: as ``mean`` (a single run)"""
    high: np.ndarray | None = None
    """the largest run value at each step; None: as ``mean``"""
    num_runs: np.ndarray | None = None
    """how many runs have points at each step (int64); None: all of them everywhere"""
    cut: tuple[int, int] | None = None
    """(first, last) x value of the mean when some run has points outside it; None: nothing cut"""

    def aligned_values(self) -> np.ndarray:
        """values_RG: each run's drawn values at :attr:`steps` (one row per run), interpolated inside
        the run's range, NaN outside it."""
        return _on_grid(self.runs, self.steps)


@dataclass(frozen=True, kw_only=True)
class CurveParams:
    """What :func:`learning_curves` reads and how it groups and aligns runs (the ``tshtrain plot``
    options of the same names)."""

    scope: LogScope = LogScope.TEST
    """the records to read"""
    key: str = "returns/mean"
    """the scalar to plot"""
    x: str | None = None
    """the x axis: a scalar of the same records (e.g. ``env_step`` in update records, where logged);
    None: the scope's step axis (``env_step`` for training and test)"""
    group_by: tuple[str, ...] | None = None
    """config keys whose values make a group; None: algorithm name and env id (see
    :mod:`tshtrain.logger.plot_runs`)"""
    average_all: bool = False
    """allow averaging runs of different algorithms or envs; with ``group_by`` None: one curve of all
    runs"""
    smooth_window: PositiveFloat | None = None
    """width of the trailing moving mean, in x units (env steps); None: no smoothing"""
    min_runs: PositiveInt | None = 1
    """the mean is taken where at least this many runs of a group have points (at most all of them);
    1: wherever any run has points, so every run is shown to its end; None: all runs (the range they
    all cover; the mean is cut there)"""

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.group_by is not None and not all(self.group_by):
            raise ConfigurationError(
                f"CurveParams.group_by must name at least one key and no empty ones, got {self.group_by!r}."
            )

    @property
    def x_axis(self) -> str:
        """The name of the x axis (``x``, or the scope's step axis)."""
        return self.x or self.scope.step_axis


@dataclass(frozen=True, kw_only=True)
class LearningCurves:
    """The curves :func:`learning_curves` read, and notes for the user (cuts, skipped runs, ...)."""

    groups: tuple[CurveGroup, ...]
    notes: tuple[str, ...] = field(default=())
    x_axis: str = "env_step"


def read_run(run_dir: str | os.PathLike[str]) -> dict[LogScope, list[Record]]:
    """The records of a run, per scope, from its one log source (CSV files when it has any, else
    TensorBoard event files; see :func:`tshtrain.logger.plot_runs.log_source`)."""
    source = log_source(Path(run_dir))
    if source is None:
        raise ConfigurationError(f"{str(run_dir)!r} holds no CSV or TensorBoard logs.")
    path, kind = source
    return read_csv_log(path) if kind == "csv" else read_tensorboard_log(path)


def load_curve(run_dir: str | os.PathLike[str], *, scope: LogScope, key: str, x: str | None = None) -> Curve:
    """The scalar ``key`` of ``scope`` in one run against ``x`` (None: the scope's step axis); records
    without them are skipped, and of records at the same x the last one counts."""
    by_x: dict[int, float] = {}
    for step, data in read_run(run_dir)[scope]:
        if key in data and (x is None or x == scope.step_axis or x in data):
            by_x[step if x is None or x == scope.step_axis else round(data[x])] = data[key]
    if not by_x:
        also = "" if x is None or x == scope.step_axis else f" with {x!r}"
        raise ConfigurationError(f"{str(run_dir)!r} has no {key!r}{also} in its {scope} records.")
    steps = np.array(sorted(by_x), dtype=np.int64)
    return Curve(
        run_dir=Path(run_dir),
        steps=steps,
        values=np.array([by_x[int(s)] for s in steps], dtype=np.float64),
    )


def trailing_mean(steps: np.ndarray, values: np.ndarray, window: float) -> np.ndarray:
    """At each step s, the mean of ``values`` at steps in (s - window, s] (``steps`` increasing)."""
    total = np.concatenate([[0.0], np.cumsum(values)])
    end = np.arange(1, len(steps) + 1)
    start = np.searchsorted(steps, steps - window, side="right")
    result: np.ndarray = (total[end] - total[start]) / (end - start)
    return result


def _on_grid(curves: Sequence[Curve], grid: np.ndarray) -> np.ndarray:
    """values_RG: the runs' drawn values at ``grid``, interpolated inside each run's range, NaN outside."""
    values_RG = np.full((len(curves), len(grid)), np.nan)
    for row, curve in zip(values_RG, curves, strict=True):
        inside = (grid >= curve.steps[0]) & (grid <= curve.steps[-1])
        row[inside] = np.interp(grid[inside], curve.steps, curve.drawn)
    return values_RG


def _align(curves: Sequence[Curve], min_runs: int) -> tuple[np.ndarray, np.ndarray]:
    """(grid, values_RG): the runs' drawn values on the union of their steps where at least ``min_runs``
    runs have points, NaN outside a run's range."""
    grid = np.unique(np.concatenate([c.steps for c in curves]))
    values_RG = _on_grid(curves, grid)
    keep = (~np.isnan(values_RG)).sum(axis=0) >= min_runs
    if not keep.any():
        raise ConfigurationError(
            f"the runs {[str(c.run_dir) for c in curves]} share no range of steps where {min_runs} of "
            f"them have points; plot them separately or lower --min-runs."
        )
    return grid[keep], values_RG[:, keep]


def mean_and_std(curves: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, std) of several curves on the range all of them cover (linear interpolation)."""
    grid, values_RG = _align(curves, len(curves))
    return grid, values_RG.mean(axis=0), values_RG.std(axis=0)


def make_group(label: str, curves: Sequence[Curve], *, min_runs: int | None = None) -> CurveGroup:
    """The :class:`CurveGroup` of ``curves``: mean, std, min and max where at least ``min_runs`` (None:
    all) of them have points."""
    needed = len(curves) if min_runs is None else min(min_runs, len(curves))
    grid, values_RG = _align(curves, needed)
    present_RG = ~np.isnan(values_RG)
    outside = any(c.steps[0] < grid[0] or c.steps[-1] > grid[-1] for c in curves)
    return CurveGroup(
        label=label,
        runs=tuple(curves),
        steps=grid,
        mean=np.nanmean(values_RG, axis=0),
        std=np.nanstd(values_RG, axis=0),
        low=np.nanmin(values_RG, axis=0),
        high=np.nanmax(values_RG, axis=0),
        num_runs=present_RG.sum(axis=0),
        cut=(int(grid[0]), int(grid[-1])) if outside else None,
    )


def _cut_note(group: CurveGroup, params: CurveParams) -> str:
    assert group.cut is not None  # called for cut groups only
    first, last = group.cut
    n = len(group.runs)
    if params.min_runs is None:
        who = "both runs have" if n == 2 else f"all {n} runs have"
    else:
        who = f"at least {min(params.min_runs, n)} of the {n} runs have"
    ends = ", ".join(f"{int(c.steps[-1]):,}" for c in group.runs)
    axis = params.x_axis.replace("_", " ") + "s"
    return (
        f"{group.label}: the mean is cut to {axis} {first:,}-{last:,}, where {who} points (they end at "
        f"{ends}); each run is drawn whole with --per-seed"
        + (
            ""
            if params.min_runs is not None
            else ", and the mean wherever a run has points with --min-runs 1"
        )
    )


def _run_name(run: RunLogs) -> str:
    seed = None if run.config is None else run.config.get("seed")
    return f"seed {seed}" if seed is not None else run.run_dir.name


def _curve(run: RunLogs, params: CurveParams) -> Curve:
    logged = load_curve(run.log_dir, scope=params.scope, key=params.key, x=params.x)
    smoothed = (
        None
        if params.smooth_window is None
        else trailing_mean(logged.steps, logged.values, params.smooth_window)
    )
    return Curve(
        run_dir=run.run_dir, steps=logged.steps, values=logged.values, smoothed=smoothed, name=_run_name(run)
    )


def learning_curves(
    paths: Sequence[str | os.PathLike[str]], params: CurveParams | None = None
) -> LearningCurves:
    """The curves of the runs below ``paths``, one per group of runs (see the module docstring).

    Raises:
        ConfigurationError: no runs, a run without the scalar, an unknown group-by key, a group that
            mixes experiments without ``average_all``, runs that share no range.
    """
    params = params or CurveParams()
    runs, notes = locate_runs(paths)
    run_groups, group_notes = group_runs(runs, group_by=params.group_by, average_all=params.average_all)
    notes.extend(group_notes)
    groups = []
    for run_group in run_groups:
        curves = [_curve(run, params) for run in run_group.runs]
        group = make_group(run_group.label, curves, min_runs=params.min_runs)
        if group.cut is not None:
            notes.append(_cut_note(group, params))
        groups.append(group)
    return LearningCurves(groups=tuple(groups), notes=tuple(notes), x_axis=params.x_axis)


__all__ = [
    "Curve",
    "CurveGroup",
    "CurveParams",
    "LearningCurves",
    "find_runs",
    "learning_curves",
    "load_curve",
    "make_group",
    "mean_and_std",
    "read_run",
    "trailing_mean",
]
