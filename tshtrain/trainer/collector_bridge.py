"""The trainer's listeners on its collectors: ``on_episodes_end`` / ``on_envs_reset`` callbacks and
rendering (``TrainerOptions.render_every_num_env_steps``).

A listener is attached to a collector only while something needs it (a callback active at those
points, or rendering for the training collector), so that a plain run pays one attribute check per
vector step. Everything is detached when the run ends, so a finished trainer leaves the collectors as
it found them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from tshtrain.data.collector_base import BaseCollector, CollectorListener
from tshtrain.trainer.callbacks import EnvsReset, EpisodesEnded
from tshtrain.trainer.dispatch import CallbackSet
from tshtrain.trainer.options import TrainerOptions

log = logging.getLogger(__name__)


class _Bridge:
    """One collector's listener."""

    def __init__(
        self,
        collector: BaseCollector,
        callbacks: CallbackSet,
        *,
        test: bool,
        render_every: int | None,
        env_step: int,
    ):
        self.collector = collector
        self.previous: CollectorListener | None = collector.listener
        self._callbacks = callbacks
        self._test = test
        self._render_every = render_every
        self._env_steps = env_step
        self._episodes = callbacks.active("on_episodes_end")
        self._resets = callbacks.active("on_envs_reset")

    def on_vector_step(self, done_env_ids: np.ndarray) -> None:
        if self.previous is not None:
            self.previous.on_vector_step(done_env_ids)
        if self._render_every is not None:
            before = self._env_steps
            self._env_steps += self.collector.num_envs
            if self._env_steps // self._render_every > before // self._render_every:
                self.collector.render_env()
        if self._episodes and len(done_env_ids):
            ended = EpisodesEnded(env_ids=done_env_ids.copy(), collector=self.collector, test=self._test)
            self._callbacks.call("on_episodes_end", ended)

    def on_env_reset(self, env_ids: np.ndarray) -> None:
        if self.previous is not None:
            self.previous.on_env_reset(env_ids)
        if self._resets:
            self._callbacks.call(
                "on_envs_reset", EnvsReset(env_ids=env_ids, collector=self.collector, test=self._test)
            )


class CollectorBridges:
    """Attaches and detaches the listeners of a trainer's collectors (``training``, ``test``)."""

    def __init__(
        self, callbacks: CallbackSet, collectors: Mapping[str, BaseCollector], options: TrainerOptions
    ):
        self._callbacks = callbacks
        self._collectors = dict(collectors)
        self._options = options
        self._bridges: list[_Bridge] = []
        self._attached = False
        self._env_step = 0
        callbacks.on_change(self._changed)

    def attach(self, env_step: int) -> None:
        """Attach what is needed now (``env_step``: the training env steps so far, for rendering)."""
        self._attached, self._env_step = True, env_step
        listen = self._callbacks.active("on_episodes_end") or self._callbacks.active("on_envs_reset")
        for role, collector in self._collectors.items():
            render = self._options.render_every_num_env_steps if role == "training" else None
            if listen or render is not None:
                bridge = _Bridge(
                    collector, self._callbacks, test=role == "test", render_every=render, env_step=env_step
                )
                collector.listener = bridge
                self._bridges.append(bridge)

    def detach(self) -> None:
        """Put the collectors' previous listeners back."""
        self._attached = False
        for bridge in reversed(self._bridges):
            if bridge.collector.listener is bridge:
                bridge.collector.listener = bridge.previous
        self._bridges = []

    def close_envs(self) -> None:
        """Close the collectors' envs (``options.close_envs``), logging failures."""
        for collector in self._collectors.values():
            try:
                collector.close_env()
            except Exception:
                log.exception("closing the envs of a collector failed")

    def _changed(self) -> None:
        if self._attached:
            env_step = self._env_step
            for bridge in self._bridges:  # keep the rendering position of a re-attached bridge
                if bridge.collector is self._collectors.get("training"):
                    env_step = bridge._env_steps
            self.detach()
            self.attach(env_step)
