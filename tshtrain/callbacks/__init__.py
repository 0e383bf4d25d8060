"""Ready-made callbacks (add them with ``trainer.add_callback``): early stopping, gradient norms,
reward normalisation, batch sub-sampling, frame counts, freeing the CUDA cache."""

from __future__ import annotations

from tshtrain.callbacks.builtin import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    EarlyStopping,
    GradientNormLog,
    RewardNormalizer,
)

__all__ = [
    "BatchSubSampler",
    "ClearCudaCache",
    "CountFramesLog",
    "EarlyStopping",
    "GradientNormLog",
    "RewardNormalizer",
]
