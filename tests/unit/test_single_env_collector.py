"""The Collector's direct stepping (``direct_step``; one env: the scalar fast path, several: the sub-envs
stepped without ``SyncVectorEnv.step``): the same buffers, stats, random numbers, listener calls, errors
and checkpoints as the vector path (``direct_step=False``) with the same seeds."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    DeterministicActorPolicy,
    EpsilonSchedule,
    QValuePolicy,
    TanhGaussianPolicy,
    mlp,
    obs_encoder,
)
from tshtrain.data import (
    Collector,
    CollectStats,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    VectorReplayBuffer,
)
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import EnvStepError, EpisodeLimitError

# ---------------------------------------------------------------------------- envs and policies


class DictEnv(gym.Env[dict[str, np.ndarray], np.int64]):
    """Dict observations (a float vector and an int counter); terminates when the position leaves
    [-3, 3], reports ``info["metrics"]`` (a float and an int) and ``info["score"]`` at every step."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {
                "pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                "count": gym.spaces.Box(0, 10_000, (1,), np.int64),
            }
        )
        self.action_space = gym.spaces.Discrete(3)
        self.pos = np.zeros(2, np.float32)
        self.count = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.count = 0
        return self._obs(), {"score": 0.5}

    def _obs(self) -> dict[str, np.ndarray]:
        return {"pos": self.pos.copy(), "count": np.array([self.count], np.int64)}

    def step(self, action: np.int64) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self.pos = (
            self.pos + np.float32(int(action) - 1) * 0.7 + self.np_random.normal(0, 0.3, 2).astype(np.float32)
        )
        self.count += 1
        info = {"metrics": {"dist": float(np.abs(self.pos).sum()), "count": self.count}, "score": 1.5}
        return self._obs(), float(-np.abs(self.pos).sum()), bool(np.abs(self.pos).max() > 3.0), False, info


def cartpole(max_steps: int | None = None, num_envs: int = 1) -> gym.vector.VectorEnv[Any, Any, Any]:
    kwargs = {"max_episode_steps": max_steps} if max_steps else {}
    return make_vector_env("CartPole-v1", num_envs, env_kwargs=kwargs)


def q_policy(seed: int = 0) -> QValuePolicy:
    torch.manual_seed(seed)
    space = gym.spaces.Discrete(2)
    return QValuePolicy(
        mlp(4, 2, (16,), nn.ReLU),
        space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.1, num_env_steps=300),
        seed=seed,
    )


def dict_policy(seed: int = 0) -> QValuePolicy:
    torch.manual_seed(seed)
    space = DictEnv().observation_space
    net = nn.Sequential(obs_encoder(space), nn.LazyLinear(3))
    return QValuePolicy(
        net, gym.spaces.Discrete(3), eps_schedule=EpsilonSchedule(start=0.5, end=0.2), seed=seed
    )


def pendulum() -> gym.vector.VectorEnv[Any, Any, Any]:
    return make_vector_env("Pendulum-v1", 1, env_kwargs={"max_episode_steps": 50})


def sac_policy(seed: int = 0) -> TanhGaussianPolicy:
    torch.manual_seed(seed)
    return TanhGaussianPolicy(
        mlp(3, 2, (16,), nn.ReLU), gym.spaces.Box(-2.0, 2.0, (1,), np.float32), seed=seed
    )


def ddpg_policy(seed: int = 0) -> DeterministicActorPolicy:
    torch.manual_seed(seed)
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    return DeterministicActorPolicy(mlp(3, 1, (16,), nn.ReLU), space, noise_std=0.3, seed=seed)


class RecordingListener:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def on_vector_step(self, done_env_ids: np.ndarray) -> None:
        self.calls.append(("step", done_env_ids.tolist()))

    def on_env_reset(self, env_ids: np.ndarray) -> None:
        self.calls.append(("reset", env_ids.tolist()))


Build = Callable[[bool], Collector]


def pair(build: Build) -> tuple[Collector, Collector]:
    """(fast, vector) collectors built the same way."""
    fast, vector = build(True), build(False)
    assert fast.uses_direct_step and not vector.uses_direct_step
    return fast, vector


def assert_same_buffers(a: BaseReplayBuffer | None, b: BaseReplayBuffer | None) -> None:
    assert a is not None and b is not None
    assert a.layout() == b.layout()
    fields_a, fields_b = a.field_arrays(), b.field_arrays()
    assert sorted(fields_a) == sorted(fields_b)
    for name in fields_a:
        assert fields_a[name].dtype == fields_b[name].dtype, name
        np.testing.assert_array_equal(fields_a[name], fields_b[name], err_msg=name)  # row by row: all rows


def assert_same_stats(a: CollectStats, b: CollectStats) -> None:
    assert a.n_collected_steps == b.n_collected_steps
    assert a.n_collected_episodes == b.n_collected_episodes
    assert a.returns.dtype == b.returns.dtype and a.lens.dtype == b.lens.dtype
    np.testing.assert_array_equal(a.returns, b.returns)
    np.testing.assert_array_equal(a.lens, b.lens)
    assert a.env_info == b.env_info and a.env_info_counts == b.env_info_counts


def assert_same_state(a: Collector, b: Collector) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for key in sa:
        if isinstance(sa[key], torch.Tensor):
            assert torch.equal(sa[key], sb[key]), key
        elif isinstance(sa[key], dict) and key == "obs":
            assert all(torch.equal(sa[key][k], sb[key][k]) for k in sa[key])
        else:
            assert sa[key] == sb[key], key


def run_both(build: Build, calls: list[dict[str, Any]]) -> tuple[Collector, Collector]:
    fast, vector = pair(build)
    for kwargs in calls:
        assert_same_stats(fast.collect(**kwargs), vector.collect(**kwargs))
        assert_same_state(fast, vector)
    assert_same_buffers(fast.buffer, vector.buffer)
    return fast, vector


# ---------------------------------------------------------------------------- equality with the vector path


def test_dqn_cartpole_n_step_random_then_epsilon_greedy() -> None:
    def build(direct: bool) -> Collector:
        buffer = VectorReplayBuffer(500, 1, seed=0)
        return Collector(q_policy(), cartpole(), buffer, exploration_noise=True, seed=3, direct_step=direct)

    calls = [{"n_step": 100, "random": True}, *[{"n_step": 64}] * 8, {"n_step": 5, "deterministic": True}]
    fast, vector = run_both(build, calls)
    assert len(fast.buffer or []) == 500  # 617 steps: wrapped around the circular buffer
    # the 8 * 64 epsilon-greedy steps are counted; the deterministic (test-like) call uses
    # eps_inference and leaves the training schedule alone
    assert int(fast.policy.explored_env_steps) == int(vector.policy.explored_env_steps) == 512  # type: ignore[attr-defined]


def test_truncation_and_termination_and_n_episode_mode() -> None:
    def build(direct: bool) -> Collector:
        policy = q_policy(1)
        return Collector(
            policy,
            cartpole(max_steps=12),
            ReplayBuffer(500),
            exploration_noise=True,
            seed=5,
            direct_step=direct,
        )

    calls = [
        {"n_step": 30},
        {"n_episode": 4},
        {"n_step": 7},
        {"n_episode": 3, "random": True},
        {"n_step": 50},
    ]
    fast, _ = run_both(build, calls)
    truncated = fast.buffer.field_arrays()["truncated"]  # type: ignore[union-attr]
    terminated = fast.buffer.field_arrays()["terminated"]  # type: ignore[union-attr]
    assert truncated.any() and terminated.any()  # both kinds of episode end were compared


def test_dict_observations_and_env_info() -> None:
    def build(direct: bool) -> Collector:
        env = make_vector_env(lambda: gym.wrappers.TimeLimit(DictEnv(), 9), 1)
        buffer = VectorReplayBuffer(400, 1, seed=0)
        return Collector(
            dict_policy(), env, buffer, exploration_noise=True, seed=2, info_key="metrics", direct_step=direct
        )

    fast, _ = run_both(build, [{"n_step": 80}, {"n_episode": 5}, {"n_step": 33, "random": True}])
    assert fast.collect(n_step=40).env_info.keys() == {"dist", "count"}
    fields = fast.buffer.field_arrays()  # type: ignore[union-attr]
    assert fields["obs/count"].dtype == np.int64 and fields["truncated"].any() and fields["terminated"].any()


def test_info_key_of_plain_values() -> None:
    def build(direct: bool) -> Collector:
        env = make_vector_env(lambda: gym.wrappers.TimeLimit(DictEnv(), 9), 1)
        return Collector(
            dict_policy(), env, None, exploration_noise=True, seed=2, info_key="score", direct_step=direct
        )

    fast, vector = pair(build)
    for _ in range(3):
        a, b = fast.collect(n_step=25), vector.collect(n_step=25)
        assert_same_stats(a, b)
        assert a.env_info["score"] > 0


@pytest.mark.parametrize("make_policy", [sac_policy, ddpg_policy], ids=["sac", "gaussian_noise"])
def test_box_actions_with_noise_on_pendulum(make_policy: Callable[[int], Any]) -> None:
    def build(direct: bool) -> Collector:
        buffer = VectorReplayBuffer(300, 1, seed=0)
        return Collector(
            make_policy(0), pendulum(), buffer, exploration_noise=True, seed=7, direct_step=direct
        )

    run_both(
        build,
        [{"n_step": 60, "random": True}, *[{"n_step": 40}] * 3, {"n_episode": 2, "deterministic": True}],
    )


def test_test_collector_without_buffer() -> None:
    def build(direct: bool) -> Collector:
        return Collector(q_policy(), cartpole(), None, seed=11, direct_step=direct)

    run_both_no_buffer = pair(build)
    for _ in range(2):
        assert_same_stats(*(c.collect(n_episode=3, deterministic=True) for c in run_both_no_buffer))


def test_listener_calls_are_the_same() -> None:
    def build(direct: bool) -> Collector:
        return Collector(
            q_policy(),
            cartpole(max_steps=10),
            ReplayBuffer(200),
            exploration_noise=True,
            seed=0,
            direct_step=direct,
        )

    fast, vector = pair(build)
    listeners = RecordingListener(), RecordingListener()
    fast.listener, vector.listener = listeners
    for collector in (fast, vector):
        collector.collect(n_step=25)
        collector.collect(n_episode=2)
        collector.collect(n_step=3, reset_before_collect=True)
    assert listeners[0].calls == listeners[1].calls
    assert ("step", [0]) in listeners[0].calls and ("reset", [0]) in listeners[0].calls
    assert_same_buffers(fast.buffer, vector.buffer)


def test_prioritized_buffer_goes_through_its_own_add() -> None:
    def build(direct: bool) -> Collector:
        buffer = PrioritizedReplayBuffer(200, alpha=0.6, beta=0.4, seed=0)
        return Collector(q_policy(), cartpole(), buffer, exploration_noise=True, seed=0, direct_step=direct)

    fast, vector = run_both(build, [{"n_step": 50}, {"n_step": 20}])
    np.testing.assert_array_equal(fast.buffer.priorities(), vector.buffer.priorities())  # type: ignore[union-attr]


def test_buffer_with_more_columns_than_envs() -> None:
    def build(direct: bool) -> Collector:
        return Collector(
            q_policy(),
            cartpole(),
            VectorReplayBuffer(400, 4),
            exploration_noise=True,
            seed=0,
            direct_step=direct,
        )

    run_both(build, [{"n_step": 30}, {"n_episode": 2}])


# ---------------------------------------------------------------------------- errors


class NanAfter(gym.Wrapper[np.ndarray, np.int64, np.ndarray, np.int64]):
    """Returns a NaN observation (or reward) at its ``at``-th step."""

    def __init__(self, env: gym.Env[np.ndarray, np.int64], at: int, field: str):
        super().__init__(env)
        self.at, self.field, self.steps = at, field, 0

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, rew, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.field == "obs":
                obs = obs.copy()
                obs[1] = np.nan
            else:
                rew = float("inf")
        return obs, float(rew), terminated, truncated, info


@pytest.mark.parametrize("field", ["obs", "rew"])
def test_check_finite_raises_the_same_error(field: str) -> None:
    messages = []
    for direct in (True, False):
        env = make_vector_env(lambda: NanAfter(gym.make("CartPole-v1"), 37, field), 1)
        collector = Collector(
            q_policy(), env, ReplayBuffer(100), seed=0, check_finite=True, direct_step=direct
        )
        collector.collect(n_step=20)
        with pytest.raises(EnvStepError) as info:
            collector.collect(n_step=30)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "after collector env step 36" in messages[0]


class Exploding(gym.Wrapper[np.ndarray, np.int64, np.ndarray, np.int64]):
    def __init__(self, env: gym.Env[np.ndarray, np.int64]):
        super().__init__(env)
        self.steps = 0

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        if self.steps == 5:
            raise RuntimeError("boom")
        return self.env.step(action)  # type: ignore[return-value]


def test_env_error_names_the_sub_env() -> None:
    notes = []
    for direct in (True, False):
        env = make_vector_env(lambda: Exploding(gym.make("CartPole-v1")), 1)
        collector = Collector(q_policy(), env, None, seed=0, direct_step=direct)
        with pytest.raises(RuntimeError, match="boom") as info:
            collector.collect(n_step=10)
        notes.append(info.value.__notes__)
    assert notes[0] == notes[1] and "sub-env 0" in notes[0][0]


class Endless(gym.Env[np.ndarray, np.int64]):
    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros(1, np.float32), 1.0, False, False, {}


def test_episode_limit_error_is_the_same() -> None:
    messages = []
    for direct in (True, False):
        policy = QValuePolicy(mlp(1, 2, (4,), nn.ReLU), gym.spaces.Discrete(2), seed=0)
        collector = Collector(
            policy, make_vector_env(Endless, 1), ReplayBuffer(100), seed=0, direct_step=direct
        )
        with pytest.raises(EpisodeLimitError) as info:
            collector.collect(n_episode=1, max_env_steps=40)
        messages.append(str(info.value))
        assert collector.state_dict()["ep_len"].tolist() == [40]
    assert messages[0] == messages[1]


# ---------------------------------------------------------------------------- checkpoints and eligibility


def test_checkpoint_round_trip_continues_as_if_never_stopped() -> None:
    def build(direct: bool) -> Collector:
        buffer = VectorReplayBuffer(300, 1, seed=0)
        return Collector(
            q_policy(), cartpole(max_steps=15), buffer, exploration_noise=True, seed=4, direct_step=direct
        )

    straight = build(True)
    straight.collect(n_step=37)
    second = straight.collect(n_step=37)

    first = build(True)
    first.collect(n_step=37)
    state, snapshot = pickle.loads(pickle.dumps(first.state_dict())), first.env_snapshot()
    policy_state = first.policy.state_dict()  # type: ignore[attr-defined]
    assert first.buffer is not None
    for direct in (True, False):  # a fast-path checkpoint resumes on either path
        resumed = build(direct)
        resumed.policy.load_state_dict(policy_state)  # type: ignore[attr-defined]
        assert resumed.buffer is not None
        resumed.buffer.restore(
            {k: v.copy() for k, v in first.buffer.field_arrays().items()}, first.buffer.layout()
        )
        resumed.load_state_dict(state)
        assert resumed.restore_env_snapshot(snapshot)
        assert_same_stats(resumed.collect(n_step=37), second)
        assert_same_buffers(resumed.buffer, straight.buffer)
        assert_same_state(resumed, straight)


def test_which_envs_take_the_fast_path() -> None:
    policy = q_policy()
    assert Collector(policy, cartpole()).uses_direct_step
    assert not Collector(policy, cartpole(), direct_step=False).uses_direct_step
    assert Collector(policy, cartpole(num_envs=2)).uses_direct_step
    assert Collector(policy, cartpole(), info_key="x").uses_direct_step  # one env: info is summed directly
    assert not Collector(policy, cartpole(num_envs=2), info_key="x").uses_direct_step  # needs the vector info
    async_env = make_vector_env("CartPole-v1", 1, mode="async")
    try:
        assert not Collector(policy, async_env).uses_direct_step
    finally:
        async_env.close()
    wrapped = gym.wrappers.vector.RecordEpisodeStatistics(cartpole())
    assert not Collector(policy, wrapped).uses_direct_step


# ---------------------------------------------------------------------------- several envs


@pytest.mark.parametrize("num_envs", [2, 3, 8])
def test_several_envs_n_step_and_n_episode(num_envs: int) -> None:
    def build(direct: bool) -> Collector:
        buffer = VectorReplayBuffer(150 * num_envs, num_envs, seed=0)
        env = cartpole(max_steps=20, num_envs=num_envs)
        return Collector(q_policy(2), env, buffer, exploration_noise=True, seed=9, direct_step=direct)

    calls = [
        {"n_step": 40, "random": True},
        {"n_step": 64},
        {"n_episode": 5},  # fewer episodes than envs for 8: only some envs store
        {"n_step": 33},
        {"n_episode": 2, "deterministic": True},
    ]
    fast, _ = run_both(build, calls)
    fields = fast.buffer.field_arrays()  # type: ignore[union-attr]
    assert fields["truncated"].any() and fields["terminated"].any()


def test_several_envs_dict_observations_and_listener() -> None:
    def build(direct: bool) -> Collector:
        env = make_vector_env(lambda: gym.wrappers.TimeLimit(DictEnv(), 7), 3)
        buffer = VectorReplayBuffer(300, 3, seed=0)
        return Collector(dict_policy(), env, buffer, exploration_noise=True, seed=1, direct_step=direct)

    fast, vector = pair(build)
    listeners = RecordingListener(), RecordingListener()
    fast.listener, vector.listener = listeners
    for kwargs in ({"n_step": 45}, {"n_episode": 4}, {"n_step": 12, "random": True}):
        assert_same_stats(fast.collect(**kwargs), vector.collect(**kwargs))
        assert_same_state(fast, vector)
    assert_same_buffers(fast.buffer, vector.buffer)
    assert listeners[0].calls == listeners[1].calls


def test_several_envs_error_names_the_sub_env() -> None:
    built = iter(range(100))

    def make() -> gym.Env[Any, Any]:
        env = gym.make("CartPole-v1")
        return Exploding(env) if next(built) % 3 == 2 else env

    collector = Collector(q_policy(), make_vector_env(make, 3), None, seed=0)
    assert collector.uses_direct_step
    with pytest.raises(RuntimeError, match="boom") as info:
        collector.collect(n_step=30)
    assert info.value.__notes__[0].startswith("raised by the step of sub-env 2 of the vector env")


def test_is_finite_step_passes_exactly_the_finite_steps() -> None:
    """The cheap test of the one-env hot path (one sum over reward and observation) is True only when
    every number is finite; overflow to inf makes it False, and the caller's exact check then passes."""
    import math

    from tshtrain.data.direct_step import is_finite_step

    finite = np.array([[0.5, -2.0, 3.0, 1e3]], dtype=np.float32)
    assert is_finite_step(finite, 1.0)
    for bad in (np.nan, np.inf, -np.inf):
        obs = finite.copy()
        obs[0, 2] = bad
        assert not is_finite_step(obs, 1.0)
        assert not is_finite_step(finite, float(bad))
    assert not is_finite_step(np.array([[-np.inf, 0.0]], np.float32), math.inf)  # inf + -inf
    huge = np.array([[1e308, 1e308]], dtype=np.float64)  # finite numbers whose sum overflows
    assert np.isfinite(huge).all()
    assert not is_finite_step(huge, 0.0)  # the cheap test says no; the collector's exact check then passes
    assert is_finite_step(np.array([[1, 2]], dtype=np.int64), 0.5)  # integer observations: only the reward
    assert is_finite_step({"a": finite, "b": np.array([[1]], np.int8)}, 0.0)
    assert not is_finite_step({"a": finite, "b": np.array([[np.nan]], np.float32)}, 0.0)
