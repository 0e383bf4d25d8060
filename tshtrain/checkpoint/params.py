"""Automatic checkpoints: when and where (``TrainerParams.checkpoint``); writing them is
:mod:`tshtrain.checkpoint.store`'s job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tshtrain.errors import ConfigurationError

Backend = Literal["torch", "dcp"]


@dataclass(frozen=True, kw_only=True)
class CheckpointParams:
    """Automatic checkpoints (``TrainerParams.checkpoint``)."""

    directory: str | Path
    """where checkpoints go: ``periodic-<epoch>-<env_step>/``, ``best/`` and ``final/``"""
    every_num_epochs: int | None = 1
    """save after every this many epochs (None: not by epoch)"""
    every_num_env_steps: int | None = None
    """save after the training step that crosses every this many env steps (None: not by env steps)"""
    keep_last: int = 3
    """periodic checkpoints kept (older ones are deleted)"""
    save_best: bool = True
    """save ``best/`` after each test step that reaches a new best score"""
    save_on_exit: bool = True
    """save ``final/`` when the run ends: normally, by a stop, by KeyboardInterrupt or by an exception
    (the manifest records which; after an exception the last periodic checkpoint is the safe one)"""
    include_buffers: bool = True
    """save the training replay buffer (large for off-policy runs; needed for an exact resume)"""
    backend: Backend = "torch"
    """``"torch"``: one ``torch.save`` file loaded with ``weights_only=True``; ``"dcp"``:
    ``torch.distributed.checkpoint`` (sharded-ready tensors)"""

    def __post_init__(self) -> None:
        for name in ("every_num_epochs", "every_num_env_steps", "keep_last"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(
                    f"CheckpointParams.{name} must be an int >= 1 or None, got {value!r}."
                )
        if self.every_num_epochs is None and self.every_num_env_steps is None and not self.save_on_exit:
            raise ConfigurationError(
                "CheckpointParams: every_num_epochs and every_num_env_steps are None and save_on_exit is "
                "False, so no checkpoint would ever be written; set one of them."
            )
        if self.backend not in ("torch", "dcp"):
            raise ConfigurationError(
                f"CheckpointParams.backend must be 'torch' or 'dcp', got {self.backend!r}."
            )
