"""Correct hooks for every stage, built-in callbacks and events: mypy must accept all of it."""

from collections.abc import Mapping

import torch

from tshtrain.adapters import (
    EventContext,
    EventManager,
    EventUnit,
    Every,
    HookContext,
    HookRegistry,
    HookScalars,
    HookStage,
    OnEpisodeEnd,
    OnTestEnd,
)
from tshtrain.algorithm.base import TrainingStats
from tshtrain.callbacks import CountFramesLog, EarlyStopping
from tshtrain.data import TransitionBatch
from tshtrain.data.stats import CollectStats
from tshtrain.trainer import (
    CollectedBatch,
    InfoStats,
    OffPolicyTrainer,
    OptimizerStep,
    SetupInfo,
    StepSummary,
    TestResult,
    TrainerOptions,
)


def setup(ctx: HookContext[SetupInfo]) -> None: ...
def batch_process(ctx: HookContext[CollectedBatch]) -> CollectedBatch | None:
    return ctx.data


def pre_steps_log(ctx: HookContext[CollectStats | None]) -> dict[str, float]:
    return {"n": 0.0 if ctx.data is None else float(ctx.data.n_collected_steps)}


def pre_update(ctx: HookContext[CollectedBatch | None]) -> None: ...
def process_optim_batch(ctx: HookContext[TransitionBatch]) -> TransitionBatch:
    return ctx.data


def post_loss(ctx: HookContext[Mapping[str, torch.Tensor]]) -> None: ...
def post_optim(ctx: HookContext[OptimizerStep]) -> None: ...
def post_optim_log(ctx: HookContext[OptimizerStep]) -> HookScalars:
    return HookScalars({"lr": ctx.data.optimizer.param_groups[0]["lr"]}, progress_bar=("lr",))


def post_update(ctx: HookContext[TrainingStats]) -> None:
    if ctx.counters.gradient_step > 100:
        ctx.request_stop("enough")


def post_steps_log(ctx: HookContext[StepSummary]) -> None: ...
def pre_test(ctx: HookContext[None]) -> None: ...
def post_test(ctx: HookContext[TestResult]) -> None: ...
def shutdown(ctx: HookContext[InfoStats]) -> None: ...
def anything(ctx: HookContext[object]) -> None: ...


class StatefulPostUpdate:
    def __call__(self, ctx: HookContext[TrainingStats]) -> None: ...
    def state_dict(self) -> dict[str, int]:
        return {}

    def load_state_dict(self, state: dict[str, int]) -> None: ...


def randomize(ctx: EventContext) -> None: ...


def register_all(trainer: OffPolicyTrainer) -> None:
    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    events = EventManager("train")
    trainer.add_callback(events, name="events")
    eval_events = EventManager("eval")
    trainer.add_callback(eval_events, name="eval_events")
    hooks.register(HookStage.SETUP, setup, name="setup")
    hooks.register(HookStage.BATCH_PROCESS, batch_process)
    hooks.register(HookStage.PRE_STEPS_LOG, pre_steps_log)
    hooks.register(HookStage.PRE_UPDATE, pre_update)
    hooks.register(HookStage.PROCESS_OPTIM_BATCH, process_optim_batch)
    hooks.register(HookStage.POST_LOSS, post_loss)
    hooks.register(HookStage.POST_OPTIM, post_optim)
    hooks.register(HookStage.POST_OPTIM_LOG, post_optim_log)
    hooks.register(HookStage.POST_UPDATE, post_update)
    hooks.register(HookStage.POST_STEPS_LOG, post_steps_log)
    hooks.register(HookStage.PRE_TEST, pre_test)
    hooks.register(HookStage.POST_TEST, post_test)
    hooks.register(HookStage.SHUTDOWN, shutdown)
    hooks.register("post_update", post_update, name="by_value")
    hooks.register(HookStage.POST_UPDATE, StatefulPostUpdate(), name="stateful")
    hooks.register(HookStage.POST_UPDATE, anything, name="anything")
    hooks.register(HookStage.PRE_TEST, anything, name="anything")
    trainer.add_callback(CountFramesLog())
    trainer.add_callback(EarlyStopping("test/score", patience=3))
    events.register("randomize", randomize, trigger=OnEpisodeEnd())
    events.register("snapshot", randomize, trigger=Every(1000, unit=EventUnit.GRADIENT_STEP))
    eval_events.register("save", randomize, trigger=OnTestEnd())


def options() -> TrainerOptions:
    return TrainerOptions(test_deterministic=False, render_every_num_env_steps=100, close_envs=True)
