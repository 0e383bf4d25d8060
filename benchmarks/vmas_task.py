"""What the VMAS benchmark (``bench_vmas.py``, ``vmas_contestants.py``) and its hand-written baseline
(``hand_ppo_vmas.py``) share: the task, the PPO settings, the phase timers, the env wrappers and the
network builder. Both sides import this module; neither imports the other's settings from the other
(which made the two a cycle).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from tshtrain.env.tensor_env import TensorObs, TensorStep, TensorVectorEnv

TASK: dict[str, Any] = {
    "scenario": "navigation",
    "max_episode_steps": 100,
    "n_agents": 2,
    "collisions": False,
}
"""The VMAS task of the benchmark and of the learning check: scenario, time limit, scenario kwargs."""


# ============================================================================ settings and timers
@dataclass(frozen=True, kw_only=True)
class PPOSettings:
    """The hyperparameters every contestant uses (the knobs a library cannot match are listed in
    :data:`UNMATCHED_KNOBS`). The defaults are those with which the hand loop reaches the task's
    threshold (``python benchmarks/hand_ppo_vmas.py``)."""

    rollout_len: int = 32
    """vector steps per rollout (env steps per env per iteration)"""
    num_epochs: int = 5
    """passes over each rollout"""
    num_minibatches: int = 4
    """mini-batches per pass (mini-batch size = rollout_len * num_envs / num_minibatches)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the actor and of the (separate) critic, tanh activations"""
    lr: float = 3e-4
    """Adam learning rate, constant"""
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    """weight of the value loss (a mean squared error, no value clipping)"""
    max_grad_norm: float = 1.0
    init_log_std: float = -0.5
    """state-independent log std of the Gaussian policy"""


@dataclass
class Phases:
    """Seconds one run spent in its phases (filled by the run; env.step time is in :class:`TimedEnv`)."""

    update: float = 0.0
    """in the PPO update (GAE, epochs of mini-batches)"""
    collect: float | None = None
    """in the collection phase, where the library has one apart (hand loop: its rollout loop;
    tshtrain: the trainer's collection steps; rsl_rl: the runner's rollout loop, as it measures it);
    None: not measured separately (skrl interleaves collection and update step by step)"""


# ============================================================================ envs
class TimedEnv:
    """A :class:`TensorVectorEnv` that forwards to ``env`` and adds up the time spent in its ``step``."""

    def __init__(self, env: TensorVectorEnv):
        if not isinstance(env, TensorVectorEnv):
            raise TypeError(f"bench_vmas needs a TensorVectorEnv, got {type(env).__name__}")
        self.env = env
        self.step_seconds = 0.0
        self.num_vector_steps = 0

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    @property
    def device(self) -> torch.device:
        return self.env.device

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        return self.env.single_observation_space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        return self.env.single_action_space

    @property
    def max_episode_steps(self) -> int:
        return int(getattr(self.env, "max_episode_steps", 0) or 0)

    def reset(self, *, seed: int | None = None) -> tuple[TensorObs, Mapping[str, Any]]:
        return self.env.reset(seed=seed)

    def step(self, actions: torch.Tensor) -> TensorStep:
        start = time.perf_counter()
        out = self.env.step(actions)
        self.step_seconds += time.perf_counter() - start
        self.num_vector_steps += 1
        return out

    def close(self) -> None:
        self.env.close()


class StubNavEnv:
    """A cheap stand-in for a VMAS navigation task: N point masses, each steering to its goal past 6
    obstacles. Observation (18, as VMAS navigation's with one agent): position, velocity, goal relative
    to the agent, and the positions of 6 obstacles relative to the agent. Action (2): a force in
    [-1, 1]^2. Reward: progress to the goal, minus 0.1 while touching an obstacle. Terminates at the
    goal, truncates after ``max_episode_steps`` (clocks start spread at ``reset``); ended envs reset in
    the same step (the TensorVectorEnv contract)."""

    num_obstacles = 6

    def __init__(self, *, num_envs: int, device: str = "cpu", seed: int = 0, max_episode_steps: int = 150):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.max_episode_steps = max_episode_steps
        obs_dim = 6 + 2 * self.num_obstacles
        self.single_observation_space = gym.spaces.Box(-math.inf, math.inf, (obs_dim,))
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (2,))
        self._gen = torch.Generator(device=self.device).manual_seed(seed)
        n, d = num_envs, self.device
        self.pos, self.vel, self.goal = (torch.zeros(n, 2, device=d) for _ in range(3))
        self.obstacles = torch.zeros(n, self.num_obstacles, 2, device=d)
        self.t = torch.zeros(n, dtype=torch.long, device=d)
        self._respawn(torch.ones(n, dtype=torch.bool, device=d))

    def _uniform(self, *shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=self._gen, device=self.device) * 2.0 - 1.0

    def _respawn(self, mask_N: torch.Tensor) -> None:
        n, m = self.num_envs, mask_N.view(-1, 1)
        self.pos = torch.where(m, self._uniform(n, 2), self.pos)
        self.vel = torch.where(m, torch.zeros_like(self.vel), self.vel)
        self.goal = torch.where(m, self._uniform(n, 2), self.goal)
        self.obstacles = torch.where(m.unsqueeze(-1), self._uniform(n, self.num_obstacles, 2), self.obstacles)
        self.t = torch.where(mask_N, torch.zeros_like(self.t), self.t)

    def _obs(self) -> torch.Tensor:
        rel_obstacles = (self.obstacles - self.pos.unsqueeze(1)).flatten(1)
        return torch.cat([self.pos, self.vel, self.goal - self.pos, rel_obstacles], dim=1)

    def reset(self, *, seed: int | None = None) -> tuple[TensorObs, Mapping[str, Any]]:
        if seed is not None:
            self._gen.manual_seed(seed)
        self._respawn(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        # episode clocks start spread over [0, max_episode_steps), as VmasEnv's (and rsl_rl's) do, so
        # that time-outs do not all fall in one step
        self.t = torch.randint(
            0, self.max_episode_steps, (self.num_envs,), generator=self._gen, device=self.device
        )
        return self._obs(), {}

    def step(self, actions: torch.Tensor) -> TensorStep:
        dist_before = (self.goal - self.pos).norm(dim=1)
        self.vel = 0.9 * self.vel + 0.1 * actions.clamp(-1.0, 1.0)
        self.pos = self.pos + 0.1 * self.vel
        dist = (self.goal - self.pos).norm(dim=1)
        touching = ((self.obstacles - self.pos.unsqueeze(1)).norm(dim=2) < 0.1).any(dim=1)
        rew = (dist_before - dist) - 0.1 * touching.float()
        self.t += 1
        terminated = dist < 0.05
        truncated = (self.t >= self.max_episode_steps) & ~terminated
        final_obs = self._obs()
        done = terminated | truncated
        if bool(done.any()):
            self._respawn(done)
            obs = torch.where(done.view(-1, 1), self._obs(), final_obs)
        else:
            obs = final_obs
        return TensorStep(obs, rew, terminated, truncated, final_obs, {})

    def close(self) -> None:
        pass


def task_kwargs(scenario: str) -> dict[str, Any]:
    """The scenario arguments of :data:`TASK` when ``scenario`` is its scenario, else none."""
    if scenario != TASK["scenario"]:
        return {}
    return {k: v for k, v in TASK.items() if k not in ("scenario", "max_episode_steps")}


def box_bounds(env: TensorVectorEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) of the env's Box action space as tensors on its device."""
    space = env.single_action_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise TypeError(f"bench_vmas needs a one-dimensional Box action space, got {space!r}")
    low = torch.as_tensor(space.low, dtype=torch.float32, device=env.device)
    high = torch.as_tensor(space.high, dtype=torch.float32, device=env.device)
    return low, high


def obs_dim(env: TensorVectorEnv) -> int:
    space = env.single_observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise TypeError(f"bench_vmas needs a one-dimensional Box observation space, got {space!r}")
    return int(space.shape[0])


class TanhInPlace(nn.Module):
    """tanh written over the linear layer's output (the hand loop's variant of what tshtrain's ``mlp``
    does since issue 37: the same numbers, one allocation fewer per layer and pass)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.tanh_()


def mlp_tanh(sizes: list[int], *, in_place: bool = False, fast: bool = False) -> nn.Sequential:
    """Linear layers of the given sizes with tanh between them (the actor and critic of every
    contestant but tshtrain, whose ``mlp`` builds the same with its ``FastTanh``); ``in_place``: torch's
    tanh written over the layer's output; ``fast``: tshtrain's ``FastTanh`` itself (the honest baseline
    for that trick, as the hand loop gets fused Adam)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            if fast:
                from tshtrain.algorithm.blocks.nets import FastTanh

                layers.append(FastTanh())
            else:
                layers.append(TanhInPlace() if in_place else nn.Tanh())
    return nn.Sequential(*layers)
