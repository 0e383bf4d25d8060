"""Learning tests of hindsight experience replay: DQN on :class:`~tshtrain.env.BitFlippingEnv` (sparse
reward -1 / 0, episodes of ``n_bits`` steps, ending by time limit only) with an
:class:`~tshtrain.data.HERVectorReplayBuffer` (``num_future_goals=4``) and, as the control, the same run
(same seed, same budget) with a plain :class:`~tshtrain.data.VectorReplayBuffer`.

Training stops when a test step (20 greedy episodes) averages ``stop_at``; then 100 fresh greedy episodes
measure the **success rate**: the share of episodes that reach their goal at some step (return above
-n_bits: an episode that never reaches it scores exactly -n_bits).

* CI tier (``learning``): 10 bits, seed 0, at most 3,400 env steps (400 random prefill + 3 epochs of
  1,000): HER >= 0.8 success, plain replay <= 0.1. Both runs take seconds on one torch thread.
* slow tier: 15 bits, seeds 0-4, at most 20,400 env steps: HER >= 0.85 success on >= 4 of 5 seeds, plain
  replay <= 0.1 on every seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, encoder_mlp, obs_encoder
from tshtrain.data import Collector, HERVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import BitFlippingEnv, make_vector_env
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams

NUM_ENVS = 4
PREFILL_ENV_STEPS = 400
EVAL_EPISODES = 100


@dataclass(frozen=True, kw_only=True)
class Outcome:
    seed: int
    her: bool
    best_score: float
    success_rate: float
    env_steps: int
    wall_time: float


@dataclass(frozen=True, kw_only=True)
class Budget:
    n_bits: int
    seed: int
    max_epochs: int
    epoch_num_steps: int
    stop_at: float
    """mean test return that stops training"""


def train_bit_flipping(budget: Budget, *, her: bool) -> Outcome:
    """DQN on n-bit flipping, with or without HER (num_future_goals=4); its outcome."""
    n_bits, seed, max_epochs = budget.n_bits, budget.seed, budget.max_epochs
    epoch_num_steps, stop_at = budget.epoch_num_steps, budget.stop_at
    start = time.perf_counter()
    torch.manual_seed(seed)

    def factory() -> BitFlippingEnv:
        return BitFlippingEnv(n_bits=n_bits)

    train_envs = make_vector_env(factory, NUM_ENVS)
    test_envs = make_vector_env(factory, NUM_ENVS)
    space = train_envs.single_observation_space
    policy = QValuePolicy(
        encoder_mlp(obs_encoder(space), n_bits, (256, 256), nn.ReLU),
        train_envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.1, num_env_steps=epoch_num_steps),
        seed=seed,
    )
    algorithm = DQN(
        policy=policy,
        params=DQNParams(lr=1e-3, gamma=0.9, target_update_freq=100, huber_loss=False),
    )
    size = max_epochs * epoch_num_steps + PREFILL_ENV_STEPS
    buffer: BaseReplayBuffer = (
        HERVectorReplayBuffer(size, NUM_ENVS, BitFlippingEnv.compute_reward, num_future_goals=4, seed=seed)
        if her
        else VectorReplayBuffer(size, NUM_ENVS, seed=seed)
    )
    training_collector = Collector(policy, train_envs, buffer, exploration_noise=True, seed=seed)
    training_collector.collect(n_step=PREFILL_ENV_STEPS, random=True)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=NUM_ENVS * 4,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=128,
        test_step_num_episodes=20,
        stop_fn=lambda score: score >= stop_at,
        verbose=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    final = test_collector.collect(n_episode=EVAL_EPISODES, reset_before_collect=True, deterministic=True)
    train_envs.close()
    test_envs.close()
    outcome = Outcome(
        seed=seed,
        her=her,
        best_score=float(info.best_reward),
        success_rate=float(np.mean(final.returns > -n_bits)),
        env_steps=info.train_step + PREFILL_ENV_STEPS,
        wall_time=time.perf_counter() - start,
    )
    print(
        f"RESULT her={her} n_bits={n_bits} seed={seed} success_rate={outcome.success_rate:.2f} "
        f"best_score={outcome.best_score:.2f} "
        f"env_steps={outcome.env_steps} wall_time={outcome.wall_time:.0f}s",
        flush=True,
    )
    return outcome


def test_success_means_a_score_above_minus_n_bits() -> None:
    # the scoring claim of the module docstring, on the env itself: reaching the goal at step d of
    # n and flipping one bit back and forth afterwards scores -(d - 1) - ceil((n - d) / 2)
    env = BitFlippingEnv(n_bits=6)
    obs, _ = env.reset(seed=3)
    diff = [int(b) for b in np.flatnonzero(obs["achieved_goal"] != obs["desired_goal"])]
    total = 0.0
    for bit in diff + [0] * (6 - len(diff)):
        total += env.step(np.int64(bit))[1]
    d = len(diff)
    assert total == -(d - 1) - -(-(6 - d) // 2)
    assert total > -6


@pytest.mark.learning
def test_her_learns_ten_bits_where_plain_replay_does_not() -> None:
    budget = Budget(n_bits=10, seed=0, max_epochs=3, epoch_num_steps=1000, stop_at=-8.0)
    with_her = train_bit_flipping(budget, her=True)
    without = train_bit_flipping(budget, her=False)
    assert with_her.success_rate >= 0.8, with_her
    assert without.success_rate <= 0.1, without


@pytest.mark.learning
@pytest.mark.slow
def test_her_learns_fifteen_bits_on_most_seeds() -> None:
    outcomes = []
    for seed in range(5):
        budget = Budget(n_bits=15, seed=seed, max_epochs=10, epoch_num_steps=2000, stop_at=-11.0)
        outcomes.append((train_bit_flipping(budget, her=True), train_bit_flipping(budget, her=False)))
    assert sum(her.success_rate >= 0.85 for her, _ in outcomes) >= 4, outcomes
    assert all(plain.success_rate <= 0.1 for _, plain in outcomes), outcomes
