"""The generic Trainer: epochs of training steps and test steps (the words: see :mod:`tshtrain.trainer`).

``reset`` runs an initial test step (epoch 0), as Tianshou does; ``run`` = ``reset`` + training steps
until a stop, each :meth:`Trainer._training_step`, top-down; a run can also be driven epoch by epoch,
step by step or env step by env step (:mod:`tshtrain.adapters.skrl`). The family's parts are a strategy
(:mod:`tshtrain.trainer.steps`), which data-parallel runs wrap (:mod:`tshtrain.parallel`); the run's
state is data (``RunState``), checkpointed through :mod:`tshtrain.checkpoint`.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import torch

from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.checkpoint import Backend, CheckpointManager, load_checkpoint, save_checkpoint
from tshtrain.checkpoint.store import check_saved_world_size, for_rank, rank_path
from tshtrain.checkpoint.trainer_state import TrainerState
from tshtrain.counters import Counters
from tshtrain.cpu_memory import keep_freed_memory
from tshtrain.data.listeners import CollectorEvents
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.devices import resolve_device
from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import Logger, NoOpLogger, family_log_intervals
from tshtrain.logger.console import ProgressBar, RunClock, stderr_is_terminal, write_line
from tshtrain.trainer.callbacks import (
    Callback,
    CollectedBatch,
    SetupInfo,
    StepSummary,
    StopTraining,
    TestResult,
)
from tshtrain.trainer.dispatch import AutoCheckpoints, CallbackSet, ParamsCallbacks
from tshtrain.trainer.options import TrainerOptions
from tshtrain.trainer.params import OnPolicyTrainerParams, TrainerParams
from tshtrain.trainer.recorder import RunRecorder, format_info_table, format_run_summary, format_test_line
from tshtrain.trainer.run_state import BestResult, OpenEpoch, RunState
from tshtrain.trainer.stats import EpochStats, InfoStats, StopReason, TrainingStepResult
from tshtrain.trainer.steps import CollectedSteps, StepStrategy, StrategyWrapper

log = logging.getLogger(__name__)
summary_log = logging.getLogger("tshtrain.trainer")
"""the test-step lines and the end-of-run summary, at INFO, whether or not ``verbose`` prints them"""

TAlgorithm = TypeVar("TAlgorithm", bound=Algorithm[Any])
TParams = TypeVar("TParams", bound=TrainerParams)


class Trainer(ABC, Generic[TAlgorithm, TParams]):
    """Runs epochs of training steps and test steps; the family's part is a :class:`StepStrategy`."""

    algorithm_family: ClassVar[type[Algorithm[Any]]] = Algorithm
    """the algorithm family the trainer runs; checked when it is built"""
    family_description: ClassVar[str] = ""
    """what an algorithm of that family is, for the message that names this trainer for one"""

    def __init__(self, algorithm: TAlgorithm, params: TParams, options: TrainerOptions | None = None):
        """``params``: what kind of training, how long, callables, logger; ``options``: how the run behaves
        around it. ConfigurationError: ``algorithm`` is not of the trainer's :attr:`algorithm_family`."""
        check_algorithm_family(type(self).__name__, self.algorithm_family, algorithm)
        self.algorithm = algorithm
        self.params = params
        if options is not None and not isinstance(options, TrainerOptions):
            raise TypeError(
                f"{type(self).__name__}: options must be TrainerOptions, got {type(options).__name__}."
            )
        self.options = options if options is not None else TrainerOptions()
        """how the run behaves around the training (see TrainerOptions)"""
        if self.options.device is not None:
            algorithm.to(resolve_device(self.options.device))
        self.state = RunState()
        """counters, best result, stop, timing, windows, logger position, open epoch"""
        strategy = self._make_strategy()
        if self.options.distributed is not None:
            strategy = self.options.distributed.wrap(strategy, algorithm)
        self._strategy = strategy
        self.logger: Logger = (
            params.logger if params.logger is not None and strategy.is_main else NoOpLogger()
        )
        self.callbacks = CallbackSet(
            counters=lambda: self.state.counters,
            algorithm=algorithm,
            stop=lambda detail: self.state.finish(StopReason.HOOK, detail),
        )
        """the callbacks, in calling order: automatic checkpoints, the params' callables, yours"""
        self._autosave: AutoCheckpoints | None = None
        if params.checkpoint is not None:
            manager = CheckpointManager(for_rank(params.checkpoint, strategy.describe()))
            self._autosave = AutoCheckpoints(manager, self._state_view, lambda: self.state.is_reset)
            self.callbacks.add(self._autosave, "auto_checkpoints")
        self.callbacks.add(ParamsCallbacks(params, self.state.finish), "params")
        render_every = self.options.render_every_num_env_steps
        self._collector_events = CollectorEvents(
            strategy.collectors(), self.callbacks.call, self.callbacks.active, render_every=render_every
        )
        self.callbacks.on_change(self._collector_events.changed)
        self._recorder = RunRecorder(
            self.logger, self.state, family_log_intervals(isinstance(params, OnPolicyTrainerParams))
        )
        self._bar: ProgressBar | None = None
        self._run_clock = RunClock()
        self._started = self._resumed = self._closed = self._step_open = False

    def wrap_strategy(self, wrapper: StrategyWrapper) -> None:
        """Wrap the family's step strategy (what ``TrainerOptions.distributed`` does when the trainer
        is built): for drivers that change a few parts of the training step, such as
        :class:`tshtrain.seeds.SeedBatch`. Only before the run starts (after ``load_checkpoint`` is fine).

        Raises:
            RuntimeError: the run has started.
        """
        if self._started:
            raise RuntimeError(f"{type(self).__name__}.wrap_strategy: the run has started; wrap before it.")
        self._strategy = wrapper.wrap(self._strategy, self.algorithm)

    @abstractmethod
    def _make_strategy(self) -> StepStrategy:
        """The family's parts of a training step."""

    # ================================================================== the run's state, read-only
    @property
    def counters(self) -> Counters:
        """The counters now."""
        return self.state.counters

    @property
    def best(self) -> BestResult:
        """The best test step so far: score, mean return and its std, epoch."""
        return self.state.best

    @property
    def done(self) -> bool:
        """True once training has ended (see stop_reason)."""
        return self.state.done

    @property
    def stop_reason(self) -> StopReason | None:
        """Why training ended (None while it runs)."""
        return self.state.stop_reason

    @property
    def stop_detail(self) -> str | None:
        """Who stopped training and why (callbacks, adapters, ``request_stop(reason)``)."""
        return self.state.stop_detail

    def info_stats(self) -> InfoStats:
        """Counters, best result and timing so far."""
        return self.state.info_stats()

    def add_callback(self, callback: Callback, *, name: str | None = None) -> None:
        """Add a callback (the one way to run code at a loop point; docs/hooks.md), called after the
        params' callables in the order added; ``name`` (default: the class name) is unique, and its state
        is saved under it."""
        self.callbacks.add(callback, name if name is not None else type(callback).__name__)

    # ================================================================== driving the run
    def reset(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> None:
        """Prepare a run: counters to zero (or from the logger), collectors (``reset_collectors``) and their
        buffers (``reset_collector_buffers``) reset, ``on_run_start``, the initial test step."""
        self._strategy.prepare()
        self.state.reset()
        self._step_open = False
        if self.params.resume_from_log:
            point = self.logger.restore_counters()
            if point is not None:
                self.state.counters = point.counters
                self.state.last_logged.update(point.last_logged)
        self.state.is_reset = True
        self._set_flush_denormal(True)  # before the initial test step
        self._start(resumed=False)  # on_run_start; before the envs are reset
        if reset_collectors:
            self._strategy.reset_collectors(reset_collector_buffers)
            if self.params.test_collector is not None:
                self.params.test_collector.reset(reset_buffer=reset_collector_buffers, reset_stats=True)
        if self.state.counters.epoch >= self.params.max_epochs:
            self.state.finish(StopReason.MAX_EPOCHS)
        elif self._env_steps_left() == 0:  # a run resumed from its log at its budget
            self.state.finish(StopReason.MAX_ENV_STEPS)
        elif self.params.test_collector is not None:
            self._test_step(initial=True)

    def run(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> InfoStats:
        """Reset (or continue from :meth:`load_checkpoint`), run training steps until a stop, close and
        return the final InfoStats; with ``verbose`` a summary table is printed (and a summary line logged
        to ``tshtrain.trainer`` at INFO). With ``params.checkpoint``, ``final/`` is written however it ends.
        """
        s, name = self.state, type(self).__name__
        if self._closed:
            raise RuntimeError(
                f"{name}.run(): this trainer's run has ended and its logger is closed; a "
                f"trainer runs once. Build a new trainer (with a new logger) to train again, or to continue "
                f"this run load one of its checkpoints into a new trainer."
            )
        if self._resumed and s.done and s.counters.epoch < self.params.max_epochs:  # it returns at once
            log.warning(
                f"{name}.run(): the loaded checkpoint's run had ended ({s.stop_reason}, after "
                f"{s.counters.epoch} epochs), so this run ends at once although max_epochs is "
                f"{self.params.max_epochs}; to train it on, call trainer.reopen() after load_checkpoint "
                f"(docs/checkpoints.md, 'Continuing a finished run')."
            )
        try:
            if not self._resumed:
                self.reset(reset_collectors, reset_collector_buffers)
            while not s.done:
                self._training_step(None)
        except BaseException as error:
            self._strategy.report_failure(error)
            self._final_checkpoint(f"{type(error).__name__}: {error}")
            self._shutdown(quiet=True)
            self._close(quiet=True)  # the original error is what the caller needs to see
            raise
        self._final_checkpoint(str(s.stop_reason))
        self.close()
        info = self.info_stats()
        summary_log.info(format_run_summary(info))
        if self._verbose():
            write_line(format_info_table(info))
        return info

    def __iter__(self) -> Iterator[EpochStats]:
        """Epoch by epoch (resets first if ``reset`` was not called)."""
        if not self.state.is_reset:
            self.reset()
        while not self.state.done:
            yield self.execute_epoch()

    def execute_epoch(self) -> EpochStats:
        """Run training steps until the current epoch (with its test step) is complete."""
        while True:
            result = self.execute_training_step()
            if result.epoch_stats is not None:
                return result.epoch_stats

    def execute_training_step(self, collected: CollectedSteps | None = None) -> TrainingStepResult:
        """One training step; completes the epoch (test step included) when its quota is reached.
        ``collected``: what a driver gathered itself for the step it began with :meth:`begin_training_step`
        (:class:`~tshtrain.adapters.skrl.EnvStepDriver`); None: the step collects."""
        return self._training_step(collected)

    def begin_training_step(self) -> None:
        """Begin a training step whose collection a driver gathers itself (reset if needed, open the
        epoch, ``on_training_step_start``); RuntimeError if the run ended or a step is open already."""
        if self._step_open:
            raise RuntimeError(
                f"{type(self).__name__}: a training step is open (begun by a driver that collects env step "
                f"by env step); complete it first (execute_training_step(collected), or the driver's step())."
            )
        if not self.state.is_reset:
            self.reset()  # may end training already (stop_fn on the initial test step, resumed run)
        if self.state.done:
            raise RuntimeError(f"Training has ended ({self.state.stop_reason}); call reset() to start again.")
        if not self._started:  # a run resumed from a checkpoint starts here
            self._start(resumed=True)
        self._set_flush_denormal(True)  # every step: the flag is per thread
        if self.state.epoch is None:
            self._open_epoch()
        self.callbacks.step_sink.scalars.clear()
        self.callbacks.step_open = True
        self._step_open = True
        self.callbacks.call("on_training_step_start")

    @property
    def training_step_open(self) -> bool:
        """True between :meth:`begin_training_step` and the completion of that training step."""
        return self._step_open

    def close(self) -> None:
        """End a run you drive yourself (``run()`` does it): ``on_run_end``, the collectors detached, the
        envs (``options.close_envs``), the progress bar and the logger closed."""
        self._shutdown()
        self._close()

    def request_stop(self, reason: str | None = None) -> None:
        """Ask training to stop after the current training step (stop reason ``REQUESTED``; ``reason``
        becomes ``InfoStats.stop_detail``)."""
        self.state.finish(StopReason.REQUESTED, reason)

    # ================================================================== the training step
    def _training_step(self, collected: CollectedSteps | None) -> TrainingStepResult:
        """One training step, top-down (docs/concepts.md draws it)."""
        if collected is None:
            self.begin_training_step()
        elif not self._step_open:
            raise RuntimeError(
                f"{type(self).__name__}.execute_training_step(collected): begin the training step first "
                f"(begin_training_step())."
            )
        self._step_open = False  # the step completes now (or fails)
        start = time.perf_counter()
        s, strategy, callbacks = self.state, self._strategy, self.callbacks
        collect_stat: CollectStats | None = None
        training_stat: TrainingStats | None = None
        try:
            batch: CollectedBatch | None = None
            if strategy.online:
                batch = strategy.collect(collected, self._env_steps_left())
                collect_stat = batch.collect_stat
                self._recorder.collection(collect_stat)
                batch = callbacks.transform("after_collect", batch, CollectedBatch)
            stopped_by_test = False
            if collect_stat is not None and self._test_in_training(collect_stat):
                self._test_step(in_training=True)
                stopped_by_test = s.done
            if stopped_by_test:  # the update is skipped
                self._advance(collect_stat, None)
            else:
                callbacks.call("before_update", batch)
                update_start = time.perf_counter()
                parts = strategy.update(batch, callbacks, self._show_progress())
                if not strategy.online:  # offline: env_step counts the transitions sampled
                    s.counters = s.counters.advanced(env_step=strategy.samples_per_step())
                if parts:
                    stats = [part.stat for part in parts]
                    training_stat = stats[0] if len(stats) == 1 else type(stats[0]).aggregate(stats)
                    self._recorder.update(training_stat, time.perf_counter() - update_start, parts)
                    callbacks.call("after_update", training_stat)
                self._advance(collect_stat, training_stat)
        except StopTraining as signal:  # raised inside the update: it is abandoned
            s.finish(StopReason.HOOK, signal.reason)
        s.counters = s.counters.advanced(training_step=1)
        callbacks.call(
            "on_training_step_end", StepSummary(collect_stat=collect_stat, training_stat=training_stat)
        )
        self._recorder.training_record(collect_stat, callbacks.step_sink.scalars)
        callbacks.step_open = False
        s.timing["train"] += time.perf_counter() - start + (collected.seconds if collected else 0.0)
        strategy.agree_on_stop(s)  # data-parallel: a stop on any rank stops every rank
        epoch = s.epoch
        epoch_closed = (
            s.done
            or (epoch is not None and epoch.progress >= self.params.epoch_num_steps)
            or self._env_steps_left() == 0
        )
        epoch_stats = self._close_epoch() if epoch_closed else None
        if self._autosave is not None:
            self._autosave.after_training_step(epoch_closed=epoch_closed)
        return TrainingStepResult(
            collect_stat=collect_stat, training_stat=training_stat, epoch_stats=epoch_stats
        )

    def _test_in_training(self, stat: CollectStats) -> bool:
        """``test_in_training``: test now if the training episodes, scored, satisfy ``stop_fn``."""
        p = self.params
        return (
            bool(getattr(p, "test_in_training", False))
            and p.stop_fn is not None
            and p.test_collector is not None
            and stat.n_collected_episodes > 0
            and p.stop_fn(self._score(stat))
        )

    def _env_steps_left(self) -> int | None:
        """Env steps left of ``max_env_steps`` (None: no such budget)."""
        budget: int | None = getattr(self.params, "max_env_steps", None)
        return None if budget is None else max(0, budget - self.state.counters.env_step)

    def _advance(self, collect_stat: CollectStats | None, stat: TrainingStats | None) -> None:
        """Move the open epoch on by the training step: its env steps online, one step offline."""
        amount = 1 if collect_stat is None else collect_stat.n_collected_steps
        epoch = self.state.epoch
        assert epoch is not None
        epoch.progress += amount
        if self._bar is not None:
            last = next(
                (c.returns_stat.mean for c in reversed(epoch.collect) if c.n_collected_episodes), None
            )
            update = None if stat is None else stat.as_scalars()
            self._bar.advance(amount, last, update, self.callbacks.progress)

    # ================================================================== the test step
    def _test_step(self, *, initial: bool = False, in_training: bool = False) -> CollectStats:
        """Run a test step (on rank 0 of a data-parallel run, which tells the others its result)."""
        return self._strategy.test(lambda: self._run_test_step(initial, in_training), self.state)

    def _run_test_step(self, initial: bool, in_training: bool) -> CollectStats:
        """Collect the test episodes, score them, update the best result, log, ``on_test_end`` (where
        ``stop_fn`` applies, except to the initial test step, as in Tianshou)."""
        p, s, collector = self.params, self.state, self.params.test_collector
        assert collector is not None
        self.callbacks.test_sink.scalars.clear()
        self.callbacks.call("on_test_start")
        option = self.options.test_deterministic
        start = time.perf_counter()
        stat = collector.collect(
            n_episode=p.test_step_num_episodes,
            deterministic=self.algorithm.policy.deterministic_eval if option is None else option,
            reset_before_collect=True,
            max_env_steps=p.test_step_max_env_steps,
        )
        stat = self._strategy.reduce_returns(stat)
        self._recorder.test(stat, time.perf_counter() - start)
        score, returns, epoch = float(self._score(stat)), stat.returns_stat, s.counters.epoch
        is_best = s.best.score is None or score > s.best.score
        if is_best:
            s.best = BestResult(score=score, reward=returns.mean, reward_std=returns.std, epoch=epoch)
        where = s.counters.env_step if in_training else None
        line = format_test_line(epoch, returns, s.best, in_training_env_step=where)
        summary_log.info(line)
        if self._verbose():
            write_line(line)
        result = TestResult(
            collect_stat=stat,
            score=score,
            is_best=is_best,
            initial=initial,
            in_training=in_training,
            best_score=s.best.score,
        )
        self.callbacks.call("on_test_end", result)
        self._recorder.test_record(stat, score, self.callbacks.test_sink.scalars, in_training=in_training)
        return stat

    # ================================================================== epochs
    def _open_epoch(self) -> None:
        self.state.counters = self.state.counters.advanced(epoch=1)
        self.state.epoch = OpenEpoch()
        self._recorder.epoch_opened()
        if self._show_progress():
            self._bar = self._new_bar(0)

    def _new_bar(self, initial: int) -> ProgressBar:
        return ProgressBar(
            epoch=self.state.counters.epoch,
            max_epochs=self.params.max_epochs,
            total=self.params.epoch_num_steps,
            initial=initial,
            unit="env_step" if self._strategy.online else "update",
            run_clock=self._run_clock,
        )

    def _close_epoch(self) -> EpochStats:
        s = self.state
        if self._bar is not None:  # closed first: the test step's line goes below the finished bar
            self._bar.close()
            self._bar = None
        test_stat = self._test_step() if self.params.test_collector is not None and not s.done else None
        if self._env_steps_left() == 0:  # the budget's reason first: it is what ended the epoch
            s.finish(StopReason.MAX_ENV_STEPS)
        elif s.counters.epoch >= self.params.max_epochs:
            s.finish(StopReason.MAX_EPOCHS)
        epoch = s.epoch
        assert epoch is not None
        s.epoch = None
        info = self.info_stats()
        self._recorder.info_record(info)
        training = type(epoch.training[0]).aggregate(epoch.training) if epoch.training else None
        epoch_stats = EpochStats(
            epoch=s.counters.epoch,
            train_collect_stat=merge_collect_stats(epoch.collect) if epoch.collect else None,
            test_collect_stat=test_stat,
            training_stat=training,
            info_stat=info,
        )
        self.callbacks.call("on_epoch_end", epoch_stats)
        return epoch_stats

    # ================================================================== checkpoints
    def save_checkpoint(
        self, path: str | Path | None = None, *, include_buffers: bool = True, backend: Backend = "torch"
    ) -> Path:
        """Write everything a resumed run needs to the directory ``path`` and return it (this rank's, in a
        data-parallel run); atomic, and signed with your key (:mod:`tshtrain.signing`). ``path`` None:
        ``manual-<epoch>-<env_step>`` in ``params.checkpoint.directory`` (ConfigurationError without one).
        """
        if path is None:
            if self.params.checkpoint is None:
                raise ConfigurationError(
                    f"{type(self).__name__}.save_checkpoint(): no path given and params.checkpoint is None, "
                    f"so the run has no checkpoint directory; pass a path, or build the params with "
                    f"checkpoint=CheckpointParams(directory=...)."
                )
            c = self.state.counters
            path = Path(self.params.checkpoint.directory) / f"manual-{c.epoch:06d}-{c.env_step:012d}"
        path = rank_path(Path(path), self._strategy.describe())
        return save_checkpoint(self._state_view(), path, include_buffers=include_buffers, backend=backend)

    def load_checkpoint(self, path: str | Path, *, load_buffers: bool = True, trusted: bool = False) -> None:
        """Restore a checkpoint into this trainer, built like the one that saved it; the next :meth:`run`
        continues from there. A run that had ended (``final/``) stays ended: see :meth:`reopen`.

        Args:
            path: the checkpoint directory.
            load_buffers: also restore the replay buffers saved with it.
            trusted: also unpickle what only pickles can hold (the envs' snapshots, for a bit-exact
                resume), from a source you trust. Your own checkpoints, signed with your key
                (:mod:`tshtrain.signing`), restore their envs without it; from any other nothing is
                unpickled or imported, and the envs are reset (a warning says why).

        Raises:
            CheckpointError: the checkpoint is missing, damaged, of another format or trainer, or does not
                fit this trainer (e.g. another number of envs); nothing is changed then.
        """
        if self._strategy.describe() is not None:  # data-parallel: every rank is given rank 0's path
            check_saved_world_size(path, self._state_view())  # the same cause on every rank
        path = rank_path(Path(path), self._strategy.describe())
        load_checkpoint(self._state_view(), path, load_buffers=load_buffers, trusted=trusted)
        self._strategy.discard_staged()
        self._resumed = True
        epoch = self.state.epoch
        if epoch is not None and self._show_progress():
            self._bar = self._new_bar(epoch.progress)

    def reopen(self) -> None:
        """Continue a run that ended: after :meth:`load_checkpoint` of its ``final/``, clear its stop so that
        :meth:`run` trains on up to this trainer's (larger) ``params.max_epochs``: the run a larger budget
        would have given from the start, unless something depends on the budget (a ``"linear"``
        schedule). RuntimeError: nothing was loaded, the run had not ended, or no epochs are left.
        """
        s = self.state
        if not self._resumed or not s.done:
            raise RuntimeError(
                f"{type(self).__name__}.reopen(): load the checkpoint of a run that ended first "
                f"(loaded: {self._resumed}, ended: {s.done})."
            )
        if s.counters.epoch >= self.params.max_epochs or self._env_steps_left() == 0:
            raise RuntimeError(
                f"{type(self).__name__}.reopen(): {s.counters.epoch} epochs and {s.counters.env_step} env "
                f"steps ran already (max_epochs {self.params.max_epochs}, max_env_steps "
                f"{getattr(self.params, 'max_env_steps', None)}); build the trainer with a larger budget."
            )
        s.reopen()

    def state_dict(self) -> dict[str, Any]:
        """Everything of the trainer a resumed run needs but the buffers' arrays and env snapshots:
        algorithm, run state, callbacks, collectors, buffer generators, global RNGs."""
        return self._state_view().state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (checked whole before anything changes)."""
        self._state_view().load_state_dict(state)
        self._strategy.discard_staged()

    def _state_view(self) -> TrainerState:
        self._strategy.settle()  # a checkpoint is read or written with background collection settled
        return TrainerState(
            algorithm=self.algorithm,
            trainer_name=type(self).__name__,
            params=self.params,
            run=self,
            strategy=self._strategy,
            callbacks=self.callbacks,
            checkpoints=None if self._autosave is None else self._autosave.manager,
            logger=self.logger,
            ranks=self._strategy.describe(),
        )

    def _final_checkpoint(self, reason: str) -> None:
        if self._autosave is not None and self.state.is_reset:
            self._autosave.final(reason)

    # ================================================================== internals
    def _score(self, stat: CollectStats) -> float:
        """The score of collected episodes: ``compute_score_fn`` or, by default, the mean return."""
        compute = self.params.compute_score_fn
        return float(compute(stat)) if compute is not None else stat.returns_stat.mean

    def _set_flush_denormal(self, on: bool) -> None:
        if self.options.flush_denormal:
            torch.set_flush_denormal(on)

    def _verbose(self) -> bool:
        return self.params.verbose and self._strategy.is_main

    def _show_progress(self) -> bool:
        show = self.params.show_progress
        return self._strategy.is_main and (stderr_is_terminal() if show is None else show)

    def _start(self, *, resumed: bool) -> None:
        """Listen to the collectors, ``on_run_start`` (at ``reset()``, or a resumed run's first step)."""
        self._started = True
        if self.options.retain_freed_memory:  # once per process; a no-op after the first run
            keep_freed_memory()
        self._collector_events.attach(self.state.counters.env_step)
        buffers = self._strategy.buffers()
        info = SetupInfo(
            algorithm=self.algorithm,
            buffer=buffers.get("dataset", buffers.get("training")),
            offline=not self._strategy.online,
            resumed=resumed,
        )
        self.callbacks.call("on_run_start", info)

    def _shutdown(self, *, quiet: bool = False) -> None:
        """``on_run_end``, detach, close the envs (``options.close_envs``), ``algorithm.close()`` (worker
        processes; their state comes back first). ``quiet``: log errors (the run ends with one)."""
        try:
            if self._started:
                self.callbacks.call("on_run_end", self.info_stats())
        except Exception:
            if not quiet:
                raise
            log.exception("an on_run_end callback failed")
        finally:
            self._collector_events.detach()
            self._started = False
            if self.options.close_envs:
                self._collector_events.close_envs()
            try:
                self.algorithm.close()
            except Exception:
                if not quiet:
                    raise
                log.exception("%s failed to stop its workers", type(self.algorithm).__name__)

    def _close(self, *, quiet: bool = False) -> None:
        """Close the progress bar and the logger; ``quiet``: log a failing close instead of raising."""
        self._closed = True
        self._set_flush_denormal(False)
        self._strategy.close()
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        try:
            self.logger.close()
        except Exception:
            if not quiet:
                raise
            log.exception("%s failed to close", type(self.logger).__name__)


def check_algorithm_family(trainer: str, family: type[Algorithm[Any]], algorithm: object) -> None:
    """Raise ``ConfigurationError`` unless ``algorithm`` is of the ``family`` that ``trainer`` runs (mypy's
    static check, at run time), naming the trainer to use instead."""
    if isinstance(algorithm, family):
        return
    name = type(algorithm).__name__
    pending: list[type[Any]] = [Trainer]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.family_description and isinstance(algorithm, cls.algorithm_family):
            raise ConfigurationError(
                f"{trainer} cannot train {name}: it is {cls.family_description}, and {trainer} runs "
                f"{family.__name__}s. Use {cls.__name__} with {name}, or an algorithm of the "
                f"{family.__name__} family with {trainer}."
            )
    raise ConfigurationError(
        f"{trainer}: algorithm is a {name}, not a {family.__name__}; pass an algorithm of that family "
        f"(tshtrain.algorithm)."
    )
