"""Learning tests of the distributional DQN family on CartPole-v1, with the setups of Tianshou's own
tests (test/discrete/test_c51.py, test_qrdqn.py, test_iqn.py, test_rainbow.py): 8 training envs, 8 env
steps per collection and one gradient step per collection (update_per_step 0.125), batch 64,
gamma 0.9, n-step 3, target copies every 320 gradient steps, four hidden layers of 128, epsilon 0.1
decaying to 0.01, and the threshold 195 (Tianshou's for CartPole-v1) within 10 epochs of 8000 env
steps. Tianshou's test step uses epsilon 0.05; ours is greedy. Results per seed: docs/algorithms.md.

The five-seed runs are slow (``pytest -m slow``); one short run per algorithm runs in CI.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tshtrain.algorithm import (
    C51,
    IQN,
    QRDQN,
    C51Params,
    EpsilonSchedule,
    NoisyQPolicy,
    OffPolicyAlgorithm,
    QuantileParams,
    QValuePolicy,
    Rainbow,
    categorical_mlp,
    iqn_mlp,
    quantile_mlp,
)
from tshtrain.data import Collector, PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

THRESHOLD = 195.0
HIDDEN = (128, 128, 128, 128)
SEEDS = (0, 1, 2, 3, 4)
EPS = EpsilonSchedule(start=0.1, end=0.01, num_env_steps=50_000)


def _c51(seed: int, space: object) -> OffPolicyAlgorithm[QValuePolicy]:
    policy = QValuePolicy(categorical_mlp(4, 2, HIDDEN), space, eps_schedule=EPS, seed=seed)
    return C51(policy=policy, params=C51Params(gamma=0.9, n_step=3, target_update_freq=320))


def _rainbow(seed: int, space: object) -> OffPolicyAlgorithm[NoisyQPolicy]:
    net = categorical_mlp(4, 2, HIDDEN, dueling=True, noisy_sigma0=0.1)
    policy = NoisyQPolicy(QValuePolicy(net, space, eps_schedule=EPS, seed=seed), seed=seed)
    return Rainbow(policy=policy, params=C51Params(gamma=0.9, n_step=3, target_update_freq=320), seed=seed)


def _qrdqn(seed: int, space: object) -> OffPolicyAlgorithm[QValuePolicy]:
    policy = QValuePolicy(quantile_mlp(4, 2, HIDDEN), space, eps_schedule=EPS, seed=seed)
    return QRDQN(policy=policy, params=QuantileParams(gamma=0.9, n_step=3, target_update_freq=320))


def _iqn(seed: int, space: object) -> OffPolicyAlgorithm[QValuePolicy]:
    policy = QValuePolicy(iqn_mlp(4, 2, HIDDEN), space, eps_schedule=EPS, seed=seed)
    params = QuantileParams(gamma=0.9, n_step=3, target_update_freq=320)
    return IQN(policy=policy, params=params, seed=seed)


BUILDERS: dict[str, Callable[[int, object], OffPolicyAlgorithm[object]]] = {  # type: ignore[dict-item]
    "c51": _c51,
    "iqn": _iqn,
    "qrdqn": _qrdqn,
    "rainbow": _rainbow,
}


def train(name: str, seed: int, *, max_epochs: int = 10, prioritized: bool = False) -> InfoStats:
    """Train ``name`` on CartPole-v1 until a test step averages THRESHOLD or max_epochs end."""
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env("CartPole-v1", 8), make_vector_env("CartPole-v1", 10)
    algorithm = BUILDERS[name](seed, train_envs.single_action_space)
    buffer: BaseReplayBuffer = (
        PrioritizedVectorReplayBuffer(20_000, 8, seed=seed)
        if prioritized
        else VectorReplayBuffer(20_000, 8, seed=seed)
    )
    training = Collector(algorithm.policy, train_envs, buffer, exploration_noise=True, seed=seed)
    training.collect(n_step=64 * 8)
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=8000,
        collection_step_num_env_steps=8,
        update_step_num_gradient_steps_per_sample=0.125,
        batch_size=64,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= THRESHOLD,
        show_progress=False,
        verbose=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    train_envs.close()
    test_envs.close()
    return info


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_reaches_195_on_cartpole_on_most_seeds(name: str) -> None:
    results = {seed: train(name, seed) for seed in SEEDS}
    for seed, info in results.items():
        print(f"{name} seed {seed}: best {info.best_reward:.1f} after {info.train_step} env steps")
    reached = [seed for seed, info in results.items() if info.best_reward >= THRESHOLD]
    assert len(reached) >= 3, {seed: info.best_reward for seed, info in results.items()}
