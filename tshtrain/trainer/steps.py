"""What differs per family inside a training step: a small strategy object per trainer.

The trainer's training step (``Trainer._run_training_step``) reads top-down and is the same for every
family; it asks its :class:`StepStrategy` for the family's parts:

===========  ===========================================  ==========================================
family       collect                                      update
===========  ===========================================  ==========================================
on-policy    ``collection_step_num_*`` with the training  one ``algorithm.update(rollout, ...)``
             collector; the update gets the rollout       (epochs of mini-batches), then the buffer
                                                          is cleared
off-policy   the same; the data stays in the replay       round(u * n_collected) gradient steps,
             buffer (``overlap_collection``: collected    one ``algorithm.update(buffer, ...)`` each
             during the previous update, see
             :mod:`tshtrain.trainer.overlap`)
offline      nothing                                      one gradient step on the dataset
===========  ===========================================  ==========================================
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, final

from typing_extensions import override

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm, TrainingStats
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.data.buffer import BufferLayout
from tshtrain.data.collector import Collector
from tshtrain.data.collector_base import AnyReplayBuffer, BaseCollector
from tshtrain.data.stats import CollectStats
from tshtrain.trainer.callbacks import CollectedBatch
from tshtrain.trainer.dispatch import CallbackSet, hooks_for
from tshtrain.trainer.overlap import OverlappedCollection
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
)
from tshtrain.trainer.progress import INNER_BAR_MIN_STEPS, inner_bar


@dataclass(frozen=True)
class UpdatePart:
    """One ``algorithm.update`` call: its statistics and the scalars callbacks logged inside it."""

    stat: TrainingStats
    scalars: Mapping[str, float]


class StepStrategy(ABC):
    """The family-specific parts of a training step (see the module docstring)."""

    online: bool
    """True if training steps collect"""

    @abstractmethod
    def collectors(self) -> dict[str, BaseCollector]:
        """The collectors by role (``training``, ``test``)."""

    @abstractmethod
    def buffers(self) -> dict[str, AnyReplayBuffer]:
        """The buffers whose state a checkpoint holds, by role (``training``, ``test``, ``dataset``)."""

    @abstractmethod
    def setup_buffer(self) -> AnyReplayBuffer | None:
        """The buffer shown to ``on_run_start`` (the training buffer, or the dataset offline)."""

    def prepare(self) -> None:  # noqa: B027 - optional, a no-op for the online families
        """Once per ``reset()``, before anything else (offline: the algorithm reads the dataset)."""

    @abstractmethod
    def reset_collectors(self, reset_buffers: bool) -> None:
        """Reset the training collector (the trainer resets the test collector)."""

    def collect(self) -> tuple[CollectStats, BufferLayout]:
        """One collection step and the buffer's layout before it (online only)."""
        raise NotImplementedError(f"{type(self).__name__} does not collect")

    def batch(self, stat: CollectStats, layout: BufferLayout) -> CollectedBatch:
        """The collection step's data as handed to callbacks and the update (online only)."""
        raise NotImplementedError(f"{type(self).__name__} does not collect")

    @abstractmethod
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        """The update step: one part per ``algorithm.update`` call (empty: no update was possible)."""

    @abstractmethod
    def progress(self, collect_stat: CollectStats | None) -> int:
        """How far a training step moves the epoch (env steps online, 1 offline)."""

    @abstractmethod
    def samples_per_step(self) -> int:
        """Env steps counted per training step without a collection (offline: the batch size)."""


class _OnlineStrategy(StepStrategy):
    online = True

    def __init__(self, params: OnlineTrainerParams):
        self._params = params
        buffer = params.training_collector.buffer
        assert buffer is not None  # checked by the params
        self.buffer = buffer

    @override
    def collectors(self) -> dict[str, BaseCollector]:
        found = {"training": self._params.training_collector}
        if self._params.test_collector is not None:
            found["test"] = self._params.test_collector
        return found

    @override
    def buffers(self) -> dict[str, AnyReplayBuffer]:
        return {name: c.buffer for name, c in self.collectors().items() if c.buffer is not None}

    @override
    def setup_buffer(self) -> AnyReplayBuffer | None:
        return self.buffer

    @override
    def reset_collectors(self, reset_buffers: bool) -> None:
        self._params.training_collector.reset(reset_buffer=reset_buffers, reset_stats=True)

    @override
    def collect(self) -> tuple[CollectStats, BufferLayout]:
        p = self._params
        layout = self.buffer.layout()
        stat = p.training_collector.collect(
            n_step=p.collection_step_num_env_steps, n_episode=p.collection_step_num_episodes
        )
        return stat, layout

    @override
    def batch(self, stat: CollectStats, layout: BufferLayout) -> CollectedBatch:
        return CollectedBatch(
            collect_stat=stat, rollout=self.rollout(stat), buffer=self.buffer, layout_before=layout
        )

    def rollout(self, stat: CollectStats) -> AnyRolloutBatch | None:
        """What an update receives besides the buffer: on-policy the rollout, else None."""
        del stat
        return None

    @override
    def progress(self, collect_stat: CollectStats | None) -> int:
        assert collect_stat is not None
        return collect_stat.n_collected_steps

    @override
    def samples_per_step(self) -> int:
        return 0


@final
class OnPolicyStep(_OnlineStrategy):
    """Hands each collection step's rollout to the algorithm, then clears the buffer (keeping the
    collector's per-env episode statistics, so returns of episodes spanning two collection steps stay
    correct)."""

    def __init__(self, algorithm: OnPolicyAlgorithm[Any], params: OnPolicyTrainerParams):
        super().__init__(params)
        self._algorithm = algorithm
        self._on_policy = params

    @override
    def rollout(self, stat: CollectStats) -> AnyRolloutBatch | None:
        rollout = self.buffer.rollout()
        if rollout.num_steps != stat.stored_transitions:
            raise RuntimeError(
                f"OnPolicyTrainer: the collection step gathered {stat.stored_transitions} "
                f"{'env steps' if stat.n_stored_transitions is None else 'transitions'} "
                f"but the training buffer holds {rollout.num_steps} (capacity {self.buffer.capacity}); its "
                f"sub-buffers overflowed during episode collection. Enlarge the training buffer so that "
                f"one collection step fits, or collect fewer episodes per collection step."
            )
        return rollout

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        assert batch is not None and batch.rollout is not None  # callbacks may replace the rollout
        bridge = callbacks.update_hooks()
        try:
            stat = self._algorithm.update(
                batch.rollout,
                batch_size=self._on_policy.batch_size,
                num_repetitions=self._on_policy.update_step_num_repetitions,
                hooks=hooks_for(bridge),
            )
        finally:  # also when a callback stops training inside the update
            batch.buffer.reset(keep_statistics=True)
        return [UpdatePart(stat, {} if bridge is None else bridge.scalars())]


@final
class OffPolicyStep(_OnlineStrategy):
    """After each collection step of n transitions, round(u * n) gradient steps on buffer samples.

    With ``overlap_collection`` the next collection step is collected in a background thread during
    the gradient steps (:mod:`tshtrain.trainer.overlap`)."""

    def __init__(self, algorithm: OffPolicyAlgorithm[Any], params: OffPolicyTrainerParams):
        super().__init__(params)
        self._algorithm = algorithm
        self._off_policy = params
        self.overlap: OverlappedCollection | None = None
        """the background collection (None: overlap_collection is off)"""
        if params.overlap_collection:
            collector = params.training_collector
            assert isinstance(collector, Collector)  # checked by the params
            self.overlap = OverlappedCollection(
                collector,
                algorithm.policy,
                num_env_steps=params.collection_step_num_env_steps,
                num_episodes=params.collection_step_num_episodes,
                max_policy_lag=params.max_policy_lag,
            )

    @override
    def reset_collectors(self, reset_buffers: bool) -> None:
        if self.overlap is not None:
            self.overlap.discard()
        super().reset_collectors(reset_buffers)

    @override
    def collect(self) -> tuple[CollectStats, BufferLayout]:
        if self.overlap is None:
            return super().collect()
        return self.overlap.take()

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        assert batch is not None
        overlap = self.overlap
        if overlap is None:
            return self._gradient_steps(batch, callbacks, show_bar)
        overlap.start()
        try:
            parts = self._gradient_steps(batch, callbacks, show_bar)
        except BaseException:  # the update's error is the one to see; the thread is joined first
            overlap.join(updated=False, raise_error=False)
            raise
        overlap.join(updated=bool(parts))
        return parts

    def _gradient_steps(
        self, batch: CollectedBatch, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        buffer = batch.buffer
        num_steps = round(
            self._off_policy.update_step_num_gradient_steps_per_sample * batch.collect_stat.n_collected_steps
        )
        if num_steps == 0 or len(buffer) == 0:
            return []
        steps: Iterable[int] = range(num_steps)
        if show_bar and num_steps >= INNER_BAR_MIN_STEPS:
            steps = inner_bar(num_steps, "gradient steps")
        parts: list[UpdatePart] = []
        batch_size = self._off_policy.batch_size
        for _ in steps:
            bridge = callbacks.update_hooks()
            stat = self._algorithm.update(buffer, batch_size, hooks=hooks_for(bridge))
            parts.append(UpdatePart(stat, {} if bridge is None else bridge.scalars()))
        return parts


@final
class OfflineStep(StepStrategy):
    """Each training step is one gradient step on a sample of ``params.buffer``; ``env_step``
    advances by ``batch_size`` (the transitions sampled), as in Tianshou."""

    online = False

    def __init__(self, algorithm: OfflineAlgorithm[Any], params: OfflineTrainerParams):
        env = getattr(params.test_collector, "env", None)  # a vector env's spaces, when it has one
        algorithm.check_dataset(params.buffer, getattr(env, "single_observation_space", None))
        self._algorithm = algorithm
        self._params = params

    @override
    def collectors(self) -> dict[str, BaseCollector]:
        return {} if self._params.test_collector is None else {"test": self._params.test_collector}

    @override
    def buffers(self) -> dict[str, AnyReplayBuffer]:
        found = {name: c.buffer for name, c in self.collectors().items() if c.buffer is not None}
        found["dataset"] = self._params.buffer
        return found

    @override
    def setup_buffer(self) -> AnyReplayBuffer | None:
        return self._params.buffer

    @override
    def prepare(self) -> None:
        self._algorithm.process_buffer(self._params.buffer)

    @override
    def reset_collectors(self, reset_buffers: bool) -> None:
        del reset_buffers  # the dataset is never cleared

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        del batch, show_bar
        bridge = callbacks.update_hooks()
        stat = self._algorithm.update(self._params.buffer, self._params.batch_size, hooks=hooks_for(bridge))
        return [UpdatePart(stat, {} if bridge is None else bridge.scalars())]

    @override
    def progress(self, collect_stat: CollectStats | None) -> int:
        return 1

    @override
    def samples_per_step(self) -> int:
        return self._params.batch_size
