"""EnvPool (the ``envpool`` package, the ``envpool`` extra) as a same-step-autoreset Gymnasium vector env.

EnvPool runs a batch of Atari, MuJoCo and other envs in C++ threads and hands back numpy batches. Its
Gymnasium API autoresets in the **next** step: the step that ends an episode returns its final
observation, and the following ``step`` ignores that sub-env's action and returns the reset observation
(reward 0, ``elapsed_step`` 0). tshtrain's collectors need **same-step** autoreset (see
:mod:`tshtrain.env.vector`), so :class:`EnvPoolVectorEnv` converts: after each step, the sub-envs that
ended are stepped once more on their own (EnvPool's ``step(actions, env_id)``), which performs their reset
at once; the step's observation holds the reset observations and ``info["final_obs"]`` the final ones, as
Gymnasium's ``SAME_STEP`` vector envs report them. No transition spans two episodes, and the extra
partial step costs one call into the pool per vector step in which an episode ended.

In an experiment file::

    env:
      type: envpool
      id: Breakout-v5          # an EnvPool task id (envpool.list_all_envs())
      kwargs: {episodic_life: false, reward_clip: false}   # envpool.make's options

EnvPool's Atari tasks do their own preprocessing (84x84 grayscale, 4 stacked frames, frame skip 4, up to
30 no-ops, channels first: the observations have the shape of Gymnasium's ``AtariPreprocessing`` +
``FrameStackObservation``), configured by ``kwargs`` rather than wrappers; unlike ALE's ``v5`` ids,
EnvPool's ``Breakout-v5`` has no sticky actions and presses FIRE after a reset unless told otherwise
(``repeat_action_probability: 0.25, use_fire_reset: false`` match tshtrain's Atari example).
Seeds: sub-env ``i`` gets ``seed + i``, fixed when the pool is built; ``reset(seed=s)`` with another
seed rebuilds the pool.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from tshtrain.errors import ConfigurationError, UnsupportedSpaceError, require_positive


def _envpool_module() -> Any:
    try:
        return importlib.import_module("envpool")
    except ImportError as error:
        raise ImportError(
            "env.type envpool needs the envpool package: pip install 'tshtrain[envpool]'."
        ) from error


def _same_step_info(
    info: dict[str, Any], reset_info: Mapping[str, Any], rows: np.ndarray, done: np.ndarray
) -> dict[str, Any]:
    """Gymnasium's same-step layout: ``final_info`` holds the ending step's per-env arrays (each with its
    ``_key`` mask: the sub-envs that ended), the top level the reset's values in the ended rows."""
    final_info: dict[str, Any] = {}
    merged = dict(info)
    for key, value in info.items():
        if not isinstance(value, np.ndarray) or value.shape[:1] != done.shape:
            continue
        final_info[key], final_info[f"_{key}"] = value, done
        reset_value = reset_info.get(key)
        if isinstance(reset_value, np.ndarray) and reset_value.shape[1:] == value.shape[1:]:
            merged[key] = value.copy()
            merged[key][rows] = reset_value
    merged["final_info"], merged["_final_info"] = final_info, done
    return merged


class EnvPoolVectorEnv(gym.vector.VectorEnv[Any, Any, Any]):
    """An EnvPool pool of ``num_envs`` sub-envs of one task, in same-step autoreset mode.

    Args:
        task_id: an EnvPool task id such as ``"Breakout-v5"`` or ``"Hopper-v4"``.
        num_envs: sub-envs, > 0.
        seed: sub-env ``i`` is seeded with ``seed + i``.
        make_kwargs: further keyword arguments of ``envpool.make`` (e.g. ``num_threads``,
            ``max_episode_steps``, Atari's ``episodic_life``); not ``env_type``, ``num_envs``,
            ``batch_size`` or ``seed``, which this class sets.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012 - as Gymnasium's

    def __init__(self, task_id: str, num_envs: int, *, seed: int = 0, **make_kwargs: Any):
        require_positive("EnvPoolVectorEnv", "num_envs", num_envs)
        reserved = sorted({"env_type", "num_envs", "batch_size", "seed"} & set(make_kwargs))
        if reserved:
            raise ConfigurationError(
                f"EnvPoolVectorEnv: {reserved} are set by tshtrain (the pool is synchronous, "
                f"one batch of num_envs, seeded with seed); remove them from the kwargs."
            )
        envpool = _envpool_module()
        if task_id not in envpool.list_all_envs():
            raise ConfigurationError(
                f"EnvPoolVectorEnv: {task_id!r} is not an EnvPool task; envpool.list_all_envs() lists "
                f"them (e.g. 'Breakout-v5', 'Pong-v5', 'Hopper-v4')."
            )
        self._make = envpool.make
        self._task_id = task_id
        self._make_kwargs = dict(make_kwargs)
        self.num_envs = num_envs
        self._seed = seed
        self._pool = self._build(seed)
        self.single_observation_space = self._pool.observation_space
        self.single_action_space = self._pool.action_space
        if isinstance(self.single_observation_space, gym.spaces.Dict | gym.spaces.Tuple):
            raise UnsupportedSpaceError(
                f"EnvPoolVectorEnv: {task_id!r} has the structured observation space "
                f"{self.single_observation_space!r}; only array observations are supported."
            )
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._all_ids = np.arange(num_envs, dtype=np.int32)

    def _build(self, seed: int) -> Any:
        try:
            return self._make(
                self._task_id, env_type="gymnasium", num_envs=self.num_envs, seed=seed, **self._make_kwargs
            )
        except (TypeError, ValueError, RuntimeError) as error:
            raise ConfigurationError(
                f"EnvPoolVectorEnv: envpool.make({self._task_id!r}, **{self._make_kwargs}) failed: {error}"
            ) from None

    @property
    def pool(self) -> Any:
        """The EnvPool pool itself (next-step autoreset: step it only through this class)."""
        return self._pool

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-env. ``seed`` (an int: sub-env ``i`` gets ``seed + i``) other than the pool's
        rebuilds the pool; ``options`` are not supported."""
        if options:
            raise ConfigurationError(f"EnvPoolVectorEnv.reset: options are not supported, got {options!r}.")
        if isinstance(seed, list):
            if seed != list(range(seed[0], seed[0] + self.num_envs)):
                raise ConfigurationError(
                    f"EnvPoolVectorEnv.reset: seeds must be consecutive (s, s + 1, ...), got {seed}."
                )
            seed = seed[0]
        if seed is not None and seed != self._seed:
            self._pool.close()
            self._pool = self._build(seed)
            self._seed = seed
        obs, info = self._pool.reset()
        return self._in_env_order(obs, info), dict(info)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every sub-env; the ones that ended are reset in the same step (module docstring)."""
        actions = np.asarray(actions)
        obs, rew, terminated, truncated, info = self._pool.step(actions, self._all_ids)
        obs = self._in_env_order(obs, info)
        done = np.logical_or(terminated, truncated)
        info = dict(info)
        if done.any():
            ended = np.flatnonzero(done).astype(np.int32)
            final_obs = np.empty(self.num_envs, dtype=object)
            final_obs[ended] = list(obs[ended])
            reset_obs, _, _, _, reset_info = self._pool.step(actions[ended], ended)
            rows = np.asarray(reset_info["env_id"])
            obs = obs.copy()
            obs[rows] = reset_obs
            info = _same_step_info(info, reset_info, rows, done)
            info["final_obs"] = final_obs
            info["_final_obs"] = done
        return obs, np.asarray(rew, dtype=np.float64), terminated, truncated, info

    def _in_env_order(self, obs: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
        env_id = np.asarray(info["env_id"])
        if np.array_equal(env_id, self._all_ids):
            return obs
        ordered = np.empty_like(obs)  # pragma: no cover - a synchronous pool answers in env order
        ordered[env_id] = obs
        return ordered

    def close_extras(self, **kwargs: Any) -> None:
        """Close the pool (its threads)."""
        self._pool.close()
