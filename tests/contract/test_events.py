"""Contract tests of the event managers: every trigger fires where documented, episode-end and reset
events reach the envs (domain randomisation), eval events run in test steps (saving trajectories,
recording videos), manual triggers, stops, state, and the errors at registration."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from typing_extensions import override

from tests.adapter_helpers import eval_events_of, events_of
from tests.extras import need
from tshtrain.adapters import (
    EventContext,
    EventUnit,
    Every,
    Manual,
    OnEpisodeEnd,
    OnReset,
    OnShutdown,
    OnStartup,
    OnTestEnd,
    OnTestStart,
)
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import StopReason, StopTraining


class Recorder:
    """An event callback that records the contexts it was called with."""

    def __init__(self) -> None:
        self.calls: list[EventContext] = []

    def __call__(self, ctx: EventContext) -> None:
        self.calls.append(ctx)


def _counting(kit: Any, lengths: list[int]) -> Any:
    return lambda: kit.counting_vector_env(lengths)


def _set_length(collector: Collector | None, env_ids: Any, length: int) -> None:
    assert collector is not None and isinstance(collector.env, gym.vector.SyncVectorEnv)
    for i in env_ids:
        collector.env.envs[int(i)].unwrapped.length = length  # type: ignore[attr-defined]


# ====================================================================== train triggers


def test_every_registered_train_event_is_really_applied(kit: Any) -> None:
    # 2 epochs of 2 training steps of 10 env steps, 10 gradient steps each (u = 1)
    setup = kit.make_off_policy(env=_counting(kit, [3, 4]), test_env=_counting(kit, [3]))
    trainer = setup.trainer()
    triggers = {
        "every_20_env_steps": Every(20, unit=EventUnit.ENV_STEP),
        "every_3_training_steps": Every(3, unit=EventUnit.TRAINING_STEP),
        "every_15_gradient_steps": Every(15, unit=EventUnit.GRADIENT_STEP),
        "every_epoch": Every(1, unit=EventUnit.EPOCH),
        "every_2_epochs": Every(2, unit="epoch"),  # type: ignore[arg-type]  # values are accepted too
        "episode_end": OnEpisodeEnd(),
        "reset": OnReset(),
        "startup": OnStartup(),
        "shutdown": OnShutdown(),
        "manual": Manual(),
    }
    recorders = {name: Recorder() for name in triggers}
    for name, trigger in triggers.items():
        events_of(trainer).register(name, recorders[name], trigger=trigger)
    trainer.run()
    events_of(trainer).trigger("manual")
    counts = {name: events_of(trainer).fire_count(name) for name in triggers}
    assert all(count > 0 for count in counts.values()), counts
    assert counts["every_20_env_steps"] == 2
    assert [c.counters.env_step for c in recorders["every_20_env_steps"].calls] == [20, 40]
    assert [c.counters.training_step for c in recorders["every_3_training_steps"].calls] == [3]
    assert [c.counters.gradient_step for c in recorders["every_15_gradient_steps"].calls] == [20, 30]
    assert [c.counters.epoch for c in recorders["every_epoch"].calls] == [1, 2]
    assert [c.counters.epoch for c in recorders["every_2_epochs"].calls] == [2]
    assert counts["startup"] == counts["shutdown"] == counts["manual"] == 1
    assert counts["reset"] == 1  # the training collector's reset in trainer.reset()
    # sub-env 0 ends episodes at vector steps 3, 6, 9, ..., sub-env 1 at 4, 8, ...: 40 env steps = 20
    # vector steps hold 6 + 5 episode ends, in 6 + 5 - 1 vector steps (step 12 ends both)
    assert sum(len(c.env_ids) for c in recorders["episode_end"].calls) == 11
    assert counts["episode_end"] == 10


def test_episode_end_events_receive_env_ids_and_can_randomise_the_envs(kit: Any) -> None:
    setup = kit.make_off_policy(env=_counting(kit, [3, 5]), test_env=None, max_epochs=1)
    trainer = setup.trainer()
    ended: list[list[int]] = []

    def shorten(ctx: EventContext) -> None:
        assert ctx.env_ids is not None
        ended.append(ctx.env_ids.tolist())
        _set_length(ctx.collector, ctx.env_ids, 2)

    events_of(trainer).register("shorten", shorten, trigger=OnEpisodeEnd())
    (epoch,) = list(trainer)
    # env 0 ends at vector step 3, then (length 2) at 5, 7, 9; env 1 ends at 5, then at 7, 9
    assert ended == [[0], [0, 1], [0, 1], [0, 1]]
    assert epoch.train_collect_stat is not None
    assert epoch.train_collect_stat.lens.tolist() == [3, 2, 5, 2, 2, 2, 2]


def test_reset_events_fire_before_the_envs_reset(kit: Any) -> None:
    setup = kit.make_on_policy(
        env=_counting(kit, [3, 3]), test_env=None, max_epochs=1, collection_step_num_episodes=2,
        epoch_num_steps=12,
    )  # fmt: skip
    trainer = setup.trainer()
    resets: list[list[int]] = []

    def lengthen(ctx: EventContext) -> None:
        assert ctx.env_ids is not None and ctx.collector is setup.training_collector
        resets.append(ctx.env_ids.tolist())
        _set_length(ctx.collector, ctx.env_ids, 6)

    events_of(trainer).register("lengthen", lengthen, trigger=OnReset())
    trainer.reset()
    result = trainer.execute_training_step()
    assert resets[0] == [0, 1]  # trainer.reset() reset the envs: randomised before the first episodes
    assert result.collect_stat is not None and result.collect_stat.lens.tolist() == [6, 6]


def test_manual_trigger_fires_at_once_and_unknown_names_are_reported(kit: Any) -> None:
    trainer = kit.make_off_policy(test_env=None).trainer()
    recorder = Recorder()
    events_of(trainer).register("snapshot", recorder, trigger=Manual())
    trainer.reset()
    trainer.execute_training_step()
    events_of(trainer).trigger("snapshot")
    assert len(recorder.calls) == 1 and recorder.calls[0].counters.env_step == 10
    with pytest.raises(ConfigurationError, match=r"no event named 'nope'; registered: \['snapshot'\]"):
        events_of(trainer).trigger("nope")


def test_an_event_can_stop_training(kit: Any) -> None:
    trainer = kit.make_off_policy(test_env=None, max_epochs=10).trainer()

    def stop(ctx: EventContext) -> None:
        ctx.request_stop("budget reached")

    def raise_stop(ctx: EventContext) -> None:
        raise StopTraining("never reached")

    events_of(trainer).register("budget", stop, trigger=Every(30))
    events_of(trainer).register("later", raise_stop, trigger=Every(50))
    info = trainer.run()
    assert info.stop_reason == StopReason.HOOK
    assert info.stop_detail == "train event 'budget': budget reached"
    assert info.train_step == 30


def test_event_state_is_saved_and_restored(kit: Any) -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def __call__(self, ctx: EventContext) -> None:
            self.n += 1

        def state_dict(self) -> dict[str, Any]:
            return {"n": self.n}

        def load_state_dict(self, state: Mapping[str, Any]) -> None:
            self.n = int(state["n"])

    trainer = kit.make_off_policy(test_env=None).trainer()
    events_of(trainer).register("count", Counter(), trigger=Every(1, unit=EventUnit.TRAINING_STEP))
    trainer.run()
    state = trainer.callbacks.state_dict()
    assert state["events"] == {"fired": {"count": 4}, "callbacks": {"count": {"n": 4}}}
    fresh = kit.make_off_policy(test_env=None).trainer()
    counter = Counter()
    events_of(fresh).register("count", counter, trigger=Every(1, unit=EventUnit.TRAINING_STEP))
    fresh.callbacks.load_state_dict(state)
    assert counter.n == 4 and events_of(fresh).fire_count("count") == 4


# ====================================================================== eval events


def test_eval_events_run_in_test_steps_and_can_save_trajectories(kit: Any, tmp_path: Path) -> None:
    test_env = kit.counting_vector_env([3])
    policy = kit.FixedPolicy(test_env.single_action_space, fixed_action=1)
    test_collector = Collector(policy, test_env, VectorReplayBuffer(100, 1), seed=5)
    setup = kit.make_off_policy(test_env=None, test_step_num_episodes=2)
    params = type(setup.params)(**{**_fields(setup.params), "test_collector": test_collector})
    trainer = setup.trainer_cls(setup.algorithm, params)
    order: list[str] = []
    saved: list[Path] = []

    def save_trajectories(ctx: EventContext) -> None:
        order.append("end")
        assert ctx.collector is test_collector and test_collector.buffer is not None
        batch = test_collector.buffer.sample_all()
        path = tmp_path / f"test-{ctx.counters.epoch}.npz"
        np.savez(path, obs=np.asarray(batch.obs), act=batch.act, rew=batch.rew, done=batch.done)
        saved.append(path)
        test_collector.buffer.reset()

    eval_events_of(trainer).register("start", lambda ctx: order.append("start"), trigger=OnTestStart())
    eval_events_of(trainer).register("episode", lambda ctx: order.append("episode"), trigger=OnEpisodeEnd())
    eval_events_of(trainer).register("save", save_trajectories, trigger=OnTestEnd())
    trainer.run()
    assert order == ["start", "episode", "episode", "end"] * 3  # initial test step + 2 epochs
    assert [p.name for p in saved] == ["test-0.npz", "test-1.npz", "test-2.npz"]
    data = np.load(saved[-1])
    assert data["rew"].tolist() == [1.0] * 6 and data["done"].sum() == 2  # 2 episodes of 3 steps


@pytest.mark.integration
def test_eval_events_can_record_videos(kit: Any, tmp_path: Path) -> None:
    need("moviepy", "video")

    class FrameEnv(gym.Env[np.ndarray, np.int64]):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 30}  # noqa: RUF012

        def __init__(self) -> None:
            self.render_mode = "rgb_array"
            self.observation_space = gym.spaces.Box(0.0, 10.0, shape=(1,), dtype=np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self._t = 0

        @override
        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            super().reset(seed=seed)
            self._t = 0
            return np.zeros(1, dtype=np.float32), {}

        @override
        def step(self, action: np.int64) -> Any:
            self._t += 1
            return np.array([self._t], dtype=np.float32), 1.0, self._t >= 5, False, {}

        @override
        def render(self) -> Any:
            return np.full((16, 16, 3), 20 * self._t, dtype=np.uint8)

    class Toggle:
        on = False

    toggle = Toggle()

    def factory() -> gym.Env[Any, Any]:
        return gym.wrappers.RecordVideo(FrameEnv(), str(tmp_path), episode_trigger=lambda _: toggle.on)

    test_env = make_vector_env(factory, 1)
    test_collector = Collector(kit.FixedPolicy(test_env.single_action_space), test_env, seed=3)
    setup = kit.make_off_policy(test_env=None, max_epochs=1)
    params = type(setup.params)(**{**_fields(setup.params), "test_collector": test_collector})
    trainer = setup.trainer_cls(setup.algorithm, params)

    def start(ctx: EventContext) -> None:
        toggle.on = ctx.counters.epoch > 0  # record the test steps after training only

    def end(ctx: EventContext) -> None:
        toggle.on = False

    eval_events_of(trainer).register("video_on", start, trigger=OnTestStart())
    eval_events_of(trainer).register("video_off", end, trigger=OnTestEnd())
    trainer.run()
    test_env.close()
    assert len(list(tmp_path.glob("*.mp4"))) >= 1


# ====================================================================== bad input


@pytest.mark.parametrize("n", [0, -3, True, 2.5, "10"])
def test_every_rejects_intervals_that_are_not_positive_ints(n: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"Every.n must be an int >= 1"):
        Every(n)


def test_every_rejects_unknown_units() -> None:
    with pytest.raises(ConfigurationError, match=r"Every\.unit must be one of 'env_step', 'training_step'"):
        Every(5, unit="fortnight")  # type: ignore[arg-type]


def test_managers_reject_duplicates_foreign_triggers_and_wrong_callbacks(kit: Any) -> None:
    trainer = kit.make_off_policy().trainer()
    events_of(trainer).register("a", Recorder(), trigger=Manual())
    with pytest.raises(ConfigurationError, match="train event 'a' is already registered"):
        events_of(trainer).register("a", Recorder(), trigger=Manual())
    with pytest.raises(ConfigurationError, match="the train manager does not fire OnTestStart"):
        events_of(trainer).register("b", Recorder(), trigger=OnTestStart())
    with pytest.raises(ConfigurationError, match="the eval manager does not fire Every"):
        eval_events_of(trainer).register("c", Recorder(), trigger=Every(10))

    def two(ctx: EventContext, extra: int) -> None: ...

    with pytest.raises(TypeError, match="must take exactly one positional argument, the EventContext"):
        events_of(trainer).register("d", two, trigger=Manual())  # type: ignore[arg-type]


def _fields(params: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
