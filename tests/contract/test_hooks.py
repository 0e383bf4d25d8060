"""Contract tests of hook stages: their order in the loop, what they receive, transforms, logged
scalars, stops, state for checkpoints, and the errors at registration."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.adapter_helpers import events_of, hooks_of
from tests.contract._hook_setups import (
    LinearOffPolicy,
    any_trainer,
    off_policy_trainer,
    recording_on_policy_trainer,
    reinforce_trainer,
)
from tshtrain.adapters import HookContext, HookScalars, HookStage
from tshtrain.algorithm.base import TrainingStats
from tshtrain.data import TransitionBatch
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError
from tshtrain.logger import LogScope, MemoryLogger
from tshtrain.trainer import (
    CollectedBatch,
    OptimizerStep,
    SetupInfo,
    StepSummary,
    StopReason,
    StopTraining,
    TestResult,
)

ONE_STEP = ["batch_process", "pre_steps_log", "pre_update"]
OPTIM = ["post_loss", "optimizer", "post_optim", "post_optim_log"]


def _record_all(trainer: Any) -> list[str]:
    seen: list[str] = []
    for stage in HookStage:

        def hook(ctx: HookContext[Any], stage: HookStage = stage) -> None:
            assert ctx.stage == stage and ctx.name == "recorder"
            seen.append(stage.value)

        hooks_of(trainer).register(stage, hook, name="recorder")
    return seen


# ====================================================================== order


def test_stage_order_on_policy() -> None:
    trainer = reinforce_trainer(max_epochs=1)  # 2 training steps, one mini-batch each
    seen = _record_all(trainer)
    trainer.run()
    step = [*ONE_STEP, *OPTIM, "post_update", "post_steps_log"]
    assert seen == ["setup", "pre_test", "post_test", *step, *step, "pre_test", "post_test", "shutdown"]


def test_stage_order_off_policy_has_process_optim_batch_per_gradient_step() -> None:
    trainer = off_policy_trainer(max_epochs=1)  # 2 training steps of 2 gradient steps
    seen = _record_all(trainer)
    trainer.run()
    gradient_step = ["process_optim_batch", *OPTIM]
    step = [*ONE_STEP, *gradient_step, *gradient_step, "post_update", "post_steps_log"]
    assert seen == ["setup", "pre_test", "post_test", *step, *step, "pre_test", "post_test", "shutdown"]


def test_stage_order_offline_has_no_batch_process() -> None:
    trainer = any_trainer("offline", max_epochs=1, epoch_num_steps=2)
    seen = _record_all(trainer)
    trainer.run()
    step = ["pre_steps_log", "pre_update", "process_optim_batch", *OPTIM, "post_update", "post_steps_log"]
    assert seen == ["setup", "pre_test", "post_test", *step, *step, "pre_test", "post_test", "shutdown"]


def test_test_in_training_test_step_runs_between_pre_steps_log_and_pre_update() -> None:
    trainer = off_policy_trainer(max_epochs=1, test_in_training=True, stop_fn=lambda score: score > 1e9)
    seen = _record_all(trainer)
    trainer.reset()
    seen.clear()
    trainer.execute_training_step()
    assert seen[:2] == ["batch_process", "pre_steps_log"]
    if "pre_test" in seen:  # training episodes finished: the stop_fn was asked (and said no)
        assert seen.index("post_test") < seen.index("pre_update")


def test_several_hooks_at_one_stage_run_in_registration_order() -> None:
    trainer = off_policy_trainer(max_epochs=1)
    calls: list[str] = []
    for name in ("first", "second", "third"):
        hooks_of(trainer).register(HookStage.POST_UPDATE, lambda ctx, n=name: calls.append(n), name=name)
    trainer.run()
    assert calls == ["first", "second", "third"] * 2
    assert hooks_of(trainer).names("post_update") == ["first", "second", "third"]


# ====================================================================== payloads


def test_payloads_and_counters() -> None:
    trainer = off_policy_trainer(max_epochs=1)
    got: dict[str, list[Any]] = {}

    def keep(stage: str, value: Any) -> None:
        got.setdefault(stage, []).append(value)

    def setup(ctx: HookContext[SetupInfo]) -> None:
        keep("setup", ctx.data)

    def post_update(ctx: HookContext[TrainingStats]) -> None:
        keep("post_update", (ctx.data, ctx.counters.gradient_step, ctx.counters.update_step))

    def post_optim(ctx: HookContext[OptimizerStep]) -> None:
        keep("post_optim", ctx.data)

    def post_steps_log(ctx: HookContext[StepSummary]) -> None:
        keep("post_steps_log", (ctx.data, ctx.counters.training_step))

    def post_test(ctx: HookContext[TestResult]) -> None:
        keep("post_test", ctx.data)

    def post_loss(ctx: HookContext[Mapping[str, torch.Tensor]]) -> None:
        keep("post_loss", dict(ctx.data))

    hooks_of(trainer).register(HookStage.SETUP, setup)
    hooks_of(trainer).register(HookStage.POST_UPDATE, post_update)
    hooks_of(trainer).register(HookStage.POST_OPTIM, post_optim)
    hooks_of(trainer).register(HookStage.POST_STEPS_LOG, post_steps_log)
    hooks_of(trainer).register(HookStage.POST_TEST, post_test)
    hooks_of(trainer).register(HookStage.POST_LOSS, post_loss)
    trainer.run()
    (info,) = got["setup"]
    assert info.algorithm is trainer.algorithm and info.buffer is trainer.params.training_collector.buffer
    assert not info.offline and not info.resumed
    # the counters a post_update hook sees already include the update step
    assert [(g, u) for _, g, u in got["post_update"]] == [(2, 1), (4, 2)]
    assert all(
        step.name == "optim" and step.optimizer is trainer.algorithm.optim for step in got["post_optim"]
    )
    assert len(got["post_optim"]) == 4
    assert [training_step for _, training_step in got["post_steps_log"]] == [0, 1]
    assert all(summary.collect_stat.n_collected_steps == 10 for summary, _ in got["post_steps_log"])
    assert got["post_test"][0].is_best is True
    assert set(got["post_loss"][0]) == {"regression loss"}


def test_batch_process_can_replace_the_on_policy_rollout() -> None:
    trainer = recording_on_policy_trainer(max_epochs=1)

    def double_rewards(ctx: HookContext[CollectedBatch]) -> CollectedBatch | None:
        rollout = ctx.data.rollout
        assert rollout is not None and ctx.data.collect_stat.n_collected_steps == rollout.num_steps
        return dataclasses.replace(ctx.data, rollout=dataclasses.replace(rollout, rew=rollout.rew * 2))

    hooks_of(trainer).register(HookStage.BATCH_PROCESS, double_rewards)
    trainer.run()
    assert all(np.all(r.rew == 2.0) for r in trainer.algorithm.rollouts)  # CartPole rewards are 1


def test_batch_process_off_policy_sees_exactly_the_new_transitions() -> None:
    trainer = off_policy_trainer(max_epochs=2)
    new: list[TransitionBatch] = []

    def take(ctx: HookContext[CollectedBatch]) -> None:
        assert ctx.data.rollout is None
        new.append(ctx.data.new_transitions())

    hooks_of(trainer).register(HookStage.BATCH_PROCESS, take)
    trainer.run()
    buffer = trainer.params.training_collector.buffer
    assert [len(b) for b in new] == [10] * 4
    everything = np.sort(np.concatenate([b.indices for b in new]))
    np.testing.assert_array_equal(everything, np.sort(buffer.chronological_indices()))


def test_process_optim_batch_transforms_what_the_algorithm_uses() -> None:
    trainer = off_policy_trainer(max_epochs=1)

    def zero_rewards(ctx: HookContext[TransitionBatch]) -> TransitionBatch | None:
        return dataclasses.replace(ctx.data, rew=np.zeros_like(ctx.data.rew))

    def first_half(ctx: HookContext[TransitionBatch]) -> TransitionBatch | None:
        assert np.all(ctx.data.rew == 0)  # chained: sees the first hook's result
        return None  # unchanged

    hooks_of(trainer).register(HookStage.PROCESS_OPTIM_BATCH, zero_rewards)
    hooks_of(trainer).register(HookStage.PROCESS_OPTIM_BATCH, first_half)
    trainer.run()
    assert all(np.all(b.rew == 0) for b in trainer.algorithm.batches)


def test_a_transform_hook_returning_the_wrong_type_fails_with_its_name() -> None:
    trainer = off_policy_trainer(max_epochs=1)
    hooks_of(trainer).register(HookStage.BATCH_PROCESS, lambda ctx: 42, name="bad")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="hook 'bad' at stage 'batch_process' returned int"):
        trainer.run()


def test_update_hooks_act_only_inside_the_run() -> None:
    trainer = off_policy_trainer(max_epochs=1)
    hooks_of(trainer).register(HookStage.POST_LOSS, lambda ctx: None, name="loss")
    calls: list[int] = []
    hooks_of(trainer).register(HookStage.POST_OPTIM, lambda ctx: calls.append(1), name="optim")
    trainer.run()
    assert calls  # the trainer passed its hooks to every update
    before = len(calls)
    trainer.algorithm.update(trainer.params.training_collector.buffer, 4)  # outside the run
    assert len(calls) == before


def test_without_hooks_nothing_is_attached() -> None:
    trainer = off_policy_trainer(max_epochs=1)
    trainer.reset()
    assert not trainer.algorithm.optim._optimizer_step_post_hooks
    assert trainer.params.training_collector.listener is None


# ====================================================================== logging


def test_log_hooks_scalars_go_to_the_training_and_update_records() -> None:
    logger = MemoryLogger()
    trainer = off_policy_trainer(max_epochs=1, logger=logger)
    hooks_of(trainer).register(HookStage.PRE_STEPS_LOG, lambda ctx: {"pre": 1.0}, name="pre")
    hooks_of(trainer).register(
        HookStage.POST_STEPS_LOG, lambda ctx: {"post": float(ctx.counters.training_step)}, name="post"
    )
    optim_calls = iter(range(100))
    hooks_of(trainer).register(
        HookStage.POST_OPTIM_LOG, lambda ctx: {"k": float(next(optim_calls))}, name="optim"
    )
    trainer.run()
    training = logger.records[LogScope.TRAINING]
    assert [(step, d["pre"], d["post"]) for step, d in training] == [(10, 1.0, 0.0), (20, 1.0, 1.0)]
    assert "returns_window/mean" in training[-1][1] or "n_collected_steps" in training[-1][1]
    update = logger.records[LogScope.UPDATE]
    # off-policy: every gradient step is its own record, with its own post_optim_log value
    assert [(step, d["k"]) for step, d in update] == [(1, 0.0), (2, 1.0), (3, 2.0), (4, 3.0)]


def test_post_optim_log_on_policy_is_averaged_over_the_update_steps_optimizer_steps() -> None:
    logger = MemoryLogger()
    trainer = reinforce_trainer(max_epochs=1, batch_size=16, logger=logger)  # 32 env steps: 2 mini-batches
    values = iter(range(100))
    hooks_of(trainer).register(HookStage.POST_OPTIM_LOG, lambda ctx: {"k": float(next(values))}, name="optim")
    trainer.run()
    assert [d["k"] for _, d in logger.records[LogScope.UPDATE]] == [0.5, 2.5]


def test_offline_training_records_hold_only_hook_scalars() -> None:
    logger = MemoryLogger()
    trainer = any_trainer("offline", max_epochs=1, logger=logger)
    assert logger.records[LogScope.TRAINING] == []
    trainer = any_trainer("offline", max_epochs=1, logger=logger)
    hooks_of(trainer).register(HookStage.POST_STEPS_LOG, lambda ctx: {"x": 2.0}, name="x")
    trainer.run()
    assert [(s, d) for s, d in logger.records[LogScope.TRAINING]] == [
        (16, {"x": 2.0}),
        (32, {"x": 2.0}),
        (48, {"x": 2.0}),
    ]


def test_log_hooks_respect_the_interval_gating() -> None:
    from tshtrain.logger import LogIntervals

    logger = MemoryLogger(LogIntervals(training_interval=20, update_interval=1))
    trainer = off_policy_trainer(max_epochs=2, logger=logger)
    calls: list[int] = []

    def log(ctx: HookContext[StepSummary]) -> dict[str, float]:
        calls.append(ctx.counters.env_step)
        return {"x": 1.0}

    hooks_of(trainer).register(HookStage.POST_STEPS_LOG, log)
    trainer.run()
    assert calls == [10, 20, 30, 40]  # hooks run at every training step ...
    assert [s for s, _ in logger.records[LogScope.TRAINING]] == [10, 30]  # ... records when due


def test_a_log_hook_may_not_overwrite_a_trainer_scalar() -> None:
    trainer = off_policy_trainer(max_epochs=1, logger=MemoryLogger())
    hooks_of(trainer).register(HookStage.PRE_STEPS_LOG, lambda ctx: {"n_collected_steps": 3.0}, name="clash")
    with pytest.raises(ConfigurationError, match="'n_collected_steps'"):
        trainer.run()


def test_progress_bar_shows_marked_scalars(monkeypatch: pytest.MonkeyPatch) -> None:
    from tshtrain.trainer import base

    postfixes: list[dict[str, float]] = []

    class FakeBar:
        def __init__(self, **layout: Any):
            del layout

        def advance(self, amount: int, last: Any, stat: Any, extra: Any = None) -> None:
            postfixes.append(dict(extra or {}))

        def close(self) -> None:
            pass

    monkeypatch.setattr(base, "ProgressBar", FakeBar)
    trainer = off_policy_trainer(max_epochs=1, show_progress=True)

    def marked(ctx: HookContext[CollectStats | None]) -> HookScalars:
        return HookScalars({"shown": 1.0, "hidden": 2.0}, progress_bar=("shown",))

    hooks_of(trainer).register(HookStage.PRE_STEPS_LOG, marked)
    trainer.run()
    assert postfixes == [{"shown": 1.0}, {"shown": 1.0}]


def test_hook_scalars_reject_unknown_progress_bar_names() -> None:
    with pytest.raises(ConfigurationError, match=r"progress_bar names \['y'\]"):
        HookScalars({"x": 1.0}, progress_bar=("y",))


# ====================================================================== stopping


def test_request_stop_from_a_hook_ends_after_the_training_step_with_its_reason() -> None:
    trainer = off_policy_trainer(max_epochs=5)

    def stopper(ctx: HookContext[TrainingStats]) -> None:
        if ctx.counters.update_step == 3:
            ctx.request_stop("enough updates")

    hooks_of(trainer).register(HookStage.POST_UPDATE, stopper)
    info = trainer.run()
    assert info.stop_reason == StopReason.HOOK
    assert info.stop_detail == "hook 'stopper' (post_update): enough updates"
    assert info.update_step == 3


def test_stop_training_inside_an_update_abandons_it_before_the_optimizer_step() -> None:
    trainer = off_policy_trainer(max_epochs=5)
    algorithm: LinearOffPolicy = trainer.algorithm  # type: ignore[assignment]
    weights: list[torch.Tensor] = []

    def stop_at_third_loss(ctx: HookContext[Mapping[str, torch.Tensor]]) -> None:
        weights.append(algorithm.net.weight.detach().clone())
        if len(weights) == 3:
            raise StopTraining("third loss")

    hooks_of(trainer).register(HookStage.POST_LOSS, stop_at_third_loss)
    info = trainer.run()
    assert info.stop_reason == StopReason.HOOK
    assert info.stop_detail == "hook 'stop_at_third_loss' (post_loss): third loss"
    assert torch.equal(algorithm.net.weight, weights[-1])  # the third step was not taken
    assert info.gradient_step == 2 and info.update_step == 1


def test_stop_training_outside_an_update_acts_as_request_stop() -> None:
    trainer = off_policy_trainer(max_epochs=5)

    def stop(ctx: HookContext[None]) -> None:
        if ctx.counters.epoch == 1:
            raise StopTraining("after the first epoch's test")

    hooks_of(trainer).register(HookStage.PRE_TEST, stop)
    info = trainer.run()
    assert info.stop_reason == StopReason.HOOK and info.stop_detail is not None
    assert "after the first epoch's test" in info.stop_detail


def test_request_stop_with_a_reason() -> None:
    trainer = off_policy_trainer(max_epochs=5)
    trainer.reset()
    trainer.execute_training_step()
    trainer.request_stop("by hand")
    trainer.execute_epoch() if not trainer.done else None
    assert trainer.info_stats().stop_reason == StopReason.REQUESTED
    assert trainer.info_stats().stop_detail == "by hand"


# ====================================================================== state


class CountingHook:
    """A stateful post_update hook."""

    def __init__(self) -> None:
        self.count = 0
        self.history = torch.zeros(0)

    def __call__(self, ctx: HookContext[TrainingStats]) -> None:
        self.count += 1
        self.history = torch.cat([self.history, torch.tensor([float(ctx.counters.gradient_step)])])

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count, "history": self.history}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.count = int(state["count"])
        self.history = state["history"]


def test_extension_state_round_trips_through_a_weights_only_file(tmp_path: Path) -> None:
    trainer = off_policy_trainer(max_epochs=1)
    hook = CountingHook()
    hooks_of(trainer).register(HookStage.POST_UPDATE, hook, name="counter")
    hooks_of(trainer).register(HookStage.POST_STEPS_LOG, lambda ctx: None, name="stateless")
    trainer.run()
    torch.save(trainer.callbacks.state_dict(), tmp_path / "ext.pt")
    state = torch.load(tmp_path / "ext.pt", weights_only=True)
    assert list(state["hooks"]) == ["counter"] and state["hooks"]["counter"]["count"] == 2
    assert torch.equal(state["hooks"]["counter"]["history"], torch.tensor([2.0, 4.0]))
    assert trainer.counters.training_step == 2  # run state, not callback state

    fresh = off_policy_trainer(max_epochs=1)
    restored = CountingHook()
    hooks_of(fresh).register(HookStage.POST_UPDATE, restored, name="counter")
    fresh.callbacks.load_state_dict(state)
    assert restored.count == 2 and torch.equal(restored.history, hook.history)


def test_load_extension_state_strictness() -> None:
    trainer = off_policy_trainer(max_epochs=1)
    hooks_of(trainer).register(HookStage.POST_UPDATE, CountingHook(), name="counter")
    state = trainer.callbacks.state_dict()
    other = off_policy_trainer(max_epochs=1)
    hooks_of(other)
    with pytest.raises(ConfigurationError, match=r"for \['counter'\] no such stateful hook"):
        other.callbacks.load_state_dict(state)
    other.callbacks.load_state_dict(state, strict=False)


def test_a_multi_stage_hook_object_is_saved_once_and_names_of_stateful_hooks_are_unique() -> None:
    trainer = off_policy_trainer(max_epochs=1)

    class Two:
        def post_update(self, ctx: HookContext[TrainingStats]) -> None: ...

        def pre_test(self, ctx: HookContext[object]) -> None: ...

        def state_dict(self) -> dict[str, Any]:
            return {"x": 1}

        def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    two = Two()
    hooks_of(trainer).register(HookStage.POST_UPDATE, two.post_update, name="two")
    hooks_of(trainer).register(HookStage.PRE_TEST, two.pre_test, name="two")
    assert trainer.callbacks.state_dict()["hooks"] == {"two": {"x": 1}}
    with pytest.raises(ConfigurationError, match="'two' already belongs to another stateful hook"):
        hooks_of(trainer).register(HookStage.POST_TEST, Two().pre_test, name="two")


# ====================================================================== bad input


def test_unknown_stage_is_rejected_with_the_list_of_stages() -> None:
    trainer = off_policy_trainer()
    with pytest.raises(ConfigurationError, match=r"unknown stage 'post_epoch'; the stages are 'setup', "):
        hooks_of(trainer).register("post_epoch", lambda ctx: None)  # type: ignore[call-overload]


def test_duplicate_name_at_a_stage_is_rejected() -> None:
    trainer = off_policy_trainer()
    hooks_of(trainer).register(HookStage.POST_UPDATE, lambda ctx: None, name="a")
    hooks_of(trainer).register(HookStage.PRE_UPDATE, lambda ctx: None, name="a")  # other stage: fine
    with pytest.raises(
        ConfigurationError, match="a hook named 'a' is already registered at stage 'post_update'"
    ):
        hooks_of(trainer).register(HookStage.POST_UPDATE, lambda ctx: None, name="a")


def test_wrong_arity_is_rejected() -> None:
    trainer = off_policy_trainer()

    def two_args(ctx: Any, extra: int) -> None: ...

    with pytest.raises(TypeError, match=r"hook 'two_args' for stage 'post_update' must take exactly one"):
        hooks_of(trainer).register(HookStage.POST_UPDATE, two_args)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must take exactly one positional argument"):
        hooks_of(trainer).register(HookStage.POST_UPDATE, lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callable"):
        hooks_of(trainer).register(HookStage.POST_UPDATE, 3)  # type: ignore[arg-type]


def test_a_hook_annotated_for_another_stage_is_rejected() -> None:
    trainer = off_policy_trainer()

    def after_test(ctx: HookContext[TestResult]) -> None: ...

    with pytest.raises(
        TypeError,
        match=r"takes HookContext\[.*TestResult.*\], but that stage passes HookContext\[TrainingStats\]",
    ):
        hooks_of(trainer).register(HookStage.POST_UPDATE, after_test)  # type: ignore[arg-type]

    def needs_stats(ctx: HookContext[CollectStats]) -> None: ...

    # pre_steps_log passes None offline: a hook taking only CollectStats does not fit
    with pytest.raises(TypeError, match=r"passes HookContext\[CollectStats \| None\]"):
        hooks_of(trainer).register(HookStage.PRE_STEPS_LOG, needs_stats)  # type: ignore[arg-type]

    def not_a_context(ctx: int) -> None: ...

    with pytest.raises(TypeError, match="must take a HookContext"):
        hooks_of(trainer).register(HookStage.POST_UPDATE, not_a_context)  # type: ignore[arg-type]

    def wrong_return(ctx: HookContext[StepSummary]) -> str:
        return ""

    with pytest.raises(TypeError, match="annotated to return"):
        hooks_of(trainer).register(HookStage.POST_STEPS_LOG, wrong_return)  # type: ignore[arg-type]

    def general(ctx: HookContext[object]) -> None: ...

    hooks_of(trainer).register(HookStage.POST_UPDATE, general)  # object takes anything
    hooks_of(trainer).register(HookStage.PRE_TEST, general)


def test_hooks_and_events_continue_exactly_after_a_checkpoint(tmp_path: Path) -> None:
    from tshtrain.adapters import EventContext, EventUnit, Every
    from tshtrain.callbacks import CountFramesLog

    def build() -> tuple[Any, CountingHook, CountFramesLog, list[tuple[int, bool]], list[int]]:
        trainer = off_policy_trainer(max_epochs=3)
        counter, frames = CountingHook(), CountFramesLog()
        hooks_of(trainer).register(HookStage.POST_UPDATE, counter, name="counter")
        trainer.add_callback(frames)
        setups: list[tuple[int, bool]] = []
        hooks_of(trainer).register(
            HookStage.SETUP, lambda ctx: setups.append((ctx.counters.env_step, ctx.data.resumed)), name="s"
        )
        fired: list[int] = []

        def every(ctx: EventContext) -> None:
            fired.append(ctx.counters.training_step)

        events_of(trainer).register("every", every, trigger=Every(3, unit=EventUnit.TRAINING_STEP))
        return trainer, counter, frames, setups, fired

    trainer, counter, frames, _, fired = build()
    trainer.run()
    expected = (counter.count, counter.history.tolist(), frames.frames, fired)

    trainer, *_ = build()
    trainer.reset()
    trainer.execute_epoch()
    trainer.save_checkpoint(tmp_path / "ckpt")
    resumed, counter, frames, setups, fired = build()
    resumed.load_checkpoint(tmp_path / "ckpt", trusted=True)
    resumed.run()
    assert setups == [(20, True)]  # a resumed run starts (setup hooks) at its first training step
    assert (counter.count, counter.history.tolist(), frames.frames, fired) == (
        expected[0],
        expected[1],
        expected[2],
        [t for t in expected[3] if t > 2],
    )
