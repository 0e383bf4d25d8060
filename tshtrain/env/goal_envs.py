"""A small goal-conditioned env with the observation layout of gymnasium-robotics, for HER.

:class:`BitFlippingEnv` (Andrychowicz et al. 2017, section 3.1): the state is ``n_bits`` bits, action
``i`` flips bit ``i``, and the goal is a random bit string. Observations are a Dict with ``observation``
(the bits), ``achieved_goal`` (the bits again) and ``desired_goal`` (the target), all float32; the
reward is sparse, 0 when the bits equal the goal after the step and -1 otherwise, computed by the
vectorised :meth:`BitFlippingEnv.compute_reward` that a HER buffer takes. Episodes end only by the
time limit (``n_bits`` steps unless given), as in gymnasium-robotics, so relabelling a goal never
changes whether a transition is terminal. Without hindsight relabelling an agent almost never sees a
reward of 0 for 8 or more bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import gymnasium as gym
import numpy as np
from typing_extensions import override

from tshtrain.errors import ConfigurationError

BIT_FLIPPING_ID = "tshtrain/BitFlipping-v0"
"""The Gymnasium id :func:`register_goal_envs` registers :class:`BitFlippingEnv` under."""

__all__ = ["BIT_FLIPPING_ID", "BitFlippingEnv", "register_goal_envs"]

GoalObs = dict[str, np.ndarray]


@final
class BitFlippingEnv(gym.Env[dict[str, Any], np.int64]):
    """Flip bits until they equal the goal; sparse reward -1 / 0 (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(self, n_bits: int = 8, max_episode_steps: int | None = None):
        """Args:
        n_bits: number of bits (and of actions).
        max_episode_steps: the episode length; None: ``n_bits`` (every goal is reachable in time).
        """
        if n_bits < 1:
            raise ConfigurationError(f"BitFlippingEnv.n_bits must be >= 1, got {n_bits!r}.")
        steps = n_bits if max_episode_steps is None else max_episode_steps
        if steps < 1:
            raise ConfigurationError(f"BitFlippingEnv.max_episode_steps must be >= 1, got {steps!r}.")
        self.n_bits = n_bits
        """number of bits"""
        self.max_episode_steps = steps
        """steps until the episode is truncated"""
        bits = gym.spaces.Box(0.0, 1.0, shape=(n_bits,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": bits, "achieved_goal": bits, "desired_goal": bits}
        )
        self.action_space = gym.spaces.Discrete(n_bits)
        self._state = np.zeros(n_bits, dtype=np.float32)
        self._goal = np.zeros(n_bits, dtype=np.float32)
        self._steps = 0

    def _obs(self) -> GoalObs:
        return {
            "observation": self._state.copy(),
            "achieved_goal": self._state.copy(),
            "desired_goal": self._goal.copy(),
        }

    @override
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[GoalObs, dict[str, Any]]:
        super().reset(seed=seed)
        self._state = self.np_random.integers(0, 2, size=self.n_bits).astype(np.float32)
        self._goal = self._state.copy()
        while np.array_equal(self._goal, self._state):  # a goal that needs at least one flip
            self._goal = self.np_random.integers(0, 2, size=self.n_bits).astype(np.float32)
        self._steps = 0
        return self._obs(), {}

    @override
    def step(self, action: np.int64) -> tuple[GoalObs, float, bool, bool, dict[str, Any]]:
        bit = int(action)
        if not 0 <= bit < self.n_bits:
            raise ConfigurationError(f"BitFlippingEnv.step: action {action!r} outside 0..{self.n_bits - 1}.")
        self._state[bit] = 1.0 - self._state[bit]
        self._steps += 1
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], {}))
        truncated = self._steps >= self.max_episode_steps
        return obs, reward, False, truncated, {"is_success": reward == 0.0}

    @staticmethod
    def compute_reward(
        achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Mapping[str, Any], /
    ) -> np.ndarray:
        """0 where ``achieved_goal`` equals ``desired_goal`` (all bits, last axis), -1 elsewhere;
        vectorised over leading axes (a :class:`~tshtrain.data.her.GoalRewardFn`)."""
        del info
        reached = np.all(np.asarray(achieved_goal) == np.asarray(desired_goal), axis=-1)
        return np.asarray(reached, dtype=np.float32) - np.float32(1.0)


def register_goal_envs() -> None:
    """Register :class:`BitFlippingEnv` as ``tshtrain/BitFlipping-v0`` (``gym.make(BIT_FLIPPING_ID,
    n_bits=...)``); calling it again does nothing. Nothing is registered at import."""
    if BIT_FLIPPING_ID not in gym.registry:
        gym.register(id=BIT_FLIPPING_ID, entry_point=_make_bit_flipping)


def _make_bit_flipping(**kwargs: Any) -> BitFlippingEnv:
    return BitFlippingEnv(**kwargs)
