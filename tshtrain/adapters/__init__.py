"""Other libraries' vocabularies, translated onto the one extension protocol (``Callback``).

Each adapter is a :class:`~tshtrain.trainer.callbacks.Callback` that maps names; add it to a trainer like
any callback (docs/hooks.md, "Coming from another library"):

* :class:`HookRegistry` -- TorchRL's hook stages (``hooks.register("post_loss", fn)``)::

      hooks = HookRegistry()
      trainer.add_callback(hooks, name="hooks")
      hooks.register("post_update", my_hook)

* :class:`EventManager` -- EmbodiChain's event manager (named callbacks fired by triggers)::

      events = EventManager("train")
      trainer.add_callback(events, name="events")
      events.register("randomize", randomize_gravity, trigger=OnEpisodeEnd())
"""

from __future__ import annotations

from tshtrain.adapters.embodichain import (
    EventContext,
    EventManager,
    EventUnit,
    Every,
    Manual,
    OnEpisodeEnd,
    OnReset,
    OnShutdown,
    OnStartup,
    OnTestEnd,
    OnTestStart,
    Trigger,
)
from tshtrain.adapters.torchrl import HookRegistry
from tshtrain.adapters.torchrl_stages import HookContext, HookScalars, HookStage, LogOutput

__all__ = [
    "EventContext",
    "EventManager",
    "EventUnit",
    "Every",
    "HookContext",
    "HookRegistry",
    "HookScalars",
    "HookStage",
    "LogOutput",
    "Manual",
    "OnEpisodeEnd",
    "OnReset",
    "OnShutdown",
    "OnStartup",
    "OnTestEnd",
    "OnTestStart",
    "Trigger",
]
