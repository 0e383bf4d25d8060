"""The concrete trainers: on-policy, off-policy and offline (see ``tshtrain.trainer.base`` for the loop)."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, final

from typing_extensions import override

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm, TrainingStats
from tshtrain.data.batch import RolloutBatch
from tshtrain.data.buffer import BufferLayout
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.base import TAlgorithm, Trainer, TrainingStepResult
from tshtrain.trainer.hooks import CollectedBatch
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
)
from tshtrain.trainer.progress import INNER_BAR_MIN_STEPS, inner_bar
from tshtrain.trainer.stepping import CollectedSteps, EnvStepResult

TOnlineParams = TypeVar("TOnlineParams", bound=OnlineTrainerParams)


class OnlineTrainer(Trainer[TAlgorithm, TOnlineParams]):
    """A trainer whose training steps collect data with ``params.training_collector`` and then update."""

    _pending_env_steps: list[CollectStats] | None = None
    """the vector steps of a training step being driven env step by env step (None: none pending)"""
    _pending_start: tuple[BufferLayout, float] | None = None

    @override
    def reset(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> None:
        self._pending_env_steps = None
        super().reset(reset_collectors, reset_collector_buffers)

    @override
    def execute_training_step(self) -> TrainingStepResult:
        if self._pending_env_steps is not None:
            raise RuntimeError(
                f"A training step is being driven env step by env step ({len(self._pending_env_steps)} "
                f"vector steps so far); finish it with execute_env_step() before execute_training_step()."
            )
        return super().execute_training_step()

    def execute_env_step(self) -> EnvStepResult:
        """Step every training env once; the env step that completes the collection step's quota also
        completes the training step (update, logs, hooks, events, callbacks, maybe the epoch's end).

        Driving a whole run so gives the same run as ``run()`` (see :mod:`tshtrain.trainer.stepping`).

        Raises:
            ConfigurationError: with episode-based collection (``collection_step_num_episodes``).
            RuntimeError: after the run ended (``reset()`` starts again).
        """
        params = self.params
        collector = params.training_collector
        if params.collection_step_num_env_steps is None:
            raise ConfigurationError(
                f"{type(self).__name__}.execute_env_step needs env-step collection "
                f"(collection_step_num_env_steps); collection_step_num_episodes="
                f"{params.collection_step_num_episodes} ends collection steps by episodes. Use "
                f"execute_training_step() instead."
            )
        if self._pending_env_steps is None:
            self._begin_training_step()
            buffer = collector.buffer
            assert buffer is not None  # checked by the params
            self._pending_env_steps = []
            self._pending_start = (buffer.layout(), 0.0)
        assert self._pending_start is not None
        start = time.perf_counter()
        stat = collector.collect(n_step=collector.num_envs)
        pending = self._pending_env_steps
        pending.append(stat)
        layout, seconds = self._pending_start[0], self._pending_start[1] + time.perf_counter() - start
        self._pending_start = (layout, seconds)
        if len(pending) < -(-params.collection_step_num_env_steps // collector.num_envs):
            return EnvStepResult(collect_stat=stat, num_vector_steps=len(pending), training_step=None)
        self._pending_env_steps, self._pending_start = None, None
        collected = CollectedSteps(stat=merge_collect_stats(pending), layout_before=layout, seconds=seconds)
        result = self._complete_training_step(collected)
        return EnvStepResult(collect_stat=stat, num_vector_steps=len(pending), training_step=result)

    @override
    def _reset_collectors(self, reset_buffers: bool) -> None:
        self.params.training_collector.reset(reset_buffer=reset_buffers, reset_stats=True)

    def _collect(self, collected: CollectedSteps | None) -> tuple[CollectStats, BufferLayout]:
        """The collection step (or the one gathered env step by env step) and the buffer's layout
        before it."""
        if collected is not None:
            return collected.stat, collected.layout_before
        params = self.params
        buffer = params.training_collector.buffer
        assert buffer is not None  # checked by the params
        layout = buffer.layout()
        stat = params.training_collector.collect(
            n_step=params.collection_step_num_env_steps, n_episode=params.collection_step_num_episodes
        )
        return stat, layout

    def _rollout(self, collect_stat: CollectStats) -> RolloutBatch | None:
        """What an update receives besides the buffer: on-policy the rollout, else None."""
        del collect_stat
        return None

    @override
    def _training_step(
        self, collected: CollectedSteps | None
    ) -> tuple[CollectStats | None, TrainingStats | None]:
        params = self.params
        stat, layout = self._collect(collected)
        stat = self._record_collect(stat)
        buffer = params.training_collector.buffer
        assert buffer is not None  # checked by the params
        batch = self._ext.batch_process(
            CollectedBatch(
                collect_stat=stat, rollout=self._rollout(stat), buffer=buffer, layout_before=layout
            )
        )
        self._ext.pre_steps_log(stat)
        if (
            params.test_in_training
            and params.stop_fn is not None
            and params.test_collector is not None
            and stat.n_collected_episodes > 0
            and params.stop_fn(self._score(stat))  # the training episodes scored like a test step
        ):
            self._test_step()
            if self.done:
                self._advance_bar(stat.n_collected_steps, None)
                return stat, None
        self._ext.pre_update(batch)
        start = time.perf_counter()
        parts = self._update(batch)
        training_stat: TrainingStats | None = None
        if parts:
            training_stat = parts[0] if len(parts) == 1 else type(parts[0]).aggregate(parts)
            self._record_update(training_stat, time.perf_counter() - start, parts)
            self._ext.post_update(training_stat)
        self._advance_bar(stat.n_collected_steps, training_stat)
        return stat, training_stat

    @abstractmethod
    def _update(self, batch: CollectedBatch) -> Sequence[TrainingStats]:
        """The update step after a collection step: the statistics of its algorithm updates (one
        on-policy, one per gradient step off-policy; empty: no update was possible). Call
        ``self._ext.end_part()`` after each ``algorithm.update``."""


@final
class OnPolicyTrainer(OnlineTrainer[OnPolicyAlgorithm[Any], OnPolicyTrainerParams]):
    """Hands each collection step's rollout to the algorithm, then clears the buffer.

    The algorithm does ``update_step_num_repetitions`` passes over the rollout in mini-batches of
    ``batch_size`` (None: the whole rollout). Clearing the buffer keeps the collector's per-env
    episode statistics, so returns of episodes spanning two collection steps stay correct.
    """

    @override
    def _rollout(self, collect_stat: CollectStats) -> RolloutBatch | None:
        buffer = self.params.training_collector.buffer
        assert buffer is not None  # checked by the params
        rollout = buffer.rollout()
        if rollout.num_steps != collect_stat.n_collected_steps:
            raise RuntimeError(
                f"OnPolicyTrainer: the collection step gathered {collect_stat.n_collected_steps} env steps "
                f"but the training buffer holds {rollout.num_steps} (capacity {buffer.capacity}); its "
                f"sub-buffers overflowed during episode collection. Enlarge the training buffer so that "
                f"one collection step fits, or collect fewer episodes per collection step."
            )
        return rollout

    @override
    def _update(self, batch: CollectedBatch) -> Sequence[TrainingStats]:
        assert batch.rollout is not None  # set by _rollout; batch_process hooks may replace it
        try:
            stat = self.algorithm.update(
                batch.rollout,
                batch_size=self.params.batch_size,
                num_repetitions=self.params.update_step_num_repetitions,
                hooks=self._ext.update_hooks,
            )
        finally:  # also when a hook stops training inside the update
            batch.buffer.reset(keep_statistics=True)
        self._ext.end_part()
        return [stat]


@final
class OffPolicyTrainer(OnlineTrainer[OffPolicyAlgorithm[Any], OffPolicyTrainerParams]):
    """After each collection step of n transitions, round(u * n) gradient steps on buffer samples."""

    @override
    def _update(self, batch: CollectedBatch) -> Sequence[TrainingStats]:
        buffer = batch.buffer
        num_steps = round(
            self.params.update_step_num_gradient_steps_per_sample * batch.collect_stat.n_collected_steps
        )
        if num_steps == 0 or len(buffer) == 0:
            return []
        steps: Iterable[int] = range(num_steps)
        if self._show_progress() and num_steps >= INNER_BAR_MIN_STEPS:
            steps = inner_bar(num_steps, "gradient steps")
        parts: list[TrainingStats] = []
        for _ in steps:
            parts.append(self.algorithm.update(buffer, self.params.batch_size, hooks=self._ext.update_hooks))
            self._ext.end_part()
        return parts


@final
class OfflineTrainer(Trainer[OfflineAlgorithm[Any], OfflineTrainerParams]):
    """Each training step is one gradient step on a sample of ``params.buffer``.

    ``env_step`` advances by ``batch_size`` per training step (the transitions sampled), as in Tianshou.
    """

    @override
    def _reset_collectors(self, reset_buffers: bool) -> None:
        del reset_buffers  # the dataset is never cleared

    @override
    def reset(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> None:
        self.algorithm.process_buffer(self.params.buffer)
        super().reset(reset_collectors, reset_collector_buffers)

    @override
    def _training_step(
        self, collected: CollectedSteps | None
    ) -> tuple[CollectStats | None, TrainingStats | None]:
        del collected  # nothing is collected offline
        self._ext.pre_steps_log(None)
        self._ext.pre_update(None)
        start = time.perf_counter()
        stat = self.algorithm.update(self.params.buffer, self.params.batch_size, hooks=self._ext.update_hooks)
        self._ext.end_part()
        # No env is stepped offline; as in Tianshou, env_step counts the transitions sampled from the
        # dataset, so that the env_step axis (test logs, callbacks) advances.
        self.counters.env_step += self.params.batch_size
        self._record_update(stat, time.perf_counter() - start)
        self._ext.post_update(stat)
        self._advance_bar(1, stat)
        return None, stat
