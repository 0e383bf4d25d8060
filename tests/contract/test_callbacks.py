"""The one extension mechanism: Callback points, their order, RunContext, logging, stopping, state."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from typing_extensions import override

from tests.adapter_helpers import hooks_of
from tests.contract._hook_setups import off_policy_trainer, recording_on_policy_trainer, reinforce_trainer
from tshtrain.adapters import HookStage
from tshtrain.adapters.skrl import EnvStepDriver
from tshtrain.algorithm.base import TrainingStats
from tshtrain.data import TransitionBatch
from tshtrain.errors import ConfigurationError
from tshtrain.logger import LogScope, MemoryLogger
from tshtrain.trainer import (
    Callback,
    CollectedBatch,
    EpisodesEnded,
    EpochStats,
    InfoStats,
    OptimizerStep,
    RunContext,
    SetupInfo,
    StepSummary,
    StopReason,
    StopTraining,
    TestResult,
)


class Recorder(Callback):
    """Records every point it is called at, with the counters it saw."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @override
    def on_run_start(self, ctx: RunContext, setup: SetupInfo) -> None:
        self.calls.append("on_run_start")

    @override
    def on_training_step_start(self, ctx: RunContext) -> None:
        self.calls.append("on_training_step_start")

    @override
    def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
        self.calls.append("after_collect")
        return None

    @override
    def before_update(self, ctx: RunContext, batch: CollectedBatch | None) -> None:
        self.calls.append("before_update")

    @override
    def on_optimizer_step(self, ctx: RunContext, step: OptimizerStep) -> None:
        self.calls.append(f"on_optimizer_step:{step.name}")

    @override
    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        self.calls.append("after_update")

    @override
    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        self.calls.append(f"on_training_step_end:{ctx.counters.training_step}")

    @override
    def on_test_start(self, ctx: RunContext) -> None:
        self.calls.append("on_test_start")

    @override
    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        self.calls.append(f"on_test_end:initial={result.initial}")

    @override
    def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
        self.calls.append(f"on_epoch_end:{stats.epoch}")

    @override
    def on_run_end(self, ctx: RunContext, info: InfoStats) -> None:
        self.calls.append("on_run_end")


def test_the_points_are_called_in_loop_order() -> None:
    trainer = reinforce_trainer(max_epochs=1, epoch_num_steps=32)
    recorder = Recorder()
    trainer.add_callback(recorder)
    trainer.run()
    assert recorder.calls == [
        "on_run_start",
        "on_test_start",
        "on_test_end:initial=True",
        "on_training_step_start",
        "after_collect",
        "before_update",
        "on_optimizer_step:optim",
        "after_update",
        "on_training_step_end:1",
        "on_test_start",
        "on_test_end:initial=False",
        "on_epoch_end:1",
        "on_run_end",
    ]


def test_callbacks_run_after_the_params_callables_in_the_order_added_adapters_too() -> None:
    order: list[str] = []

    class Last(Callback):
        @override
        def on_test_start(self, ctx: RunContext) -> None:
            order.append("callback")

    trainer = reinforce_trainer(
        max_epochs=1, epoch_num_steps=32, test_fn=lambda e, s: order.append("test_fn")
    )
    hooks_of(trainer).register(HookStage.PRE_TEST, lambda ctx: order.append("pre_test"))
    trainer.add_callback(Last())
    trainer.reset()
    assert order == ["test_fn", "pre_test", "callback"]
    assert trainer.callbacks.names() == ["params", "hooks", "Last"]


def test_a_callback_is_active_only_at_the_points_it_overrides() -> None:
    class OnlyTestEnd(Callback):
        @override
        def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
            pass

    trainer = reinforce_trainer()
    trainer.add_callback(OnlyTestEnd())
    assert trainer.callbacks.active("on_test_end")
    assert not trainer.callbacks.active("on_loss")
    assert trainer.callbacks.update_hooks() is None  # the algorithm gets the no-op hooks


def test_ctx_log_writes_into_the_record_of_its_point() -> None:
    class Logs(Callback):
        @override
        def on_training_step_start(self, ctx: RunContext) -> None:
            ctx.log({"at_start": 1.0})

        @override
        def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
            ctx.log({"steps": float(ctx.counters.training_step)})

        @override
        def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
            ctx.log({"twice_the_score": 2 * result.score})

        @override
        def on_optimizer_step(self, ctx: RunContext, step: OptimizerStep) -> None:
            ctx.log({"lr": step.optimizer.param_groups[0]["lr"]})

    logger = MemoryLogger()
    trainer = reinforce_trainer(max_epochs=1, epoch_num_steps=64, logger=logger)
    trainer.add_callback(Logs())
    trainer.run()
    training = logger.records[LogScope.TRAINING]
    assert [data["steps"] for _, data in training] == [1.0, 2.0]
    assert all(data["at_start"] == 1.0 for _, data in training)
    tests = logger.records[LogScope.TEST]
    assert all(data["twice_the_score"] == 2 * data["score"] for _, data in tests)
    assert all(data["lr"] == pytest.approx(1e-2) for _, data in logger.records[LogScope.UPDATE])


def test_ctx_log_where_no_record_is_written_is_an_error() -> None:
    class LogsAtEpochEnd(Callback):
        @override
        def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
            ctx.log({"epoch": float(stats.epoch)})

    trainer = reinforce_trainer(max_epochs=1, epoch_num_steps=32)
    trainer.add_callback(LogsAtEpochEnd(), name="epoch_logger")
    with pytest.raises(RuntimeError, match=r"epoch_logger logs \['epoch'\] at on_epoch_end, where no record"):
        trainer.run()


def test_episode_scalars_are_the_same_when_driven_env_step_by_env_step() -> None:
    class EpisodeLog(Callback):
        @override
        def on_episodes_end(self, ctx: RunContext, ended: EpisodesEnded) -> None:
            if not ended.test:
                ctx.log({"ended": float(len(ended.env_ids))})

    records = []
    for drive in ("run", "env_steps"):
        logger = MemoryLogger()
        trainer = off_policy_trainer(
            max_epochs=2, logger=logger, epoch_num_steps=200, collection_step_num_env_steps=100
        )
        trainer.add_callback(EpisodeLog())
        if drive == "run":
            trainer.run()
        else:
            trainer.reset()
            driver = EnvStepDriver(trainer)
            while not trainer.done:
                driver.step()
            trainer.close()
        records.append([(step, data.get("ended")) for step, data in logger.records[LogScope.TRAINING]])
    assert records[0] == records[1]
    assert any(ended is not None for _, ended in records[0])


def test_request_stop_and_stop_training_name_the_callback() -> None:
    class StopAtFirstTest(Callback):
        @override
        def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
            if not result.initial:
                ctx.request_stop(f"score {result.score}")

    trainer = reinforce_trainer(max_epochs=5, epoch_num_steps=32)
    trainer.add_callback(StopAtFirstTest(), name="goal")
    info = trainer.run()
    assert info.stop_reason is StopReason.HOOK
    assert info.stop_detail is not None and info.stop_detail.startswith("callback 'goal': score ")

    class AbandonUpdate(Callback):
        @override
        def on_loss(self, ctx: RunContext, losses: Mapping[str, torch.Tensor]) -> None:
            raise StopTraining("loss seen")

    trainer = off_policy_trainer()
    trainer.add_callback(AbandonUpdate(), name="nan_guard")
    info = trainer.run()
    assert info.stop_reason is StopReason.HOOK
    assert info.stop_detail == "callback 'nan_guard': loss seen"
    assert info.gradient_step == 0  # the update was abandoned before its optimizer step


def test_after_collect_may_replace_the_rollout() -> None:
    class DoubleRewards(Callback):
        @override
        def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
            assert batch.rollout is not None
            rollout = dataclasses.replace(batch.rollout, rew=batch.rollout.rew * 2)
            return dataclasses.replace(batch, rollout=rollout)

    trainer = recording_on_policy_trainer(max_epochs=1, epoch_num_steps=32)
    trainer.add_callback(DoubleRewards())
    trainer.run()
    algorithm: Any = trainer.algorithm
    assert algorithm.rollouts and all(float(r.rew[r.valid].max()) == 2.0 for r in algorithm.rollouts)


def test_on_sampled_batch_transforms_every_sample() -> None:
    seen: list[int] = []

    class Halve(Callback):
        @override
        def on_sampled_batch(self, ctx: RunContext, batch: TransitionBatch) -> TransitionBatch | None:
            seen.append(len(batch.rew))
            return dataclasses.replace(batch, rew=batch.rew / 2)

    trainer = off_policy_trainer(max_epochs=1)
    trainer.add_callback(Halve())
    info = trainer.run()
    assert len(seen) == info.gradient_step > 0


class Counting(Callback):
    def __init__(self) -> None:
        self.count = 0

    @override
    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        self.count += 1

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.count = int(state["count"])


def test_callback_state_goes_with_checkpoints(tmp_path: Any) -> None:
    trainer = off_policy_trainer(max_epochs=1)
    trainer.add_callback(Counting(), name="counter")
    trainer.run()
    path = trainer.save_checkpoint(tmp_path / "ckpt")
    fresh = off_policy_trainer(max_epochs=1)
    restored = Counting()
    fresh.add_callback(restored, name="counter")
    fresh.load_checkpoint(path, trusted=True)
    assert restored.count == 2
    assert fresh.counters == trainer.counters


def test_bad_callbacks_are_refused_when_added() -> None:
    trainer = reinforce_trainer()
    trainer.add_callback(Counting(), name="counter")
    with pytest.raises(ConfigurationError, match=r"a callback named 'counter' exists already"):
        trainer.add_callback(Counting(), name="counter")
    with pytest.raises(TypeError, match=r"must be a tshtrain.trainer.Callback"):
        trainer.add_callback(lambda ctx: None)  # type: ignore[arg-type]  # the mistake under test


def test_a_callback_may_name_its_attributes_freely() -> None:
    """``points``, ``bind``, ``attach``: names a user's callback may use (once, ``points`` broke
    ``add_callback`` with "'list' object is not callable")."""
    seen: list[int] = []

    class Scorer(Callback):
        def __init__(self) -> None:
            self.points: list[float] = []
            self.bind = "mine"
            self.attach = 3

        @override
        def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
            self.points.append(result.score)
            seen.append(ctx.counters.epoch)

    trainer = reinforce_trainer(max_epochs=2, epoch_num_steps=32)
    scorer = Scorer()
    trainer.add_callback(scorer)
    trainer.run()
    assert seen == [0, 1, 2] and len(scorer.points) == 3


def test_a_checkpoint_with_empty_adapter_state_loads_into_a_trainer_without_that_adapter() -> None:
    """Trainers once carried a hook registry and two event managers whether used or not; their empty
    state must not stop such a checkpoint from loading."""
    trainer = reinforce_trainer(max_epochs=1, epoch_num_steps=32)
    state = trainer.callbacks.state_dict()
    legacy = {**state, "hooks": {}, "events": {"fired": {}, "callbacks": {}}}
    reinforce_trainer(max_epochs=1, epoch_num_steps=32).callbacks.load_state_dict(legacy)
    with pytest.raises(ConfigurationError, match="no such stateful callback"):
        reinforce_trainer(max_epochs=1, epoch_num_steps=32).callbacks.load_state_dict(
            {**state, "hooks": {"counter": {"n": 1}}}
        )
