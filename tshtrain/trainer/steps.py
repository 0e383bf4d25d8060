"""What differs per family inside a training step: the trainer's training step (``Trainer._training_step``)
is the same for every family and asks its :class:`StepStrategy` for the family's parts. On-policy, the
collection step's rollout goes to one ``algorithm.update(rollout, ...)``, then the buffer is cleared;
off-policy, the data stays in the replay buffer and round(u * n_collected) gradient steps follow, one
``algorithm.update(buffer, ...)`` each (with ``overlap_collection`` the next collection step runs
meanwhile: :mod:`tshtrain.data.overlap`); offline, a training step is one gradient step on the dataset.

A data-parallel run wraps the strategy (``TrainerOptions.distributed``, :mod:`tshtrain.parallel`):
the collection step's statistics become all ranks', test steps run on rank 0, the ranks agree on
stops. One process uses the defaults here, which do nothing of the kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, final

from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    Algorithm,
    OfflineAlgorithm,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    TrainingStats,
)
from tshtrain.algorithm.pending_stats import resolve_stats
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.data.buffer import BufferLayout
from tshtrain.data.collector import Collector
from tshtrain.data.collector_base import AnyReplayBuffer, BaseCollector
from tshtrain.data.overlap import OverlappedCollection
from tshtrain.data.stats import CollectStats
from tshtrain.logger.console import INNER_BAR_MIN_STEPS, inner_bar
from tshtrain.trainer.callbacks import CollectedBatch
from tshtrain.trainer.dispatch import CallbackSet
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
    TrainerParams,
)
from tshtrain.trainer.run_state import RunState


@dataclass(frozen=True)
class UpdatePart:
    """One ``algorithm.update`` call: its statistics and the scalars callbacks logged inside it."""

    stat: TrainingStats
    scalars: Mapping[str, float]


@dataclass(frozen=True, kw_only=True)
class CollectedSteps:
    """A collection step gathered env step by env step, handed to the rest of its training step."""

    stat: CollectStats
    """the merged statistics of its vector steps"""
    layout_before: BufferLayout = field(repr=False)
    """the training buffer's write positions before its first vector step"""
    seconds: float
    """wall-clock time spent collecting it"""


class StrategyWrapper(Protocol):
    """``TrainerOptions.distributed``: wraps the step strategy (:class:`tshtrain.parallel.DataParallel`)."""

    def wrap(self, strategy: StepStrategy, algorithm: Algorithm[Any]) -> StepStrategy:
        """``strategy`` as the wrapper means it (one rank of a data-parallel run)."""


class StepStrategy(ABC):
    """The family-specific parts of a training step (see the module docstring)."""

    online: bool
    """True if training steps collect"""
    is_main: bool = True
    """True for the process that logs, tests and shows progress (rank 0 of a data-parallel run)"""

    def __init__(self, params: TrainerParams):
        self.params = params

    @abstractmethod
    def collectors(self) -> dict[str, BaseCollector]:
        """The collectors by role (``training``, ``test``)."""

    def buffers(self) -> dict[str, AnyReplayBuffer]:
        """The buffers whose state a checkpoint holds, by role (``training``, ``test``, ``dataset``)."""
        return {name: c.buffer for name, c in self.collectors().items() if c.buffer is not None}

    def prepare(self) -> None:  # noqa: B027 - optional, a no-op for the online families
        """Once per ``reset()``, before anything else (offline: the algorithm reads the dataset)."""

    @abstractmethod
    def reset_collectors(self, reset_buffers: bool) -> None:
        """Reset the training collector (the trainer resets the test collector)."""

    def collect(self, collected: CollectedSteps | None, env_steps_left: int | None = None) -> CollectedBatch:
        """One collection step (or what ``collected`` gathered env step by env step), its returns reduced
        per ``multi_agent_return_reduction``, as handed to callbacks and the update (online only);
        ``env_steps_left``: what ``max_env_steps`` leaves, the most a collection step may take."""
        raise NotImplementedError(f"{type(self).__name__} does not collect")

    @abstractmethod
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        """The update step: one part per ``algorithm.update`` call (empty: no update was possible)."""

    def samples_per_step(self) -> int:
        """Env steps counted per training step without a collection (offline: the batch size)."""
        return 0

    def reduce_returns(self, stat: CollectStats) -> CollectStats:
        """``stat`` with one return per episode (``params.multi_agent_return_reduction``)."""
        reduce = self.params.multi_agent_return_reduction
        return stat.with_return_reduction(reduce) if reduce is not None else stat

    def test(self, run: Callable[[], CollectStats], state: RunState) -> CollectStats:
        """Run a test step (``run`` collects, scores, records and calls the callbacks)."""
        del state
        return run()

    def agree_on_stop(self, state: RunState) -> None:  # noqa: B027 - a no-op in one process
        """At the end of every training step: make a stop on any rank every rank's."""

    def settle(self) -> None:  # noqa: B027 - a no-op without background collection
        """Before a checkpoint is read or written: background work joined, its writes applied."""

    def discard_staged(self) -> None:  # noqa: B027 - a no-op without background collection
        """After a checkpoint was restored: what was collected before it is void."""

    def describe(self) -> dict[str, int] | None:
        """This process's rank of a data-parallel run, ``{"world_size", "rank"}`` (None: one process)."""
        return None

    def close(self) -> None:  # noqa: B027 - a no-op in one process
        """The run ended (data-parallel: remove the gradient hooks)."""

    def report_failure(self, error: BaseException) -> None:  # noqa: B027 - a no-op in one process
        """The run fails with ``error`` (data-parallel: tell the other ranks)."""


class DelegatingStep(StepStrategy):
    """A wrapper of another strategy, ``inner``, that passes every part on to it: the base of the
    strategies that change a few parts (a data-parallel rank, a member of a seed batch)."""

    def __init__(self, inner: StepStrategy):
        super().__init__(inner.params)
        self.inner = inner
        self.online = inner.online
        self.is_main = inner.is_main

    @override
    def collectors(self) -> dict[str, BaseCollector]:
        return self.inner.collectors()

    @override
    def buffers(self) -> dict[str, AnyReplayBuffer]:
        return self.inner.buffers()

    @override
    def prepare(self) -> None:
        self.inner.prepare()

    @override
    def reset_collectors(self, reset_buffers: bool) -> None:
        self.inner.reset_collectors(reset_buffers)

    @override
    def collect(self, collected: CollectedSteps | None, env_steps_left: int | None = None) -> CollectedBatch:
        return self.inner.collect(collected, env_steps_left)

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        return self.inner.update(batch, callbacks, show_bar)

    @override
    def samples_per_step(self) -> int:
        return self.inner.samples_per_step()

    @override
    def reduce_returns(self, stat: CollectStats) -> CollectStats:
        return self.inner.reduce_returns(stat)

    @override
    def test(self, run: Callable[[], CollectStats], state: RunState) -> CollectStats:
        return self.inner.test(run, state)

    @override
    def agree_on_stop(self, state: RunState) -> None:
        self.inner.agree_on_stop(state)

    @override
    def settle(self) -> None:
        self.inner.settle()

    @override
    def discard_staged(self) -> None:
        self.inner.discard_staged()

    @override
    def describe(self) -> dict[str, int] | None:
        return self.inner.describe()

    @override
    def close(self) -> None:
        self.inner.close()

    @override
    def report_failure(self, error: BaseException) -> None:
        self.inner.report_failure(error)


class _OnlineStrategy(StepStrategy):
    online = True

    def __init__(self, params: OnlineTrainerParams):
        super().__init__(params)
        self._online = params
        buffer = params.training_collector.buffer
        assert buffer is not None  # checked by the params
        self.buffer = buffer

    @override
    def collectors(self) -> dict[str, BaseCollector]:
        found = {"training": self._online.training_collector}
        if self._online.test_collector is not None:
            found["test"] = self._online.test_collector
        return found

    @override
    def reset_collectors(self, reset_buffers: bool) -> None:
        self._online.training_collector.reset(reset_buffer=reset_buffers, reset_stats=True)

    def _collect(self, env_steps_left: int | None) -> tuple[CollectStats, BufferLayout]:
        p = self._online
        layout = self.buffer.layout()
        n_step = p.collection_step_num_env_steps
        if n_step is not None and env_steps_left is not None:  # the last one is cut to the budget
            n_step = min(n_step, env_steps_left)
        stat = p.training_collector.collect(n_step=n_step, n_episode=p.collection_step_num_episodes)
        return stat, layout

    @override
    def collect(self, collected: CollectedSteps | None, env_steps_left: int | None = None) -> CollectedBatch:
        stat, layout = (
            (collected.stat, collected.layout_before) if collected else self._collect(env_steps_left)
        )
        stat = self.reduce_returns(stat)
        return CollectedBatch(
            collect_stat=stat, rollout=self.rollout(stat), buffer=self.buffer, layout_before=layout
        )

    def rollout(self, stat: CollectStats) -> AnyRolloutBatch | None:
        """What an update receives besides the buffer: on-policy the rollout, else None."""
        del stat
        return None


@final
class OnPolicyStep(_OnlineStrategy):
    """The training step of :class:`~tshtrain.trainer.OnPolicyTrainer` (see there)."""

    def __init__(self, algorithm: OnPolicyAlgorithm[Any], params: OnPolicyTrainerParams):
        super().__init__(params)
        self._algorithm, self._on_policy = algorithm, params

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
                hooks=bridge or NO_UPDATE_HOOKS,
            )
        finally:  # also when a callback stops training inside the update
            batch.buffer.reset(keep_statistics=True)
        return [UpdatePart(stat, {} if bridge is None else bridge.scalars())]


@final
class OffPolicyStep(_OnlineStrategy):
    """The training step of :class:`~tshtrain.trainer.OffPolicyTrainer` (see there)."""

    def __init__(self, algorithm: OffPolicyAlgorithm[Any], params: OffPolicyTrainerParams):
        super().__init__(params)
        self._algorithm, self._off_policy = algorithm, params
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
    def _collect(self, env_steps_left: int | None) -> tuple[CollectStats, BufferLayout]:
        # a budget is refused with overlap_collection (the params check it)
        return super()._collect(env_steps_left) if self.overlap is None else self.overlap.take()

    @override
    def settle(self) -> None:
        if self.overlap is not None:
            self.overlap.settle()

    @override
    def discard_staged(self) -> None:
        if self.overlap is not None:
            self.overlap.discard()

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        assert batch is not None
        u = self._off_policy.update_step_num_gradient_steps_per_sample
        num_steps = round(u * batch.collect_stat.n_collected_steps) if len(batch.buffer) else 0
        steps: Iterable[int] = range(num_steps)
        if show_bar and num_steps >= INNER_BAR_MIN_STEPS:
            steps = inner_bar(num_steps, "gradient steps")
        overlap = self.overlap
        if overlap is not None:
            overlap.start()
        parts: list[UpdatePart] = []
        try:
            with self._algorithm.deferring_stats():  # the statistics become floats together, below
                for _ in steps:
                    bridge = callbacks.update_hooks()
                    stat = self._algorithm.update(
                        batch.buffer, self._off_policy.batch_size, hooks=bridge or NO_UPDATE_HOOKS
                    )
                    parts.append(UpdatePart(stat, {} if bridge is None else bridge.scalars()))
            resolve_stats([part.stat for part in parts])
        except BaseException:  # the update's error is the one to see; the thread is joined first
            if overlap is not None:
                overlap.join(updated=False, raise_error=False)
            raise
        if overlap is not None:
            overlap.join(updated=bool(parts))
        return parts


@final
class OfflineStep(StepStrategy):
    """The training step of :class:`~tshtrain.trainer.OfflineTrainer` (see there)."""

    online = False

    def __init__(self, algorithm: OfflineAlgorithm[Any], params: OfflineTrainerParams):
        super().__init__(params)
        env = getattr(params.test_collector, "env", None)  # a vector env's spaces, when it has one
        algorithm.check_dataset(params.buffer, getattr(env, "single_observation_space", None))
        self._algorithm, self._offline = algorithm, params

    @override
    def collectors(self) -> dict[str, BaseCollector]:
        return {} if self._offline.test_collector is None else {"test": self._offline.test_collector}

    @override
    def buffers(self) -> dict[str, AnyReplayBuffer]:
        return {**super().buffers(), "dataset": self._offline.buffer}

    @override
    def prepare(self) -> None:
        self._algorithm.process_buffer(self._offline.buffer)

    @override
    def reset_collectors(self, reset_buffers: bool) -> None:
        del reset_buffers  # the dataset is never cleared

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        del batch, show_bar
        bridge, p = callbacks.update_hooks(), self._offline
        stat = self._algorithm.update(p.buffer, p.batch_size, hooks=bridge or NO_UPDATE_HOOKS)
        return [UpdatePart(stat, {} if bridge is None else bridge.scalars())]

    @override
    def samples_per_step(self) -> int:
        return self._offline.batch_size
