"""The band drawn around a curve's mean: what it is, and its limits at each step.

Three kinds (:data:`Band`), each **clipped to the runs' own range** at every step (the smallest and the
largest run value there), so a band never claims a return that no run reached (a ±std band around
CartPole's returns would otherwise pass 500, the most an episode can return):

* ``std``: the mean ± one population standard deviation over the runs;
* ``ci``: a **percentile bootstrap confidence interval of the mean** over the runs, as rliable reports
  intervals for aggregate scores: draw the runs with replacement :data:`BOOTSTRAP_RESAMPLES` times
  (whole runs: a resample keeps each run's curve together), take the mean of each resample, and report
  the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those means. A mean over few
  runs has a wide interval; a single run has none (its value).
* ``minmax``: the smallest to the largest run value.

:func:`band_limits` computes the limits (what a test compares), :func:`band_description` says in words
what the band is (the figure's legend title).
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from tshtrain.errors import ConfigurationError

Band = Literal["std", "ci", "minmax", "none"]
"""the band around a curve's mean (see the module docstring)"""
BANDS: tuple[Band, ...] = get_args(Band)
"""the band choices"""
BOOTSTRAP_RESAMPLES = 2000
"""resamples of the runs for a ``ci`` band at each step (rliable's ``get_interval_estimates``
defaults to 50,000 for one table of scores; a figure bootstraps every step, and 2,000 draw the band)"""
CONFIDENCE = 0.95
"""the coverage of a ``ci`` band"""


def band_description(band: Band, *, confidence: float = CONFIDENCE) -> str:
    """What the band of a figure shows, in words (the legend's title)."""
    if band == "std":
        return "band: mean ± 1 std over runs, within their range"
    if band == "ci":
        return f"band: {confidence:.0%} bootstrap CI of the mean over runs"
    if band == "minmax":
        return "band: min to max over runs"
    return "no band"


def bootstrap_mean_ci(
    values_RG: np.ndarray,
    rng: np.random.Generator,
    *,
    confidence: float = CONFIDENCE,
    num_resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[np.ndarray, np.ndarray]:
    """(low_G, high_G): the percentile bootstrap interval of the mean over runs at each step.

    Args:
        values_RG: one row per run, one column per step; NaN where a run has no point. Steps with the
            same runs present are resampled together (whole runs are drawn).
        rng: the generator the resamples are drawn from.
        confidence: the interval's coverage, in (0, 1).
        num_resamples: how many resamples of the runs.
    """
    if not 0.0 < confidence < 1.0:
        raise ConfigurationError(f"confidence must be in (0, 1), got {confidence!r}.")
    present_RG = ~np.isnan(values_RG)
    low_G = np.full(values_RG.shape[1], np.nan)
    high_G = np.full(values_RG.shape[1], np.nan)
    quantiles = [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0]
    for mask in np.unique(present_RG.T, axis=0):  # one pattern of present runs at a time
        columns = (mask == present_RG.T).all(axis=1)
        runs_KG = values_RG[np.ix_(mask, columns)]
        k = runs_KG.shape[0]
        if k == 0:
            continue
        counts_BK = rng.multinomial(k, np.full(k, 1.0 / k), size=num_resamples)  # each resample's draws
        means_BG = counts_BK @ runs_KG / k
        low_G[columns], high_G[columns] = np.quantile(means_BG, quantiles, axis=0)
    return low_G, high_G


def band_limits(
    band: Band,
    values_RG: np.ndarray,
    rng: np.random.Generator | None = None,
    *,
    confidence: float = CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(low_G, high_G) of ``band`` over the runs' values (NaN where a run has no point), clipped at each
    step to the runs' smallest and largest value there; None for ``none``.

    Args:
        rng: draws the bootstrap resamples of a ``ci`` band; None: a generator seeded with 0, so the
            same logs give the same figure.

    Raises:
        ConfigurationError: ``band`` is not one of :data:`BANDS`.
    """
    if band not in BANDS:
        raise ConfigurationError(f"band {band!r} is not one of {', '.join(BANDS)}.")
    if band == "none":
        return None
    min_G, max_G = np.nanmin(values_RG, axis=0), np.nanmax(values_RG, axis=0)
    if band == "minmax":
        return min_G, max_G
    if band == "std":
        mean_G, std_G = np.nanmean(values_RG, axis=0), np.nanstd(values_RG, axis=0)
        low_G, high_G = mean_G - std_G, mean_G + std_G
    else:
        low_G, high_G = bootstrap_mean_ci(values_RG, rng or np.random.default_rng(0), confidence=confidence)
    return np.clip(low_G, min_G, max_G), np.clip(high_G, min_G, max_G)


__all__ = [
    "BANDS",
    "BOOTSTRAP_RESAMPLES",
    "CONFIDENCE",
    "Band",
    "band_description",
    "band_limits",
    "bootstrap_mean_ci",
]
