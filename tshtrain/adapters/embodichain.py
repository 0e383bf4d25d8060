"""Event managers: callbacks registered by name, fired by a trigger (EmbodiChain's EventManager).

A train manager (training collector, ``Every``) and an eval manager (test steps) are callbacks you add::

    events = EventManager("train")
    trainer.add_callback(events, name="events")
    events.register("randomize", randomize_gravity, trigger=OnEpisodeEnd())
    events.register("snapshot", save_weights, trigger=Every(10_000, unit=EventUnit.ENV_STEP))
    eval_events = EventManager("eval", test_collector=params.test_collector)
    trainer.add_callback(eval_events, name="eval_events")
    eval_events.register("video", start_recording, trigger=OnTestStart())
    events.trigger("snapshot")  # fire by hand, any time (once added)

=================  ==================================================================================
trigger            fires
=================  ==================================================================================
``Every(n, unit)`` train only. ``env_step`` (the default): after each vector step of the training
                   collector at which the env steps cross a multiple of n (``Every(1)``: every vector
                   step), ``ctx.env_ids`` all the sub-envs, ``ctx.counters.env_step`` the env steps so
                   far (the other counters are those of the training step's start); offline, at the
                   end of training steps. training_step, gradient_step: at the end of each training
                   step in which the counter crossed a multiple of n; ``unit=epoch``: at the end of
                   every n-th epoch (after its test step)
``OnEpisodeEnd``   after each vector step in which sub-envs ended an episode; ``ctx.env_ids`` are
                   those sub-envs (already reset to their next episode: same-step autoreset)
``OnReset``        before the collector resets all its sub-envs (``ctx.env_ids``: all of them)
``OnStartup``      when the run starts (``on_run_start``, before the initial test step)
``OnShutdown``     when the run ends (``on_run_end``)
``OnTestStart``    eval only: at the start of each test step (``on_test_start``)
``OnTestEnd``      eval only: at the end of each test step (``on_test_end``)
``Manual``         only through ``manager.trigger(name)`` (every event can be triggered so)
=================  ==================================================================================

The train manager's episode and reset triggers watch the training collector, the eval manager's the
test collector. A callback takes one :class:`EventContext`; it may call ``ctx.request_stop(reason)`` or
raise :class:`~tshtrain.trainer.callbacks.StopTraining`. Callbacks with ``state_dict`` /
``load_state_dict``
are saved with checkpoints.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
from typing_extensions import override

from tshtrain.adapters.torchrl import state_owner
from tshtrain.counters import Counters
from tshtrain.data.collector_base import BaseCollector
from tshtrain.data.listeners import EnvsReset, EpisodesEnded, VectorStep
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.callbacks import (
    Adapter,
    RunContext,
    SetupInfo,
    StepSummary,
    StopTraining,
    TestResult,
)
from tshtrain.trainer.stats import EpochStats, InfoStats


class EventUnit(StrEnum):
    """The counter an :class:`Every` trigger counts."""

    ENV_STEP = "env_step"
    TRAINING_STEP = "training_step"
    GRADIENT_STEP = "gradient_step"
    EPOCH = "epoch"


@dataclass(frozen=True)
class Every:
    """Fire every ``n`` units (see the module docstring for when exactly)."""

    n: int
    unit: EventUnit = EventUnit.ENV_STEP

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigurationError(
                f"Every.n must be an int >= 1 (the interval in {self.unit}s), got {self.n!r}."
            )
        try:
            object.__setattr__(self, "unit", EventUnit(self.unit))
        except ValueError:
            allowed = ", ".join(repr(u.value) for u in EventUnit)
            raise ConfigurationError(f"Every.unit must be one of {allowed}, got {self.unit!r}.") from None


@dataclass(frozen=True)
class OnEpisodeEnd:
    """Fire after each vector step in which sub-envs ended an episode (``ctx.env_ids``)."""


@dataclass(frozen=True)
class OnReset:
    """Fire before the collector resets all its sub-envs (``ctx.env_ids``: all)."""


@dataclass(frozen=True)
class OnStartup:
    """Fire when the run starts."""


@dataclass(frozen=True)
class OnShutdown:
    """Fire when the run ends."""


@dataclass(frozen=True)
class OnTestStart:
    """Eval manager only: fire at the start of each test step."""


@dataclass(frozen=True)
class OnTestEnd:
    """Eval manager only: fire at the end of each test step."""


@dataclass(frozen=True)
class Manual:
    """Fire only when ``manager.trigger(name)`` is called."""


Trigger: TypeAlias = (
    Every | OnEpisodeEnd | OnReset | OnStartup | OnShutdown | OnTestStart | OnTestEnd | Manual
)
"""When an event fires."""

_SCOPE_TRIGGERS: Mapping[str, tuple[type, ...]] = {
    "train": (Every, OnEpisodeEnd, OnReset, OnStartup, OnShutdown, Manual),
    "eval": (OnEpisodeEnd, OnReset, OnStartup, OnShutdown, OnTestStart, OnTestEnd, Manual),
}


_TRIGGER_POINTS: Mapping[type, str] = {
    OnEpisodeEnd: "on_episodes_end",
    OnReset: "on_envs_reset",
    OnStartup: "on_run_start",
    OnShutdown: "on_run_end",
    OnTestStart: "on_test_start",
    OnTestEnd: "on_test_end",
}
"""the callback point at which each trigger fires (Every: the ends of training steps and epochs)"""


@dataclass(frozen=True, kw_only=True)
class EventContext:
    """What an event callback receives."""

    name: str
    """the event's name"""
    trigger: Trigger
    """its trigger"""
    counters: Counters
    env_ids: np.ndarray | None = None
    """OnEpisodeEnd / OnReset / Every (env steps): the sub-envs concerned (indices into the vector env)"""
    collector: BaseCollector | None = None
    """OnEpisodeEnd / OnReset / Every (env steps) / OnTestStart / OnTestEnd: the collector whose envs it
    concerns (e.g. ``ctx.collector.env.call(...)`` / ``.env.envs[i]`` for domain randomisation)"""
    stop: Callable[[str], None] = field(repr=False)
    """use :meth:`request_stop`"""

    def request_stop(self, reason: str) -> None:
        """End training after the current training step; ``reason`` goes to ``InfoStats.stop_detail``."""
        self.stop(reason)


class EventCallback(Protocol):
    """An event's action."""

    def __call__(self, ctx: EventContext, /) -> None: ...


@dataclass
class _Event:
    callback: EventCallback
    trigger: Trigger
    fired: int = 0
    last: int = 0  # Every: the unit's counter at the previous check


class EventManager(Adapter):
    """Named events with triggers, a train or an eval manager (see the module docstring). To the
    trainer, one callback."""

    def __init__(self, scope: Literal["train", "eval"], *, test_collector: BaseCollector | None = None):
        """Args:
        scope: ``"train"`` (training collector, Every) or ``"eval"`` (test collector, test start/end).
        test_collector: eval: the collector handed to OnTestStart / OnTestEnd events (the trainer's
            ``params.test_collector``).
        """
        self.scope = scope
        self._events: dict[str, _Event] = {}
        self._test_collector = test_collector
        self._per_vector_step = True
        """Every(n, env_step) fires per vector step (False offline: at the ends of training steps)"""

    @override
    def active_points(self) -> Collection[str]:
        kinds = {type(e.trigger) for e in self._events.values()}
        points = {point for kind, point in _TRIGGER_POINTS.items() if kind in kinds}
        if Every in kinds:
            points |= {"on_run_start", "on_training_step_end", "on_epoch_end"}
        if any(_counts_env_steps(e.trigger) for e in self._events.values()):
            points.add("on_vector_step")
        return points

    def register(self, name: str, callback: EventCallback, *, trigger: Trigger) -> None:
        """Register ``callback`` under ``name``, fired by ``trigger``.

        Raises:
            ConfigurationError: a duplicate name, or a trigger this manager does not fire (``Every`` is
                train-only, ``OnTestStart`` / ``OnTestEnd`` eval-only).
            TypeError: a callback that cannot be called with one EventContext.
        """
        where = f"{self.scope} event {name!r}"
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"events.register: name must be a non-empty str, got {name!r}.")
        if name in self._events:
            raise ConfigurationError(f"{where} is already registered; pass another name.")
        allowed = _SCOPE_TRIGGERS[self.scope]
        if not isinstance(trigger, allowed):
            names = ", ".join(t.__name__ for t in allowed)
            raise ConfigurationError(
                f"{where}: the {self.scope} manager does not fire {trigger!r}; its triggers are {names}."
            )
        _check_callback(callback, where)
        last = 0
        ctx = self.run_context()
        if isinstance(trigger, Every) and trigger.unit != EventUnit.EPOCH and ctx is not None:
            last = int(getattr(ctx.counters, trigger.unit.value))
        self._events[name] = _Event(callback=callback, trigger=trigger, last=last)
        self.changed()

    @property
    def names(self) -> list[str]:
        """Registered event names, in registration order."""
        return list(self._events)

    def fire_count(self, name: str) -> int:
        """How many times the event ``name`` has fired in this manager's lifetime (restored with
        checkpoints)."""
        return self._get(name).fired

    def has(self, kind: type) -> bool:
        """True if some event has a trigger of type ``kind``."""
        return any(isinstance(e.trigger, kind) for e in self._events.values())

    def trigger(self, name: str) -> None:
        """Fire the event ``name`` now (any event, whatever its trigger).

        Raises:
            RuntimeError: the manager is not added to a trainer (``trainer.add_callback``).
        """
        event = self._get(name)
        ctx = self.run_context()
        if ctx is None:
            raise RuntimeError(
                f"{self.scope} events: trigger({name!r}) needs the manager added to a trainer first "
                f"(trainer.add_callback(manager))."
            )
        self._fire(name, event, ctx.counters, ctx.request_stop)

    # ------------------------------------------------------------------ the loop points
    @override
    def on_run_start(self, ctx: RunContext, setup: SetupInfo) -> None:
        self._per_vector_step = not setup.offline
        self.reset_baselines(ctx.counters)
        self.fire(ctx, OnStartup)

    @override
    def on_vector_step(self, ctx: RunContext, step: VectorStep) -> None:
        if step.test or not self._per_vector_step:
            return
        counters = dataclasses.replace(ctx.counters, env_step=step.env_step)
        for name, event in [(n, e) for n, e in self._events.items() if _counts_env_steps(e.trigger)]:
            if self._due(event, step.env_step):
                self._fire(
                    name, event, counters, ctx.request_stop, env_ids=step.env_ids, collector=step.collector
                )

    @override
    def on_episodes_end(self, ctx: RunContext, ended: EpisodesEnded) -> None:
        if ended.test == (self.scope == "eval"):
            self.fire(ctx, OnEpisodeEnd, env_ids=ended.env_ids, collector=ended.collector)

    @override
    def on_envs_reset(self, ctx: RunContext, reset: EnvsReset) -> None:
        if reset.test == (self.scope == "eval"):
            self.fire(ctx, OnReset, env_ids=reset.env_ids, collector=reset.collector)

    @override
    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        self.check_every(ctx, epoch_closed=False)

    @override
    def on_test_start(self, ctx: RunContext) -> None:
        self.fire(ctx, OnTestStart, collector=self._test_collector)

    @override
    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        self.fire(ctx, OnTestEnd, collector=self._test_collector)

    @override
    def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
        self.check_every(ctx, epoch_closed=True)

    @override
    def on_run_end(self, ctx: RunContext, info: InfoStats) -> None:
        self.fire(ctx, OnShutdown)

    # ------------------------------------------------------------------ firing
    def fire(
        self,
        ctx: RunContext,
        kind: type,
        *,
        env_ids: np.ndarray | None = None,
        collector: BaseCollector | None = None,
    ) -> None:
        """Fire every event whose trigger is of type ``kind`` (not Every)."""
        for name, event in [(n, e) for n, e in self._events.items() if isinstance(e.trigger, kind)]:
            self._fire(name, event, ctx.counters, ctx.request_stop, env_ids=env_ids, collector=collector)

    def check_every(self, ctx: RunContext, *, epoch_closed: bool) -> None:
        """Fire Every events that are due: step units always, the epoch unit when an epoch closed."""
        counters = ctx.counters
        for name, event in list(self._events.items()):
            trigger = event.trigger
            if not isinstance(trigger, Every):
                continue
            if trigger.unit == EventUnit.EPOCH:
                if epoch_closed and counters.epoch % trigger.n == 0:
                    self._fire(name, event, counters, ctx.request_stop)
                continue
            if trigger.unit == EventUnit.ENV_STEP and self._per_vector_step:
                continue  # fired by on_vector_step
            if self._due(event, int(getattr(counters, trigger.unit.value))):
                self._fire(name, event, counters, ctx.request_stop)

    @staticmethod
    def _due(event: _Event, value: int) -> bool:
        """An Every event's counter moved to ``value``: True if it crossed a multiple of n."""
        assert isinstance(event.trigger, Every)
        due = value // event.trigger.n > event.last // event.trigger.n
        event.last = value
        return due

    def reset_baselines(self, counters: Counters) -> None:
        """Every events count from ``counters`` (the counters at the start of a run)."""
        for event in self._events.values():
            if isinstance(event.trigger, Every) and event.trigger.unit != EventUnit.EPOCH:
                event.last = int(getattr(counters, event.trigger.unit.value))

    def state_dict(self) -> dict[str, Any]:
        """Fire counts and the state of stateful callbacks."""
        state: dict[str, Any] = {"fired": {n: e.fired for n, e in self._events.items()}, "callbacks": {}}
        for name, event in self._events.items():
            owner = state_owner(event.callback)
            if owner is not None:
                state["callbacks"][name] = owner.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Restore :meth:`state_dict` (with ``strict``, the stateful callbacks must match)."""
        owners = {n: state_owner(e.callback) for n, e in self._events.items()}
        stateful = {n for n, o in owners.items() if o is not None}
        saved = dict(state.get("callbacks", {}))
        if strict and set(saved) != stateful:
            raise ConfigurationError(
                f"{self.scope} event state: for {sorted(stateful - set(saved))} is "
                f"missing and for {sorted(set(saved) - stateful)} no such stateful event is registered; "
                f"register the same events under the same names (or pass strict=False)."
            )
        for name, count in dict(state.get("fired", {})).items():
            if name in self._events:
                self._events[name].fired = int(count)
        for name, owner in owners.items():
            if owner is not None and name in saved:
                owner.load_state_dict(saved[name])

    # ------------------------------------------------------------------ internals
    def _get(self, name: str) -> _Event:
        try:
            return self._events[name]
        except KeyError:
            raise ConfigurationError(
                f"{self.scope} events: no event named {name!r}; registered: {self.names}."
            ) from None

    def _fire(
        self,
        name: str,
        event: _Event,
        counters: Counters,
        request_stop: Callable[[str], None],
        *,
        env_ids: np.ndarray | None = None,
        collector: BaseCollector | None = None,
    ) -> None:
        def stop(reason: str) -> None:
            request_stop(f"{self.scope} event {name!r}: {reason}")

        ctx = EventContext(
            name=name,
            trigger=event.trigger,
            counters=counters,
            env_ids=env_ids,
            collector=collector,
            stop=stop,
        )
        event.fired += 1
        try:
            event.callback(ctx)
        except StopTraining as signal:
            stop(signal.reason)


def _counts_env_steps(trigger: Trigger) -> bool:
    return isinstance(trigger, Every) and trigger.unit == EventUnit.ENV_STEP


def _check_callback(callback: object, where: str) -> None:
    if not callable(callback):
        raise TypeError(f"{where}: the callback must be callable, got {type(callback).__name__}.")
    try:
        signature = inspect.signature(callback)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None)
    except TypeError:
        raise TypeError(
            f"{where}: the callback must take exactly one positional argument, the EventContext, but its "
            f"signature is {signature}."
        ) from None
