"""A sleep-free env whose step costs a fixed amount of CPU (about 1 ms by default), for env-worker scaling
benchmarks (``bench_scale.py``): the work is a loop of small matrix-vector products, so the step's cost is
CPU time, not waiting, and parallel workers can only speed it up by running on other cores.

Build it with :func:`busy_env_factory` (a picklable factory: ``functools.partial`` of the class, pickled
by reference, so a subprocess or Ray worker must be able to import this module: put ``benchmarks/`` on
``PYTHONPATH``) or as the Gymnasium id ``busy_env:BusyBench-v0`` (``gymnasium.make`` imports this module).
:func:`calibrate_num_iterations` finds the loop count for a target CPU time per step on this machine
(in CPU seconds, so a busy machine does not change it much).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import gymnasium as gym
import numpy as np

OBS_DIM = 4
MATRIX_SIZE = 32
DEFAULT_NUM_ITERATIONS = 100
"""a placeholder; calibrate for the machine with :func:`calibrate_num_iterations`"""


class BusyEnv(gym.Env[np.ndarray, np.int64]):
    """Observations: 4 floats; actions: Discrete(2); reward 1 per step; episodes truncated after
    ``episode_num_steps`` steps. Each step runs ``num_iterations`` products of a 32x32 matrix with a
    vector (about ``num_iterations`` x 10 us of CPU; calibrate)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (gymnasium's class attribute)

    def __init__(self, num_iterations: int = DEFAULT_NUM_ITERATIONS, episode_num_steps: int = 200):
        if num_iterations < 0 or episode_num_steps < 1:
            raise ValueError(
                f"BusyEnv: num_iterations={num_iterations} (need >= 0), "
                f"episode_num_steps={episode_num_steps} (need >= 1)"
            )
        self.num_iterations = num_iterations
        self.episode_num_steps = episode_num_steps
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        rng = np.random.default_rng(0)
        self._matrix = (rng.standard_normal((MATRIX_SIZE, MATRIX_SIZE)) / np.sqrt(MATRIX_SIZE)).astype(
            np.float32
        )
        self._state = np.zeros(MATRIX_SIZE, np.float32)
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._state = self.np_random.standard_normal(MATRIX_SIZE).astype(np.float32)
        self._t = 0
        return self._state[:OBS_DIM].copy(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        x = self._state
        for _ in range(self.num_iterations):
            x = np.tanh(self._matrix @ x)
        self._state = x + (0.01 if int(action) == 1 else -0.01)
        self._t += 1
        return self._state[:OBS_DIM].copy(), 1.0, False, self._t >= self.episode_num_steps, {}


def busy_env_factory(num_iterations: int) -> functools.partial[BusyEnv]:
    """A picklable zero-argument factory of :class:`BusyEnv` (for ``env_factories`` / ``make_vector_env``)."""
    return functools.partial(BusyEnv, num_iterations=num_iterations)


def step_cpu_seconds(num_iterations: int, num_steps: int = 300) -> float:
    """The CPU seconds one step of ``BusyEnv(num_iterations)`` takes here (median of 3 runs)."""
    env = BusyEnv(num_iterations)
    env.reset(seed=0)
    times = []
    for _ in range(3):
        start = time.process_time()
        for _ in range(num_steps):
            env.step(np.int64(1))
        times.append((time.process_time() - start) / num_steps)
    return sorted(times)[1]


def calibrate_num_iterations(target_seconds: float = 1e-3) -> int:
    """The loop count that makes a step cost about ``target_seconds`` of CPU on this machine."""
    probe = 200
    per_iteration = step_cpu_seconds(probe) / probe
    return max(1, round(target_seconds / per_iteration))


# as "busy_env:BusyBench-v0", gymnasium.make imports this module, which registers the id
gym.register("BusyBench-v0", entry_point="busy_env:BusyEnv")
