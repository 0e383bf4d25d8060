"""Stepping the sub-envs of an in-process vector env directly: the collector's fast paths.

Gymnasium's ``SyncVectorEnv.step`` iterates the actions, merges every sub-env's info dict into a vector
info, concatenates and deep-copies the observations and copies the reward and done arrays; with one
env that costs about as much as a cheap env's own step. The steppers here do what ``SyncVectorEnv.step``
does in ``AutoresetMode.SAME_STEP``, without that batching:

* each sub-env ``vector_env.envs[i]`` (with the user's wrappers) is stepped with its action row;
* when a step ends an episode (terminated or truncated) the sub-env is reset at once, without a seed or
  options, exactly as ``SyncVectorEnv`` does; the step's observation is the episode's final one;
* observations are copied into preallocated arrays of the observation space's dtype with a leading
  batch dimension (what ``SyncVectorEnv`` returns), used in turn, so no step allocates one.

:class:`SingleEnvStepper` serves the one-env path of the :class:`~tshtrain.data.Collector` (scalars all
the way to :meth:`~tshtrain.data.buffer.BaseReplayBuffer.add_single`); :class:`VectorEnvStepper` returns
what ``SyncVectorEnv.step`` returns, except that the info holds only ``final_obs`` (the collector reads
nothing else when it is not asked for env info). :func:`direct_stepper` says which applies. What the
collector stores either way is what the vector path stores (tests compare the buffers row by row).
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


def _writer(space: gym.Space[Any]) -> Callable[[Any, int, Any], None]:
    """Copies one observation into row ``i`` of a batch (as ``SyncVectorEnv`` concatenates)."""
    if isinstance(space, gym.spaces.Dict):
        keys = tuple(space.spaces)

        def write_dict(out: dict[str, np.ndarray], i: int, obs: dict[str, Any]) -> None:
            for key in keys:
                out[key][i] = obs[key]

        return write_dict

    def write_array(out: np.ndarray, i: int, obs: Any) -> None:
        out[i] = obs

    return write_array


def _empty_batch(space: gym.Space[Any], num_envs: int) -> ObsArray:
    """Zeros of ``space`` with a batch dimension of ``num_envs`` (the arrays ``SyncVectorEnv`` fills)."""
    batch = create_empty_array(space, num_envs, fn=np.zeros)
    assert isinstance(batch, np.ndarray | dict)  # array spaces or a Dict of them: see direct_stepper
    return batch


def direct_stepper(
    env: gym.vector.VectorEnv[Any, Any, Any], *, reads_info: bool
) -> SingleEnvStepper | VectorEnvStepper | None:
    """A stepper for ``env`` if it can be stepped directly with the same results, else None.

    That needs exactly Gymnasium's ``SyncVectorEnv`` (no vector wrapper, no subclass: either may change
    what ``step`` returns) in same-step autoreset mode, whose observation space is an array space (Box,
    Discrete, MultiDiscrete, MultiBinary) or a Dict of them. One env: a :class:`SingleEnvStepper`; more:
    a :class:`VectorEnvStepper`, unless the collector ``reads_info`` (its ``info_key``), which needs the
    vector info that only ``SyncVectorEnv.step`` builds.
    """
    if type(env) is not gym.vector.SyncVectorEnv:
        return None
    if env.metadata.get("autoreset_mode") is not AutoresetMode.SAME_STEP:
        return None
    space = env.single_observation_space
    if isinstance(space, gym.spaces.Dict):
        if not all(isinstance(sub, _ARRAY_SPACES) for sub in space.spaces.values()):
            return None
    elif not isinstance(space, _ARRAY_SPACES):
        return None
    if env.num_envs == 1:
        return SingleEnvStepper(env)
    return None if reads_info else VectorEnvStepper(env)


@final
class SingleEnvStepper:
    """Steps ``vector_env.envs[0]`` with same-step autoreset (see the module docstring)."""

    def __init__(self, vector_env: gym.vector.SyncVectorEnv):
        self.vector_env = vector_env
        """the vector env whose only sub-env is stepped (``envs[0]`` is read at every step, so a
        restored env snapshot takes effect)"""
        space = vector_env.single_observation_space
        self._write = _writer(space)
        arrays = [_empty_batch(space, 1) for _ in range(3)]
        self._current: ObsArray = arrays[0]
        self._free: tuple[ObsArray, ObsArray] = (arrays[1], arrays[2])
        self.failed_env: int | None = None
        """0 once the sub-env's ``step`` raised (so the collector's error note names it), else None"""

    @property
    def current(self) -> ObsArray:
        """The array holding the observation the policy acts on next."""
        return self._current

    def adopt(self, obs: ObsArray) -> ObsArray:
        """Copy a batch-of-one observation (a vector reset's, a restored one) into :attr:`current`."""
        if isinstance(obs, np.ndarray):
            self._write(self._current, 0, obs[0])
        else:
            self._write(self._current, 0, {key: value[0] for key, value in obs.items()})
        return self._current

    def step(self, env_act: np.ndarray) -> SingleStep:
        """Step with ``env_act[0]`` (the row of a batch of one env action), resetting an ended episode."""
        env = self.vector_env.envs[0]
        current = self._current
        step_obs, free = self._free
        try:
            obs, rew, terminated, truncated, info = env.step(env_act[0])
        except BaseException:
            self.failed_env = 0  # what the collector's error note names
            raise
        if isinstance(step_obs, np.ndarray):  # array spaces: the writer's one line, inline
            step_obs[0] = obs
        else:
            self._write(step_obs, 0, obs)
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            reset_obs, reset_info = env.reset()
            self._write(free, 0, reset_obs)
            self._current, self._free = free, (current, step_obs)
            return SingleStep(step_obs, free, float(rew), terminated, truncated, reset_info, info)
        self._current, self._free = step_obs, (current, free)
        return SingleStep(step_obs, step_obs, float(rew), terminated, truncated, info, None)


@final
class VectorEnvStepper:
    """Steps the sub-envs of a ``SyncVectorEnv`` one after the other (see the module docstring)."""

    def __init__(self, vector_env: gym.vector.SyncVectorEnv):
        self.vector_env = vector_env
        """the vector env whose sub-envs are stepped (``envs`` is read at every step, so a restored env
        snapshot takes effect)"""
        num_envs = vector_env.num_envs
        space = vector_env.single_observation_space
        self._write = _writer(space)
        self._batches = (_empty_batch(space, num_envs), _empty_batch(space, num_envs))
        self._rew = np.zeros(num_envs, dtype=np.float64)
        self._terminated = np.zeros(num_envs, dtype=bool)
        self._truncated = np.zeros(num_envs, dtype=bool)
        self.failed_env: int | None = None
        """the sub-env whose ``step`` runs (so an exception it raises names it), else None"""

    def step(
        self, env_act: np.ndarray, current: ObsArray
    ) -> tuple[ObsArray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """``SyncVectorEnv.step(env_act)`` in same-step mode, except that the info holds only
        ``final_obs`` (when an episode ended). The observations go into whichever of the stepper's two
        batches is not ``current`` (the collector's observations, still to be stored); rewards and
        flags into arrays that the next step overwrites."""
        out = self._batches[1] if self._batches[0] is current else self._batches[0]
        rew, terminated, truncated, write = self._rew, self._terminated, self._truncated, self._write
        final: np.ndarray | None = None
        for i, env in enumerate(self.vector_env.envs):
            self.failed_env = i
            obs, rew[i], terminated[i], truncated[i], _ = env.step(env_act[i])
            self.failed_env = None
            if terminated[i] or truncated[i]:
                if final is None:
                    final = np.full(len(rew), None, dtype=object)
                final[i] = obs
                obs, _ = env.reset()
            write(out, i, obs)
        return out, rew, terminated, truncated, {} if final is None else {"final_obs": final}


def is_finite_step(obs: ObsArray, rew: float) -> bool:
    """True if the reward and every float observation entry are finite (a cheap test: a Python sum of
    a short list; inf + -inf and overflow give a non-finite sum, and then the caller's exact check
    decides)."""
    if isinstance(obs, np.ndarray) and obs.dtype.kind == "f" and obs.size <= _SMALL_OBS:
        return math.isfinite(rew + sum(obs.ravel().tolist()))  # the common case, one test for both
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
