"""Overlapped collection for off-policy training (``OffPolicyTrainerParams.overlap_collection``).

While the learner takes the gradient steps of training step k, a background thread collects the data of
training step k + 1 with an *actor*: a copy of the learner's policy whose weights are pushed from the
learner after update steps. torch releases the GIL inside its kernels and a subprocess vector env steps
outside it, so the two can run at the same time (docs/overlap.md has the measured gains).

Schedule of training step k (k >= 2; the first training step collects in the foreground):

1. the collection staged during update k - 1 is *applied*: its buffer writes are replayed into the
   training buffer, its listener calls (episode-end / env-reset callbacks, rendering) are delivered,
   and its statistics are the training step's collection step;
2. the update starts the thread (collection step k + 1, written to a :class:`StagingBuffer`, never to
   the training buffer the learner samples from) and takes its gradient steps;
3. the thread is joined at the end of the update (its error, if any, is raised here with its message),
   state the collection changed in the actor's buffers (e.g. ``QValuePolicy.explored_env_steps``) is
   copied to the learner, and the learner's parameters and buffers are pushed to the actor when the
   lag would otherwise exceed ``max_policy_lag``.

**Policy lag.** Version v of the weights = the weights after v update steps. The collection step that
update k first samples was collected with version ``k - 1 - lag``; without overlap the lag is 0, with
overlap it is between 1 and ``max_policy_lag`` (exactly 1 with the default: weights pushed after every
update step). The first collection step (and one after an update that did not run) is collected in
the foreground with the learner's current weights (lag 0). :attr:`OverlappedCollection.lags`
records the lag of every collection step, for tests and measurements.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, final

import numpy as np
import torch
from typing_extensions import override

from tshtrain.data.batch import ObsArray
from tshtrain.data.buffer import BaseReplayBuffer, BufferLayout
from tshtrain.data.collector import Collector, CollectorPolicy
from tshtrain.data.collector_base import CollectorListener
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError

__all__ = ["CollectionLag", "OverlappedCollection", "StagingBuffer"]

_OWNER = "OffPolicyTrainerParams.overlap_collection=True"


class ModulePolicy(CollectorPolicy, Protocol):
    """A collector's policy that is a torch module (``tshtrain.algorithm.Policy``): its weights are
    copied to the actor that collects in the background."""

    @property
    def device(self) -> torch.device: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def buffers(self, recurse: bool = True) -> Iterator[torch.Tensor]: ...

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]: ...

    def requires_grad_(self, requires_grad: bool = True) -> Any: ...


def _copy_obs(obs: ObsArray) -> ObsArray:
    if isinstance(obs, np.ndarray):
        return obs.copy()
    return {key: np.array(value, copy=True) for key, value in obs.items()}


@final
class StagingBuffer(BaseReplayBuffer):
    """Records the writes a collector makes (``add``, ``add_single``, ``truncate_episodes``) without
    storing them, and replays them, in order, into the real buffer later (:meth:`replay_into`).

    Replaying gives the real buffer exactly what the collector would have written into it directly
    (same rows, same flags, a prioritized buffer's priorities set at the time of the replay). It holds
    no samples: ``len()`` is 0.
    """

    def __init__(self, target: BaseReplayBuffer):
        """Args:
        target: the buffer the writes are meant for (its shape is taken for the collector's checks).
        """
        super().__init__(column_capacity=target.column_capacity, num_columns=target.num_columns, seed=0)
        self._writes: list[Callable[[BaseReplayBuffer], object]] = []

    @override
    def add(
        self,
        *,
        obs: ObsArray,
        act: np.ndarray,
        rew: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        obs_next: ObsArray,
        env_ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """Record one vector step (the arguments are copied: envs may reuse their arrays)."""
        obs_c, next_c = _copy_obs(obs), _copy_obs(obs_next)
        act_c, rew_c = np.array(act, copy=True), np.array(rew, copy=True)
        term_c, trunc_c = np.array(terminated, copy=True), np.array(truncated, copy=True)
        ids_c = None if env_ids is None else np.array(env_ids, copy=True)
        self._writes.append(
            lambda buffer: buffer.add(
                obs=obs_c,
                act=act_c,
                rew=rew_c,
                terminated=term_c,
                truncated=trunc_c,
                obs_next=next_c,
                env_ids=ids_c,
            )
        )
        return np.zeros(0, dtype=np.int64)  # no index: nothing is stored here

    @override
    def add_single(
        self,
        *,
        obs: ObsArray,
        act: np.ndarray,
        rew: float,
        terminated: bool,
        truncated: bool,
        obs_next: ObsArray,
    ) -> int:
        """Record one transition of a one-env collector."""
        obs_c, act_c, next_c = _copy_obs(obs), np.array(act, copy=True), _copy_obs(obs_next)
        self._writes.append(
            lambda buffer: buffer.add_single(
                obs=obs_c, act=act_c, rew=rew, terminated=terminated, truncated=truncated, obs_next=next_c
            )
        )
        return -1

    @override
    def truncate_episodes(self, env_ids: np.ndarray) -> None:
        """Record the truncation (it applies to the real buffer's newest transitions at replay)."""
        ids = np.array(env_ids, copy=True)
        self._writes.append(lambda buffer: buffer.truncate_episodes(ids))

    @property
    def num_writes(self) -> int:
        """Writes recorded since the last replay."""
        return len(self._writes)

    def replay_into(self, buffer: BaseReplayBuffer) -> None:
        """Apply the recorded writes to ``buffer`` in order and forget them."""
        writes, self._writes = self._writes, []
        for write in writes:
            write(buffer)


@final
class _ListenerLog:
    """A collector listener that records the calls, for delivery in the main thread later."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, np.ndarray]] = []  # (is a vector step, env ids)

    def on_vector_step(self, done_env_ids: np.ndarray) -> None:
        self.calls.append((True, np.array(done_env_ids, copy=True)))

    def on_env_reset(self, env_ids: np.ndarray) -> None:
        self.calls.append((False, np.array(env_ids, copy=True)))

    def replay_into(self, listener: CollectorListener | None) -> None:
        calls, self.calls = self.calls, []
        if listener is None:
            return
        for is_step, env_ids in calls:
            if is_step:
                listener.on_vector_step(env_ids)
            else:
                listener.on_env_reset(env_ids)


@dataclass(frozen=True, kw_only=True)
class CollectionLag:
    """The weights one collection step was collected with."""

    training_step: int
    """the number of the update step that first samples it (1 = the first update step)"""
    actor_version: int
    """update steps contained in the actor's weights while it collected"""
    learner_version: int
    """update steps completed by the learner when the collection step is applied (before its update)"""
    background: bool
    """collected in the background thread (False: in the foreground, the first one)"""

    @property
    def lag(self) -> int:
        """``learner_version - actor_version``: 0 without overlap, 1..max_policy_lag with it."""
        return self.learner_version - self.actor_version


@final
class _Staged:
    """A collection step collected ahead of its training step."""

    def __init__(self, writes: StagingBuffer, calls: _ListenerLog, actor_version: int, background: bool):
        self.writes = writes
        self.calls = calls
        self.actor_version = actor_version
        self.background = background
        self.stat: CollectStats | None = None
        self.error: BaseException | None = None
        self.layout_before: BufferLayout | None = None
        """set when the writes were applied to the training buffer (before a checkpoint)"""


@final
class OverlappedCollection:
    """Collects the next collection step in a background thread while the learner updates (see the
    module docstring). Owned by the off-policy step strategy; one per trainer."""

    def __init__(
        self,
        collector: Collector,
        learner: ModulePolicy,
        *,
        num_env_steps: int | None,
        num_episodes: int | None,
        max_policy_lag: int,
    ):
        """Args:
        collector: the training collector (its ``policy`` must be ``learner``).
        learner: the algorithm's policy, whose weights the actor copies.
        num_env_steps: env steps per collection step (None: episodes).
        num_episodes: episodes per collection step (None: env steps).
        max_policy_lag: push the learner's weights to the actor once they are this many update steps
            ahead of the actor's.
        """
        if collector.policy is not learner:
            raise ConfigurationError(
                f"{_OWNER}: the training collector's policy ({type(collector.policy).__name__}) is not "
                f"the algorithm's policy; build the collector with algorithm.policy (the actor that "
                f"collects in the background is a copy of it)."
            )
        if learner.device.type != "cpu":
            raise ConfigurationError(
                f"{_OWNER}: the policy is on {learner.device}; overlapped collection supports CPU "
                f"policies only (use overlap_collection=False on {learner.device.type})."
            )
        assert isinstance(collector.buffer, BaseReplayBuffer)  # checked by the params
        self._collector = collector
        self._buffer = collector.buffer
        self._n_step, self._n_episode = num_env_steps, num_episodes
        self.max_policy_lag = max_policy_lag
        self.learner = learner
        self.actor: ModulePolicy = copy.deepcopy(learner)
        """the policy that collects: the learner's weights of :attr:`actor_version`"""
        self.actor.requires_grad_(False)
        self.learner_version = 0
        """update steps the learner completed"""
        self.actor_version = 0
        """update steps contained in the actor's weights"""
        self.lags: list[CollectionLag] = []
        """one record per collection step applied, in order (see :class:`CollectionLag`)"""
        self._baseline = self._actor_buffers()
        self._staged: _Staged | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the training step's parts
    def take(self) -> tuple[CollectStats, BufferLayout]:
        """The training step's collection step: the staged one, else one collected now (foreground);
        its writes go into the training buffer and its listener calls are delivered."""
        assert self._thread is None, "take() while the collection thread runs"
        staged = self._staged
        if staged is None:  # in the foreground, with the learner's current weights (lag 0)
            self._push()
            staged = self._new_staged(background=False)
            self._collect(staged)
            self._sync_back()
        self._staged = None
        layout = staged.layout_before
        if layout is None:
            layout = self._buffer.layout()
            staged.writes.replay_into(self._buffer)
        staged.calls.replay_into(self._collector.listener)
        self.lags.append(
            CollectionLag(
                training_step=len(self.lags) + 1,
                actor_version=staged.actor_version,
                learner_version=self.learner_version,
                background=staged.background,
            )
        )
        assert staged.stat is not None
        return staged.stat, layout

    def start(self) -> None:
        """Start collecting the next collection step in the background (at the start of an update)."""
        assert self._thread is None and self._staged is None, "one collection step is staged at a time"
        staged = self._staged = self._new_staged(background=True)
        self._thread = threading.Thread(
            target=self._collect_in_thread,
            args=(staged, torch.get_num_threads()),
            name="tshtrain-overlapped-collection",
            daemon=True,
        )
        self._thread.start()

    def _collect_in_thread(self, staged: _Staged, num_threads: int) -> None:
        # torch's thread count is an OpenMP setting per OS thread: a new thread would start with one
        # worker per core (whose spin-waits slowed collection ~10x on 2 cores), not the trainer's count
        torch.set_num_threads(num_threads)
        self._collect(staged)

    def join(self, *, updated: bool, raise_error: bool = True) -> None:
        """Wait for the background collection (the end of an update); raise its error (with a note
        saying where it came from) unless ``raise_error`` is False (the update itself failed), then
        sync the actor and the learner.

        Args:
            updated: the update took gradient steps (the learner's version advances).
            raise_error: raise the collection's error.
        """
        staged = self._wait()
        if updated:
            self.learner_version += 1
        if staged is None:
            return
        if staged.error is not None:
            self._staged = None
            if raise_error:
                raise staged.error
            return
        self._sync_back()
        self._maybe_push()

    def settle(self) -> None:
        """Before a checkpoint is read or written: join the thread and apply the staged writes to the
        training buffer (its statistics stay pending: the next training step counts them)."""
        staged = self._wait()
        if staged is None or staged.layout_before is not None:
            return
        if staged.error is not None:
            self._staged = None
            raise staged.error
        self._sync_back()
        staged.layout_before = self._buffer.layout()
        staged.writes.replay_into(self._buffer)

    def discard(self) -> None:
        """Forget a staged collection step and give the actor the learner's weights (the run is reset,
        or a checkpoint was restored: the learner may hold other weights than when the actor was made)."""
        self._wait()
        self._staged = None
        self._push()

    # ------------------------------------------------------------------ internals
    def _new_staged(self, *, background: bool) -> _Staged:
        return _Staged(StagingBuffer(self._buffer), _ListenerLog(), self.actor_version, background)

    def _collect(self, staged: _Staged) -> None:
        """One collection step with the actor into the staging buffer (in the thread or not)."""
        c = self._collector
        policy, buffer, listener = c.policy, c.buffer, c.listener
        c.policy, c.buffer, c.listener = self.actor, staged.writes, staged.calls
        try:
            staged.stat = c.collect(n_step=self._n_step, n_episode=self._n_episode)
        except BaseException as error:  # handed to the main thread at join()
            if staged.background:
                error.add_note(
                    f"raised in the overlapped collection thread ({_OWNER}) while collecting the data of "
                    f"training step {len(self.lags) + 1}"
                )
            staged.error = error
        finally:
            c.policy, c.buffer = policy, buffer
            if c.listener is staged.calls:  # a listener attached meanwhile stays
                c.listener = listener
        if not staged.background and staged.error is not None:
            raise staged.error

    def _wait(self) -> _Staged | None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        return self._staged

    def _sync_back(self) -> None:
        """After a collection: copy what it changed in the actor's buffers (e.g. the env steps an
        epsilon schedule counts) to the learner; the learner's own changes are kept."""
        learner_buffers = dict(self.learner.named_buffers())
        with torch.no_grad():
            for name, tensor in self.actor.named_buffers():
                if not torch.equal(tensor, self._baseline[name]):
                    learner_buffers[name].copy_(tensor)
                    self._baseline[name] = tensor.detach().clone()

    def _maybe_push(self) -> None:
        """Push the learner's weights to the actor once they are ``max_policy_lag`` versions ahead."""
        if self.learner_version - self.actor_version >= self.max_policy_lag:
            self._push()

    def _push(self) -> None:
        with torch.no_grad():
            for mine, theirs in zip(self.actor.parameters(), self.learner.parameters(), strict=True):
                mine.copy_(theirs)
            for own, source in zip(self.actor.buffers(), self.learner.buffers(), strict=True):
                own.copy_(source)
        self.actor_version = self.learner_version
        self._baseline = self._actor_buffers()

    def _actor_buffers(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().clone() for name, tensor in self.actor.named_buffers()}

    @property
    def running(self) -> bool:
        """True while the background collection runs."""
        return self._thread is not None

    def describe(self) -> dict[str, Any]:
        """Versions and the largest lag so far (for logs and docs)."""
        return {
            "learner_version": self.learner_version,
            "actor_version": self.actor_version,
            "max_lag": max((rec.lag for rec in self.lags), default=0),
        }
