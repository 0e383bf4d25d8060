"""The concrete trainers: on-policy, off-policy and offline (see ``tshtrain.trainer.base`` for the loop)."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, final

from typing_extensions import override

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm, TrainingStats
from tshtrain.data.stats import CollectStats
from tshtrain.trainer.base import TAlgorithm, Trainer
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
)
from tshtrain.trainer.progress import INNER_BAR_MIN_STEPS, inner_bar

TOnlineParams = TypeVar("TOnlineParams", bound=OnlineTrainerParams)


class OnlineTrainer(Trainer[TAlgorithm, TOnlineParams]):
    """A trainer whose training steps collect data with ``params.training_collector`` and then update."""

    @override
    def _reset_collectors(self, reset_buffers: bool) -> None:
        self.params.training_collector.reset(reset_buffer=reset_buffers, reset_stats=True)

    @override
    def _training_step(self) -> tuple[CollectStats | None, TrainingStats | None]:
        params = self.params
        stat = params.training_collector.collect(
            n_step=params.collection_step_num_env_steps, n_episode=params.collection_step_num_episodes
        )
        stat = self._record_collect(stat)
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
        start = time.perf_counter()
        parts = self._update(stat)
        training_stat: TrainingStats | None = None
        if parts:
            training_stat = parts[0] if len(parts) == 1 else type(parts[0]).aggregate(parts)
            self._record_update(training_stat, time.perf_counter() - start, parts)
        self._advance_bar(stat.n_collected_steps, training_stat)
        return stat, training_stat

    @abstractmethod
    def _update(self, collect_stat: CollectStats) -> Sequence[TrainingStats]:
        """The update step after a collection step: the statistics of its algorithm updates (one
        on-policy, one per gradient step off-policy; empty: no update was possible)."""


@final
class OnPolicyTrainer(OnlineTrainer[OnPolicyAlgorithm[Any], OnPolicyTrainerParams]):
    """Hands each collection step's rollout to the algorithm, then clears the buffer.

    The algorithm does ``update_step_num_repetitions`` passes over the rollout in mini-batches of
    ``batch_size`` (None: the whole rollout). Clearing the buffer keeps the collector's per-env
    episode statistics, so returns of episodes spanning two collection steps stay correct.
    """

    @override
    def _update(self, collect_stat: CollectStats) -> Sequence[TrainingStats]:
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
        stat = self.algorithm.update(
            rollout,
            batch_size=self.params.batch_size,
            num_repetitions=self.params.update_step_num_repetitions,
        )
        buffer.reset(keep_statistics=True)
        return [stat]


@final
class OffPolicyTrainer(OnlineTrainer[OffPolicyAlgorithm[Any], OffPolicyTrainerParams]):
    """After each collection step of n transitions, round(u * n) gradient steps on buffer samples."""

    @override
    def _update(self, collect_stat: CollectStats) -> Sequence[TrainingStats]:
        buffer = self.params.training_collector.buffer
        assert buffer is not None  # checked by the params
        num_steps = round(
            self.params.update_step_num_gradient_steps_per_sample * collect_stat.n_collected_steps
        )
        if num_steps == 0 or len(buffer) == 0:
            return []
        steps: Iterable[int] = range(num_steps)
        if self._show_progress() and num_steps >= INNER_BAR_MIN_STEPS:
            steps = inner_bar(num_steps, "gradient steps")
        return [self.algorithm.update(buffer, self.params.batch_size) for _ in steps]


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
    def _training_step(self) -> tuple[CollectStats | None, TrainingStats | None]:
        start = time.perf_counter()
        stat = self.algorithm.update(self.params.buffer, self.params.batch_size)
        # No env is stepped offline; as in Tianshou, env_step counts the transitions sampled from the
        # dataset, so that the env_step axis (test logs, callbacks) advances.
        self.counters.env_step += self.params.batch_size
        self._record_update(stat, time.perf_counter() - start)
        self._advance_bar(1, stat)
        return None, stat
