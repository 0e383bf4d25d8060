"""Learning tests of BCQ and discrete CRR.

CI tier (seconds, fixed seeds): each learns from a dataset of a scripted behaviour policy.
* BCQ, Pendulum-v1: the behaviour is a deterministic controller ``a = clip(-(2 sin th + 0.5 th_dot))``;
  after 400 gradient steps BCQ's actions are within 0.15 (mean absolute, [-1, 1] scale) of the
  behaviour's on fresh states (an untrained BCQ is about 0.3 away).
* Discrete CRR, CartPole-v1: the behaviour pushes towards the pole's lean (``theta + 0.5 theta_dot``)
  but acts uniformly at random 30% of the time (its episodes average about 290, below 400); after 1000
  gradient steps the greedy CRR policy averages >= 400 over 5 test episodes (a random policy: about 22).

Slow tier (``pytest -m slow``): Tianshou 2.0.1's own test settings and thresholds, on datasets built by
tshtrain from trained agents (cached under ``$TSHTRAIN_DATASET_CACHE``, default the temp dir):
* BCQ (test/offline/test_bcq.py): the SAC expert dataset of ``examples/from_tianshou/cql_pendulum.py``
  (gather_pendulum_data.py's recipe, deterministic actions), 5 epochs x 500 gradient steps of batch 32,
  hidden 64, VAE 32-32, best test return over 10 episodes >= -1100.
* Discrete CRR (test/offline/test_discrete_crr.py): the DQN dataset of
  ``examples/discrete_cql_cartpole.py`` (Tianshou gathers with a QR-DQN at epsilon 0.2), lr 7e-4,
  target_update_freq 320, 5 epochs x 1000 gradient steps of batch 64, hidden 64-64, best test return
  over 10 episodes >= 180.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    BCQ,
    BCQParams,
    BCQPolicy,
    CategoricalPolicy,
    ConditionalVAE,
    DiscreteCRR,
    DiscreteCRRParams,
    Perturbation,
    QEnsemble,
    ScriptedPolicy,
    mlp,
)
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(path: str) -> ModuleType:
    name = Path(path).stem
    for folder in (EXAMPLES, (EXAMPLES / path).parent):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _pendulum_controller(obs: np.ndarray) -> np.ndarray:
    cos_th, sin_th, th_dot = obs[:, 0], obs[:, 1], obs[:, 2]
    del cos_th
    return np.clip(-(2.0 * sin_th + 0.5 * th_dot), -1.0, 1.0).astype(np.float32)[:, None]


def _bcq(seed: int, hidden: tuple[int, ...], vae_hidden: tuple[int, ...], **kw: float) -> BCQ:
    torch.manual_seed(seed)
    space = make_vector_env("Pendulum-v1", 1).single_action_space
    policy = BCQPolicy(
        perturbation=Perturbation.from_sizes(3, 1, hidden),
        vae=ConditionalVAE(3, 1, vae_hidden),
        critic=QEnsemble(3, 1, hidden),
        action_space=space,
        seed=seed,
    )
    return BCQ(policy=policy, params=BCQParams(**kw), seed=seed)


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_bcq_acts_like_a_deterministic_behaviour_policy(seed: int) -> None:
    envs = make_vector_env("Pendulum-v1", 4)
    behaviour = ScriptedPolicy(envs.single_action_space, _pendulum_controller)
    dataset = VectorReplayBuffer(2000, 4, seed=seed)
    Collector(behaviour, envs, dataset, seed=seed).collect(n_step=2000)
    algorithm = _bcq(seed, (64,), (32, 32))
    states = torch.as_tensor(dataset.sample_all().obs[::7][:200])
    behaviour_act = torch.as_tensor(_pendulum_controller(states.numpy()))

    def distance() -> float:
        with torch.inference_mode():
            return float((algorithm.policy.actions(states, deterministic=True) - behaviour_act).abs().mean())

    before = distance()
    for _ in range(400):
        algorithm.update(dataset, 64)
    after = distance()
    print(f"RESULT bcq_ci seed={seed} distance_before={before:.3f} distance_after={after:.3f}")
    assert after < 0.15 < before


def _cache_dir() -> str | None:
    return os.environ.get("TSHTRAIN_DATASET_CACHE")


def run_bcq_tianshou(seed: int, cache_dir: str | None = None) -> float:
    """Tianshou's test_bcq.py settings on the SAC Pendulum dataset; the best mean test return."""
    cql_pendulum = _example("from_tianshou/cql_pendulum.py")
    dataset = cql_pendulum.dataset(cache_dir, sample_seed=seed)
    algorithm = _bcq(seed, (64,), (32, 32), actor_lr=1e-3, critic_lr=1e-3, lmbda=0.75)
    test_collector = Collector(algorithm.policy, make_vector_env("Pendulum-v1", 10), seed=seed + 1000)
    params = OfflineTrainerParams(
        buffer=dataset,
        test_collector=test_collector,
        max_epochs=5,
        epoch_num_steps=500,
        batch_size=32,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= -1100.0,
        show_progress=False,
        verbose=False,
    )
    info = OfflineTrainer(algorithm, params).run()
    test_collector.env.close()
    return -math.inf if info.best_score is None else float(info.best_score)


@pytest.mark.learning
@pytest.mark.slow
def test_bcq_reaches_tianshous_threshold_on_pendulum() -> None:
    torch.set_num_threads(1)
    best_returns = []
    for seed in range(3):
        start = time.perf_counter()
        best = run_bcq_tianshou(seed, _cache_dir())
        print(
            f"RESULT bcq seed={seed} best_return={best:.1f} solved={best >= -1100} "
            f"wall_time={time.perf_counter() - start:.0f}s",
            flush=True,
        )
        best_returns.append(best)
    assert sum(r >= -1100.0 for r in best_returns) >= 2, best_returns


def _noisy_cartpole_controller(rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
    def act(obs: np.ndarray) -> np.ndarray:
        lean = obs[:, 2] + 0.5 * obs[:, 3]
        greedy = (lean > 0).astype(np.int64)
        explore = rng.random(len(obs)) < 0.3
        return np.where(explore, rng.integers(0, 2, len(obs)), greedy)

    return act


def _crr(seed: int, hidden: tuple[int, ...], **kw: Any) -> DiscreteCRR:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    policy = CategoricalPolicy(mlp(4, 2, hidden, nn.ReLU), space, seed=seed)
    return DiscreteCRR(policy=policy, critic=mlp(4, 2, hidden, nn.ReLU), params=DiscreteCRRParams(**kw))


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_discrete_crr_beats_a_noisy_behaviour_policy(seed: int) -> None:
    envs = make_vector_env("CartPole-v1", 4)
    behaviour = ScriptedPolicy(
        envs.single_action_space, _noisy_cartpole_controller(np.random.default_rng(seed))
    )
    dataset = VectorReplayBuffer(5000, 4, seed=seed)
    data_stats = Collector(behaviour, envs, dataset, seed=seed).collect(n_step=5000)
    algorithm = _crr(seed, (64, 64), target_update_freq=320)
    for _ in range(1000):
        algorithm.update(dataset, 64)
    test = Collector(algorithm.policy, make_vector_env("CartPole-v1", 5), seed=seed + 100)
    ret = float(test.collect(n_episode=5, deterministic=True).returns_stat.mean)
    behaviour_ret = float(data_stats.returns_stat.mean)
    print(f"RESULT discrete_crr_ci seed={seed} return={ret:.1f} behaviour_return={behaviour_ret:.1f}")
    assert ret >= 400.0 > behaviour_ret


def run_discrete_crr_tianshou(seed: int, cache_dir: str | None = None) -> float:
    """Tianshou's test_discrete_crr.py settings on the DQN CartPole dataset; the best mean test return."""
    cartpole = _example("discrete_cql_cartpole.py")
    dataset, _ = cartpole.cartpole_dataset(0, cache_dir=cache_dir, sample_seed=seed)
    algorithm = _crr(seed, (64, 64), lr=7e-4, gamma=0.99, target_update_freq=320)
    test_collector = Collector(algorithm.policy, make_vector_env("CartPole-v1", 10), seed=seed + 1000)
    params = OfflineTrainerParams(
        buffer=dataset,
        test_collector=test_collector,
        max_epochs=5,
        epoch_num_steps=1000,
        batch_size=64,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= 180.0,
        show_progress=False,
        verbose=False,
    )
    info = OfflineTrainer(algorithm, params).run()
    test_collector.env.close()
    return -math.inf if info.best_score is None else float(info.best_score)


@pytest.mark.learning
@pytest.mark.slow
def test_discrete_crr_reaches_tianshous_threshold_on_cartpole() -> None:
    torch.set_num_threads(1)
    best_returns = []
    for seed in range(3):
        start = time.perf_counter()
        best = run_discrete_crr_tianshou(seed, _cache_dir())
        print(
            f"RESULT discrete_crr seed={seed} best_return={best:.1f} solved={best >= 180} "
            f"wall_time={time.perf_counter() - start:.0f}s",
            flush=True,
        )
        best_returns.append(best)
    assert sum(r >= 180.0 for r in best_returns) >= 2, best_returns
