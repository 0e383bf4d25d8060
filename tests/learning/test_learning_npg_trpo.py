"""Learning tests of NPG and TRPO (fixed seeds), with the setup of Tianshou's own NPG / TRPO tests
(64-64 tanh networks with orthogonal initialisation, 16 training envs, 2048 env steps per collection
step, one mini-batch of the whole rollout, 2 repetitions, 5 critic steps with Adam at 1e-3).

* CartPole-v1 to 475 (its spec's threshold) within 100,000 env steps: 2 of seeds 0-2 of each in CI;
  the ``slow`` tests run seeds 0-4 and require 4 of 5.
* Pendulum-v1 to -250 (Tianshou's test threshold) within its budget of 250,000 env steps: ``slow``.

Every run prints a ``RESULT`` line (best test return, env steps, wall time).
"""

from __future__ import annotations

import time
from typing import Literal

import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    NPG,
    TRPO,
    CategoricalPolicy,
    GaussianPolicy,
    NPGParams,
    TRPOParams,
    mlp,
)
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams, StopReason

Algo = Literal["npg", "trpo"]
NUM_ENVS = 16
COLLECTION_STEP_NUM_ENV_STEPS = 2048


def _orthogonal(*modules: nn.Module) -> None:
    for module in modules:
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                nn.init.orthogonal_(layer.weight)
                nn.init.zeros_(layer.bias)


def train(algo: Algo, env_id: str, *, seed: int, max_env_steps: int, stop_at: float) -> InfoStats:
    """Train ``algo`` on ``env_id`` until the mean test return over 10 episodes reaches ``stop_at``
    or ``max_env_steps`` (rounded down to whole epochs of 10,240 env steps) are used up."""
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env(env_id, NUM_ENVS), make_vector_env(env_id, 10)
    obs_dim = int(train_envs.single_observation_space.shape[0])  # type: ignore[index]  # a Box
    policy: CategoricalPolicy | GaussianPolicy
    if env_id == "CartPole-v1":
        policy = CategoricalPolicy(mlp(obs_dim, 2, (64, 64)), train_envs.single_action_space, seed=seed)
        gamma = 0.99
    else:
        actor = mlp(obs_dim, 1, (64, 64))
        policy = GaussianPolicy(actor, train_envs.single_action_space, seed=seed)
        gamma = 0.95
    critic = mlp(obs_dim, 1, (64, 64))
    _orthogonal(policy, critic)
    algorithm: NPG | TRPO
    if algo == "npg":
        algorithm = NPG(policy=policy, critic=critic, params=NPGParams(gamma=gamma), seed=seed)
    else:
        algorithm = TRPO(
            policy=policy, critic=critic, params=TRPOParams(gamma=gamma, max_kl=0.005), seed=seed
        )
    epoch_num_steps = 5 * COLLECTION_STEP_NUM_ENV_STEPS
    params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, train_envs, VectorReplayBuffer(COLLECTION_STEP_NUM_ENV_STEPS, NUM_ENVS), seed=seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max(1, max_env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=COLLECTION_STEP_NUM_ENV_STEPS,
        batch_size=None,
        update_step_num_repetitions=2,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= stop_at,
        show_progress=False,
        verbose=False,
    )
    try:
        return OnPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def _run(algo: Algo, env_id: str, seed: int, budget: int, threshold: float) -> tuple[InfoStats, bool]:
    """Train; True if a test step after training reached ``threshold`` within ``budget`` env steps."""
    start = time.perf_counter()
    info = train(algo, env_id, seed=seed, max_env_steps=budget, stop_at=threshold)
    print(
        f"RESULT {algo} {env_id} seed={seed} best_reward={info.best_reward} best_epoch={info.best_epoch} "
        f"env_steps={info.train_step} stop={info.stop_reason} time={time.perf_counter() - start:.1f}s"
    )
    solved = (
        info.stop_reason is StopReason.STOP_FN
        and info.best_reward is not None
        and info.best_reward >= threshold
        and info.train_step <= budget
    )
    return info, solved


@pytest.mark.learning
@pytest.mark.parametrize("algo", ["npg", "trpo"])
def test_solves_cartpole_on_2_of_seeds_0_to_2(algo: Algo) -> None:
    """One seed's pass or fail flips with last-bit changes of the arithmetic (seeds 0-9, one thread:
    TRPO 9/10 with torch's tanh, 7/10 with tshtrain.algorithm.FastTanh; NPG 8/10 and 10/10), so CI asks for 2 of 3."""
    results = {seed: _run(algo, "CartPole-v1", seed, 100_000, 475.0) for seed in range(3)}
    num_solved = sum(solved for _, solved in results.values())
    assert num_solved >= 2, {seed: (info.best_reward, info.train_step) for seed, (info, _) in results.items()}


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["npg", "trpo"])
def test_solves_cartpole_on_4_of_5_seeds(algo: Algo) -> None:
    results = {seed: _run(algo, "CartPole-v1", seed, 100_000, 475.0) for seed in range(5)}
    num_solved = sum(solved for _, solved in results.values())
    assert num_solved >= 4, {seed: (info.best_reward, info.train_step) for seed, (info, _) in results.items()}


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["npg", "trpo"])
def test_solves_pendulum_seed_0(algo: Algo) -> None:
    info, solved = _run(algo, "Pendulum-v1", 0, 250_000, -250.0)
    assert solved, info
