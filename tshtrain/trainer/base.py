"""The generic Trainer: epochs of training steps and test steps.

Glossary (the words used in code, docs and logs):

* **env step** -- one transition of one environment; N vector envs take N env steps per ``step()``.
  Offline, the env_step counter counts the transitions sampled from the dataset (as in Tianshou).
* **collection step** -- one ``Collector.collect`` call (n env steps or n episodes).
* **update step** -- the algorithm's update after a collection step. On-policy: passes of mini-batches
  over the rollout; off-policy: round(u * n_collected) gradient steps; offline: one gradient step.
* **gradient step** -- one optimizer step (counted separately from update steps).
* **training step** -- collection step + (optional test-in-training) + update step; offline: one update.
* **test step** -- ``test_step_num_episodes`` episodes on the test collector, scored by
  ``compute_score_fn``.
* **epoch** -- training steps until ``epoch_num_steps`` env steps were collected (online;
  ceil(s / c) training steps when c env steps are collected per step), or ``epoch_num_steps`` training
  steps (offline); then one test step.

Before the first epoch, ``reset`` runs an initial test step (epoch 0), as Tianshou does, so that the
untrained policy's score is the first best score. ``run`` = ``reset`` + all epochs. The same run can be
driven epoch by epoch (``for epoch_stats in trainer``) or training step by training step
(``execute_training_step`` until ``trainer.done``); an epoch's test step runs inside the training step
that completes the epoch.

Callback points, in order, for one training step: ``training_fn(epoch, env_step)`` -> collection ->
[test-in-training: test step] -> update -> ``save_checkpoint_fn(epoch, env_step, gradient_step)``.
A test step: ``test_fn(epoch, env_step)`` -> test collection -> score -> [new best: ``save_best_fn``]
-> ``stop_fn(score)``.

What is logged under which scope, and when (interval gating), is in ``tshtrain.trainer.records``; a
logger that fails stops training with ``LoggerError`` after the logger is closed (docs/logging.md).
"""

from __future__ import annotations

import logging
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.logger.base import Logger, LogScope, NoOpLogger, RestoredCounters
from tshtrain.trainer.params import TrainerParams
from tshtrain.trainer.progress import ProgressBar, format_info_table
from tshtrain.trainer.records import EpisodeWindow, LogGate, update_timing
from tshtrain.trainer.stats import EpochStats, InfoStats, StopReason, TimingStats

log = logging.getLogger(__name__)

TAlgorithm = TypeVar("TAlgorithm", bound=Algorithm[Any])
TParams = TypeVar("TParams", bound=TrainerParams)


@dataclass(frozen=True, kw_only=True)
class TrainingStepResult:
    """What one training step did."""

    collect_stat: CollectStats | None
    """the collection step (None offline)"""
    training_stat: TrainingStats | None
    """the update step (None if it was skipped because training stopped)"""
    epoch_stats: EpochStats | None
    """set when this training step completed an epoch (its test step included)"""


@dataclass
class _Counters:
    epoch: int = 0
    env_step: int = 0
    env_episode: int = 0
    update_step: int = 0
    gradient_step: int = 0
    test_step: int = 0
    test_episode: int = 0


@dataclass
class _Best:
    score: float | None = None
    reward: float | None = None
    reward_std: float | None = None
    epoch: int | None = None


class Trainer(ABC, Generic[TAlgorithm, TParams]):
    """Runs epochs of training steps and test steps; subclasses implement the training step's work."""

    def __init__(self, algorithm: TAlgorithm, params: TParams):
        self.algorithm = algorithm
        self.params = params
        self.logger: Logger = params.logger if params.logger is not None else NoOpLogger()
        self.counters = _Counters()
        """epoch, env_step, env_episode, update_step, gradient_step, test_step, test_episode"""
        self.best = _Best()
        """best test score, its mean return and std, and its epoch"""
        self.done = False
        """True once training has ended (see stop_reason)"""
        self.stop_reason: StopReason | None = None
        """why training ended (None while it runs)"""
        self._timing = {"collect": 0.0, "update": 0.0, "test": 0.0, "train": 0.0}
        self._start_time = time.perf_counter()
        self._is_reset = False
        self._gate = LogGate(self.logger)
        self._windows = {LogScope.TRAINING: EpisodeWindow(), LogScope.TEST: EpisodeWindow()}
        self._epoch_open = False
        self._epoch_progress = 0
        self._epoch_collect: list[CollectStats] = []
        self._epoch_training: list[TrainingStats] = []
        self._bar: ProgressBar | None = None

    # ================================================================== public driving API
    def reset(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> None:
        """Prepare a run: counters to zero (or from the logger), collectors reset, initial test step.

        Args:
            reset_collectors: reset the collectors' envs and statistics.
            reset_collector_buffers: also clear their buffers (only with reset_collectors).
        """
        self.counters = _Counters()
        self.best = _Best()
        self.done = False
        self.stop_reason = None
        self._timing = dict.fromkeys(self._timing, 0.0)
        self._start_time = time.perf_counter()
        self._gate.reset()
        self._windows = {LogScope.TRAINING: EpisodeWindow(), LogScope.TEST: EpisodeWindow()}
        self._epoch_open = False
        if reset_collectors:
            self._reset_collectors(reset_collector_buffers)
            if self.params.test_collector is not None:
                self.params.test_collector.reset(reset_buffer=reset_collector_buffers, reset_stats=True)
        if self.params.resume_from_log:
            restored = self.logger.restore_counters()
            if restored is not None:
                self._restore(restored)
        self._is_reset = True
        if self.counters.epoch >= self.params.max_epochs:
            self._finish(StopReason.MAX_EPOCHS)
        elif self.params.test_collector is not None:
            self._test_step(apply_stop_fn=False)

    def run(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> InfoStats:
        """Reset, run all epochs (or until a stop), close the logger and return the final InfoStats.

        With ``verbose``, a summary table of the final InfoStats is printed at the end.
        """
        try:
            self.reset(reset_collectors, reset_collector_buffers)
            for _ in self:
                pass
        except BaseException:
            self._close(quiet=True)  # the original error is what the caller needs to see
            raise
        self._close()
        info = self.info_stats()
        if self.params.verbose:
            print(format_info_table(info), flush=True)
        return info

    def __iter__(self) -> Iterator[EpochStats]:
        """Epoch by epoch (resets first if ``reset`` was not called)."""
        if not self._is_reset:
            self.reset()
        while not self.done:
            yield self.execute_epoch()

    def execute_epoch(self) -> EpochStats:
        """Run training steps until the current epoch (with its test step) is complete."""
        while True:
            result = self.execute_training_step()
            if result.epoch_stats is not None:
                return result.epoch_stats

    def execute_training_step(self) -> TrainingStepResult:
        """One training step; completes the epoch (test step included) when its quota is reached."""
        if not self._is_reset:
            self.reset()  # may end training already (stop_fn on the initial test step, resumed run)
        if self.done:
            raise RuntimeError(f"Training has ended ({self.stop_reason}); call reset() to start again.")
        if not self._epoch_open:
            self._open_epoch()
        if self.params.training_fn is not None:
            self.params.training_fn(self.counters.epoch, self.counters.env_step)
        start = time.perf_counter()
        collect_stat, training_stat = self._training_step()
        self._timing["train"] += time.perf_counter() - start
        if self.params.save_checkpoint_fn is not None:
            c = self.counters
            self.params.save_checkpoint_fn(c.epoch, c.env_step, c.gradient_step)
        epoch_stats = self._close_epoch() if self.done or self._epoch_complete() else None
        return TrainingStepResult(
            collect_stat=collect_stat, training_stat=training_stat, epoch_stats=epoch_stats
        )

    def request_stop(self) -> None:
        """Ask training to stop after the current training step (stop reason ``REQUESTED``)."""
        self._finish(StopReason.REQUESTED)

    def info_stats(self) -> InfoStats:
        """Counters, best result and timing so far."""
        c = self.counters
        return InfoStats(
            update_step=c.update_step,
            gradient_step=c.gradient_step,
            best_score=self.best.score,
            best_reward=self.best.reward,
            best_reward_std=self.best.reward_std,
            best_epoch=self.best.epoch,
            train_step=c.env_step,
            train_episode=c.env_episode,
            test_step=c.test_step,
            test_episode=c.test_episode,
            timing=TimingStats(
                total_time=time.perf_counter() - self._start_time,
                train_time=self._timing["train"],
                train_time_collect=self._timing["collect"],
                train_time_update=self._timing["update"],
                test_time=self._timing["test"],
            ),
            stop_reason=self.stop_reason,
        )

    # ================================================================== for subclasses
    @abstractmethod
    def _reset_collectors(self, reset_buffers: bool) -> None:
        """Reset the training collector(s) (the test collector is reset by the base class)."""

    @abstractmethod
    def _training_step(self) -> tuple[CollectStats | None, TrainingStats | None]:
        """Collect (online) and update; advance the counters and call the record helpers."""

    def _epoch_complete(self) -> bool:
        """True when the open epoch has done its share of training: ``epoch_num_steps`` env steps
        (online) or training steps (offline), as counted by ``_advance_bar``."""
        return self._epoch_progress >= self.params.epoch_num_steps

    def _epoch_total(self) -> int:
        """The progress-bar total of one epoch (env steps online, training steps offline)."""
        return self.params.epoch_num_steps

    def _record_collect(self, stat: CollectStats) -> CollectStats:
        """Count a training collection step, log it, and return its (reduced) stats."""
        stat = self._reduce_returns(stat)
        self.counters.env_step += stat.n_collected_steps
        self.counters.env_episode += stat.n_collected_episodes
        self._timing["collect"] += stat.collect_time
        self._epoch_collect.append(stat)
        window = self._windows[LogScope.TRAINING]
        window.add(stat)
        if self._gate.due(LogScope.TRAINING, self.counters.env_step):
            self._gate.write(
                LogScope.TRAINING, self.counters.env_step, {**stat.as_scalars(), **window.as_scalars()}
            )
        return stat

    def _record_update(
        self, stat: TrainingStats, seconds: float, parts: Sequence[TrainingStats] | None = None
    ) -> None:
        """Count an update step and log its statistics.

        Args:
            stat: the update step's statistics.
            seconds: time spent in the update step.
            parts: the records ``stat`` aggregates (off-policy: one per gradient step); the epoch's
                training_stat aggregates these, so that its averages are over all of them. Each part
                is a candidate record of the update scope at the gradient_step it ends on, so that
                off-policy every gradient step gets its own point (when the update interval allows).
        """
        parts = parts if parts is not None else [stat]
        self.counters.update_step += 1
        self._timing["update"] += seconds
        self._epoch_training.extend(parts)
        timing: dict[str, float] | None = None
        for part in parts:
            self.counters.gradient_step += part.num_gradient_steps
            if self._gate.due(LogScope.UPDATE, self.counters.gradient_step):
                timing = timing or update_timing(stat.num_gradient_steps, seconds)
                self._gate.write(
                    LogScope.UPDATE, self.counters.gradient_step, {**part.as_scalars(), **timing}
                )

    def _advance_bar(self, amount: int, stat: TrainingStats | None) -> None:
        self._epoch_progress += amount
        if self._bar is not None:
            self._bar.advance(amount, self.counters.env_step, self._last_returns(), stat)

    def _test_step(self, *, apply_stop_fn: bool = True) -> CollectStats:
        """Run a test step, update the best result, apply stop_fn (requires a test collector).

        The initial test step (epoch 0) passes ``apply_stop_fn=False``: as in Tianshou, an untrained
        policy that happens to satisfy stop_fn does not end a run before it trained.
        """
        collector = self.params.test_collector
        assert collector is not None
        if self.params.test_fn is not None:
            self.params.test_fn(self.counters.epoch, self.counters.env_step)
        start = time.perf_counter()
        stat = collector.collect(
            n_episode=self.params.test_step_num_episodes,
            deterministic=self.algorithm.policy.deterministic_eval,
            reset_before_collect=True,
        )
        self._timing["test"] += time.perf_counter() - start
        stat = self._reduce_returns(stat)
        self.counters.test_step += stat.n_collected_steps
        self.counters.test_episode += stat.n_collected_episodes
        score = self._score(stat)
        if self.best.score is None or score > self.best.score:
            self.best = _Best(
                score=float(score),
                reward=stat.returns_stat.mean,
                reward_std=stat.returns_stat.std,
                epoch=self.counters.epoch,
            )
            if self.params.save_best_fn is not None:
                self.params.save_best_fn(self.algorithm)
        window = self._windows[LogScope.TEST]
        window.add(stat)
        if self._gate.due(LogScope.TEST, self.counters.env_step):
            data = {**stat.as_scalars(), "score": float(score), **window.as_scalars()}
            self._gate.write(LogScope.TEST, self.counters.env_step, data)
        if self.params.verbose:
            print(
                f"Epoch #{self.counters.epoch}: test_reward: {stat.returns_stat.mean:.6f} ± "
                f"{stat.returns_stat.std:.6f}, best_reward: {self.best.reward:.6f} ± "
                f"{self.best.reward_std:.6f} in #{self.best.epoch}",
                flush=True,
            )
        if apply_stop_fn and self.params.stop_fn is not None and self.params.stop_fn(float(score)):
            self._finish(StopReason.STOP_FN)
        return stat

    def _finish(self, reason: StopReason) -> None:
        if not self.done:
            self.done = True
            self.stop_reason = reason

    # ================================================================== internals
    def _score(self, stat: CollectStats) -> float:
        """The score of collected episodes: ``compute_score_fn`` or, by default, the mean return."""
        compute = self.params.compute_score_fn
        return float(compute(stat)) if compute is not None else stat.returns_stat.mean

    def _reduce_returns(self, stat: CollectStats) -> CollectStats:
        reduce = self.params.multi_agent_return_reduction
        return stat.with_return_reduction(reduce) if reduce is not None else stat

    def _show_progress(self) -> bool:
        show = self.params.show_progress
        return sys.stderr.isatty() if show is None else show

    def _open_epoch(self) -> None:
        self.counters.epoch += 1
        self._epoch_open = True
        self._epoch_progress = 0
        self._epoch_collect = []
        self._epoch_training = []
        if self._show_progress():
            self._bar = ProgressBar(self._epoch_total(), f"Epoch #{self.counters.epoch}")

    def _close_epoch(self) -> EpochStats:
        test_stat = None
        if self.params.test_collector is not None and not self.done:
            test_stat = self._test_step()
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self.counters.epoch >= self.params.max_epochs:
            self._finish(StopReason.MAX_EPOCHS)
        self._epoch_open = False
        info = self.info_stats()
        if self._gate.due(LogScope.INFO, self.counters.epoch):
            self._gate.write(LogScope.INFO, self.counters.epoch, info.as_scalars())
        training = (
            type(self._epoch_training[0]).aggregate(self._epoch_training) if self._epoch_training else None
        )
        return EpochStats(
            epoch=self.counters.epoch,
            train_collect_stat=merge_collect_stats(self._epoch_collect) if self._epoch_collect else None,
            test_collect_stat=test_stat,
            training_stat=training,
            info_stat=info,
        )

    def _last_returns(self) -> float | None:
        for stat in reversed(self._epoch_collect):
            if stat.n_collected_episodes:
                return stat.returns_stat.mean
        return None

    def _restore(self, restored: RestoredCounters) -> None:
        """Continue the counters and the interval gating of the run the logger's records end with."""
        c = self.counters
        c.epoch, c.env_step, c.gradient_step = restored.epoch, restored.env_step, restored.gradient_step
        c.env_episode, c.update_step = restored.env_episode, restored.update_step
        c.test_step, c.test_episode = restored.test_step, restored.test_episode
        self._gate.reset(restored.last_logged)

    def _close(self, *, quiet: bool = False) -> None:
        """Close the progress bar and the logger; ``quiet``: log a failing close instead of raising."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        try:
            self.logger.close()
        except Exception:
            if not quiet:
                raise
            log.exception("%s failed to close", type(self.logger).__name__)
