"""The automatic checkpoints of ``TrainerParams.checkpoint``, as an internal callback of the trainer.

``best/`` is written at ``on_test_end`` of a test step that set a new best score (this callback is
called before any other there, so the checkpoint holds the state the test step left); ``periodic-*``
after each training step for which one is due, once the step's records are written and the epoch it
closed (with its test step) is complete (:meth:`AutoCheckpoints.after_training_step`); ``final/`` when
the run ends, however it ends (:meth:`AutoCheckpoints.final`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import final

from typing_extensions import override

from tshtrain.checkpoint import Checkpointable, CheckpointManager
from tshtrain.trainer.callbacks import Callback, RunContext, TestResult

log = logging.getLogger(__name__)


@final
class AutoCheckpoints(Callback):
    """Writes ``best/``, ``periodic-*`` and ``final/`` (see the module docstring)."""

    def __init__(
        self, manager: CheckpointManager, target: Callable[[], Checkpointable], active: Callable[[], bool]
    ):
        """Args:
        manager: where and when (``params.checkpoint``, per rank).
        target: the trainer's state view now.
        active: True once the run is reset or loaded (before, there is nothing to save).
        """
        self.manager = manager
        self._target = target
        self._active = active

    @override
    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        if result.is_best and self._active():
            self.manager.best(self._target())

    def after_training_step(self, *, epoch_closed: bool) -> None:
        """A periodic checkpoint, if one is due after this training step."""
        self.manager.periodic(self._target(), epoch_closed=epoch_closed)

    def final(self, reason: str) -> None:
        """``final/``; a failure is logged, never raised over the run's own outcome."""
        try:
            self.manager.final(self._target(), reason)
        except Exception:
            log.exception("Trainer: the final checkpoint could not be written")
