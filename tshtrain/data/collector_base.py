"""What every collector shares: :class:`BaseCollector`, the type the trainer works with.

Two collectors implement it: :class:`tshtrain.data.Collector` (numpy; Gymnasium vector envs) and
:class:`tshtrain.data.TensorCollector` (torch; :class:`~tshtrain.env.TensorVectorEnv` batches that
never leave the device). Both follow the semantics of ``collect`` written in
:mod:`tshtrain.data.collector`; this base holds the argument checks, the counters, the listener, the
resets and the shape of checkpointing, and leaves the vector steps to the subclasses.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, NamedTuple, Protocol, TypeAlias, final

import numpy as np

from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.stats import CollectStats
from tshtrain.data.tensor_buffer import TensorReplayBuffer
from tshtrain.errors import ConfigurationError, require_positive

log = logging.getLogger(__name__)

QUIET_EPISODE_ENV_STEPS = 100_000
"""``collect(n_episode=...)`` warns once when this many vector steps passed without an episode end (each
collecting sub-env took that many env steps in its episode): an env that never ends an episode would
otherwise keep a test step (or an episode-based training step) silent until its bound, or forever"""

AnyReplayBuffer: TypeAlias = BaseReplayBuffer | TensorReplayBuffer
"""A buffer of either data path: numpy (:class:`BaseReplayBuffer` and its subclasses) or tensors."""

EnvSnapshotFormat: TypeAlias = Literal["pickle", "torch"]
"""how a collector encodes its envs' state (see :attr:`BaseCollector.env_snapshot_format`)"""


class EnvSnapshot(NamedTuple):
    """A collector's envs as saved in a checkpoint."""

    data: bytes
    """what :meth:`BaseCollector.env_snapshot` returned"""
    format: EnvSnapshotFormat
    """its encoding: ``pickle`` (trusted checkpoints only) or ``torch`` (``weights_only``-loadable)"""


class CollectorListener(Protocol):
    """Opt-in notifications from a collector (``collector.listener``); the trainer uses them for its
    episode-end and reset events and for rendering. Unset (None), they cost one attribute check per
    vector step (on the torch path a listener costs one host sync per vector step: the ended envs'
    indices are read from the device)."""

    def on_vector_step(self, done_env_ids: np.ndarray) -> None:
        """After every vector step (its transitions are stored); ``done_env_ids``: the sub-envs whose
        episode ended in it, already reset to their next episode (same-step autoreset)."""
        ...

    def on_env_reset(self, env_ids: np.ndarray) -> None:
        """Before the collector resets the sub-envs ``env_ids`` (all of them)."""
        ...


class CollectedEpisodes:
    """What one collection gathered, on the host: stored env steps, finished episodes' returns and
    lengths, and the means / counts of the env-info metrics."""

    def __init__(
        self,
        stored: int,
        returns: np.ndarray,
        lens: np.ndarray,
        env_info: Mapping[str, float] | None = None,
        env_info_counts: Mapping[str, int] | None = None,
    ):
        self.stored = stored
        self.returns = returns
        self.lens = lens
        self.env_info = dict(env_info or {})
        self.env_info_counts = dict(env_info_counts or {})


def quiet_episode_env_steps() -> int:
    """:data:`QUIET_EPISODE_ENV_STEPS`, read when a collection starts."""
    return QUIET_EPISODE_ENV_STEPS


def warn_no_episode_end(owner: str, n_episode: int, num_env_steps: int, max_env_steps: int | None) -> None:
    """Say that ``collect(n_episode=...)`` took ``num_env_steps`` env steps on each sub-env and no episode
    ended."""
    bound = (
        f"it stops with an error at max_env_steps={max_env_steps} (a trainer's test step: "
        f"trainer.test_step_max_env_steps)"
        if max_env_steps is not None
        else "nothing bounds it"
    )
    log.warning(
        "%s(n_episode=%d): %d env steps on each sub-env and no episode has ended yet; the env may never "
        "end an episode: "
        "give it a time limit (env.kwargs.max_episode_steps in an experiment file, "
        "gymnasium.wrappers.TimeLimit in code); %s.",
        owner,
        n_episode,
        num_env_steps,
        bound,
    )


@final
class EpisodeQuota:
    """Which sub-envs still collect during ``collect(n_episode=n)`` (both collectors' episode loop).

    The first ``min(n, num_envs)`` envs start an episode; an env that finishes one starts another while
    fewer than ``n`` have been started, and stops otherwise. Only the transitions of collecting envs
    are stored and counted.
    """

    __slots__ = ("active_mask", "max_env_steps", "n_episode", "owner", "quiet_steps", "started", "stored")

    def __init__(
        self, n_episode: int, num_envs: int, *, owner: str = "collect", max_env_steps: int | None = None
    ):
        """Args:
        n_episode: the number of episodes to finish.
        num_envs: the number of sub-envs.
        owner: who collects, for the warning on an env that never ends an episode (``Collector.collect``).
        max_env_steps: the collection's bound, named in that warning (None: none).
        """
        self.owner = owner
        self.max_env_steps = max_env_steps
        self.quiet_steps = 0
        """vector steps since an episode last ended"""
        self.n_episode = n_episode
        self.active_mask = np.zeros(num_envs, dtype=bool)
        """the envs that still collect"""
        self.active_mask[: min(n_episode, num_envs)] = True
        self.started = int(self.active_mask.sum())
        """episodes started so far"""
        self.stored = 0
        """env steps of collecting envs so far (the transitions stored)"""

    def running(self) -> bool:
        """True while some env still collects."""
        return bool(self.active_mask.any())

    def step_envs(self) -> np.ndarray | None:
        """The envs whose transitions the next vector step stores (None: all of them); counts them."""
        active = np.flatnonzero(self.active_mask)
        self.stored += len(active)
        self.quiet_steps += 1
        return None if len(active) == len(self.active_mask) else active

    def finish(self, done_idx: np.ndarray) -> np.ndarray:
        """Record the episodes that ended in the last vector step (``done_idx``: the envs, ascending).

        Returns:
            A mask over ``done_idx``: the envs that were collecting (their episodes count).
        """
        finished: np.ndarray = self.active_mask[done_idx]
        for env_id in done_idx[finished]:
            if self.started < self.n_episode:
                self.started += 1
            else:
                self.active_mask[env_id] = False
        if len(done_idx):
            self.quiet_steps = 0
        elif self.quiet_steps == QUIET_EPISODE_ENV_STEPS:
            warn_no_episode_end(self.owner, self.n_episode, self.quiet_steps, self.max_env_steps)
        return finished

    def over_limit(self, max_env_steps: int) -> bool:
        """True when ``max_env_steps`` steps were stored and some env still collects."""
        return self.stored >= max_env_steps and self.running()


class BaseCollector(ABC):
    """The contract and shared machinery of collectors (see the module docstring)."""

    buffer: AnyReplayBuffer | None
    """where transitions go; None: nothing is stored (test collectors)"""

    def __init__(
        self, *, num_envs: int, buffer: AnyReplayBuffer | None, exploration_noise: bool, info_key: str | None
    ):
        self.num_envs = num_envs
        """number of envs stepped together"""
        if buffer is not None and buffer.num_columns < num_envs:
            raise ConfigurationError(
                f"{type(self).__name__}: the buffer has {buffer.num_columns} sub-buffer(s) but the env has "
                f"{num_envs} sub-envs; use {type(buffer).__name__}(total_size, buffer_num={num_envs})."
            )
        self.buffer = buffer
        self.exploration_noise = exploration_noise
        """apply the policy's exploration noise to its actions"""
        self.info_key = info_key
        """report the means of the numeric scalars in ``info[info_key]`` (None: info is not read)"""
        self.listener: CollectorListener | None = None
        """notified after every vector step and before env resets (see :class:`CollectorListener`)"""
        self.num_collected_env_steps = 0
        """env steps stored since the last stats reset"""
        self.num_collected_episodes = 0
        """episodes finished since the last stats reset"""

    # ------------------------------------------------------------------ resetting
    @abstractmethod
    def reset_env(self, seed: int | None = None) -> None:
        """Reset all envs (new episodes) and the per-env episode accumulators; episodes cut short end,
        in the buffer, with their last stored transition marked truncated."""

    def reset(self, *, reset_buffer: bool = True, reset_stats: bool = True, seed: int | None = None) -> None:
        """Reset the envs; optionally clear the buffer and the collected-steps counters."""
        self.reset_env(seed)
        if reset_buffer and self.buffer is not None:
            self.buffer.reset()
        if reset_stats:
            self.num_collected_env_steps = 0
            self.num_collected_episodes = 0

    # ------------------------------------------------------------------ collecting
    def collect(
        self,
        n_step: int | None = None,
        n_episode: int | None = None,
        *,
        random: bool = False,
        deterministic: bool = False,
        reset_before_collect: bool = False,
        max_env_steps: int | None = None,
    ) -> CollectStats:
        """Collect ``n_step`` env steps or ``n_episode`` episodes (exactly one of the two).

        Args:
            random: take uniformly random actions instead of the policy's.
            deterministic: ask the policy for its deterministic (evaluation) actions.
            reset_before_collect: reset the envs first (discarding unfinished episodes).
            max_env_steps: with ``n_episode``, raise :class:`~tshtrain.errors.EpisodeLimitError` once this
                many env steps were taken without finishing the episodes (an env that never ends an
                episode would otherwise hang the call); None: no bound.
        """
        owner = f"{type(self).__name__}.collect"
        if (n_step is None) == (n_episode is None):
            raise ConfigurationError(
                f"{owner}: give exactly one of n_step and n_episode, got n_step={n_step!r}, "
                f"n_episode={n_episode!r}."
            )
        if reset_before_collect:
            self.reset_env()
        start = time.perf_counter()
        self._begin_collect()
        if n_step is not None:
            require_positive(owner, "n_step", n_step)
            num_vector_steps = -(-n_step // self.num_envs)
            self._check_capacity(num_vector_steps)
            got = self._collect_steps(num_vector_steps, random, deterministic)
        else:
            assert n_episode is not None
            require_positive(owner, "n_episode", n_episode)
            got = self._collect_episodes(n_episode, random, deterministic, max_env_steps)
            self.reset_env()
        self.num_collected_env_steps += got.stored
        self.num_collected_episodes += len(got.lens)
        return self._finish_stats(
            CollectStats(
                n_collected_steps=got.stored,
                n_collected_episodes=len(got.lens),
                returns=got.returns,
                lens=got.lens,
                collect_time=time.perf_counter() - start,
                env_info=got.env_info,
                env_info_counts=got.env_info_counts,
            )
        )

    def _finish_stats(self, stats: CollectStats) -> CollectStats:
        """The stats ``collect`` returns, from those of the call (subclasses add what they know: the
        agents, the transitions stored)."""
        return stats

    def _check_capacity(self, num_vector_steps: int) -> None:
        if self.buffer is not None and num_vector_steps > self.buffer.column_capacity:
            raise ConfigurationError(
                f"{type(self).__name__}.collect: one collection step needs {num_vector_steps} rows per env "
                f"but each sub-buffer holds {self.buffer.column_capacity}; enlarge the buffer to at least "
                f"{num_vector_steps * self.buffer.num_columns} transitions or collect fewer steps."
            )

    @abstractmethod
    def _begin_collect(self) -> None:
        """Called at the start of every ``collect`` (fresh per-call accumulators)."""

    @abstractmethod
    def _collect_steps(self, num_vector_steps: int, random: bool, deterministic: bool) -> CollectedEpisodes:
        """Step all envs ``num_vector_steps`` times, storing every transition."""

    @abstractmethod
    def _collect_episodes(
        self, n_episode: int, random: bool, deterministic: bool, max_env_steps: int | None
    ) -> CollectedEpisodes:
        """Store exactly ``n_episode`` complete episodes (see :mod:`tshtrain.data.collector`)."""

    # ------------------------------------------------------------------ the envs
    @abstractmethod
    def render_env(self) -> None:
        """Render the envs (the trainer's ``render_every_num_env_steps``)."""

    @abstractmethod
    def close_env(self) -> None:
        """Close the envs."""

    # ------------------------------------------------------------------ checkpoints
    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """The collector's own state (generator, current observations, unfinished-episode
        accumulators under ``ep_return`` / ``ep_len`` / ``ep_stored``, counters), loadable with
        ``torch.load(weights_only=True)``."""

    @abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (the envs are restored with :meth:`restore_env_snapshot`)."""

    env_snapshot_format: ClassVar[EnvSnapshotFormat] = "pickle"
    """how :meth:`env_snapshot` encodes the envs: ``"pickle"`` (restored only from trusted checkpoints:
    unpickling runs code) or ``"torch"`` (``torch.save`` of tensors and plain values, read back with
    ``weights_only=True``: safe to restore from any checkpoint)"""

    @abstractmethod
    def env_snapshot(self) -> bytes | None:
        """The envs' state as bytes (see :attr:`env_snapshot_format`), or None when it cannot be saved
        (a resumed run resets them)."""

    @abstractmethod
    def restore_env_snapshot(self, snapshot: bytes | None) -> bool:
        """Put the envs back from :meth:`env_snapshot` (None: reset them). Returns True if restored."""

    def _counters_state(self) -> dict[str, int]:
        return {
            "num_collected_env_steps": self.num_collected_env_steps,
            "num_collected_episodes": self.num_collected_episodes,
        }

    def _load_counters(self, state: Mapping[str, Any]) -> None:
        self.num_collected_env_steps = int(state["num_collected_env_steps"])
        self.num_collected_episodes = int(state["num_collected_episodes"])
