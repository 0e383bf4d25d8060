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
-> ``stop_fn(score)``. Hook stages (``register_hook``) and events (``events``, ``eval_events``) add to
these points; ``docs/hooks.md`` draws the loop with all of them (``tshtrain.trainer.extensions`` runs
them). Online trainers can also be driven one env step at a time (``execute_env_step``).

What is logged under which scope, and when (interval gating), is in ``tshtrain.trainer.records``; a
logger that fails stops training with ``LoggerError`` after the logger is closed (docs/logging.md).
"""

from __future__ import annotations

import logging
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch

from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.logger.base import Logger, LogScope, NoOpLogger, RestoredCounters
from tshtrain.trainer.checkpoint import (
    Backend,
    CheckpointManager,
    checkpoint_collect_stats,
    checkpoint_training_stats,
    load_trainer_checkpoint,
    restore_collect_stats,
    restore_training_stats,
    save_trainer_checkpoint,
)
from tshtrain.trainer.extensions import ExtensionRuntime
from tshtrain.trainer.hook_registry import merge_scalar
from tshtrain.trainer.hooks import StopTraining
from tshtrain.trainer.options import TrainerOptions
from tshtrain.trainer.params import TrainerParams
from tshtrain.trainer.progress import ProgressBar, format_info_table
from tshtrain.trainer.records import EpisodeWindow, LogGate, update_timing
from tshtrain.trainer.stats import EpochStats, InfoStats, StopReason, TimingStats
from tshtrain.trainer.stepping import CollectedSteps

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

    def __init__(self, algorithm: TAlgorithm, params: TParams, options: TrainerOptions | None = None):
        """Args:
        algorithm: what is trained.
        params: what kind of training, how long, callbacks, logger.
        options: how the run behaves (evaluation mode, rendering, closing envs); default options.
        """
        self.algorithm = algorithm
        self.params = params
        if options is not None and not isinstance(options, TrainerOptions):
            raise TypeError(
                f"{type(self).__name__}: options must be TrainerOptions, got {type(options).__name__}."
            )
        self.options = options if options is not None else TrainerOptions()
        """how the run behaves around the training (see TrainerOptions)"""
        self.logger: Logger = params.logger if params.logger is not None else NoOpLogger()
        self.counters = _Counters()
        """epoch, env_step, env_episode, update_step, gradient_step, test_step, test_episode"""
        self.best = _Best()
        """best test score, its mean return and std, and its epoch"""
        self.done = False
        """True once training has ended (see stop_reason)"""
        self.stop_reason: StopReason | None = None
        """why training ended (None while it runs)"""
        self.stop_detail: str | None = None
        """who stopped training and why, for stops by hooks, events and ``request_stop(reason)``"""
        self._ext = ExtensionRuntime(self)
        self.hooks = self._ext.hooks
        """the hooks by stage (docs/hooks.md)"""
        self.register_hook = self.hooks.register
        """``register_hook(stage, hook, name=...)``: see :meth:`HookRegistry.register`"""
        self.events = self._ext.events
        """the train event manager (docs/hooks.md#events)"""
        self.eval_events = self._ext.eval_events
        """the eval event manager: events of test steps"""
        self._step_collect: CollectStats | None = None
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
        self._checkpoints = CheckpointManager(params.checkpoint) if params.checkpoint is not None else None
        self._resumed = False

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
        self.stop_detail = None
        self._timing = dict.fromkeys(self._timing, 0.0)
        self._start_time = time.perf_counter()
        self._gate.reset()
        self._windows = {LogScope.TRAINING: EpisodeWindow(), LogScope.TEST: EpisodeWindow()}
        self._epoch_open = False
        if self.params.resume_from_log:
            restored = self.logger.restore_counters()
            if restored is not None:
                self._restore(restored)
        self._is_reset = True
        self._set_flush_denormal(True)  # before the initial test step
        self._ext.start(resumed=False)  # setup hooks, startup events; before the envs are reset
        if reset_collectors:
            self._reset_collectors(reset_collector_buffers)
            if self.params.test_collector is not None:
                self.params.test_collector.reset(reset_buffer=reset_collector_buffers, reset_stats=True)
        if self.counters.epoch >= self.params.max_epochs:
            self._finish(StopReason.MAX_EPOCHS)
        elif self.params.test_collector is not None:
            self._test_step(apply_stop_fn=False)

    def run(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> InfoStats:
        """Reset, run all epochs (or until a stop), close the logger and return the final InfoStats.

        After :meth:`load_checkpoint`, the run continues from the checkpoint instead of resetting.
        With ``verbose``, a summary table of the final InfoStats is printed at the end. With
        ``params.checkpoint``, a final checkpoint is written however the run ends.
        """
        try:
            if not self._resumed:
                self.reset(reset_collectors, reset_collector_buffers)
            for _ in self:
                pass
        except BaseException as error:
            self._final_checkpoint(f"{type(error).__name__}: {error}")
            self._ext.shutdown(quiet=True)
            self._close(quiet=True)  # the original error is what the caller needs to see
            raise
        self._final_checkpoint(str(self.stop_reason))
        self.close()
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
        self._begin_training_step()
        return self._complete_training_step(None)

    def close(self) -> None:
        """End the run: shutdown hooks and events, detach from the algorithm and the collectors, close
        the envs (``options.close_envs``), the progress bar and the logger. ``run()`` does this; call it
        when you drive the trainer yourself."""
        self._ext.shutdown()
        self._close()

    def extension_state(self) -> dict[str, Any]:
        """The state of hooks and events for checkpoints (plain values and tensors)."""
        return self._ext.state_dict()

    def load_extension_state(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Restore :meth:`extension_state` into the same hooks and events, registered under the same
        names (``strict``: anything else is an error)."""
        self._ext.load_state_dict(state, strict=strict)

    def _begin_training_step(self) -> None:
        """The start of every training step: reset if needed, open the epoch, ``training_fn``."""
        if not self._is_reset:
            self.reset()  # may end training already (stop_fn on the initial test step, resumed run)
        if self.done:
            raise RuntimeError(f"Training has ended ({self.stop_reason}); call reset() to start again.")
        self._ext.ensure_started()  # a run resumed from a checkpoint starts here
        self._set_flush_denormal(True)  # every step: the flag is per thread
        if not self._epoch_open:
            self._open_epoch()
        if self.params.training_fn is not None:
            self.params.training_fn(self.counters.epoch, self.counters.env_step)

    def _complete_training_step(self, collected: CollectedSteps | None) -> TrainingStepResult:
        """The rest of a training step: collection (unless ``collected`` holds what was collected env
        step by env step), update, log hooks and the training record, Every events,
        ``save_checkpoint_fn`` and, when its quota is met, the end of the epoch."""
        start = time.perf_counter()
        self._ext.begin_step()
        self._step_collect = None
        try:
            collect_stat, training_stat = self._training_step(collected)
        except StopTraining as signal:  # raised inside the update: it is abandoned
            self._ext.stop_now(signal)
            collect_stat, training_stat = self._step_collect, None
        self._write_training_record(self._ext.post_steps_log(collect_stat, training_stat))
        self._timing["train"] += (
            time.perf_counter() - start + (0.0 if collected is None else collected.seconds)
        )
        self._ext.after_training_step()
        if self.params.save_checkpoint_fn is not None:
            c = self.counters
            self.params.save_checkpoint_fn(c.epoch, c.env_step, c.gradient_step)
        epoch_stats = self._close_epoch() if self.done or self._epoch_complete() else None
        if epoch_stats is not None:
            self._ext.after_epoch()
        if self._checkpoints is not None:
            self._checkpoints.periodic(self, epoch_closed=epoch_stats is not None)
        return TrainingStepResult(
            collect_stat=collect_stat, training_stat=training_stat, epoch_stats=epoch_stats
        )

    def save_checkpoint(
        self, path: str | Path, *, include_buffers: bool = True, backend: Backend = "torch"
    ) -> Path:
        """Write everything a resumed run needs to the directory ``path`` (see
        :mod:`tshtrain.trainer.checkpoint`); atomic: a crash mid-write leaves the previous state."""
        return save_trainer_checkpoint(self, path, include_buffers=include_buffers, backend=backend)

    def load_checkpoint(self, path: str | Path, *, load_buffers: bool = True) -> None:
        """Restore a checkpoint into this trainer, built with the same algorithm, params and collectors
        as the one that saved it; the next :meth:`run` (or iteration) continues from there.

        Raises:
            CheckpointError: the checkpoint is missing, truncated, corrupted, of another format
                version, or from another algorithm or trainer class; nothing is changed then.
        """
        load_trainer_checkpoint(self, path, load_buffers=load_buffers)
        self._resumed = True

    def checkpoint_state(self) -> dict[str, Any]:
        """The trainer's own state for checkpoints (plain values and tensors)."""
        return {
            "counters": asdict(self.counters),
            "best": asdict(self.best),
            "done": self.done,
            "stop_reason": None if self.stop_reason is None else str(self.stop_reason),
            "timing": dict(self._timing),
            "elapsed": time.perf_counter() - self._start_time,
            "last_logged": {str(k): v for k, v in self._gate.last_logged.items()},
            "windows": {str(k): w.state_dict() for k, w in self._windows.items()},
            "epoch_open": self._epoch_open,
            "epoch_progress": self._epoch_progress,
            "epoch_collect": [checkpoint_collect_stats(s) for s in self._epoch_collect],
            "epoch_training": [checkpoint_training_stats(s) for s in self._epoch_training],
            "is_reset": self._is_reset,
            "env_step_mark": 0 if self._checkpoints is None else self._checkpoints.env_step_mark,
        }

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`checkpoint_state`."""
        self.counters = _Counters(**state["counters"])
        self.best = _Best(**state["best"])
        self.done = bool(state["done"])
        self.stop_reason = None if state["stop_reason"] is None else StopReason(state["stop_reason"])
        self._timing = dict(state["timing"])
        self._start_time = time.perf_counter() - float(state["elapsed"])
        self._gate.reset({LogScope(k): v for k, v in state["last_logged"].items() if v is not None})
        for key, window in state["windows"].items():
            self._windows[LogScope(key)].load_state_dict(window)
        self._epoch_open = bool(state["epoch_open"])
        self._epoch_progress = int(state["epoch_progress"])
        self._epoch_collect = [restore_collect_stats(s) for s in state["epoch_collect"]]
        self._epoch_training = [restore_training_stats(s) for s in state["epoch_training"]]
        self._is_reset = bool(state["is_reset"])
        if self._checkpoints is not None:
            self._checkpoints.env_step_mark = int(state["env_step_mark"])
        if self._epoch_open and self._show_progress():
            self._bar = ProgressBar(self._epoch_total(), f"Epoch #{self.counters.epoch}")

    def _final_checkpoint(self, reason: str) -> None:
        if self._checkpoints is None or not self._is_reset:
            return
        try:
            self._checkpoints.final(self, reason)
        except Exception:  # never hide the run's own outcome behind a failed final save
            log.exception("Trainer: the final checkpoint could not be written")

    def request_stop(self, reason: str | None = None) -> None:
        """Ask training to stop after the current training step (stop reason ``REQUESTED``; ``reason``
        becomes ``InfoStats.stop_detail``)."""
        self._finish(StopReason.REQUESTED, reason)

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
            stop_detail=self.stop_detail,
        )

    # ================================================================== for subclasses
    @abstractmethod
    def _reset_collectors(self, reset_buffers: bool) -> None:
        """Reset the training collector(s) (the test collector is reset by the base class)."""

    @abstractmethod
    def _training_step(
        self, collected: CollectedSteps | None
    ) -> tuple[CollectStats | None, TrainingStats | None]:
        """Collect (online; unless ``collected`` holds the collection gathered env step by env step) and
        update; advance the counters, call the record helpers and the hooks of the training step."""

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
        self._windows[LogScope.TRAINING].add(stat)
        self._step_collect = stat  # logged at the end of the training step (_write_training_record)
        return stat

    def _write_training_record(self, scalars: Mapping[str, float]) -> None:
        """The ``training`` record of a training step, when due: its collection's statistics (online)
        and the scalars of the log hooks (offline the record has only these, and is skipped without)."""
        stat = self._step_collect
        if (stat is None and not scalars) or not self._gate.due(LogScope.TRAINING, self.counters.env_step):
            return
        data: dict[str, float] = {}
        if stat is not None:
            data = {**stat.as_scalars(), **self._windows[LogScope.TRAINING].as_scalars()}
        for key, value in scalars.items():
            merge_scalar(data, key, value, "a log hook")
        self._gate.write(LogScope.TRAINING, self.counters.env_step, data)

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
        hook_scalars = self._ext.take_part_scalars(len(parts))  # post_optim_log, per part
        for part, extra in zip(parts, hook_scalars, strict=True):
            self.counters.gradient_step += part.num_gradient_steps
            if self._gate.due(LogScope.UPDATE, self.counters.gradient_step):
                timing = timing or update_timing(stat.num_gradient_steps, seconds)
                data = {**part.as_scalars(), **timing}
                for key, value in extra.items():
                    merge_scalar(data, key, value, "a post_optim_log hook")
                self._gate.write(LogScope.UPDATE, self.counters.gradient_step, data)

    def _advance_bar(self, amount: int, stat: TrainingStats | None) -> None:
        self._epoch_progress += amount
        if self._bar is not None:
            self._bar.advance(amount, self.counters.env_step, self._last_returns(), stat, self._ext.progress)

    def _test_step(self, *, apply_stop_fn: bool = True) -> CollectStats:
        """Run a test step, update the best result, apply stop_fn (requires a test collector).

        The initial test step (epoch 0) passes ``apply_stop_fn=False``: as in Tianshou, an untrained
        policy that happens to satisfy stop_fn does not end a run before it trained.
        """
        collector = self.params.test_collector
        assert collector is not None
        if self.params.test_fn is not None:
            self.params.test_fn(self.counters.epoch, self.counters.env_step)
        self._ext.before_test()
        deterministic = self.options.test_deterministic
        start = time.perf_counter()
        stat = collector.collect(
            n_episode=self.params.test_step_num_episodes,
            deterministic=self.algorithm.policy.deterministic_eval
            if deterministic is None
            else deterministic,
            reset_before_collect=True,
        )
        self._timing["test"] += time.perf_counter() - start
        stat = self._reduce_returns(stat)
        self.counters.test_step += stat.n_collected_steps
        self.counters.test_episode += stat.n_collected_episodes
        score = self._score(stat)
        is_best = self.best.score is None or score > self.best.score
        if is_best:
            self.best = _Best(
                score=float(score),
                reward=stat.returns_stat.mean,
                reward_std=stat.returns_stat.std,
                epoch=self.counters.epoch,
            )
            if self.params.save_best_fn is not None:
                self.params.save_best_fn(self.algorithm)
            if self._checkpoints is not None and self._is_reset:
                self._checkpoints.best(self)
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
        self._ext.after_test(stat, float(score), is_best)
        return stat

    def _finish(self, reason: StopReason, detail: str | None = None) -> None:
        if not self.done:
            self.done = True
            self.stop_reason = reason
            self.stop_detail = detail

    # ================================================================== internals
    def _score(self, stat: CollectStats) -> float:
        """The score of collected episodes: ``compute_score_fn`` or, by default, the mean return."""
        compute = self.params.compute_score_fn
        return float(compute(stat)) if compute is not None else stat.returns_stat.mean

    def _reduce_returns(self, stat: CollectStats) -> CollectStats:
        reduce = self.params.multi_agent_return_reduction
        return stat.with_return_reduction(reduce) if reduce is not None else stat

    def _set_flush_denormal(self, on: bool) -> None:
        if self.options.flush_denormal:
            torch.set_flush_denormal(on)

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
        self._set_flush_denormal(False)
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        try:
            self.logger.close()
        except Exception:
            if not quiet:
                raise
            log.exception("%s failed to close", type(self.logger).__name__)
