"""Collector(check_finite=True) stops at the first NaN / inf from an env, naming the sub-env, the
collector's env step and the field, before the value reaches the buffer; an exception from a sub-env's
step names the sub-env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import EnvStepError

NUM_ENVS = 4


class _Zeros:
    """A policy that always pushes left (CartPole)."""

    def compute_actions(self, obs: Any, *, deterministic: bool) -> np.ndarray:
        return np.zeros(NUM_ENVS, dtype=np.int64)

    def map_action(self, act: np.ndarray) -> np.ndarray:
        return act

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        return act

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return act


class _Poison(gym.Wrapper[Any, Any, Any, Any]):
    """Returns ``value`` in ``field`` on its ``at``-th step (counted over episodes), or raises there."""

    def __init__(self, env: gym.Env[Any, Any], field: str, value: float, at: int):
        super().__init__(env)
        self.field, self.value, self.at, self.num_steps = field, value, at, 0

    def step(self, action: Any) -> Any:
        obs, rew, terminated, truncated, info = self.env.step(action)
        self.num_steps += 1
        if self.num_steps == self.at:
            if self.field == "raise":
                raise ValueError("the simulator diverged")
            if self.field == "obs":
                obs = obs.copy()
                obs[2] = self.value
            else:
                rew = self.value
        return obs, rew, terminated, truncated, info


def _collector(bad_env: int, field: str, value: float, at: int, check: bool = True) -> Collector:
    made = iter(range(NUM_ENVS))

    def factory() -> gym.Env[Any, Any]:
        index = next(made)
        return _Poison(gym.make("CartPole-v1"), field, value, at if index == bad_env else -1)

    envs = make_vector_env(factory, NUM_ENVS)
    return Collector(_Zeros(), envs, VectorReplayBuffer(400, NUM_ENVS), seed=0, check_finite=check)


@pytest.mark.parametrize("field", ["obs", "rew"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("bad_env", [0, 2])
def test_the_first_non_finite_value_names_env_step_and_field(field: str, value: float, bad_env: int) -> None:
    collector = _collector(bad_env, field, value, at=7)
    collector.collect(n_step=2 * NUM_ENVS)  # 2 vector steps, stored
    with pytest.raises(EnvStepError) as raised:
        collector.collect(n_step=40 * NUM_ENVS)  # the 7th step of the sub-env is this call's 5th vector step
    error = raised.value
    kind = "NaN" if np.isnan(value) else "inf"
    assert (error.env_index, error.env_step, error.field) == (bad_env, 2 * NUM_ENVS + 4 * NUM_ENVS, field)
    assert str(error).startswith(
        f"Collector(check_finite=True): sub-env {bad_env} returned {kind} in {field} in the vector step "
        f"after collector env step 24 (value "
    )
    assert collector.buffer is not None and len(collector.buffer) == 6 * NUM_ENVS  # the bad step not stored
    assert all(np.isfinite(a).all() for a in collector.buffer.field_arrays().values() if a.dtype.kind == "f")


def test_a_nan_in_a_dict_observation_names_the_key() -> None:
    class DictObs(gym.ObservationWrapper[Any, Any, Any]):
        def __init__(self, env: gym.Env[Any, Any]):
            super().__init__(env)
            self.observation_space = gym.spaces.Dict(
                {"pos": env.observation_space, "id": gym.spaces.Discrete(3)}
            )

        def observation(self, obs: Any) -> Any:
            return {"pos": obs, "id": 1}

    envs = make_vector_env(lambda: DictObs(_Poison(gym.make("CartPole-v1"), "obs", np.nan, 3)), NUM_ENVS)

    class Policy(_Zeros):
        pass

    collector = Collector(Policy(), envs, seed=0, check_finite=True)
    with pytest.raises(EnvStepError, match=r"sub-env 0 returned NaN in obs/pos in the vector step after "
                                           r"collector env step 8") as raised:  # fmt: skip
        collector.collect(n_step=10 * NUM_ENVS)
    assert raised.value.field == "obs/pos"


def test_a_nan_after_a_reset_is_caught() -> None:
    class NanReset(gym.Wrapper[Any, Any, Any, Any]):
        def reset(self, **kwargs: Any) -> Any:
            obs, info = self.env.reset(**kwargs)
            return np.full_like(obs, np.nan), info

    envs = make_vector_env(lambda: NanReset(gym.make("CartPole-v1")), NUM_ENVS)
    with pytest.raises(
        EnvStepError, match="sub-env 0 returned NaN in obs after a reset after collector env step 0"
    ):
        Collector(_Zeros(), envs, seed=0, check_finite=True)


def test_off_by_default_the_value_is_stored() -> None:
    collector = _collector(1, "rew", np.nan, at=3, check=False)
    assert collector.check_finite is False
    collector.collect(n_step=8 * NUM_ENVS)
    assert collector.buffer is not None and np.isnan(collector.buffer.field_arrays()["rew"]).sum() == 1


@pytest.mark.parametrize("bad_env", [0, 3])
def test_an_exception_in_a_sub_env_step_names_the_sub_env(bad_env: int) -> None:
    collector = _collector(bad_env, "raise", 0.0, at=5, check=False)
    collector.collect(n_step=2 * NUM_ENVS)
    with pytest.raises(ValueError, match="the simulator diverged") as raised:  # the type is kept
        collector.collect(n_step=10 * NUM_ENVS)
    assert raised.value.__notes__ == [
        f"raised by the step of sub-env {bad_env} of the vector env, in a collect that started after "
        f"collector env step {2 * NUM_ENVS}"
    ]


def test_a_batching_error_after_the_sub_envs_is_not_blamed_on_one() -> None:
    class WrongShape(gym.Wrapper[Any, Any, Any, Any]):
        def step(self, action: Any) -> Any:
            _, *rest = self.env.step(action)
            return (np.zeros(7, np.float32), *rest)

    envs = make_vector_env(lambda: WrongShape(gym.make("CartPole-v1")), NUM_ENVS)
    collector = Collector(_Zeros(), envs, seed=0)
    with pytest.raises(ValueError) as raised:
        collector.collect(n_step=NUM_ENVS)
    assert "sub-env (index unknown)" in raised.value.__notes__[0]


class _RaisesOnStep(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole whose step raises in the sub-env built with ``index == 1``."""

    def __init__(self, index: int):
        super().__init__(gym.make("CartPole-v1"))
        self.index = index

    def step(self, action: Any) -> Any:
        if self.index == 1:
            raise ValueError("the async simulator diverged")
        return self.env.step(action)


def _async_factory(index: int) -> Any:
    return lambda: _RaisesOnStep(index)


def test_an_exception_in_an_async_sub_env_names_the_sub_env_in_one_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from tshtrain.env.vector import WorkerNamingAsyncVectorEnv

    envs = WorkerNamingAsyncVectorEnv(
        [_async_factory(i) for i in range(NUM_ENVS)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    collector = Collector(_Zeros(), envs, seed=0)
    try:
        with pytest.raises(ValueError, match="the async simulator diverged") as raised:
            collector.collect(n_step=NUM_ENVS)
    finally:
        envs.close(terminate=True)
    assert raised.value.__notes__[0].startswith("raised by the step of sub-env 1 of the vector env")
    assert "Traceback" not in capfd.readouterr().err  # Gymnasium's worker log stays out of the way
