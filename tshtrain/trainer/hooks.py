"""Hook stages: what a hook at each stage receives and returns (the registry is in ``hook_registry``).

A hook is a callable taking one frozen :class:`HookContext` whose ``data`` is the stage's payload. The
stages, in loop order (``docs/hooks.md`` draws the whole loop):

====================  =================================  ===============================================
stage                 ``ctx.data``                       return
====================  =================================  ===============================================
setup                 :class:`SetupInfo`                 None
batch_process         :class:`CollectedBatch`            a new CollectedBatch (e.g. a changed rollout)
                                                         or None (unchanged)
pre_steps_log         CollectStats (None offline)        scalars to log (:data:`LogOutput`)
pre_update            CollectedBatch (None offline)      None
process_optim_batch   TransitionBatch (each sample of    a new TransitionBatch or None
                      off-policy / offline algorithms)
post_loss             ``{loss name: loss tensor}``       None
post_optim            :class:`OptimizerStep`             None
post_optim_log        :class:`OptimizerStep`             scalars to log
post_update           TrainingStats of the update step   None
post_steps_log        :class:`StepSummary`               scalars to log
pre_test              None                               None
post_test             :class:`TestResult`                None
shutdown              InfoStats (final)                  None
====================  =================================  ===============================================

Any hook may call ``ctx.request_stop(reason)`` (training ends after the current training step, stop
reason ``hook``, ``InfoStats.stop_detail`` names the hook and the reason) or raise
:class:`StopTraining` (training ends at once: inside an update, the optimizer step is not taken).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

import numpy as np
import torch

from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.data.batch import RolloutBatch, TransitionBatch
from tshtrain.data.buffer import BaseReplayBuffer, BufferLayout
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.stats import InfoStats


class HookStage(StrEnum):
    """The stages a hook can be registered at (in loop order; see the module docstring)."""

    SETUP = "setup"
    """``reset()`` (and the first training step of a run resumed from a checkpoint), before the
    initial test step"""
    BATCH_PROCESS = "batch_process"
    """after each collection step (online), before the update; may replace the collected batch"""
    PRE_STEPS_LOG = "pre_steps_log"
    """after batch_process (offline: at the start of the training step); returns scalars"""
    PRE_UPDATE = "pre_update"
    """before the update step (after a test-in-training test step)"""
    PROCESS_OPTIM_BATCH = "process_optim_batch"
    """inside the update, on every sampled batch of off-policy and offline algorithms"""
    POST_LOSS = "post_loss"
    """inside the update, after a loss is computed and before its backward pass"""
    POST_OPTIM = "post_optim"
    """after every optimizer step"""
    POST_OPTIM_LOG = "post_optim_log"
    """after every optimizer step, after post_optim; returns scalars"""
    POST_UPDATE = "post_update"
    """after the update step, with its statistics"""
    POST_STEPS_LOG = "post_steps_log"
    """at the end of the training step; returns scalars"""
    PRE_TEST = "pre_test"
    """at the start of every test step, after test_fn"""
    POST_TEST = "post_test"
    """at the end of every test step (after best tracking and stop_fn)"""
    SHUTDOWN = "shutdown"
    """when the run ends (``run()`` returns or raises, or ``close()``)"""


IN_UPDATE_STAGES = frozenset(
    {
        HookStage.PROCESS_OPTIM_BATCH,
        HookStage.POST_LOSS,
        HookStage.POST_OPTIM,
        HookStage.POST_OPTIM_LOG,
    }
)
"""stages that run inside ``algorithm.update``: a :class:`StopTraining` raised there aborts the update"""


class StopTraining(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raise from a hook or an event callback to end training at once, with ``reason``.

    Inside an update (process_optim_batch, post_loss, post_optim, post_optim_log) the update is
    abandoned where it is, so e.g. the optimizer step of a NaN loss is not taken. Elsewhere it has the
    effect of ``ctx.request_stop(reason)``.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class Counters:
    """The trainer's counters when a hook or an event is called (docs/concepts.md, "Counters")."""

    epoch: int
    env_step: int
    env_episode: int
    update_step: int
    gradient_step: int
    test_step: int
    test_episode: int
    training_step: int
    """training steps completed in this run"""


T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, kw_only=True)
class HookContext(Generic[T_co]):
    """What a hook receives: the stage, its own name, the counters and the stage's payload."""

    stage: HookStage
    name: str
    """the name the hook was registered under"""
    counters: Counters
    data: T_co
    """the stage's payload (see the module docstring)"""
    stop: Callable[[str], None] = field(repr=False)
    """use :meth:`request_stop`"""

    def request_stop(self, reason: str) -> None:
        """End training after the current training step; ``reason`` goes to ``InfoStats.stop_detail``."""
        self.stop(reason)


# ============================================================================ payloads


@dataclass(frozen=True, kw_only=True)
class SetupInfo:
    """Payload of ``setup``."""

    algorithm: Algorithm[Any]
    """the algorithm being trained"""
    buffer: BaseReplayBuffer | None
    """the training collector's buffer (online) or the dataset (offline)"""
    offline: bool
    """True for offline training (``buffer`` is the dataset; there are no collection steps)"""
    resumed: bool
    """True when the run continues from a checkpoint (no reset happened)"""


@dataclass(frozen=True, kw_only=True)
class CollectedBatch:
    """Payload of ``batch_process`` and ``pre_update``: the data of one collection step.

    A ``batch_process`` hook returns ``dataclasses.replace(batch, rollout=...)`` to change what an
    on-policy update receives. Off-policy the data already sits in the replay buffer: change samples
    in ``process_optim_batch``, or read (and, with care, rewrite) the new transitions through
    :meth:`new_indices`. ``collect_stat`` is informational: counters and the ``training`` record come
    from the collection itself.
    """

    collect_stat: CollectStats
    """statistics of the collection step"""
    rollout: RolloutBatch | None
    """on-policy: the rollout the update will receive; None off-policy"""
    buffer: BaseReplayBuffer
    """the training buffer (it holds the new transitions)"""
    layout_before: BufferLayout = field(repr=False)
    """the buffer's write positions before the collection step (see :meth:`new_indices`)"""

    def new_indices(self) -> np.ndarray:
        """Flat buffer indices of the transitions of this collection step (O(new data))."""
        return self.buffer.new_indices(self.layout_before, self.collect_stat.n_collected_steps)

    def new_transitions(self) -> TransitionBatch:
        """The transitions of this collection step, read from the buffer (a copy)."""
        return self.buffer.new_transitions(self.layout_before, self.collect_stat.n_collected_steps)


@dataclass(frozen=True, kw_only=True)
class OptimizerStep:
    """Payload of ``post_optim`` and ``post_optim_log``: the optimizer that just stepped."""

    name: str
    """its name in ``algorithm.components()``, e.g. ``"optim"``, ``"critic_optim"``"""
    optimizer: torch.optim.Optimizer


@dataclass(frozen=True, kw_only=True)
class StepSummary:
    """Payload of ``post_steps_log``: what the training step did."""

    collect_stat: CollectStats | None
    """the collection step (None offline)"""
    training_stat: TrainingStats | None
    """the update step (None if it was skipped)"""


@dataclass(frozen=True, kw_only=True)
class TestResult:
    """Payload of ``post_test``."""

    __test__ = False  # not a pytest test class

    collect_stat: CollectStats
    """the test step's episodes"""
    score: float
    """its score (compute_score_fn, or the mean return)"""
    is_best: bool
    """True if it set a new best score"""


# ============================================================================ log output


@dataclass(frozen=True)
class HookScalars:
    """Scalars returned by a log hook, some of them marked for the progress bar.

    A log hook may also return a plain ``Mapping[str, float]`` (nothing in the progress bar) or None.
    """

    scalars: Mapping[str, float]
    """name -> value"""
    progress_bar: Collection[str] = ()
    """names of ``scalars`` that also appear in the progress bar's postfix"""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.progress_bar) - set(self.scalars))
        if unknown:
            raise ConfigurationError(
                f"HookScalars.progress_bar names {unknown}, which are not among the scalars "
                f"{sorted(self.scalars)}; mark only scalars the hook returns."
            )


LogOutput: TypeAlias = Mapping[str, float] | HookScalars | None
"""What a log hook returns."""


# ============================================================================ stage protocols


class SetupHook(Protocol):
    def __call__(self, ctx: HookContext[SetupInfo], /) -> None: ...


class BatchProcessHook(Protocol):
    def __call__(self, ctx: HookContext[CollectedBatch], /) -> CollectedBatch | None: ...


class PreStepsLogHook(Protocol):
    def __call__(self, ctx: HookContext[CollectStats | None], /) -> LogOutput: ...


class PreUpdateHook(Protocol):
    def __call__(self, ctx: HookContext[CollectedBatch | None], /) -> None: ...


class ProcessOptimBatchHook(Protocol):
    def __call__(self, ctx: HookContext[TransitionBatch], /) -> TransitionBatch | None: ...


class PostLossHook(Protocol):
    def __call__(self, ctx: HookContext[Mapping[str, torch.Tensor]], /) -> None: ...


class PostOptimHook(Protocol):
    def __call__(self, ctx: HookContext[OptimizerStep], /) -> None: ...


class PostOptimLogHook(Protocol):
    def __call__(self, ctx: HookContext[OptimizerStep], /) -> LogOutput: ...


class PostUpdateHook(Protocol):
    def __call__(self, ctx: HookContext[TrainingStats], /) -> None: ...


class PostStepsLogHook(Protocol):
    def __call__(self, ctx: HookContext[StepSummary], /) -> LogOutput: ...


class PreTestHook(Protocol):
    def __call__(self, ctx: HookContext[None], /) -> None: ...


class PostTestHook(Protocol):
    def __call__(self, ctx: HookContext[TestResult], /) -> None: ...


class ShutdownHook(Protocol):
    def __call__(self, ctx: HookContext[InfoStats], /) -> None: ...


def stage_payload_types(stage: HookStage) -> tuple[type, ...]:
    """The run-time types of ``ctx.data`` at ``stage`` (for the registration check)."""
    none = type(None)
    return {
        HookStage.SETUP: (SetupInfo,),
        HookStage.BATCH_PROCESS: (CollectedBatch,),
        HookStage.PRE_STEPS_LOG: (CollectStats, none),
        HookStage.PRE_UPDATE: (CollectedBatch, none),
        HookStage.PROCESS_OPTIM_BATCH: (TransitionBatch,),
        HookStage.POST_LOSS: (Mapping,),
        HookStage.POST_OPTIM: (OptimizerStep,),
        HookStage.POST_OPTIM_LOG: (OptimizerStep,),
        HookStage.POST_UPDATE: (TrainingStats,),
        HookStage.POST_STEPS_LOG: (StepSummary,),
        HookStage.PRE_TEST: (none,),
        HookStage.POST_TEST: (TestResult,),
        HookStage.SHUTDOWN: (InfoStats,),
    }[stage]


TRANSFORM_STAGES: Mapping[HookStage, type] = {
    HookStage.BATCH_PROCESS: CollectedBatch,
    HookStage.PROCESS_OPTIM_BATCH: TransitionBatch,
}
"""stages whose hooks may return a replacement of their payload (of this type)"""

LOG_STAGES = frozenset({HookStage.PRE_STEPS_LOG, HookStage.POST_OPTIM_LOG, HookStage.POST_STEPS_LOG})
"""stages whose hooks return scalars to log"""
