"""The trainer's extension runtime: hooks, event managers and the attachments they need.

One :class:`ExtensionRuntime` per trainer calls the hooks and fires the events at the points the
trainer's loop names (``docs/hooks.md`` draws them). While a run is started it attaches, only where
something is registered that needs it:

* nothing to the algorithm: :attr:`ExtensionRuntime.update_hooks` is the
  :class:`~tshtrain.algorithm.base.UpdateHooks` the trainer passes to every ``algorithm.update``
  (process_optim_batch, post_loss, post_optim and post_optim_log);
* a :class:`~tshtrain.data.collector.CollectorListener` to the training collector (episode-end and
  reset events, rendering) and to the test collector (eval episode-end and reset events).

Everything is detached when the run ends, so a finished trainer leaves the algorithm and the
collectors as it found them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from tshtrain.algorithm.base import NO_UPDATE_HOOKS, TrainingStats, UpdateHooks
from tshtrain.data.batch import TransitionBatch
from tshtrain.data.collector import Collector, CollectorListener
from tshtrain.data.stats import CollectStats
from tshtrain.trainer.events import (
    EventManager,
    OnEpisodeEnd,
    OnReset,
    OnShutdown,
    OnStartup,
    OnTestEnd,
    OnTestStart,
)
from tshtrain.trainer.hook_registry import HookRegistry
from tshtrain.trainer.hooks import (
    CollectedBatch,
    Counters,
    HookStage,
    OptimizerStep,
    SetupInfo,
    StepSummary,
    StopTraining,
    TestResult,
)
from tshtrain.trainer.stats import StopReason

if TYPE_CHECKING:
    from tshtrain.trainer.base import Trainer

log = logging.getLogger(__name__)


class _UpdateHooksBridge:
    """The :class:`~tshtrain.algorithm.base.UpdateHooks` the trainer passes to its algorithm's update."""

    def __init__(self, runtime: ExtensionRuntime):
        self._runtime = runtime

    def process_optim_batch(self, batch: TransitionBatch, /) -> TransitionBatch:
        return self._runtime.hooks.transform(HookStage.PROCESS_OPTIM_BATCH, batch)

    def post_loss(self, losses: Mapping[str, torch.Tensor], /) -> None:
        self._runtime.hooks.call(HookStage.POST_LOSS, losses)

    def post_optim(self, name: str, optimizer: torch.optim.Optimizer, /) -> None:
        self._runtime.after_optimizer_step(name, optimizer)


_UPDATE_STAGES = (
    HookStage.PROCESS_OPTIM_BATCH,
    HookStage.POST_LOSS,
    HookStage.POST_OPTIM,
    HookStage.POST_OPTIM_LOG,
)
"""the hook stages called from inside ``algorithm.update``"""


class _CollectorBridge:
    """A collector's listener: episode-end / reset events of one manager, and rendering."""

    def __init__(self, collector: Collector, events: EventManager, render_every: int | None, env_step: int):
        self.collector = collector
        self.events = events
        self.previous: CollectorListener | None = collector.listener
        self._render_every = render_every
        self._env_steps = env_step
        self._episode_events = events.has(OnEpisodeEnd)
        self._reset_events = events.has(OnReset)

    def on_vector_step(self, done_env_ids: np.ndarray) -> None:
        if self.previous is not None:
            self.previous.on_vector_step(done_env_ids)
        if self._render_every is not None:
            before = self._env_steps
            self._env_steps += self.collector.num_envs
            if self._env_steps // self._render_every > before // self._render_every:
                self.collector.env.render()
        if self._episode_events and len(done_env_ids):
            self.events.fire(OnEpisodeEnd, env_ids=done_env_ids.copy(), collector=self.collector)

    def on_env_reset(self, env_ids: np.ndarray) -> None:
        if self.previous is not None:
            self.previous.on_env_reset(env_ids)
        if self._reset_events:
            self.events.fire(OnReset, env_ids=env_ids, collector=self.collector)


def _mean_scalars(records: list[dict[str, float]]) -> dict[str, float]:
    """Per-name means over the records that contain each name."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for record in records:
        for key, value in record.items():
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    return {key: total / counts[key] for key, total in sums.items()}


class ExtensionRuntime:
    """Hooks and events of one trainer (see the module docstring)."""

    def __init__(self, trainer: Trainer[Any, Any]):
        self._trainer = trainer
        self.hooks = HookRegistry(counters=self.counters, stop=self.request_stop, on_change=self._changed)
        self.events = EventManager(
            "train", counters=self.counters, stop=self.request_stop, on_change=self._changed
        )
        self.eval_events = EventManager(
            "eval", counters=self.counters, stop=self.request_stop, on_change=self._changed
        )
        self.training_step = 0
        """training steps completed in this run (the ``training_step`` event unit)"""
        self.progress: dict[str, float] = {}
        """the latest scalars log hooks marked for the progress bar"""
        self._started = False
        self._update_hooks = _UpdateHooksBridge(self)
        self._bridges: list[_CollectorBridge] = []
        self._optim_logs: list[dict[str, float]] = []
        self._part_logs: list[dict[str, float]] = []
        self._step_scalars: dict[str, float] = {}

    # ------------------------------------------------------------------ basics
    def counters(self) -> Counters:
        """A snapshot of the trainer's counters."""
        c = self._trainer.counters
        return Counters(
            epoch=c.epoch,
            env_step=c.env_step,
            env_episode=c.env_episode,
            update_step=c.update_step,
            gradient_step=c.gradient_step,
            test_step=c.test_step,
            test_episode=c.test_episode,
            training_step=self.training_step,
        )

    def request_stop(self, detail: str) -> None:
        """End training after the current training step with stop reason ``hook`` and ``detail``."""
        self._trainer._finish(StopReason.HOOK, detail)

    def stop_now(self, signal: StopTraining) -> None:
        """A :class:`StopTraining` escaped an update: end training with its reason."""
        self.request_stop(signal.reason)

    # ------------------------------------------------------------------ run start and end
    def start(self, *, resumed: bool) -> None:
        """Attach, call the setup hooks and fire the startup events (``reset()``, or the first training
        step of a run resumed from a checkpoint)."""
        self._detach()
        if not resumed:
            self.training_step = 0
        self._started = True
        self._attach()
        self.events.reset_baselines()
        trainer = self._trainer
        params = trainer.params
        collector = getattr(params, "training_collector", None)
        offline = not isinstance(collector, Collector)
        buffer = getattr(params, "buffer", None) if not isinstance(collector, Collector) else collector.buffer
        info = SetupInfo(algorithm=trainer.algorithm, buffer=buffer, offline=offline, resumed=resumed)
        self.hooks.call(HookStage.SETUP, info)
        self.events.fire(OnStartup)
        self.eval_events.fire(OnStartup)

    def ensure_started(self) -> None:
        """Start (as a resumed run) unless started."""
        if not self._started:
            self.start(resumed=True)

    def shutdown(self, *, quiet: bool = False) -> None:
        """Call the shutdown hooks and events, detach, close the envs (``options.close_envs``).

        Args:
            quiet: log errors of shutdown hooks instead of raising (the run is ending with an error).
        """
        try:
            if self._started:
                self.hooks.call(HookStage.SHUTDOWN, self._trainer.info_stats())
                self.events.fire(OnShutdown)
                self.eval_events.fire(OnShutdown)
        except Exception:
            if not quiet:
                raise
            log.exception("a shutdown hook or event failed")
        finally:
            self._detach()
            self._started = False
            if self._trainer.options.close_envs:
                self._close_envs()

    def _close_envs(self) -> None:
        params = self._trainer.params
        for collector in (getattr(params, "training_collector", None), params.test_collector):
            if isinstance(collector, Collector):
                try:
                    collector.env.close()
                except Exception:
                    log.exception("closing the envs of a collector failed")

    # ------------------------------------------------------------------ attachments
    def _changed(self) -> None:
        if self._started:
            self._detach()
            self._attach()

    def _attach(self) -> None:
        trainer = self._trainer
        render = trainer.options.render_every_num_env_steps
        training = getattr(trainer.params, "training_collector", None)
        if isinstance(training, Collector) and (
            render is not None or self.events.has(OnEpisodeEnd) or self.events.has(OnReset)
        ):
            self._listen(_CollectorBridge(training, self.events, render, trainer.counters.env_step))
        test = trainer.params.test_collector
        if isinstance(test, Collector) and (
            self.eval_events.has(OnEpisodeEnd) or self.eval_events.has(OnReset)
        ):
            self._listen(_CollectorBridge(test, self.eval_events, None, 0))

    def _listen(self, bridge: _CollectorBridge) -> None:
        bridge.collector.listener = bridge
        self._bridges.append(bridge)

    def _detach(self) -> None:
        for bridge in reversed(self._bridges):
            if bridge.collector.listener is bridge:
                bridge.collector.listener = bridge.previous
        self._bridges = []

    @property
    def update_hooks(self) -> UpdateHooks:
        """What the trainer passes to ``algorithm.update(..., hooks=...)``: the bridge to the hooks while
        the run is started and an in-update stage has a hook, else the no-op default."""
        if self._started and any(self.hooks.has(stage) for stage in _UPDATE_STAGES):
            return self._update_hooks
        return NO_UPDATE_HOOKS

    def after_optimizer_step(self, name: str, optimizer: torch.optim.Optimizer) -> None:
        """The post_optim and post_optim_log hooks of one optimizer step."""
        step = OptimizerStep(name=name, optimizer=optimizer)
        self.hooks.call(HookStage.POST_OPTIM, step)
        if self.hooks.has(HookStage.POST_OPTIM_LOG):
            scalars, progress = self.hooks.collect_scalars(HookStage.POST_OPTIM_LOG, step)
            self._optim_logs.append(scalars)
            self.progress.update(progress)

    # ------------------------------------------------------------------ training step
    def begin_step(self) -> None:
        """Forget the log scalars of the previous training step."""
        self._step_scalars = {}
        self._optim_logs = []
        self._part_logs = []

    def batch_process(self, batch: CollectedBatch) -> CollectedBatch:
        """The batch_process hooks, chained."""
        return self.hooks.transform(HookStage.BATCH_PROCESS, batch)

    def pre_steps_log(self, stat: CollectStats | None) -> None:
        """The pre_steps_log hooks; their scalars go to the training step's ``training`` record."""
        self._add_step_scalars(HookStage.PRE_STEPS_LOG, stat)

    def pre_update(self, batch: CollectedBatch | None) -> None:
        """The pre_update hooks."""
        self.hooks.call(HookStage.PRE_UPDATE, batch)

    def end_part(self) -> None:
        """One ``algorithm.update`` call ended: its post_optim_log scalars (means over its optimizer
        steps) belong to its ``update`` record."""
        if self._optim_logs or self._part_logs:
            self._part_logs.append(_mean_scalars(self._optim_logs))
            self._optim_logs = []

    def take_part_scalars(self, num_parts: int) -> list[dict[str, float]]:
        """The post_optim_log scalars of the last ``num_parts`` update calls (empty dicts without)."""
        if not self._optim_logs and not self._part_logs:
            return [{}] * num_parts
        if self._optim_logs:
            self.end_part()
        logs, self._part_logs = self._part_logs[-num_parts:], []
        return [{}] * (num_parts - len(logs)) + logs

    def post_update(self, stat: TrainingStats) -> None:
        """The post_update hooks."""
        self.hooks.call(HookStage.POST_UPDATE, stat)

    def post_steps_log(
        self, collect_stat: CollectStats | None, training_stat: TrainingStats | None
    ) -> dict[str, float]:
        """The post_steps_log hooks; returns all log-hook scalars of the training step."""
        if self.hooks.has(HookStage.POST_STEPS_LOG):
            summary = StepSummary(collect_stat=collect_stat, training_stat=training_stat)
            self._add_step_scalars(HookStage.POST_STEPS_LOG, summary)
        return dict(self._step_scalars)

    def _add_step_scalars(self, stage: HookStage, data: object) -> None:
        if not self.hooks.has(stage):
            return
        scalars, progress = self.hooks.collect_scalars(stage, data)
        for key, value in scalars.items():
            if key in self._step_scalars:
                self._step_scalars.pop(key)  # same name from pre_ and post_steps_log: the later wins
            self._step_scalars[key] = value
        self.progress.update(progress)

    def after_training_step(self) -> None:
        """Count the training step and fire the Every events that are due."""
        self.training_step += 1
        self.events.check_every(epoch_closed=False)

    def after_epoch(self) -> None:
        """Fire the ``Every(n, unit=epoch)`` events that are due."""
        self.events.check_every(epoch_closed=True)

    # ------------------------------------------------------------------ test step
    def before_test(self) -> None:
        """pre_test hooks, then the OnTestStart events."""
        self.hooks.call(HookStage.PRE_TEST, None)
        self.eval_events.fire(OnTestStart, collector=self._trainer.params.test_collector)

    def after_test(self, stat: CollectStats, score: float, is_best: bool) -> None:
        """post_test hooks, then the OnTestEnd events."""
        self.hooks.call(HookStage.POST_TEST, TestResult(collect_stat=stat, score=score, is_best=is_best))
        self.eval_events.fire(OnTestEnd, collector=self._trainer.params.test_collector)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Hook and event state, the training-step count and the stop detail (plain values)."""
        return {
            "hooks": self.hooks.state_dict(),
            "events": self.events.state_dict(),
            "eval_events": self.eval_events.state_dict(),
            "training_step": self.training_step,
            "stop_detail": self._trainer.stop_detail,
        }

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Restore :meth:`state_dict`."""
        self.hooks.load_state_dict(state.get("hooks", {}), strict=strict)
        self.events.load_state_dict(state.get("events", {}), strict=strict)
        self.eval_events.load_state_dict(state.get("eval_events", {}), strict=strict)
        self.training_step = int(state.get("training_step", 0))
        detail = state.get("stop_detail")
        self._trainer.stop_detail = None if detail is None else str(detail)
        self.events.reset_baselines()
