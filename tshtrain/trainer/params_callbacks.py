"""The callbacks the trainer adds itself, before yours: :class:`AutoCheckpoints` (``params.checkpoint``)
and :class:`ParamsCallbacks` (Tianshou's params callables)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import final

from typing_extensions import override

from tshtrain.checkpoint import Checkpointable, CheckpointManager
from tshtrain.trainer.callbacks import Adapter, Callback, RunContext, StepSummary, TestResult
from tshtrain.trainer.params import TrainerParams
from tshtrain.trainer.stats import EpochStats, StopReason

log = logging.getLogger("tshtrain.trainer.autosave")  # its name from before the merge, for filters


@final
class AutoCheckpoints(Callback):
    """Writes the automatic checkpoints: ``best/`` at ``on_test_end`` of a test step that set a new best
    score (this callback is called before any other there, so the checkpoint holds the state the test
    step left); ``periodic-*`` after each training step for which one is due, once the step's records are
    written and the epoch it closed (with its test step) is complete (:meth:`after_training_step`);
    ``final/`` when the run ends, however it ends (:meth:`final`)."""

    def __init__(
        self, manager: CheckpointManager, target: Callable[[], Checkpointable], active: Callable[[], bool]
    ):
        """``manager``: where and when (``params.checkpoint``, per rank); ``target``: the trainer's state view
        now; ``active``: True once the run is reset or loaded (before, there is nothing to save)."""
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


@final
class ParamsCallbacks(Adapter):
    """The params' callables at their loop points: ``training_fn`` at ``on_training_step_start``,
    ``test_fn`` at ``on_test_start``, ``save_best_fn`` and ``stop_fn`` at ``on_test_end`` (``stop_fn`` not
    after the initial test step, as in Tianshou), ``save_checkpoint_fn`` at ``on_training_step_end`` (or
    ``on_epoch_end`` of every n-th epoch, ``save_checkpoint_every_num_epochs=n``). ``compute_score_fn``
    (how test steps are scored) and the test-in-training decision are part of the steps, not loop points.
    """

    def __init__(self, params: TrainerParams, finish: Callable[[StopReason], None]):
        """``finish`` ends training with a stop reason (``stop_fn``: ``StopReason.STOP_FN``)."""
        self._params = params
        self._finish = finish
        given = {
            "on_training_step_start": params.training_fn is not None,
            "on_test_start": params.test_fn is not None,
            "on_test_end": params.save_best_fn is not None or params.stop_fn is not None,
            "on_training_step_end": params.save_checkpoint_fn is not None
            and params.save_checkpoint_every_num_epochs is None,
            "on_epoch_end": params.save_checkpoint_fn is not None
            and params.save_checkpoint_every_num_epochs is not None,
        }
        self._points = frozenset(point for point, present in given.items() if present)

    @override
    def active_points(self) -> Collection[str]:
        return self._points

    @override
    def on_training_step_start(self, ctx: RunContext) -> None:
        if self._params.training_fn is not None:
            self._params.training_fn(ctx.counters.epoch, ctx.counters.env_step)

    @override
    def on_test_start(self, ctx: RunContext) -> None:
        if self._params.test_fn is not None:
            self._params.test_fn(ctx.counters.epoch, ctx.counters.env_step)

    @override
    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        p = self._params
        if result.is_best and p.save_best_fn is not None:
            p.save_best_fn(ctx.algorithm)
        if result.initial or p.stop_fn is None:
            return
        best = result.best_score
        score = best if p.stop_fn_on_best_score and best is not None else result.score
        if p.stop_fn(score):
            self._finish(StopReason.STOP_FN)

    @override
    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        self._save_checkpoint(ctx)

    @override
    def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
        every = self._params.save_checkpoint_every_num_epochs
        if every is not None and ctx.counters.epoch % every == 0:
            self._save_checkpoint(ctx)

    def _save_checkpoint(self, ctx: RunContext) -> None:
        if self._params.save_checkpoint_fn is not None:
            c = ctx.counters
            self._params.save_checkpoint_fn(c.epoch, c.env_step, c.gradient_step)
