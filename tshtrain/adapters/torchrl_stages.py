"""Hook stages (TorchRL's trainer hooks), an adapter onto :class:`~tshtrain.trainer.callbacks.Callback`.

What a hook at each stage receives and returns; the registry, itself a callback,
is :class:`tshtrain.adapters.torchrl.HookRegistry`.

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
optimizer             :class:`OptimizerStep`             None (the algorithm stepped the optimizer)
post_optim            :class:`OptimizerStep`             None
post_optim_log        :class:`OptimizerStep`             scalars to log
post_update           TrainingStats of the update step   None
post_steps_log        :class:`StepSummary`               scalars to log
pre_test              None                               None
post_test             :class:`TestResult`                None
shutdown              InfoStats (final)                  None
====================  =================================  ===============================================

TorchRL's names of two points are accepted too (:data:`STAGE_ALIASES`): ``pre_optim_steps`` is
``pre_update``, ``post_steps`` is ``post_update``. ``optimizer`` is where TorchRL's trainer steps the
optimizer itself; in tshtrain the algorithm steps its optimizers, so a hook there runs right after each
optimizer step (before ``post_optim``), with that optimizer.

Any hook may call ``ctx.request_stop(reason)`` (training ends after the current training step, stop
reason ``hook``, ``InfoStats.stop_detail`` names the hook and the reason) or raise
:class:`StopTraining` (training ends at once: inside an update, the optimizer step is not taken).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, Protocol, TypeAlias, TypeVar

import torch

from tshtrain.algorithm.base import TrainingStats
from tshtrain.counters import Counters
from tshtrain.data.batch import TransitionBatch
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.callbacks import (
    CollectedBatch,
    OptimizerStep,
    SetupInfo,
    StepSummary,
    StopTraining,
    TestResult,
)
from tshtrain.trainer.stats import InfoStats


@dataclass(frozen=True)
class HookScalars:
    """Scalars to log, some of them marked for the progress bar.

    A log hook returns one, or a plain ``Mapping[str, float]``: with TorchRL's key ``"log_pbar"`` (a
    bool, not logged) True, all its scalars also appear in the progress bar; without it, none does.
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
    OPTIMIZER = "optimizer"
    """right after every optimizer step, which the algorithm takes (TorchRL's trainer takes it here)"""
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


STAGE_ALIASES: Mapping[str, HookStage] = {
    "pre_optim_steps": HookStage.PRE_UPDATE,
    "post_steps": HookStage.POST_UPDATE,
}
"""TorchRL's names of stages tshtrain names otherwise"""

IN_UPDATE_STAGES = frozenset(
    {
        HookStage.PROCESS_OPTIM_BATCH,
        HookStage.POST_LOSS,
        HookStage.OPTIMIZER,
        HookStage.POST_OPTIM,
        HookStage.POST_OPTIM_LOG,
    }
)
"""stages that run inside ``algorithm.update``: a :class:`StopTraining` raised there aborts the update"""


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


# ============================================================================ log output


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


class OptimizerStageHook(Protocol):
    def __call__(self, ctx: HookContext[OptimizerStep], /) -> None: ...


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
        HookStage.OPTIMIZER: (OptimizerStep,),
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


__all__ = [
    "IN_UPDATE_STAGES",
    "LOG_STAGES",
    "STAGE_ALIASES",
    "TRANSFORM_STAGES",
    "CollectedBatch",
    "Counters",
    "HookContext",
    "HookScalars",
    "HookStage",
    "LogOutput",
    "OptimizerStep",
    "SetupInfo",
    "StepSummary",
    "StopTraining",
    "TestResult",
]
