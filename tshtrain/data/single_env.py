"""Stepping the one sub-env of an in-process vector env directly: the collector's one-env fast path.

With a single env, Gymnasium's ``SyncVectorEnv.step`` (iterating the actions, merging info dicts,
concatenating and deep-copying the observations, copying the reward and done arrays) costs about as
much as a cheap env's own step. :class:`SingleEnvStepper` does what ``SyncVectorEnv.step`` does in
``AutoresetMode.SAME_STEP`` for one sub-env, without the batching:

* the sub-env ``vector_env.envs[0]`` (with the user's wrappers) is stepped with the action row;
* when the step ends an episode (terminated or truncated) the sub-env is reset at once, without a seed
  or options, exactly as ``SyncVectorEnv`` does; the step's observation is the episode's final one;
* observations are copied into arrays of the observation space's dtype with a leading batch dimension
  of one (what ``SyncVectorEnv`` returns), three of them used in turn, so no step allocates one.

The :class:`~tshtrain.data.Collector` uses it when it is given a ``SyncVectorEnv`` of one env (see
:func:`single_env_stepper`); everything it stores is what the vector path stores (a test compares the
buffers row by row).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, final

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_empty_array

from tshtrain.data.batch import ObsArray

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
_SMALL_OBS = 64  # up to this many floats, a Python sum of the list tests finiteness faster than numpy


class SingleStep(NamedTuple):
    """One step of the single env, in the collector's terms."""

    stored_next: ObsArray
    """the observation that follows the action (the final one if the episode ended): ``obs_next``"""
    obs: ObsArray
    """the observation the policy sees next (the reset one if the episode ended)"""
    rew: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    """the step's info, or the reset's info if the episode ended (as in the vector env's info)"""
    final_info: dict[str, Any] | None
    """the ended step's info (None: no episode ended)"""


def _writer(space: gym.Space[Any]) -> Callable[[Any, Any], None]:
    """Copies one observation into row 0 of a batch of one (as ``SyncVectorEnv`` concatenates)."""
    if isinstance(space, gym.spaces.Dict):
        keys = tuple(space.spaces)

        def write_dict(out: dict[str, np.ndarray], obs: dict[str, Any]) -> None:
            for key in keys:
                out[key][0] = obs[key]

        return write_dict

    def write_array(out: np.ndarray, obs: Any) -> None:
        out[0] = obs

    return write_array


def _empty_batch(space: gym.Space[Any]) -> ObsArray:
    """Zeros of ``space`` with a batch dimension of one (the arrays ``SyncVectorEnv`` fills)."""
    batch = create_empty_array(space, 1, fn=np.zeros)
    assert isinstance(batch, np.ndarray | dict)  # array spaces or a Dict of them: see single_env_stepper
    return batch


def single_env_stepper(env: gym.vector.VectorEnv[Any, Any, Any]) -> SingleEnvStepper | None:
    """A :class:`SingleEnvStepper` for ``env`` if it can be stepped directly with the same results:
    exactly Gymnasium's ``SyncVectorEnv`` (no vector wrapper, no subclass: either may change what
    ``step`` returns) of one sub-env in same-step autoreset mode, whose observation space is an array
    space (Box, Discrete, MultiDiscrete, MultiBinary) or a Dict of them. Else None."""
    if type(env) is not gym.vector.SyncVectorEnv or env.num_envs != 1:
        return None
    if env.metadata.get("autoreset_mode") is not AutoresetMode.SAME_STEP:
        return None
    space = env.single_observation_space
    if isinstance(space, gym.spaces.Dict):
        if not all(isinstance(sub, _ARRAY_SPACES) for sub in space.spaces.values()):
            return None
    elif not isinstance(space, _ARRAY_SPACES):
        return None
    return SingleEnvStepper(env)


@final
class SingleEnvStepper:
    """Steps ``vector_env.envs[0]`` with same-step autoreset (see the module docstring)."""

    def __init__(self, vector_env: gym.vector.SyncVectorEnv):
        self.vector_env = vector_env
        """the vector env whose only sub-env is stepped (``envs[0]`` is read at every step, so a
        restored env snapshot takes effect)"""
        space = vector_env.single_observation_space
        self._write = _writer(space)
        arrays = [_empty_batch(space) for _ in range(3)]
        self._current: ObsArray = arrays[0]
        self._free: tuple[ObsArray, ObsArray] = (arrays[1], arrays[2])

    @property
    def current(self) -> ObsArray:
        """The array holding the observation the policy acts on next."""
        return self._current

    def adopt(self, obs: ObsArray) -> ObsArray:
        """Copy a batch-of-one observation (a vector reset's, a restored one) into :attr:`current`."""
        if isinstance(obs, np.ndarray):
            self._write(self._current, obs[0])
        else:
            self._write(self._current, {key: value[0] for key, value in obs.items()})
        return self._current

    def step(self, env_act: np.ndarray) -> SingleStep:
        """Step with ``env_act[0]`` (the row of a batch of one env action), resetting an ended episode."""
        env = self.vector_env.envs[0]
        current = self._current
        step_obs, free = self._free
        obs, rew, terminated, truncated, info = env.step(env_act[0])
        self._write(step_obs, obs)
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            reset_obs, reset_info = env.reset()
            self._write(free, reset_obs)
            self._current, self._free = free, (current, step_obs)
            return SingleStep(step_obs, free, float(rew), terminated, truncated, reset_info, info)
        self._current, self._free = step_obs, (current, free)
        return SingleStep(step_obs, step_obs, float(rew), terminated, truncated, info, None)


def is_finite_step(obs: ObsArray, rew: float) -> bool:
    """True if the reward and every float observation entry are finite (a cheap test: a Python sum of
    a short list; inf + -inf and overflow give a non-finite sum, and then the caller's exact check
    decides)."""
    if not math.isfinite(rew):
        return False
    values = (obs,) if isinstance(obs, np.ndarray) else tuple(obs.values())
    for arr in values:
        if arr.dtype.kind not in "fc":
            continue
        if arr.dtype.kind == "f" and arr.size <= _SMALL_OBS:
            if not math.isfinite(sum(arr.ravel().tolist())):
                return False
        elif not bool(np.isfinite(arr).all()):
            return False
    return True
