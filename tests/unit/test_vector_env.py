"""Building, seeding and validating vector envs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.data.batch import ObsArray
from tshtrain.env import VectorMode, autoreset_mode, make_vector_env, require_same_step_autoreset
from tshtrain.errors import ConfigurationError


class ZeroPolicy:
    """Always action 0 (a CollectorPolicy)."""

    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        assert isinstance(obs, np.ndarray)
        return np.zeros(len(obs), dtype=np.int64)

    def map_action(self, act: np.ndarray) -> np.ndarray:
        return act

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        return act

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return act


def cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1")


def first_obs_of_plain_envs(seed: int, num_envs: int) -> np.ndarray:
    return np.stack([gym.make("CartPole-v1").reset(seed=seed + i)[0] for i in range(num_envs)])


# ---------------------------------------------------------------------------- building


@pytest.mark.parametrize("env", ["CartPole-v1", cartpole], ids=["id", "factory"])
def test_sync_vector_env_from_id_and_factory(env: Any) -> None:
    venv = make_vector_env(env, 3)
    try:
        assert isinstance(venv, gym.vector.SyncVectorEnv)
        assert venv.num_envs == 3
        assert autoreset_mode(venv) is AutoresetMode.SAME_STEP
        obs, _ = venv.reset(seed=10)
        np.testing.assert_array_equal(obs, first_obs_of_plain_envs(10, 3))
    finally:
        venv.close()


@pytest.mark.parametrize("mode", [VectorMode.ASYNC, "async"])
def test_async_vector_env(mode: VectorMode | str) -> None:
    venv = make_vector_env(cartpole, 2, mode=mode)
    try:
        assert isinstance(venv, gym.vector.AsyncVectorEnv)
        assert autoreset_mode(venv) is AutoresetMode.SAME_STEP
        obs, _ = venv.reset(seed=5)
        np.testing.assert_array_equal(obs, first_obs_of_plain_envs(5, 2))
    finally:
        venv.close()


def test_mode_given_as_string_value() -> None:
    venv = make_vector_env("CartPole-v1", 1, mode="sync")
    assert isinstance(venv, gym.vector.SyncVectorEnv)
    venv.close()


def test_env_kwargs_are_passed_to_make() -> None:
    venv = make_vector_env("CartPole-v1", 1, env_kwargs={"max_episode_steps": 3})
    venv.reset(seed=0)
    for _ in range(2):
        _, _, terminated, truncated, _ = venv.step(np.array([0]))
        assert not (terminated[0] or truncated[0])
    _, _, terminated, truncated, info = venv.step(np.array([0]))
    assert truncated[0] and not terminated[0]
    assert "final_obs" in info
    venv.close()


def test_env_kwargs_with_factory_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="env_kwargs can only be used with a Gymnasium id"):
        make_vector_env(cartpole, 1, env_kwargs={"max_episode_steps": 3})


def test_wrappers_are_applied_in_order() -> None:
    applied: list[str] = []

    def first(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        applied.append("first")
        return gym.wrappers.TimeLimit(env, max_episode_steps=2)

    def second(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        applied.append("second")
        assert isinstance(env, gym.wrappers.TimeLimit)
        return env

    venv = make_vector_env("CartPole-v1", 2, wrappers=[first, second])
    assert applied == ["first", "second"] * 2
    venv.reset(seed=0)
    venv.step(np.array([0, 0]))
    _, _, _, truncated, _ = venv.step(np.array([0, 0]))
    assert truncated.tolist() == [True, True]
    venv.close()


# ---------------------------------------------------------------------------- seeding


def test_same_seed_same_first_obs_and_sub_env_i_gets_seed_plus_i() -> None:
    a, b = make_vector_env("CartPole-v1", 4), make_vector_env("CartPole-v1", 4)
    obs_a, _ = a.reset(seed=42)
    obs_b, _ = b.reset(seed=42)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(obs_a, first_obs_of_plain_envs(42, 4))
    obs_c, _ = a.reset(seed=43)
    assert not np.array_equal(obs_a, obs_c)
    # sub-env 1 with seed 42 is sub-env 0 with seed 43
    np.testing.assert_array_equal(obs_a[1], obs_c[0])
    a.close()
    b.close()


def test_same_seed_same_trajectory() -> None:
    def run() -> np.ndarray:
        venv = make_vector_env("CartPole-v1", 2)
        obs, _ = venv.reset(seed=3)
        seen = [obs]
        for t in range(30):
            obs, *_ = venv.step(np.array([t % 2, (t // 3) % 2]))
            seen.append(obs)
        venv.close()
        return np.stack(seen)

    np.testing.assert_array_equal(run(), run())


# ---------------------------------------------------------------------------- errors


def test_unknown_id_lists_the_registered_versions() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"unknown Gymnasium id 'CartPole-v9': .*It provides versioned environments: \[ `v0`, `v1` \]",
    ):
        make_vector_env("CartPole-v9", 2)


def test_unknown_id_without_any_version() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"unknown Gymnasium id 'NoSuchEnvAtAll-v0': Environment `NoSuchEnvAtAll` doesn't exist\.$",
    ):
        make_vector_env("NoSuchEnvAtAll-v0", 2)


def test_bad_mode() -> None:
    with pytest.raises(ConfigurationError, match=r"mode 'threads' is not one of 'sync', 'async'"):
        make_vector_env("CartPole-v1", 2, mode="threads")


@pytest.mark.parametrize("num_envs", [0, -1])
def test_non_positive_num_envs(num_envs: int) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"make_vector_env\.num_envs must be a positive number, got {num_envs}"
    ):
        make_vector_env("CartPole-v1", num_envs)


def test_next_step_autoreset_env_is_rejected_by_collector() -> None:
    venv = gym.vector.SyncVectorEnv([cartpole, cartpole])  # Gymnasium's default: NEXT_STEP
    assert autoreset_mode(venv) is AutoresetMode.NEXT_STEP
    with pytest.raises(
        ConfigurationError, match=r"mode AutoresetMode\.NEXT_STEP.*needs AutoresetMode\.SAME_STEP"
    ):
        Collector(ZeroPolicy(), venv, VectorReplayBuffer(20, 2))
    with pytest.raises(ConfigurationError, match="SAME_STEP"):
        require_same_step_autoreset(venv)
    venv.close()


def test_hand_built_same_step_env_is_accepted() -> None:
    venv = gym.vector.SyncVectorEnv([cartpole, cartpole], autoreset_mode=AutoresetMode.SAME_STEP)
    collector = Collector(ZeroPolicy(), venv, VectorReplayBuffer(20, 2), seed=0)
    stats = collector.collect(n_step=4)
    assert stats.n_collected_steps == 4
    venv.close()


def test_module_prefixed_id_is_left_to_gymnasium() -> None:
    venv = make_vector_env("gymnasium.envs.classic_control:CartPole-v1", 1)
    obs, _ = venv.reset(seed=1)
    np.testing.assert_array_equal(obs, first_obs_of_plain_envs(1, 1))
    venv.close()


def test_async_env_with_collector_stores_final_observations() -> None:
    def make_env() -> gym.Env[Any, Any]:
        return gym.make("CartPole-v1", max_episode_steps=3)

    venv = make_vector_env(make_env, 2, mode=VectorMode.ASYNC)
    try:
        buf = VectorReplayBuffer(8, 2)
        Collector(ZeroPolicy(), venv, buf, seed=7).collect(n_step=8)
        roll = buf.rollout()
        assert isinstance(roll.obs_next, np.ndarray)
        for col in range(2):
            plain = make_env()
            obs, _ = plain.reset(seed=7 + col)
            for t in range(4):
                obs, _, terminated, truncated, _ = plain.step(0)
                np.testing.assert_array_equal(roll.obs_next[t, col], obs)
                assert roll.truncated[t, col] == truncated and roll.terminated[t, col] == terminated
                if terminated or truncated:
                    obs, _ = plain.reset()
        assert roll.truncated[2].all()
    finally:
        venv.close()
