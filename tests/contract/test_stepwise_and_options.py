"""Driving a run one env step at a time gives the same run as ``run()``; the run options (evaluation
mode, rendering, closing envs); the collector's listener."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from typing_extensions import override

from tshtrain.adapters.skrl import EnvStepDriver
from tests.adapter_helpers import events_of, hooks_of
from tests.contract._hook_setups import off_policy_trainer, reinforce_trainer
from tshtrain.adapters import EventContext, EventUnit, Every, HookContext, HookStage, OnEpisodeEnd
from tshtrain.callbacks import CountFramesLog
from tshtrain.data import Collector
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.logger import MemoryLogger
from tshtrain.trainer import TrainerOptions


def _instrument(trainer: Any) -> list[tuple[Any, ...]]:
    """Record every hook call and event with the counters it saw."""
    seen: list[tuple[Any, ...]] = []
    for stage in HookStage:

        def hook(ctx: HookContext[Any], stage: HookStage = stage) -> None:
            seen.append((stage.value, dataclasses.astuple(ctx.counters)))

        hooks_of(trainer).register(stage, hook, name="recorder")
    trainer.add_callback(CountFramesLog())

    def event(ctx: EventContext) -> None:
        ids = None if ctx.env_ids is None else ctx.env_ids.tolist()
        seen.append((ctx.name, dataclasses.astuple(ctx.counters), ids))

    events_of(trainer).register("every", event, trigger=Every(30, unit=EventUnit.ENV_STEP))
    events_of(trainer).register("episode", event, trigger=OnEpisodeEnd())
    return seen


def _untimed(logger: MemoryLogger) -> dict[str, list[tuple[int, dict[str, float]]]]:
    return {
        str(scope): [
            (s, {k: v for k, v in d.items() if "time" not in k and "speed" not in k}) for s, d in records
        ]
        for scope, records in logger.records.items()
    }


def _outcome(trainer: Any, logger: MemoryLogger, seen: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    info = trainer.info_stats()
    info_key = {f.name: getattr(info, f.name) for f in dataclasses.fields(info) if f.name != "timing"}
    weights = [p.detach().clone() for p in trainer.algorithm.policy.parameters()] + [
        p.detach().clone() for p in getattr(trainer.algorithm, "net", torch.nn.Linear(1, 1)).parameters()
    ]
    return info_key, _untimed(logger), seen, weights


@pytest.mark.parametrize("builder", [reinforce_trainer, off_policy_trainer], ids=["on_policy", "off_policy"])
def test_an_env_step_driven_run_equals_run(builder: Any) -> None:
    logger = MemoryLogger()
    trainer = builder(logger=logger)
    seen = _instrument(trainer)
    trainer.run()
    expected = _outcome(trainer, logger, seen)

    logger = MemoryLogger()
    trainer = builder(logger=logger)
    seen = _instrument(trainer)
    trainer.reset()
    completed = 0
    driver = EnvStepDriver(trainer)
    while not trainer.done:
        result = driver.step()
        assert result.collect_stat.n_collected_steps == 2  # one vector step of the 2 envs
        completed += result.training_step is not None
    trainer.close()
    got = _outcome(trainer, logger, seen)
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    assert got[2] == expected[2]
    assert all(torch.equal(a, b) for a, b in zip(got[3], expected[3], strict=True))
    assert completed == expected[0]["update_step"]


def test_env_steps_and_training_steps_can_be_mixed() -> None:
    trainer = off_policy_trainer()
    trainer.reset()
    first = trainer.execute_training_step()
    driver = EnvStepDriver(trainer)
    results = [driver.step() for _ in range(5)]  # 10 env steps: one training step
    assert [r.num_vector_steps for r in results] == [1, 2, 3, 4, 5]
    assert [r.training_step is None for r in results] == [True] * 4 + [False]
    assert first.collect_stat is not None and trainer.counters.env_step == 20
    driver.step()
    assert driver.pending == 1 and trainer.training_step_open
    with pytest.raises(RuntimeError, match="a training step is open"):
        trainer.execute_training_step()
    trainer.reset()  # forgets the unfinished training step
    assert driver.pending is None
    trainer.execute_training_step()
    assert driver.step().num_vector_steps == 1  # the driver starts a new training step


def test_env_step_driving_needs_env_step_collection() -> None:
    trainer = off_policy_trainer(collection_step_num_episodes=2, collection_step_num_env_steps=None)
    with pytest.raises(
        ConfigurationError, match=r"EnvStepDriver\(OffPolicyTrainer\) needs env-step collection"
    ):
        EnvStepDriver(trainer)


# ====================================================================== options


@pytest.mark.parametrize(("option", "expected"), [(None, True), (True, True), (False, False)])
def test_test_steps_deterministic_or_stochastic(option: bool | None, expected: bool) -> None:
    trainer = off_policy_trainer(options=TrainerOptions(test_deterministic=option))
    policy = trainer.algorithm.policy
    policy.deterministic_calls.clear()
    trainer.reset()  # only the initial test step acts
    assert policy.deterministic_calls and set(policy.deterministic_calls) == {expected}


class RenderCountingEnv(gym.Env[np.ndarray, np.int64]):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}  # noqa: RUF012
    renders = 0

    def __init__(self) -> None:
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    @override
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(4, dtype=np.float32), {}

    @override
    def step(self, action: np.int64) -> Any:
        self._t += 1
        return np.zeros(4, dtype=np.float32), 1.0, self._t >= 7, False, {}

    @override
    def render(self) -> Any:
        type(self).renders += 1
        return np.zeros((2, 2, 3), dtype=np.uint8)


@pytest.mark.parametrize(("every", "renders"), [(None, 0), (6, 6 * 2)])
def test_render_every_n_env_steps_or_headless(every: int | None, renders: int) -> None:
    RenderCountingEnv.renders = 0
    options = TrainerOptions(render_every_num_env_steps=every)
    trainer = off_policy_trainer(options=options, env_factory=lambda: make_vector_env(RenderCountingEnv, 2))
    test_renders = RenderCountingEnv.renders
    trainer.run()
    # 40 env steps: renders at 6, 12, ..., 36 (each renders both sub-envs); test steps never render
    assert RenderCountingEnv.renders - test_renders == renders


@pytest.mark.parametrize("close_envs", [False, True])
def test_envs_are_closed_at_the_end_only_when_asked(close_envs: bool) -> None:
    trainer = off_policy_trainer(options=TrainerOptions(close_envs=close_envs))
    trainer.run()
    assert trainer.params.training_collector.env.closed is close_envs
    assert trainer.params.test_collector is not None
    assert trainer.params.test_collector.env.closed is close_envs


def test_envs_are_closed_when_the_run_fails() -> None:
    def fail(epoch: int, env_step: int) -> None:
        if env_step >= 20:
            raise KeyError("boom")

    trainer = off_policy_trainer(options=TrainerOptions(close_envs=True), training_fn=fail)
    with pytest.raises(KeyError, match="boom"):
        trainer.run()
    assert trainer.params.training_collector.env.closed


def test_close_ends_a_run_driven_by_hand() -> None:
    logger = MemoryLogger()
    trainer = off_policy_trainer(options=TrainerOptions(close_envs=True), logger=logger)
    shutdowns: list[int] = []
    hooks_of(trainer).register(
        HookStage.SHUTDOWN, lambda ctx: shutdowns.append(ctx.data.train_step), name="s"
    )
    trainer.reset()
    trainer.execute_training_step()
    trainer.close()
    assert shutdowns == [10] and logger.closed and trainer.params.training_collector.env.closed


def _denormals_flushed() -> bool:
    return (torch.tensor([1e-39]) * 1.0).item() == 0.0


@pytest.mark.parametrize("flush", [True, False])
def test_denormals_are_flushed_while_the_trainer_works_only(flush: bool) -> None:
    seen: list[bool] = []
    trainer = off_policy_trainer(
        options=TrainerOptions(flush_denormal=flush),
        training_fn=lambda epoch, env_step: seen.append(_denormals_flushed()),
    )
    hooks_of(trainer).register(HookStage.POST_UPDATE, lambda ctx: seen.append(_denormals_flushed()), name="d")
    torch.set_flush_denormal(False)  # a trainer driven by hand in an earlier test may not have closed
    trainer.run()
    assert seen and set(seen) == {flush}
    assert not _denormals_flushed()  # cleared when the run ends


def test_denormals_are_cleared_when_the_run_fails() -> None:
    def fail(epoch: int, env_step: int) -> None:
        assert _denormals_flushed()
        raise KeyError("boom")

    torch.set_flush_denormal(False)
    with pytest.raises(KeyError, match="boom"):
        off_policy_trainer(training_fn=fail).run()
    assert not _denormals_flushed()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("render_every_num_env_steps", 0, "render_every_num_env_steps must be an int >= 1 or None"),
        ("close_envs", "yes", "close_envs must be a bool"),
        ("test_deterministic", 1, "test_deterministic must be a bool"),
        ("flush_denormal", None, "flush_denormal must be a bool"),
    ],
)
def test_options_are_validated(field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TrainerOptions(**{field: value})


# ====================================================================== collector listener


def test_collector_listener_sees_every_vector_step_and_reset(kit: Any) -> None:
    env = kit.counting_vector_env([2, 3])
    collector = Collector(kit.FixedPolicy(env.single_action_space), env, None, seed=0)
    events: list[tuple[str, list[int]]] = []

    class Listener:
        def on_vector_step(self, done_env_ids: np.ndarray) -> None:
            events.append(("step", done_env_ids.tolist()))

        def on_env_reset(self, env_ids: np.ndarray) -> None:
            events.append(("reset", env_ids.tolist()))

    collector.listener = Listener()
    collector.collect(n_step=8)  # 4 vector steps
    collector.reset_env()
    assert events == [("step", []), ("step", [0]), ("step", [1]), ("step", [0]), ("reset", [0, 1])]
