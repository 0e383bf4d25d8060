"""The one way to extend the training loop: :class:`Callback`, one method per loop point, in loop order
(``docs/hooks.md`` tabulates and draws them); each receives one read-only :class:`RunContext` and the
point's payload.

``ctx.log(scalars)`` adds scalars to the record of the point: the training step's ``training`` record
(from any training-step point) or the ``update`` record of the current ``algorithm.update`` call (from
the in-update points, averaged over its optimizer steps). ``ctx.request_stop(reason)`` ends training
after the current training step; raising :class:`StopTraining` ends it at once. A callback with
``state_dict()`` / ``load_state_dict(state)`` is saved with checkpoints under its name. An
:class:`Adapter` translates another vocabulary: Tianshou's params callables (the trainer adds it
itself), TorchRL's hook stages, EmbodiChain's events (:mod:`tshtrain.adapters`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.counters import Counters
from tshtrain.data.batch import AnyRolloutBatch, AnyTransitionBatch
from tshtrain.data.buffer import BufferLayout
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.data.listeners import EnvsReset, EpisodesEnded, VectorStep
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.stats import EpochStats, InfoStats


class StopTraining(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raise from a callback, hook or event to end training at once, with ``reason``: inside an update
    (``on_sampled_batch``, ``on_loss``, ``on_optimizer_step``) the update is abandoned where it is (e.g.
    the optimizer step of a NaN loss is not taken); elsewhere it acts as ``ctx.request_stop(reason)``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class SetupInfo:
    """Payload of ``on_run_start``."""

    algorithm: Algorithm[Any]
    """the algorithm being trained"""
    buffer: AnyReplayBuffer | None
    """the training collector's buffer (online) or the dataset (offline)"""
    offline: bool
    """True for offline training (``buffer`` is the dataset; there are no collection steps)"""
    resumed: bool
    """True when the run continues from a checkpoint (no reset happened)"""


@dataclass(frozen=True, kw_only=True)
class CollectedBatch:
    """Payload of ``after_collect`` and ``before_update``: the data of one collection step.

    ``after_collect`` may return ``dataclasses.replace(batch, rollout=...)`` to change what an on-policy
    update receives. Off-policy the data already sits in the replay buffer: change samples in
    ``on_sampled_batch``, or read (and, with care, rewrite) the new transitions through :meth:`new_indices`.
    ``collect_stat`` is informational: counters and the ``training`` record come from the collection."""

    collect_stat: CollectStats
    """statistics of the collection step"""
    rollout: AnyRolloutBatch | None
    """on-policy: the rollout the update will receive (a ``TensorRolloutBatch`` on the torch path);
    None off-policy"""
    buffer: AnyReplayBuffer
    """the training buffer (it holds the new transitions)"""
    layout_before: BufferLayout = field(repr=False)
    """the buffer's write positions before the collection step (see :meth:`new_indices`)"""

    def new_indices(self) -> np.ndarray:
        """Flat buffer indices of the transitions of this collection step (O(new data))."""
        return self.buffer.new_indices(self.layout_before, self.collect_stat.n_collected_steps)

    def new_transitions(self) -> AnyTransitionBatch:
        """The transitions of this collection step, copied from the buffer (tensors on the torch path)."""
        return self.buffer.new_transitions(self.layout_before, self.collect_stat.n_collected_steps)


@dataclass(frozen=True, kw_only=True)
class OptimizerStep:
    """Payload of ``on_optimizer_step``: the optimizer that just stepped."""

    name: str
    """its name in ``algorithm.components()``, e.g. ``"optim"``, ``"critic_optim"``"""
    optimizer: torch.optim.Optimizer


@dataclass(frozen=True, kw_only=True)
class StepSummary:
    """Payload of ``on_training_step_end``: what the training step did."""

    collect_stat: CollectStats | None
    """the collection step (None offline)"""
    training_stat: TrainingStats | None
    """the update step (None if it was skipped)"""


@dataclass(frozen=True, kw_only=True)
class TestResult:
    """Payload of ``on_test_end``."""

    __test__ = False  # not a pytest test class

    collect_stat: CollectStats
    """the test step's episodes"""
    score: float
    """its score (compute_score_fn, or the mean return)"""
    is_best: bool
    """True if it set a new best score"""
    initial: bool = False
    """True for the test step of ``reset()`` (epoch 0, or the epoch a log-resumed run starts at):
    ``stop_fn`` is not applied to it, as in Tianshou"""
    in_training: bool = False
    """True for a test step that ``test_in_training`` ran inside a training step (not an epoch's)"""
    best_score: float | None = None
    """the best score so far, this test step's included (what ``stop_fn`` gets with
    ``stop_fn_on_best_score=True``); None only where no best is tracked"""


class LogSink(Protocol):
    """Where ``ctx.log`` puts scalars (the trainer's record of the current point)."""

    def add(self, scalars: Mapping[str, float], progress: Collection[str], source: str) -> None: ...


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What every callback method receives: a read-only view of the run at that point."""

    counters: Counters
    """the counters now"""
    algorithm: Algorithm[Any]
    """the algorithm being trained (read it; change it only where a point is meant for that)"""
    name: str
    """the name the callback was added under"""
    stop: Callable[[str], None] = field(repr=False)
    """use :meth:`request_stop`"""
    sink: LogSink = field(repr=False)
    """use :meth:`log`"""

    def request_stop(self, reason: str) -> None:
        """End training after the current training step; ``reason`` goes to ``InfoStats.stop_detail``."""
        self.stop(reason)

    def log(self, scalars: Mapping[str, float], *, progress_bar: Collection[str] = ()) -> None:
        """Add scalars to the record of this point (see the module docstring); those named in
        ``progress_bar`` also appear right of the epoch's progress bar."""
        unknown = sorted(set(progress_bar) - set(scalars))
        if unknown:
            raise ConfigurationError(
                f"{self.name} marks {unknown} for the progress bar, which are not among the scalars it logs "
                f"{sorted(scalars)}; mark only scalars it logs."
            )
        self.sink.add(scalars, progress_bar, self.name)


class Callback:
    """Override the methods of the loop points you need; the others do nothing and cost nothing (the
    trainer calls a callback only at the points its class overrides). Other names are yours."""

    def on_run_start(self, ctx: RunContext, setup: SetupInfo) -> None:
        """The run starts: ``reset()``, before the initial test step (resumed: the first training step)."""

    def on_training_step_start(self, ctx: RunContext) -> None:
        """A training step starts (its epoch is open)."""

    def on_vector_step(self, ctx: RunContext, step: VectorStep) -> None:
        """The training or the test collector stepped its sub-envs once (``step.env_step`` counts the
        env steps so far; ``ctx.counters`` advance when the collection step ends)."""

    def on_episodes_end(self, ctx: RunContext, ended: EpisodesEnded) -> None:
        """Sub-envs of the training or the test collector ended episodes in the last vector step."""

    def on_envs_reset(self, ctx: RunContext, reset: EnvsReset) -> None:
        """A collector is about to reset all its sub-envs."""

    def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
        """A collection step ended (online); return a replacement batch or None (unchanged)."""

    def before_update(self, ctx: RunContext, batch: CollectedBatch | None) -> None:
        """The update step is about to run (``batch`` is None offline)."""

    def on_sampled_batch(self, ctx: RunContext, batch: AnyTransitionBatch) -> AnyTransitionBatch | None:
        """Inside an off-policy or offline update: a batch was sampled; return a replacement or None."""

    def on_loss(self, ctx: RunContext, losses: Mapping[str, torch.Tensor]) -> None:
        """Inside the update: losses computed, before their backward pass."""

    def on_optimizer_step(self, ctx: RunContext, step: OptimizerStep) -> None:
        """Inside the update: an optimizer stepped."""

    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        """The update step ran."""

    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        """The training step ended (it is counted in ``ctx.counters.training_step``)."""

    def on_test_start(self, ctx: RunContext) -> None:
        """A test step starts."""

    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        """A test step ended (best result updated)."""

    def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
        """An epoch ended (after its test step)."""

    def on_run_end(self, ctx: RunContext, info: InfoStats) -> None:
        """The run ended (normally or not)."""


class CallbackBinding(Protocol):
    """What an :class:`Adapter` is given when added: ``changed()`` re-reads its active points,
    ``context()`` is the run's context now (for use outside a loop point)."""

    def changed(self) -> None: ...

    def context(self) -> RunContext: ...


class Adapter(Callback):
    """Base of the callbacks that translate another vocabulary onto the loop points (Tianshou's params
    callables, TorchRL hook stages, EmbodiChain events): they are active at the points their
    registrations need, which change while they live, and their stop details name their source."""

    def attach(self, binding: CallbackBinding) -> None:
        """Called when the adapter is added to a trainer."""
        self._binding = binding

    def active_points(self) -> Collection[str]:
        """The loop points this adapter is active at now (a subset of those it overrides)."""
        return overridden_points(self)

    def changed(self) -> None:
        """Tell the trainer that :meth:`active_points` changed (no-op before it is added)."""
        binding: CallbackBinding | None = getattr(self, "_binding", None)
        if binding is not None:
            binding.changed()

    def run_context(self) -> RunContext | None:
        """The run's context now, or None before the adapter is added to a trainer."""
        binding: CallbackBinding | None = getattr(self, "_binding", None)
        return None if binding is None else binding.context()


POINTS: tuple[str, ...] = tuple(name for name in vars(Callback) if not name.startswith("_"))
"""the loop points, in loop order"""

IN_UPDATE_POINTS = frozenset({"on_sampled_batch", "on_loss", "on_optimizer_step"})
"""points called from inside ``algorithm.update``: a StopTraining there abandons the update"""


def overridden_points(callback: Callback) -> frozenset[str]:
    """The points whose method ``type(callback)`` overrides."""
    cls = type(callback)
    return frozenset(p for p in POINTS if getattr(cls, p) is not getattr(Callback, p))


@runtime_checkable
class StatefulCallback(Protocol):
    """A callback whose state is saved with checkpoints."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any, /) -> Any: ...
