"""skrl's step-wise driving: a run advanced one env step at a time, with the same counters, logging,
callbacks and checkpoints as ``run()``.

``EnvStepDriver(trainer).step()`` steps every training env once (one vector step). The first env step
of a training step begins it (``trainer.begin_training_step()``: on_training_step_start, the epoch
opened); the env step that completes the collection step's quota
(``ceil(collection_step_num_env_steps / num_envs)`` vector steps) completes it: the vector steps are
merged into one collection step and handed to ``trainer.execute_training_step(collected)``, which goes
on exactly as a whole training step does (after_collect, update, records, the end of the epoch).
Because a collector that collects k vector steps one at a time writes the same buffer rows, draws the
same random numbers and finishes the same episodes as one ``collect`` call of k vector steps, a run
driven so equals ``run()`` with the same seeds. Only env-step collection can be driven so (a collection
step of episodes ends when enough episodes finish), and not with ``overlap_collection`` (collection
steps then run whole, in a background thread). With ``max_env_steps`` the collection step that reaches
the budget completes early, as in ``run()``.

:class:`SequentialTrainer` and :class:`StepTrainer` (:mod:`tshtrain.adapters.skrl_trainers`) are skrl's
trainers as facades over one tshtrain trainer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, final

from tshtrain.data.buffer import BufferLayout
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OnlineTrainer, TrainingStepResult
from tshtrain.trainer.steps import CollectedSteps


@dataclass(frozen=True, kw_only=True)
class EnvStepResult:
    """What one :meth:`EnvStepDriver.step` did."""

    collect_stat: CollectStats
    """this vector step (num_envs env steps, and the episodes it ended)"""
    num_vector_steps: int
    """vector steps of the current collection step so far (including this one)"""
    training_step: TrainingStepResult | None
    """set when this env step completed its training step"""


@final
class EnvStepDriver:
    """Drives an online trainer one vector step at a time (see the module docstring)."""

    def __init__(self, trainer: OnlineTrainer[Any, Any]):
        """Raises:
        ConfigurationError: the trainer collects episodes per collection step, or overlaps collection.
        """
        params = trainer.params
        owner = f"EnvStepDriver({type(trainer).__name__})"
        if params.collection_step_num_env_steps is None:
            raise ConfigurationError(
                f"{owner} needs env-step collection (collection_step_num_env_steps); "
                f"collection_step_num_episodes={params.collection_step_num_episodes} ends collection steps "
                f"by episodes. Use trainer.execute_training_step() instead."
            )
        if getattr(params, "overlap_collection", False):
            raise ConfigurationError(
                f"{owner}: OffPolicyTrainerParams.overlap_collection=True collects whole collection steps in "
                f"a background thread, so the run cannot be driven env step by env step; use "
                f"execute_training_step() / run(), or overlap_collection=False."
            )
        self._trainer = trainer
        self._quota = -(-params.collection_step_num_env_steps // params.training_collector.num_envs)
        self._step_quota = self._quota
        self._pending: list[CollectStats] = []
        self._layout: BufferLayout | None = None
        self._seconds = 0.0

    @property
    def pending(self) -> int | None:
        """Vector steps gathered for the open training step (None: none is open)."""
        return len(self._pending) if self._layout is not None and self._trainer.training_step_open else None

    def step(self) -> EnvStepResult:
        """Step every training env once; complete the training step when its quota is met.

        Raises:
            RuntimeError: the run has ended (``trainer.reset()`` starts again).
        """
        trainer = self._trainer
        collector = trainer.params.training_collector
        if self.pending is None:  # a new training step (or the trainer was reset since)
            trainer.begin_training_step()
            buffer = collector.buffer
            assert buffer is not None  # checked by the params
            self._pending, self._layout, self._seconds = [], buffer.layout(), 0.0
            self._step_quota = self._quota
            budget = trainer.params.max_env_steps
            if budget is not None:  # the collection step that reaches the budget ends there
                left = max(1, budget - trainer.counters.env_step)
                self._step_quota = min(self._quota, -(-left // collector.num_envs))
        start = time.perf_counter()
        stat = collector.collect(n_step=collector.num_envs)
        self._pending.append(stat)
        self._seconds += time.perf_counter() - start
        pending = self._pending
        if len(pending) < self._step_quota:
            return EnvStepResult(collect_stat=stat, num_vector_steps=len(pending), training_step=None)
        assert self._layout is not None
        collected = CollectedSteps(
            stat=merge_collect_stats(pending), layout_before=self._layout, seconds=self._seconds
        )
        self._pending, self._layout = [], None
        result = trainer.execute_training_step(collected)
        return EnvStepResult(collect_stat=stat, num_vector_steps=len(pending), training_step=result)
