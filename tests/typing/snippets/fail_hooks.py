"""Hooks with the wrong signature for their stage: every line marked 'expect-error' must be rejected."""

from tshtrain.adapters import EventManager, HookContext, HookRegistry, HookStage
from tshtrain.algorithm.base import TrainingStats
from tshtrain.callbacks import GradientNormLog
from tshtrain.data.stats import CollectStats
from tshtrain.trainer import OffPolicyTrainer, StepSummary, TestResult, TrainerOptions


def after_test(ctx: HookContext[TestResult]) -> None: ...
def needs_stats(ctx: HookContext[CollectStats]) -> dict[str, float]:
    return {}


def returns_text(ctx: HookContext[StepSummary]) -> str:
    return ""


def two_arguments(ctx: HookContext[TrainingStats], extra: int) -> None: ...
def positional_ints(epoch: int) -> None: ...
def event_with_hook_context(ctx: HookContext[None]) -> None: ...


def wrong(trainer: OffPolicyTrainer) -> None:
    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    events = EventManager("train")
    trainer.add_callback(events, name="events")
    hooks.register(HookStage.POST_UPDATE, after_test)  # expect-error
    hooks.register(HookStage.PRE_STEPS_LOG, needs_stats)  # expect-error
    hooks.register(HookStage.POST_STEPS_LOG, returns_text)  # expect-error
    hooks.register(HookStage.POST_UPDATE, two_arguments)  # expect-error
    hooks.register(HookStage.SETUP, positional_ints)  # expect-error
    hooks.register("post_epoch", after_test)  # expect-error
    hooks.register(HookStage.POST_TEST, after_test, name=3)  # expect-error
    hooks.register(HookStage.PRE_TEST, GradientNormLog())  # expect-error
    events.register("e", event_with_hook_context, trigger=None)  # expect-error


def wrong_options() -> None:
    TrainerOptions(close_envs="yes")  # expect-error
    TrainerOptions(True)  # expect-error
