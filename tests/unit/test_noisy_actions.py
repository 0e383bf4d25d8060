"""Policy.compute_noisy_actions: QValuePolicy's one-env path decides the epsilon-greedy exploration
before the Q pass and skips the pass on exploring steps, with the same actions and the same random
numbers as compute_actions + add_exploration_noise."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tshtrain.algorithm import EpsilonSchedule, QValuePolicy, mlp


class _Counting(nn.Module):
    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net
        self.calls = 0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out: torch.Tensor = self.net(obs)
        return out


def _policy() -> QValuePolicy:
    torch.manual_seed(0)
    schedule = EpsilonSchedule(start=1.0, end=0.1, num_env_steps=200)
    return QValuePolicy(_Counting(mlp(3, 4, (8,))), gym.spaces.Discrete(4), eps_schedule=schedule, seed=0)


def test_one_env_noisy_actions_equal_greedy_then_noise_and_skip_exploring_q_passes() -> None:
    fused, reference = _policy(), _policy()
    assert isinstance(fused.q_net, _Counting) and isinstance(reference.q_net, _Counting)
    fused.q_net.calls = reference.q_net.calls = 0  # the construction's output-size check
    rng_f, rng_r = np.random.default_rng(3), np.random.default_rng(3)
    obs = np.random.default_rng(1).standard_normal((300, 1, 3)).astype(np.float32)
    for o in obs:
        got = fused.compute_noisy_actions(o, rng_f, deterministic=False)
        want = reference.add_exploration_noise(reference.compute_actions(o, deterministic=False), rng_r)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape
    assert rng_f.random() == rng_r.random()  # the same draws, in the same order
    assert int(fused.explored_env_steps) == int(reference.explored_env_steps) == 300
    assert reference.q_net.calls == 300
    assert 0 < fused.q_net.calls < 300  # the exploring steps ran no Q pass


def test_several_envs_and_test_steps_take_the_general_path() -> None:
    fused, reference = _policy(), _policy()
    rng_f, rng_r = np.random.default_rng(5), np.random.default_rng(5)
    obs = np.random.default_rng(2).standard_normal((20, 4, 3)).astype(np.float32)
    for i, o in enumerate(obs):
        deterministic = i % 3 == 0
        got = fused.compute_noisy_actions(o, rng_f, deterministic=deterministic)
        greedy = reference.compute_actions(o, deterministic=deterministic)
        want = reference.add_exploration_noise(greedy, rng_r)
        np.testing.assert_array_equal(got, want)
    assert int(fused.explored_env_steps) == int(reference.explored_env_steps)


def test_the_collector_acts_with_the_policy_it_holds_now() -> None:
    """Overlapped collection swaps ``collector.policy`` for an actor copy: noisy actions must come
    from the swapped-in policy, not from one remembered at construction."""
    from tshtrain.data import Collector, ReplayBuffer
    from tshtrain.env import make_vector_env

    env = make_vector_env("CartPole-v1", 1)
    first = QValuePolicy(_Counting(mlp(4, 2, (8,))), gym.spaces.Discrete(2), seed=0)
    second = QValuePolicy(_Counting(mlp(4, 2, (8,))), gym.spaces.Discrete(2), seed=0)
    collector = Collector(first, env, ReplayBuffer(64), exploration_noise=True, seed=0)
    for policy in (first, second):
        policy.set_eps_training(0.0)  # greedy: every step runs a Q pass
    collector.reset()
    collector.collect(n_step=5)
    assert isinstance(first.q_net, _Counting) and isinstance(second.q_net, _Counting)
    before = first.q_net.calls
    second.q_net.calls = 0
    collector.policy = second
    collector.collect(n_step=5)
    assert first.q_net.calls == before
    assert second.q_net.calls == 5
    env.close()
