"""Learning-curve figures (matplotlib, optional extra: ``pip install 'tshtrain[plot]'``), and the one place
to import the plotting API from.

:func:`learning_curves` (from :mod:`tshtrain.logger.plot_curves`) reads and groups the curves;
:func:`make_figure` draws them into a matplotlib ``Figure`` (what a test inspects) and
:func:`plot_learning_curves` saves that figure; ``tshtrain plot`` calls them in turn.

What a figure shows per group: the mean (solid where all runs of the group have points, dashed where
fewer do, with ``min_runs``), a band (one std, or min to max, for groups of several runs), optionally a
thin line per run over its whole range, and a legend entry naming the group, its number of runs and
whether its mean was cut to a common range.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import numpy as np

from tshtrain.errors import ConfigurationError
from tshtrain.logger.plot_curves import (
    Band,
    Curve,
    CurveGroup,
    CurveParams,
    LearningCurves,
    learning_curves,
    load_curve,
    make_group,
    mean_and_std,
    read_run,
    trailing_mean,
)
from tshtrain.logger.plot_runs import find_runs

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

BANDS: tuple[Band, ...] = get_args(Band)
"""the band choices: one ``std`` around the mean, the runs' ``minmax``, or ``none``"""


def legend_label(group: CurveGroup) -> str:
    """The group's label with its number of runs and what was cut or drawn dashed."""
    marks = [f"{len(group.runs)} runs"] if len(group.runs) > 1 else []
    if group.cut is not None:
        marks.append(f"cut to {group.cut[0]:,}–{group.cut[1]:,}")
    if group.num_runs is not None and (group.num_runs < len(group.runs)).any():
        marks.append("dashed: fewer runs")
    return f"{group.label} ({', '.join(marks)})" if marks else group.label


def _draw_group(axes: Axes, group: CurveGroup, color: str, *, per_seed: bool, band: Band) -> None:
    several = len(group.runs) > 1
    if per_seed:
        for run in group.runs:
            axes.plot(run.steps, run.drawn, color=color, linewidth=0.7, alpha=0.45, gid=f"run:{run.run_dir}")
    if several and band != "none":
        if band == "std":
            low, high = group.mean - group.std, group.mean + group.std
        else:
            low = group.mean if group.low is None else group.low
            high = group.mean if group.high is None else group.high
        axes.fill_between(
            group.steps, low, high, color=color, alpha=0.2, linewidth=0, gid=f"band:{group.label}"
        )
    full = (
        np.ones(len(group.steps), dtype=bool) if group.num_runs is None else group.num_runs == len(group.runs)
    )
    if not full.all():
        axes.plot(
            group.steps, group.mean, color=color, linewidth=1.4, linestyle="--", gid=f"partial:{group.label}"
        )
    axes.plot(
        group.steps,
        np.where(full, group.mean, np.nan),
        color=color,
        linewidth=1.8,
        label=legend_label(group),
        gid=f"mean:{group.label}",
    )


def make_figure(
    curves: LearningCurves | Sequence[CurveGroup],
    *,
    title: str | None = None,
    xlabel: str = "env steps",
    ylabel: str = "test return",
    per_seed: bool = False,
    band: Band = "std",
) -> Figure:
    """Draw each group (see the module docstring) into a new 800x500 px figure (at 100 dpi).

    The artists carry ids (``Artist.get_gid()``): ``mean:<label>``, ``partial:<label>`` (the dashed
    mean), ``band:<label>`` and ``run:<run_dir>`` (the per-seed lines).

    Raises:
        ConfigurationError: matplotlib is not installed, or ``band`` is not one of :data:`BANDS`.
    """
    if band not in BANDS:
        raise ConfigurationError(f"band {band!r} is not one of {', '.join(BANDS)}.")
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ConfigurationError(
            "plotting needs matplotlib, which is not installed; install it with "
            "pip install 'tshtrain[plot]' (or pip install matplotlib)."
        ) from error
    groups = curves.groups if isinstance(curves, LearningCurves) else tuple(curves)
    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot()
    for index, group in enumerate(groups):
        _draw_group(axes, group, f"C{index % 10}", per_seed=per_seed, band=band)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best")
    return figure


def plot_learning_curves(
    curves: LearningCurves | Sequence[CurveGroup],
    output: str | os.PathLike[str],
    *,
    title: str | None = None,
    xlabel: str = "env steps",
    ylabel: str = "test return",
    per_seed: bool = False,
    band: Band = "std",
) -> Path:
    """Draw the curves with :func:`make_figure` and save the figure to ``output`` (format from the
    suffix; parent directories are created). Returns ``output``.

    Raises:
        ConfigurationError: matplotlib is not installed.
    """
    figure = make_figure(curves, title=title, xlabel=xlabel, ylabel=ylabel, per_seed=per_seed, band=band)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    return output


__all__ = [
    "BANDS",
    "Band",
    "Curve",
    "CurveGroup",
    "CurveParams",
    "LearningCurves",
    "find_runs",
    "learning_curves",
    "legend_label",
    "load_curve",
    "make_figure",
    "make_group",
    "mean_and_std",
    "plot_learning_curves",
    "read_run",
    "trailing_mean",
]
