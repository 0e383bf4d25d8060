"""Logging a statistic of the collected transitions (TorchRL's ``LogScalar``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal, final

import numpy as np
import torch
from typing_extensions import override

from tshtrain.errors import ConfigurationError
from tshtrain.trainer.callbacks import Callback, CollectedBatch, RunContext

_FIELDS = ("rew", "act", "obs", "obs_next", "terminated", "truncated")
_REDUCTIONS: dict[str, Callable[[np.ndarray], Any]] = {
    "mean": np.mean,
    "sum": np.sum,
    "min": np.min,
    "max": np.max,
}


@final
@dataclass(eq=False)
class LogScalar(Callback):
    """Logs ``reduction`` of a field of each collection step's transitions as ``logname`` (and its
    standard deviation as ``<logname>_std``) in the training record. Point: ``after_collect``.

    TorchRL's ``LogScalar(key=("next", "reward"), logname="r_training")`` is ``LogScalar()``; the field
    names are those of :class:`~tshtrain.data.TransitionBatch` (``rew``, ``act``, ``obs``, ...).
    """

    key: str = "rew"
    """the field of the transitions (``rew``, ``act``, ``obs``, ``obs_next``, ``terminated``,
    ``truncated``)"""
    logname: str = "r_training"
    """the name it is logged under"""
    _: KW_ONLY
    log_pbar: bool = False
    """also show it in the progress bar"""
    include_std: bool = True
    """also log its standard deviation, as ``<logname>_std``"""
    reduction: Literal["mean", "sum", "min", "max"] = "mean"
    """how the values become one number"""

    def __post_init__(self) -> None:
        if self.key not in _FIELDS:
            raise ConfigurationError(f"LogScalar.key must be one of {', '.join(_FIELDS)}, got {self.key!r}.")
        if self.reduction not in _REDUCTIONS:
            raise ConfigurationError(
                f"LogScalar.reduction must be one of {', '.join(_REDUCTIONS)}, got {self.reduction!r}."
            )
        if not isinstance(self.logname, str) or not self.logname:
            raise ConfigurationError(f"LogScalar.logname must be a non-empty str, got {self.logname!r}.")

    @override
    def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
        values = getattr(batch.new_transitions(), self.key)
        if isinstance(values, dict):
            raise TypeError(f"LogScalar: {self.key} is a Dict observation; log one of its entries yourself.")
        if isinstance(values, torch.Tensor):
            values = values.detach().cpu().numpy()
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return None
        scalars = {self.logname: float(_REDUCTIONS[self.reduction](values))}
        if self.include_std:
            scalars[f"{self.logname}_std"] = float(values.std())
        ctx.log(scalars, progress_bar=tuple(scalars) if self.log_pbar else ())
        return None
