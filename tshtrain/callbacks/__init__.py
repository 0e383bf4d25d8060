"""Ready-made callbacks (add them with ``trainer.add_callback``): early stopping, gradient norms,
reward normalisation, batch sub-sampling, frame counts, a statistic of the collected data, freeing the
CUDA cache."""

from __future__ import annotations

from tshtrain.callbacks.builtin import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    EarlyStopping,
    GradientNormLog,
    RewardNormalizer,
)
from tshtrain.callbacks.scalars import LogScalar

__all__ = [
    "BatchSubSampler",
    "ClearCudaCache",
    "CountFramesLog",
    "EarlyStopping",
    "GradientNormLog",
    "LogScalar",
    "RewardNormalizer",
]
