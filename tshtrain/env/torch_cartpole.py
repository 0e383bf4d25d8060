"""A pure-torch batch of CartPole-v1 environments: the reference :class:`TensorVectorEnv`.

The physics, thresholds, reward (+1 every step, also the terminal one) and time limit (truncation
after ``max_episode_steps`` steps, 500 as in CartPole-v1) are Gymnasium's ``CartPoleEnv`` (Euler
integration), computed in float32 on ``device`` for all ``num_envs`` envs at once. Initial states are
drawn uniformly from [-0.05, 0.05] with the env's own ``torch.Generator`` (on ``device``). Ended
episodes reset in the same ``step`` call (see :mod:`tshtrain.env.tensor_env`) with tensor ops only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch

from tshtrain.devices import component_device
from tshtrain.env.tensor_env import TensorStep
from tshtrain.errors import ConfigurationError, require_positive

_GRAVITY = 9.8
_MASS_CART = 1.0
_MASS_POLE = 0.1
_TOTAL_MASS = _MASS_POLE + _MASS_CART
_HALF_LENGTH = 0.5
_POLE_MASS_LENGTH = _MASS_POLE * _HALF_LENGTH
_FORCE_MAG = 10.0
_TAU = 0.02
_THETA_THRESHOLD = 12 * 2 * math.pi / 360
_X_THRESHOLD = 2.4
_INIT_BOUND = 0.05


@final
class TorchCartPole:
    """``num_envs`` CartPole-v1 envs stepped together with tensor ops (see the module docstring).

    Observations: (N, 4) float32 ``[x, x_dot, theta, theta_dot]``; actions: (N,) integers in {0, 1}
    (0 pushes left, 1 right).
    """

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str = "cpu",
        seed: int | None = None,
        max_episode_steps: int = 500,
    ):
        """Args:
        num_envs: envs stepped together.
        device: where the state and every returned tensor live.
        seed: seeds the env's generator (initial states); None: a random seed.
        max_episode_steps: truncate episodes after this many steps.
        """
        require_positive("TorchCartPole", "num_envs", num_envs)
        require_positive("TorchCartPole", "max_episode_steps", max_episode_steps)
        self._num_envs = num_envs
        self._device = component_device(device, owner="TorchCartPole")
        self.max_episode_steps = max_episode_steps
        high = np.array([_X_THRESHOLD * 2, np.inf, _THETA_THRESHOLD * 2, np.inf], dtype=np.float32)
        self._observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self._action_space = gym.spaces.Discrete(2)
        self.generator = torch.Generator(device=self._device)
        """draws the initial states"""
        self._seed(seed)
        self.state = torch.zeros((num_envs, 4), dtype=torch.float32, device=self._device)
        """the envs' states, shape (N, 4)"""
        self.elapsed_steps = torch.zeros(num_envs, dtype=torch.int64, device=self._device)
        """steps taken in each env's current episode"""

    # ------------------------------------------------------------------ the TensorVectorEnv protocol
    @property
    def num_envs(self) -> int:
        """Number of envs (N)."""
        return self._num_envs

    @property
    def device(self) -> torch.device:
        """Where the state and every returned tensor live."""
        return self._device

    @property
    def single_observation_space(self) -> gym.spaces.Box:
        """CartPole-v1's observation space."""
        return self._observation_space

    @property
    def single_action_space(self) -> gym.spaces.Discrete:
        """Discrete(2)."""
        return self._action_space

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, Mapping[str, Any]]:
        """Reset every env (reseeding the generator if ``seed`` is given)."""
        if seed is not None:
            self._seed(seed)
        self.state = self._initial_states(self._num_envs)
        self.elapsed_steps.zero_()
        return self.state.clone(), {}

    def step(self, actions: torch.Tensor) -> TensorStep:
        """Advance every env by one step; ended episodes reset in the same call."""
        if actions.shape != (self._num_envs,):
            raise ConfigurationError(
                f"TorchCartPole.step: actions must have shape ({self._num_envs},), got "
                f"{tuple(actions.shape)}."
            )
        state = cartpole_dynamics(self.state, actions)
        x, theta = state[:, 0], state[:, 2]
        terminated = (x.abs() > _X_THRESHOLD) | (theta.abs() > _THETA_THRESHOLD)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps
        done = terminated | truncated
        final_obs = state
        # batched autoreset: a fresh initial state for every env (one generator draw of fixed size,
        # so the draws do not depend on which envs ended), taken where an episode ended
        fresh = self._initial_states(self._num_envs)
        self.state = torch.where(done.unsqueeze(1), fresh, state)
        self.elapsed_steps.masked_fill_(done, 0)
        rew = torch.ones(self._num_envs, dtype=torch.float32, device=self._device)
        return TensorStep(
            obs=self.state.clone(),
            rew=rew,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            info={},
        )

    def close(self) -> None:
        """Nothing to release."""

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The generator, the states and the step counters (tensors on the CPU)."""
        return {
            "generator": self.generator.get_state(),
            "state": self.state.cpu(),
            "elapsed_steps": self.elapsed_steps.cpu(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the number of envs must match."""
        saved = state["state"]
        if tuple(saved.shape) != (self._num_envs, 4):
            raise ConfigurationError(
                f"TorchCartPole.load_state_dict: the state holds {tuple(saved.shape)}, this env has "
                f"({self._num_envs}, 4); build it with the saved num_envs."
            )
        self.generator.set_state(state["generator"])
        self.state = saved.to(device=self._device, dtype=torch.float32)
        self.elapsed_steps = state["elapsed_steps"].to(device=self._device, dtype=torch.int64)

    # ------------------------------------------------------------------ internals
    def _seed(self, seed: int | None) -> None:
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))

    def _initial_states(self, num: int) -> torch.Tensor:
        draw = torch.rand((num, 4), generator=self.generator, device=self._device, dtype=torch.float32)
        return draw * (2 * _INIT_BOUND) - _INIT_BOUND


def cartpole_dynamics(state_N4: torch.Tensor, actions_N: torch.Tensor) -> torch.Tensor:
    """One Euler step of Gymnasium's CartPole physics for a batch of states ``[x, x_dot, theta,
    theta_dot]`` and actions in {0, 1}; returns the next states (same dtype)."""
    x, x_dot, theta, theta_dot = state_N4.unbind(dim=1)
    force = torch.where(actions_N.to(torch.bool), _FORCE_MAG, -_FORCE_MAG).to(state_N4.dtype)
    cos_theta, sin_theta = torch.cos(theta), torch.sin(theta)
    temp = (force + _POLE_MASS_LENGTH * theta_dot.square() * sin_theta) / _TOTAL_MASS
    theta_acc = (_GRAVITY * sin_theta - cos_theta * temp) / (
        _HALF_LENGTH * (4.0 / 3.0 - _MASS_POLE * cos_theta.square() / _TOTAL_MASS)
    )
    x_acc = temp - _POLE_MASS_LENGTH * theta_acc * cos_theta / _TOTAL_MASS
    return torch.stack(
        (x + _TAU * x_dot, x_dot + _TAU * x_acc, theta + _TAU * theta_dot, theta_dot + _TAU * theta_acc),
        dim=1,
    )
