"""Driving a run one env step at a time (skrl's StepTrainer / manual loop), with the same counters,
logging, callbacks and events as ``run()``; and what a training step returns.

``OnlineTrainer.execute_env_step()`` steps every training env once (one vector step). The first env
step of a training step begins it (``on_training_step_start``, opening the epoch); the env step that
completes the collection step's quota (``ceil(collection_step_num_env_steps / num_envs)`` vector steps)
finishes it: the collected vector steps are merged into one collection step and the training step
continues exactly as ``execute_training_step()`` would (after_collect, update, logs, events, the end of
the epoch). Because a collector that collects k vector steps one at a time writes the same buffer rows,
draws the same random numbers and finishes the same episodes as one ``collect`` call of k vector steps,
a run driven env step by env step equals ``run()`` with the same seeds. Only env-step based collection
can be driven so (episode-based collection steps end when enough episodes finish).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tshtrain.algorithm.base import TrainingStats
from tshtrain.data.buffer import BufferLayout
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.params import OnlineTrainerParams
from tshtrain.trainer.stats import EpochStats
from tshtrain.trainer.steps import CollectedSteps


@dataclass(frozen=True, kw_only=True)
class TrainingStepResult:
    """What one training step did."""

    collect_stat: CollectStats | None
    """the collection step (None offline)"""
    training_stat: TrainingStats | None
    """the update step (None if it was skipped because training stopped)"""
    epoch_stats: EpochStats | None
    """set when this training step completed an epoch (its test step included)"""


@dataclass(frozen=True, kw_only=True)
class EnvStepResult:
    """What one :meth:`~tshtrain.trainer.OnlineTrainer.execute_env_step` did."""

    collect_stat: CollectStats
    """this vector step (num_envs env steps, and the episodes it ended)"""
    num_vector_steps: int
    """vector steps of the current collection step so far (including this one)"""
    training_step: TrainingStepResult | None
    """set when this env step completed its training step"""


class EnvStepDriver:
    """Gathers a training step's collection one vector step at a time (see the module docstring)."""

    def __init__(
        self,
        params: OnlineTrainerParams,
        *,
        begin: Callable[[], None],
        complete: Callable[[CollectedSteps], TrainingStepResult],
        owner: str,
    ):
        """Args:
        params: the trainer's params (training collector, collection quota).
        begin: begins a training step (reset if needed, open the epoch, on_training_step_start).
        complete: runs the rest of the training step on the gathered collection.
        owner: the trainer's class name, for messages.
        """
        self._params = params
        self._begin = begin
        self._complete = complete
        self._owner = owner
        self._pending: list[CollectStats] | None = None
        self._layout: BufferLayout | None = None
        self._seconds = 0.0

    @property
    def pending(self) -> int | None:
        """Vector steps gathered for the open training step (None: none is open)."""
        return None if self._pending is None else len(self._pending)

    def clear(self) -> None:
        """Forget a training step being gathered (``reset()``)."""
        self._pending, self._layout, self._seconds = None, None, 0.0

    def step(self) -> EnvStepResult:
        """Step every training env once; complete the training step when its quota is met."""
        params = self._params
        collector = params.training_collector
        quota = params.collection_step_num_env_steps
        if quota is None:
            raise ConfigurationError(
                f"{self._owner}.execute_env_step needs env-step collection (collection_step_num_env_steps); "
                f"collection_step_num_episodes={params.collection_step_num_episodes} ends collection steps "
                f"by episodes. Use execute_training_step() instead."
            )
        if self._pending is None:
            self._begin()
            buffer = collector.buffer
            assert buffer is not None  # checked by the params
            self._pending, self._layout, self._seconds = [], buffer.layout(), 0.0
        start = time.perf_counter()
        stat = collector.collect(n_step=collector.num_envs)
        self._pending.append(stat)
        self._seconds += time.perf_counter() - start
        pending = self._pending
        if len(pending) < -(-quota // collector.num_envs):
            return EnvStepResult(collect_stat=stat, num_vector_steps=len(pending), training_step=None)
        assert self._layout is not None
        collected = CollectedSteps(
            stat=merge_collect_stats(pending), layout_before=self._layout, seconds=self._seconds
        )
        self.clear()
        result = self._complete(collected)
        return EnvStepResult(collect_stat=stat, num_vector_steps=len(pending), training_step=result)
