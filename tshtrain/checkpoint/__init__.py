"""Checkpoints: what a directory holds and how it is written, verified and read back.

The trainer decides *when* (``TrainerParams.checkpoint``, ``Trainer.save_checkpoint``); this package
knows *how*: :mod:`~tshtrain.checkpoint.files` writes a directory atomically with a manifest of
hashes and signs it (:mod:`tshtrain.signing`), :mod:`~tshtrain.checkpoint.store` puts a
:class:`Checkpointable` (the trainer's state view) into one and back, validating everything before
anything changes, and :class:`CheckpointManager` keeps the automatic ``periodic-*``, ``best`` and
``final`` checkpoints of a run.
"""

from __future__ import annotations

from tshtrain.checkpoint.files import CheckpointManifest, read_manifest
from tshtrain.checkpoint.params import Backend, CheckpointParams
from tshtrain.checkpoint.store import (
    Checkpointable,
    CheckpointManager,
    load_algorithm_checkpoint,
    load_checkpoint,
    read_algorithm_state,
    save_checkpoint,
)
from tshtrain.errors import CheckpointError

__all__ = [
    "Backend",
    "CheckpointError",
    "CheckpointManager",
    "CheckpointManifest",
    "CheckpointParams",
    "Checkpointable",
    "load_algorithm_checkpoint",
    "load_checkpoint",
    "read_algorithm_state",
    "read_manifest",
    "save_checkpoint",
]
