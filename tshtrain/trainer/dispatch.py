"""Calling a trainer's callbacks (:class:`CallbackSet`: by name, in the order added, and per loop point
those active there, so that a point without callbacks costs one dict lookup), the in-update bridge, and
the callbacks the trainer adds itself before yours: :class:`AutoCheckpoints`, :class:`ParamsCallbacks`."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar, cast, final

import torch
from typing_extensions import override

from tshtrain.algorithm.base import Algorithm
from tshtrain.checkpoint import Checkpointable, CheckpointManager
from tshtrain.counters import Counters
from tshtrain.data.batch import AnyTransitionBatch, TorchTransitionBatch, TransitionBatch
from tshtrain.errors import ConfigurationError
from tshtrain.logger.records import NoRecord, ScalarSink, mean_scalars
from tshtrain.trainer.callbacks import (
    IN_UPDATE_POINTS,
    POINTS,
    Adapter,
    Callback,
    LogSink,
    OptimizerStep,
    RunContext,
    StatefulCallback,
    StepSummary,
    StopTraining,
    TestResult,
    overridden_points,
)
from tshtrain.trainer.params import TrainerParams
from tshtrain.trainer.stats import EpochStats, StopReason

_T = TypeVar("_T")
log = logging.getLogger("tshtrain.trainer.autosave")  # its name from before the merge, for filters

_TEST_POINTS = frozenset({"on_test_start", "on_test_end"})
_COLLECTOR_POINTS = frozenset({"on_vector_step", "on_episodes_end", "on_envs_reset"})
_STEP_POINTS = _COLLECTOR_POINTS.union(
    {"on_training_step_start", "after_collect", "before_update", "after_update", "on_training_step_end"}
)


class CallbackSet:
    """The callbacks of one trainer (see the module docstring)."""

    def __init__(
        self, *, counters: Callable[[], Counters], algorithm: Algorithm[Any], stop: Callable[[str], None]
    ):
        """``counters``: the trainer's counters now; ``stop``: ends training after the current training
        step with a detail message."""
        self._counters, self._algorithm, self._stop = counters, algorithm, stop
        self._named: dict[str, Callback] = {}
        self._active: dict[str, list[tuple[str, Callback]]] = {p: [] for p in POINTS}
        self._listeners: list[Callable[[], None]] = []
        self.progress: dict[str, float] = {}
        """the latest scalars marked for the progress bar"""
        self.step_sink = ScalarSink(self.progress)
        """the scalars of the current training step's ``training`` record"""
        self.test_sink = ScalarSink(self.progress)
        """the scalars of the current test step's ``test`` record"""
        self.step_open = False
        """True between the start of a training step and the writing of its ``training`` record"""

    def add(self, callback: Callback, name: str) -> None:
        """Add ``callback`` under the unique ``name``."""
        if not isinstance(callback, Callback):
            raise TypeError(
                f"add_callback: {name!r} must be a tshtrain.trainer.Callback, got {type(callback).__name__}; "
                f"subclass Callback and override the points you need."
            )
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"add_callback: name must be a non-empty str, got {name!r}.")
        if name in self._named:
            raise ConfigurationError(f"add_callback: a callback named {name!r} exists already; pass name=...")
        self._named[name] = callback
        if isinstance(callback, Adapter):
            callback.attach(_Binding(self, name, callback))
        self.changed()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever the active points change."""
        self._listeners.append(listener)

    def changed(self) -> None:
        """Re-read every callback's active points (an adapter's change while it lives)."""
        self._active = {p: [] for p in POINTS}
        for name, callback in self._named.items():
            own = overridden_points(callback)
            if isinstance(callback, Adapter):
                own &= frozenset(callback.active_points())
            for point in own:
                self._active[point].append((name, callback))
        for listener in self._listeners:
            listener()

    def active(self, point: str) -> bool:
        """True if some callback is active at ``point``."""
        return bool(self._active[point])

    def names(self) -> list[str]:
        """The callbacks' names, in calling order."""
        return list(self._named)

    def get(self, name: str) -> Callback | None:
        """The callback added under ``name`` (None: none is)."""
        return self._named.get(name)

    def context(self, name: str, callback: Callback, sink: LogSink | None = None) -> RunContext:
        """The context a callback receives now."""
        return RunContext(
            counters=self._counters(),
            algorithm=self._algorithm,
            name=name,
            stop=lambda reason: self._stop(_stop_detail(name, callback, reason)),
            sink=sink if sink is not None else self.step_sink,
        )

    def call(self, point: str, *payload: object, sink: LogSink | None = None) -> None:
        """Call every callback active at ``point`` (a point that returns nothing); ``sink``: where their
        ``ctx.log`` writes (default: the record of the point)."""
        for name, callback in self._active[point]:
            self._invoke(point, name, callback, payload, sink)

    def transform(self, point: str, data: _T, expected: type, sink: LogSink | None = None) -> _T:
        """Chain the callbacks of a transforming point: each gets the previous one's result."""
        for name, callback in self._active[point]:
            result = self._invoke(point, name, callback, (data,), sink)
            if result is None:
                continue
            if not isinstance(result, expected):
                raise TypeError(
                    f"callback {name!r} returned {type(result).__name__} from {point}; it must return a "
                    f"{expected.__name__} or None."
                )
            data = cast(_T, result)
        return data

    def _sink(self, point: str, payload: tuple[object, ...]) -> LogSink:
        """Where ``ctx.log`` writes at ``point`` (see the module docstring of callbacks)."""
        test = bool(payload and getattr(payload[0], "test", False))
        if point in _TEST_POINTS or (point in _COLLECTOR_POINTS and test):
            return self.test_sink
        if point in _STEP_POINTS and self.step_open:
            return self.step_sink
        return NoRecord(point)

    def _invoke(
        self, point: str, name: str, callback: Callback, payload: tuple[object, ...], sink: LogSink | None
    ) -> Any:
        method = getattr(callback, point)
        ctx = self.context(name, callback, sink if sink is not None else self._sink(point, payload))
        try:
            return method(ctx, *payload)
        except StopTraining as signal:
            detail = _stop_detail(name, callback, signal.reason)
            if point in IN_UPDATE_POINTS:  # abandon the update, named
                raise StopTraining(detail) from None
            self._stop(detail)
            return None

    def update_hooks(self) -> UpdateBridge | None:
        """A fresh bridge for one ``algorithm.update`` call (its ``hooks=``), or None when no callback acts
        inside updates (then pass :data:`~tshtrain.algorithm.base.NO_UPDATE_HOOKS`)."""
        if not any(self._active[p] for p in IN_UPDATE_POINTS):
            return None
        return UpdateBridge(self)

    def state_dict(self) -> dict[str, Any]:
        """``{name: state_dict()}`` of every stateful callback."""
        return {name: cb.state_dict() for name, cb in self._named.items() if isinstance(cb, StatefulCallback)}

    def check_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Raise ConfigurationError unless ``state`` fits the stateful callbacks (with ``strict``)."""
        stateful = {n for n, cb in self._named.items() if isinstance(cb, StatefulCallback)}
        # an adapter that held nothing (e.g. the hook registry every trainer had before adapters were
        # added by choice) may be absent from the loading trainer
        unexpected = {n for n in set(state) - stateful if not _empty(state[n])}
        missing = stateful - set(state)
        if strict and (missing or unexpected):
            raise ConfigurationError(
                f"callback state: for {sorted(missing)} is missing and for "
                f"{sorted(unexpected)} no such stateful callback is added; add the same callbacks under "
                f"the same names as the run that saved it (or pass strict=False)."
            )

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Restore :meth:`state_dict` (checked first with :meth:`check_state_dict`)."""
        self.check_state_dict(state, strict=strict)
        for name, callback in self._named.items():
            if isinstance(callback, StatefulCallback) and name in state:
                load: Callable[..., Any] = callback.load_state_dict
                if "strict" in inspect.signature(load).parameters:  # adapters check their members' names
                    load(state[name], strict=strict)
                else:
                    callback.load_state_dict(state[name])


def _empty(state: object) -> bool:
    """True for a state that holds nothing: empty mappings, nested or not."""
    return isinstance(state, Mapping) and all(_empty(v) for v in state.values())


def _stop_detail(name: str, callback: Callback, reason: str) -> str:
    """A stop's detail: an adapter's reason names its source already, a callback's is prefixed."""
    return reason if isinstance(callback, Adapter) else f"callback {name!r}: {reason}"


class _Binding:
    """What an adapter added to a :class:`CallbackSet` is given (see ``Adapter.attach``)."""

    def __init__(self, callbacks: CallbackSet, name: str, adapter: Adapter):
        self._callbacks, self._name, self._adapter = callbacks, name, adapter

    def changed(self) -> None:
        self._callbacks.changed()

    def context(self) -> RunContext:
        return self._callbacks.context(self._name, self._adapter)


class UpdateBridge:
    """The :class:`~tshtrain.algorithm.base.UpdateHooks` of one ``algorithm.update`` call: calls the
    callbacks' in-update points and gathers what they log, one record per optimizer step."""

    def __init__(self, callbacks: CallbackSet):
        self._callbacks = callbacks
        self._records: list[dict[str, float]] = []
        self._sink = ScalarSink(callbacks.progress)

    def on_sampled_batch(self, batch: AnyTransitionBatch, /) -> AnyTransitionBatch:
        kind: type[TransitionBatch] | type[TorchTransitionBatch] = type(batch)
        return self._callbacks.transform("on_sampled_batch", batch, kind, sink=self._sink)

    def on_loss(self, losses: Mapping[str, torch.Tensor], /) -> None:
        self._callbacks.call("on_loss", losses, sink=self._sink)

    def on_optimizer_step(self, name: str, optimizer: torch.optim.Optimizer, /) -> None:
        step = OptimizerStep(name=name, optimizer=optimizer)
        self._callbacks.call("on_optimizer_step", step, sink=self._sink)
        self._records.append(self._sink.scalars)
        self._sink = ScalarSink(self._callbacks.progress)

    def scalars(self) -> dict[str, float]:
        """The means, per name, of what was logged in this update call."""
        if self._sink.scalars:
            self._records.append(self._sink.scalars)
            self._sink = ScalarSink(self._callbacks.progress)
        return mean_scalars(self._records)


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
        self.manager, self._target, self._active = manager, target, active

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
    and the test-in-training decision are parts of the steps, not loop points."""

    def __init__(self, params: TrainerParams, finish: Callable[[StopReason], None]):
        """``finish`` ends training with a stop reason (``stop_fn``: ``StopReason.STOP_FN``)."""
        self._params, self._finish = params, finish
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
