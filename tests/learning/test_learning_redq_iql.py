"""Learning tests of REDQ and IQL, with fixed seeds. Every run prints one ``RESULT`` line.

CI tier (seconds): a one-step task, ``r = -(a - 0.5)^2`` for a Box(-1, 1) action, then the episode ends.

* REDQ, online with 3 gradient steps per env step: the deterministic action ends within 0.15 of 0.5.
* IQL, offline on uniformly random actions: the deterministic action ends within 0.15 of 0.5, where
  behaviour cloning (the same update with beta -> 0, every weight 1) stays near the dataset's mean 0.

Slow tier (``pytest -m slow``, minutes each on one CPU thread):

* REDQ, Pendulum-v1, Tianshou 2.0.1's test/continuous/test_redq.py setting (ensemble 4, subset 2, hidden
  (64, 64), actor lr 1e-4, critic lr 1e-3, fixed alpha 0.2, batch 64, 8 training envs, 1000 random steps,
  UTD 3 and actor_delay 3, 5 epochs of 5000 env steps) and its threshold: a test step averaging >= -250.
  Test steps average 10 episodes (Tianshou: 100).
* IQL, Pendulum-v1, on the SAC dataset of ``examples/cql_pendulum.py`` (Tianshou has no IQL, so no
  threshold of its own): the criterion the CQL and TD3+BC learning tests use, a normalised score
  ``(R - R_random) / (R_expert - R_random) >= 0.8`` of the final policy over 10 test episodes after 5,000
  gradient steps, which on that dataset is well above Tianshou's -1200 for its offline Pendulum tests
  (CQL, TD3+BC, BCQ). beta is 0.3, not the paper's 3.0: beta multiplies advantages in reward units, and
  Pendulum's raw rewards (down to -16 per step) are several times the paper's normalised D4RL rewards;
  with beta 3.0 seed 0 scored 0.18-0.51 between 2,000 and 8,000 steps (docs/algorithms/iql.md).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import IQL, REDQ, IQLParams, QEnsemble, REDQParams, TanhGaussianPolicy, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    StopReason,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
IQL_PENDULUM_BETA = 0.3
"""the inverse temperature of the IQL Pendulum test (module docstring)"""
BEST_ACTION = 0.5


class _OneStepTask(gym.Env[np.ndarray, np.ndarray]):
    """Observation 0, action a in [-1, 1], reward -(a - 0.5)^2, then the episode ends."""

    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: np.ndarray) -> Any:
        reward = -float((action[0] - BEST_ACTION) ** 2)
        return np.zeros(1, dtype=np.float32), reward, True, False, {}


def _greedy_action(policy: TanhGaussianPolicy) -> float:
    with torch.inference_mode():
        return float(policy.actions(torch.zeros(1, 1), deterministic=True)[0, 0])


@pytest.mark.learning
def test_redq_finds_the_best_action_of_a_one_step_task() -> None:
    torch.manual_seed(0)
    space = _OneStepTask.action_space
    policy = TanhGaussianPolicy(mlp(1, 2, (32, 32), nn.ReLU), space, seed=0)
    algorithm = REDQ(
        policy=policy,
        critic=QEnsemble(1, 1, (32, 32), num_critics=5),
        params=REDQParams(actor_delay=3, alpha=0.01),
        seed=0,
    )
    envs = make_vector_env(_OneStepTask, 2)
    collector = Collector(policy, envs, VectorReplayBuffer(1000, 2, seed=0), seed=0)
    collector.collect(n_step=50, random=True)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=1,
        epoch_num_steps=300,
        collection_step_num_env_steps=2,
        update_step_num_gradient_steps_per_sample=3,
        batch_size=32,
        show_progress=False,
        verbose=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    action = _greedy_action(policy)
    print(f"RESULT redq one-step seed=0 action={action:.3f} gradient_steps={info.gradient_step}", flush=True)
    assert abs(action - BEST_ACTION) < 0.15, action


def _uniform_dataset(num: int = 2000) -> VectorReplayBuffer:
    rng = np.random.default_rng(0)
    buffer = VectorReplayBuffer(num, 1, seed=0)
    for _ in range(num):
        act = rng.uniform(-1.0, 1.0, size=(1, 1)).astype(np.float32)
        buffer.add(
            obs=np.zeros((1, 1), dtype=np.float32),
            act=act,
            rew=-((act[:, 0] - BEST_ACTION) ** 2),
            terminated=np.ones(1, dtype=bool),
            truncated=np.zeros(1, dtype=bool),
            obs_next=np.zeros((1, 1), dtype=np.float32),
        )
    return buffer


def _iql_one_step_action(beta: float) -> float:
    torch.manual_seed(0)
    policy = TanhGaussianPolicy(mlp(1, 2, (32, 32), nn.ReLU), _OneStepTask.action_space, seed=0)
    algorithm = IQL(
        policy=policy,
        critic=QEnsemble(1, 1, (32, 32)),
        value=mlp(1, 1, (32, 32), nn.ReLU),
        params=IQLParams(beta=beta, expectile=0.9, actor_lr=1e-3, critic_lr=1e-3, value_lr=1e-3),
    )
    params = OfflineTrainerParams(
        buffer=_uniform_dataset(),
        max_epochs=1,
        epoch_num_steps=600,
        batch_size=64,
        show_progress=False,
        verbose=False,
    )
    OfflineTrainer(algorithm, params).run()
    return _greedy_action(policy)


@pytest.mark.learning
def test_iql_weights_the_dataset_towards_its_best_actions() -> None:
    iql_action = _iql_one_step_action(beta=3.0)
    cloned_action = _iql_one_step_action(beta=1e-6)  # every weight ~1: behaviour cloning
    print(f"RESULT iql one-step seed=0 action={iql_action:.3f} bc_action={cloned_action:.3f}", flush=True)
    assert abs(iql_action - BEST_ACTION) < 0.15, iql_action
    assert abs(cloned_action) < 0.2, cloned_action


def _redq_pendulum(seed: int) -> tuple[bool, float, int, float]:
    """Tianshou's test_redq.py setting (module docstring); returns (solved, best test return, env steps
    with prefill, wall time in seconds)."""
    start = time.perf_counter()
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env("Pendulum-v1", 8), make_vector_env("Pendulum-v1", 10)
    policy = TanhGaussianPolicy(mlp(3, 2, (64, 64), nn.ReLU), train_envs.single_action_space, seed=seed)
    algorithm = REDQ(
        policy=policy,
        critic=QEnsemble(3, 1, (64, 64), num_critics=4),
        params=REDQParams(actor_lr=1e-4, critic_lr=1e-3, alpha=0.2, subset_size=2, actor_delay=3),
        seed=seed,
    )
    collector = Collector(policy, train_envs, VectorReplayBuffer(20000, 8, seed=seed), seed=seed)
    collector.collect(n_step=1000, random=True)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=5,
        epoch_num_steps=5000,
        collection_step_num_env_steps=8,
        update_step_num_gradient_steps_per_sample=3,
        batch_size=64,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= -250.0,
        show_progress=False,
        verbose=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    train_envs.close()
    test_envs.close()
    solved = info.stop_reason is StopReason.STOP_FN
    best = math.nan if info.best_reward is None else float(info.best_reward)
    return solved, best, info.train_step + 1000, time.perf_counter() - start


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_redq_reaches_minus_250_on_pendulum(seed: int) -> None:
    torch.set_num_threads(1)
    solved, best, env_steps, wall_time = _redq_pendulum(seed)
    print(
        f"RESULT redq pendulum seed={seed} solved={solved} best_reward={best:.1f} env_steps={env_steps} "
        f"wall_time={wall_time:.0f}s",
        flush=True,
    )
    assert solved, best


def _example(name: str) -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_iql_reaches_normalised_score_0_8_on_pendulum(seed: int) -> None:
    torch.set_num_threads(1)
    cql_example = _example("cql_pendulum")
    start = time.perf_counter()
    data = cql_example.pendulum_dataset(
        0, cache_dir=os.environ.get("TSHTRAIN_DATASET_CACHE"), sample_seed=seed
    )
    torch.manual_seed(seed)
    space = make_vector_env("Pendulum-v1", 1).single_action_space
    policy = TanhGaussianPolicy(mlp(3, 2, (256, 256), nn.ReLU), space, seed=seed)
    algorithm = IQL(
        policy=policy,
        critic=QEnsemble(3, 1, (256, 256)),
        value=mlp(3, 1, (256, 256), nn.ReLU),
        params=IQLParams(beta=IQL_PENDULUM_BETA),
    )
    params = OfflineTrainerParams(
        buffer=data.buffer,
        max_epochs=5,
        epoch_num_steps=1000,
        batch_size=256,
        show_progress=False,
        verbose=False,
    )
    OfflineTrainer(algorithm, params).run()
    ret = cql_example.evaluate(policy, seed)
    score = data.normalised_score(ret)
    print(
        f"RESULT iql pendulum seed={seed} return={ret:.1f} normalised_score={score:.2f} "
        f"solved={score >= 0.8} wall_time={time.perf_counter() - start:.0f}s",
        flush=True,
    )
    assert score >= 0.8, (ret, score)
