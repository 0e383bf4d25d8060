"""What happens to a collector's envs, told to whoever listens: vector steps, episodes that ended in a
vector step, resets of all sub-envs, and rendering every n env steps
(``TrainerOptions.render_every_num_env_steps``).

:class:`CollectorEvents` attaches a listener to a collector only while something needs it (a callback
of the trainer active at ``on_vector_step`` / ``on_episodes_end`` / ``on_envs_reset``, or rendering for
the training collector), so that a plain run pays one attribute check per vector step. Detaching puts
the previous listeners back, so a finished trainer leaves the collectors as it found them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tshtrain.data.collector_base import BaseCollector, CollectorListener

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class VectorStep:
    """Payload of ``on_vector_step``: a collector stepped its sub-envs once."""

    env_ids: np.ndarray
    """the sub-envs that stepped (all of them)"""
    env_step: int
    """the collector's env steps so far, this vector step's included: for the training collector, what
    the trainer's ``env_step`` counter will read (it advances when the collection step ends); for the
    test collector, its env steps since the run started"""
    collector: BaseCollector
    """the collector whose envs they are"""
    test: bool
    """True for the test collector"""


@dataclass(frozen=True, kw_only=True)
class EpisodesEnded:
    """Payload of ``on_episodes_end``."""

    env_ids: np.ndarray
    """the sub-envs that ended an episode (already reset to their next episode: same-step autoreset)"""
    collector: BaseCollector
    """the collector whose envs they are"""
    test: bool
    """True for the test collector"""


@dataclass(frozen=True, kw_only=True)
class EnvsReset:
    """Payload of ``on_envs_reset``."""

    env_ids: np.ndarray
    """the sub-envs about to be reset (all of them)"""
    collector: BaseCollector
    """the collector whose envs they are"""
    test: bool
    """True for the test collector"""


Notify = Callable[[str, object], None]
"""``notify(point, payload)``: calls whoever listens at ``"on_vector_step"`` / ``"on_episodes_end"`` /
``"on_envs_reset"``"""


class _Listener:
    """One collector's listener."""

    def __init__(
        self,
        collector: BaseCollector,
        notify: Notify,
        *,
        test: bool,
        listen: bool,
        render_every: int | None,
        env_step: int,
        steps: bool = False,
    ):
        self.collector = collector
        self.previous: CollectorListener | None = collector.listener
        self._notify = notify
        self._test = test
        self._listen = listen
        self._render_every = render_every
        self._steps = steps
        self.env_steps = env_step
        self._all_env_ids = np.arange(collector.num_envs)
        self._all_env_ids.setflags(write=False)  # one array for every vector step's payload

    def on_vector_step(self, done_env_ids: np.ndarray) -> None:
        if self.previous is not None:
            self.previous.on_vector_step(done_env_ids)
        before = self.env_steps
        self.env_steps += self.collector.num_envs
        if (
            self._render_every is not None
            and self.env_steps // self._render_every > before // self._render_every
        ):
            self.collector.render_env()
        if self._steps:
            step = VectorStep(
                env_ids=self._all_env_ids, env_step=self.env_steps, collector=self.collector, test=self._test
            )
            self._notify("on_vector_step", step)
        if self._listen and len(done_env_ids):
            ended = EpisodesEnded(env_ids=done_env_ids.copy(), collector=self.collector, test=self._test)
            self._notify("on_episodes_end", ended)

    def on_env_reset(self, env_ids: np.ndarray) -> None:
        if self.previous is not None:
            self.previous.on_env_reset(env_ids)
        if self._listen:
            self._notify(
                "on_envs_reset", EnvsReset(env_ids=env_ids, collector=self.collector, test=self._test)
            )


_EVENT_POINTS = frozenset({"on_episodes_end", "on_envs_reset"})


class CollectorEvents:
    """Attaches and detaches the listeners of a run's collectors (roles ``training``, ``test``)."""

    def __init__(
        self,
        collectors: Mapping[str, BaseCollector],
        notify: Notify,
        listens: Callable[[str], bool],
        *,
        render_every: int | None,
    ):
        """Args:
        collectors: by role (``training``, ``test``).
        notify: called as ``notify(point, payload)``.
        listens: whether anyone listens at a point now.
        render_every: render the training envs every this many env steps (None: never).
        """
        self._collectors = dict(collectors)
        self._notify = notify
        self._listens = listens
        self._render_every = render_every
        self._listeners: list[_Listener] = []
        self._wanted: frozenset[str] = frozenset()
        self._attached = False

    def attach(self, env_step: int) -> None:
        """Attach what is needed now (``env_step``: the training env steps so far, for rendering)."""
        self.detach()
        self._wanted = frozenset(p for p in ("on_vector_step", *_EVENT_POINTS) if self._listens(p))
        self._attached = True
        episodes = bool(self._wanted & _EVENT_POINTS)
        steps = "on_vector_step" in self._wanted
        for role, collector in self._collectors.items():
            render = self._render_every if role == "training" else None
            if episodes or steps or render is not None:
                listener = _Listener(
                    collector,
                    self._notify_wanted,
                    test=role == "test",
                    listen=episodes,
                    render_every=render,
                    env_step=env_step if role == "training" else 0,
                    steps=steps,
                )
                collector.listener = listener
                self._listeners.append(listener)

    def changed(self) -> None:
        """Who listens changed: re-attach, keeping the rendering position."""
        if self._attached:
            training = self._collectors.get("training")
            self.attach(next((x.env_steps for x in self._listeners if x.collector is training), 0))

    def detach(self) -> None:
        """Put the collectors' previous listeners back."""
        self._attached = False
        for listener in reversed(self._listeners):
            if listener.collector.listener is listener:
                listener.collector.listener = listener.previous
        self._listeners = []

    def close_envs(self) -> None:
        """Close the collectors' envs, logging failures."""
        for collector in self._collectors.values():
            try:
                collector.close_env()
            except Exception:
                log.exception("closing the envs of a collector failed")

    def _notify_wanted(self, point: str, payload: object) -> None:
        if point in self._wanted:
            self._notify(point, payload)
