"""The adapters of a trainer, added on first use under the names the trainer once gave them."""

from __future__ import annotations

from typing import Any

from tshtrain.adapters import EventManager, HookRegistry
from tshtrain.trainer import Trainer


def hooks_of(trainer: Trainer[Any, Any]) -> HookRegistry:
    """The trainer's TorchRL hook registry (added as ``"hooks"`` the first time)."""
    found = trainer.callbacks.get("hooks")
    if found is None:
        found = HookRegistry()
        trainer.add_callback(found, name="hooks")
    assert isinstance(found, HookRegistry)
    return found


def events_of(trainer: Trainer[Any, Any]) -> EventManager:
    """The trainer's train event manager (added as ``"events"`` the first time)."""
    found = trainer.callbacks.get("events")
    if found is None:
        found = EventManager("train")
        trainer.add_callback(found, name="events")
    assert isinstance(found, EventManager)
    return found


def eval_events_of(trainer: Trainer[Any, Any]) -> EventManager:
    """The trainer's eval event manager (added as ``"eval_events"`` the first time)."""
    found = trainer.callbacks.get("eval_events")
    if found is None:
        found = EventManager("eval", test_collector=trainer.params.test_collector)
        trainer.add_callback(found, name="eval_events")
    assert isinstance(found, EventManager)
    return found
