"""Hooks with the wrong signature for their stage: every line marked 'expect-error' must be rejected."""

from tshtrain.algorithm.base import TrainingStats
from tshtrain.data.stats import CollectStats
from tshtrain.trainer import (
    EventContext,
    GradientNormLog,
    HookContext,
    HookStage,
    OffPolicyTrainer,
    StepSummary,
    TestResult,
    TrainerOptions,
)


def after_test(ctx: HookContext[TestResult]) -> None: ...
def needs_stats(ctx: HookContext[CollectStats]) -> dict[str, float]:
    return {}


def returns_text(ctx: HookContext[StepSummary]) -> str:
    return ""


def two_arguments(ctx: HookContext[TrainingStats], extra: int) -> None: ...
def positional_ints(epoch: int) -> None: ...
def event_with_hook_context(ctx: HookContext[None]) -> None: ...


def wrong(trainer: OffPolicyTrainer) -> None:
    trainer.register_hook(HookStage.POST_UPDATE, after_test)  # expect-error
    trainer.register_hook(HookStage.PRE_STEPS_LOG, needs_stats)  # expect-error
    trainer.register_hook(HookStage.POST_STEPS_LOG, returns_text)  # expect-error
    trainer.register_hook(HookStage.POST_UPDATE, two_arguments)  # expect-error
    trainer.register_hook(HookStage.SETUP, positional_ints)  # expect-error
    trainer.register_hook("post_epoch", after_test)  # expect-error
    trainer.register_hook(HookStage.POST_TEST, after_test, name=3)  # expect-error
    trainer.register_hook(HookStage.PRE_TEST, GradientNormLog())  # expect-error
    trainer.events.register("e", event_with_hook_context, trigger=None)  # expect-error


def wrong_options() -> None:
    TrainerOptions(close_envs="yes")  # expect-error
    TrainerOptions(True)  # expect-error
