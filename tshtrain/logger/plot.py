"""Learning-curve figures (matplotlib, optional extra: ``pip install 'tshtrain[plot]'``), and the one place
to import the plotting API from.

:func:`learning_curves` (from :mod:`tshtrain.logger.plot_curves`) reads and groups the curves;
:func:`make_figure` draws them into a matplotlib ``Figure`` (what a test inspects) and
:func:`plot_learning_curves` saves that figure; ``tshtrain plot`` calls them in turn.

What a figure shows per group: the mean (solid where all runs of the group have points, dashed where
fewer do: by default every run is shown to its end), a band that the legend's title names (one std, a
bootstrap confidence interval of the mean, or min to max; see :mod:`tshtrain.logger.plot_bands`),
optionally a thin line per run over its whole range, labelled with its seed and marked where it ends,
and a legend entry naming the group, its number of runs and whether its mean was cut to a common
range. Under the curves, a strip shows how many runs of each group have points at each step.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tshtrain.errors import ConfigurationError
from tshtrain.logger.plot_bands import (
    BANDS,
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    Band,
    band_description,
    band_limits,
    bootstrap_mean_ci,
)
from tshtrain.logger.plot_curves import (
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


def legend_label(group: CurveGroup) -> str:
    """The group's label with its number of runs and what was cut or drawn dashed."""
    marks = [f"{len(group.runs)} runs"] if len(group.runs) > 1 else []
    if group.cut is not None:
        marks.append(f"cut to {group.cut[0]:,}–{group.cut[1]:,}")
    if group.num_runs is not None and (group.num_runs < len(group.runs)).any():
        marks.append("dashed: fewer runs")
    return f"{group.label} ({', '.join(marks)})" if marks else group.label


_RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""the marks that tell the per-run lines of a group apart (at each run's last point and in the legend)"""


def _draw_group(axes: Axes, group: CurveGroup, color: str, *, per_seed: bool, band: Band) -> None:
    several = len(group.runs) > 1
    if per_seed:
        for number, run in enumerate(group.runs):
            axes.plot(
                run.steps,
                run.drawn,
                color=color,
                linewidth=0.8,
                alpha=0.6,
                marker=_RUN_MARKERS[number % len(_RUN_MARKERS)],
                markevery=[len(run.steps) - 1],  # one mark where the run ends, as in the legend
                markersize=5,
                gid=f"run:{run.run_dir}",
                label=run.name or run.run_dir.name,
            )
    limits = band_limits(band, group.aligned_values()) if several else None
    if limits is not None:
        axes.fill_between(
            group.steps, limits[0], limits[1], color=color, alpha=0.2, linewidth=0, gid=f"band:{group.label}"
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
        zorder=3,
    )


def _draw_counts(axes: Axes, groups: Sequence[CurveGroup]) -> None:
    """The strip under the curves: how many runs of each group have points at each step."""
    from matplotlib.ticker import MaxNLocator

    top = 1
    for index, group in enumerate(groups):
        counts = np.full(len(group.steps), len(group.runs)) if group.num_runs is None else group.num_runs
        axes.step(group.steps, counts, where="pre", color=f"C{index % 10}", gid=f"count:{group.label}")
        top = max(top, len(group.runs))
    axes.set_ylim(0, top + 0.5)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("runs")
    axes.grid(True, alpha=0.3)


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
    mean), ``band:<label>``, ``run:<run_dir>`` (the per-seed lines, labelled ``seed <n>``) and, in the
    strip under the curves (the figure's second axes, drawn when a group has several runs),
    ``count:<label>`` (the number of runs at each step). The legend's title says what the band is.

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
    several = any(len(group.runs) > 1 for group in groups)
    if several:
        axes, strip = figure.subplots(2, 1, sharex=True, height_ratios=(5, 1))
    else:
        axes = figure.add_subplot()
    for index, group in enumerate(groups):
        _draw_group(axes, group, f"C{index % 10}", per_seed=per_seed, band=band)
    if several:
        _draw_counts(strip, groups)
        strip.set_xlabel(xlabel)
    else:
        axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title)
    axes.grid(True, alpha=0.3)
    legend_title = band_description(band) if several and band != "none" else None
    axes.legend(loc="best", title=legend_title, fontsize="small", title_fontsize="small")
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
    "BOOTSTRAP_RESAMPLES",
    "CONFIDENCE",
    "Band",
    "Curve",
    "CurveGroup",
    "CurveParams",
    "LearningCurves",
    "band_description",
    "band_limits",
    "bootstrap_mean_ci",
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
