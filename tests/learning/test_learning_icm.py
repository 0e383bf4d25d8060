"""Learning tests of ICM around DQN and PPO on CartPole-v1 (Tianshou's test_dqn_icm / test_ppo_icm bar:
a mean test return of 195). They run examples/icm_cartpole.py, so the example cannot rot. Seed 0 runs in
CI (well under a minute each); the other seeds carry the ``slow`` marker.

The slow tier also compares DQN with and without ICM on a sparse-reward combination lock (below)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    DQN,
    DQNParams,
    EpsilonSchedule,
    ICMModule,
    ICMOffPolicy,
    ICMParams,
    QValuePolicy,
    mlp,
)
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams, StopReason

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
THRESHOLD = 195.0
SEEDS = [
    0,
    pytest.param(1, marks=pytest.mark.slow),
    pytest.param(2, marks=pytest.mark.slow),
    pytest.param(3, marks=pytest.mark.slow),
    pytest.param(4, marks=pytest.mark.slow),
]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("icm_cartpole", EXAMPLES / "icm_cartpole.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["icm_cartpole"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.learning
@pytest.mark.parametrize("algorithm", ["dqn", "ppo"])
@pytest.mark.parametrize("seed", SEEDS)
def test_icm_wrapped_algorithm_solves_cartpole(algorithm: str, seed: int) -> None:
    example = _example()
    train = example.train_dqn if algorithm == "dqn" else example.train_ppo
    _, info = train(seed=seed, max_epochs=10, stop_at=THRESHOLD, verbose=False)
    print(f"RESULT {algorithm}+icm seed={seed} best_reward={info.best_reward} env_steps={info.train_step}")
    # stop_fn is not consulted at the initial test step: STOP_FN means a test after training reached it
    assert info.stop_reason is StopReason.STOP_FN, info
    assert info.best_reward is not None and info.best_reward >= THRESHOLD, info


class CombinationLock(gym.Env[np.ndarray, np.int64]):
    """A sparse-reward chain: ``length`` positions shown one-hot; at each position one of the two actions
    (fixed per position by ``key_seed``) moves one step on, the other back to position 0. Reward 1 and
    the end of the episode only at the last position; episodes are cut after ``2 * length`` steps. Random
    actions reach the end with probability about 2**-length per attempt."""

    def __init__(self, length: int = 20, key_seed: int = 12345):
        self.length = length
        self.key = np.random.default_rng(key_seed).integers(0, 2, length)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = self.num_steps = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.length, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = self.num_steps = 0
        return self._obs(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.num_steps += 1
        self.position = self.position + 1 if action == self.key[self.position] else 0
        solved = self.position == self.length - 1
        return self._obs(), float(solved), solved, not solved and self.num_steps >= 2 * self.length, {}


def _lock_run(seed: int, *, icm: bool, length: int = 20, num_env_steps: int = 40_000) -> InfoStats:
    """DQN (optionally + ICM with reward_scale 0.1) on the lock until a test step reaches the end."""
    torch.manual_seed(seed)
    envs = make_vector_env(lambda: CombinationLock(length), 4)
    test_envs = make_vector_env(lambda: CombinationLock(length), 2)
    policy = QValuePolicy(
        mlp(length, 2, (64, 64), nn.ReLU),
        envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=num_env_steps // 2),
        seed=seed,
    )
    dqn = DQN(policy=policy, params=DQNParams(lr=1e-3, gamma=0.99, target_update_freq=100))
    algorithm: DQN | ICMOffPolicy[QValuePolicy] = dqn
    if icm:
        module = ICMModule.from_mlp(length, envs.single_action_space, (64, 32))
        algorithm = ICMOffPolicy(dqn, module, ICMParams(reward_scale=0.1))
    params = OffPolicyTrainerParams(
        training_collector=Collector(
            policy, envs, VectorReplayBuffer(50_000, 4, seed=seed), exploration_noise=True, seed=seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=num_env_steps // 2000,
        epoch_num_steps=2000,
        collection_step_num_env_steps=8,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=64,
        test_step_num_episodes=2,
        stop_fn=lambda score: score >= 1.0,
        verbose=False,
        show_progress=False,
    )
    try:
        return OffPolicyTrainer(algorithm, params).run()
    finally:
        envs.close()
        test_envs.close()


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_icm_opens_a_20_step_combination_lock_that_plain_dqn_does_not_open_as_soon(seed: int) -> None:
    plain, curious = _lock_run(seed, icm=False), _lock_run(seed, icm=True)
    print(
        f"RESULT lock20 seed={seed} dqn: best={plain.best_reward} env_steps={plain.train_step} "
        f"dqn+icm: best={curious.best_reward} env_steps={curious.train_step}"
    )
    assert curious.stop_reason is StopReason.STOP_FN, curious
    assert curious.train_step < plain.train_step, (plain, curious)
