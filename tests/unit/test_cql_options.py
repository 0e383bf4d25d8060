"""CQL's Tianshou options: ``calibrated`` (Cal-QL), ``max_grad_norm``, ``cql_weight_min`` /
``cql_weight_max`` (Tianshou's ``alpha_min`` / ``alpha_max``), and the [-1, 1] action space check.

Expected numbers are computed here by hand on tiny buffers and single-layer critics whose weights
are set by hand.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import CQL, CQLParams, QEnsemble, TanhGaussianPolicy
from tshtrain.algorithm.blocks.calibration import dataset_returns_to_go
from tshtrain.data import ReplayBuffer, TransitionBatch, VectorReplayBuffer
from tshtrain.errors import ConfigurationError

BOX = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
TWIN_WEIGHTS = [[[1.0], [2.0]], [[1.0], [-1.0]]]  # Q_1 = o + 2 a; Q_2 = o - a + 0.5
TWIN_BIAS = [[0.0], [0.5]]


def close(actual: float, expected: float, tol: float = 1e-5) -> None:
    assert actual == pytest.approx(expected, rel=tol, abs=tol)


def twin_critic() -> QEnsemble:
    critic = QEnsemble(1, 1, ())
    (layer,) = critic.net
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(TWIN_WEIGHTS))
        layer.bias.copy_(torch.tensor(TWIN_BIAS).unsqueeze(1))
    return critic


def q_twin(obs: float, act: float) -> tuple[float, float]:
    return obs + 2.0 * act, obs - act + 0.5


def policy(seed: int = 4) -> TanhGaussianPolicy:
    actor = nn.Linear(1, 2)
    with torch.no_grad():  # actor(o) = (mu, log_std) = (o / 2, -1)
        actor.weight.copy_(torch.tensor([[0.5], [0.0]]))
        actor.bias.copy_(torch.tensor([0.0, -1.0]))
    return TanhGaussianPolicy(actor, BOX, seed=seed)


def add(
    buffer: Any, obs: list[float], act: list[float], rew: list[float], *, term: list[bool], trunc: list[bool]
) -> None:
    n = len(obs)
    buffer.add(
        obs=np.array(obs, dtype=np.float32).reshape(n, 1),
        act=np.array(act, dtype=np.float32).reshape(n, 1),
        rew=np.array(rew, dtype=np.float32),
        terminated=np.array(term),
        truncated=np.array(trunc),
        obs_next=np.array(obs, dtype=np.float32).reshape(n, 1) + 1.0,
    )


class Recorder:
    """Update hooks: record the first value of every loss and the critics' gradient norm at their step."""

    def __init__(self, critic: nn.Module | None = None):
        self.critic = critic
        self.losses: dict[str, float] = {}
        self.critic_grad_norm: float | None = None

    def on_sampled_batch(self, batch: TransitionBatch, /) -> TransitionBatch:
        return batch

    def on_loss(self, losses: Any, /) -> None:
        for name, loss in losses.items():
            self.losses.setdefault(name, float(loss.detach()))

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        del optimizer
        if name == "critic_optim" and self.critic is not None:
            grads = [p.grad.flatten() for p in self.critic.parameters() if p.grad is not None]
            self.critic_grad_norm = float(torch.cat(grads).norm())


# ------------------------------------------------------------------------------------------ params
def test_defaults_keep_plain_cql() -> None:
    p = CQLParams()
    assert (p.calibrated, p.max_grad_norm, p.cql_weight_min, p.cql_weight_max) == (False, None, 0.0, 1e6)


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        ({"max_grad_norm": 0.0}, r"CQLParams\.max_grad_norm"),
        ({"cql_weight_min": -1.0}, r"CQLParams\.cql_weight_min"),
        ({"cql_weight_max": 0.0}, r"CQLParams\.cql_weight_max"),
        ({"cql_weight_min": 2.0, "cql_weight_max": 1.0}, r"cql_weight_min=2\.0 is above cql_weight_max=1\.0"),
    ],
)
def test_invalid_options_are_rejected(fields: dict[str, Any], pattern: str) -> None:
    with pytest.raises(ConfigurationError, match=pattern):
        CQLParams(**fields)


# ------------------------------------------------------------------------------------------ returns-to-go
def test_returns_to_go_per_episode_with_nothing_after_a_cut() -> None:
    buffer = VectorReplayBuffer(8, 2, seed=0)  # two columns of 4
    # column 0: r = 1, 2 (terminated) | 3, 4 (truncated); column 1: r = 10, 20, 30 (unfinished)
    add(buffer, [0, 0], [0, 0], [1.0, 10.0], term=[False, False], trunc=[False, False])
    add(buffer, [0, 0], [0, 0], [2.0, 20.0], term=[True, False], trunc=[False, False])
    add(buffer, [0, 0], [0, 0], [3.0, 30.0], term=[False, False], trunc=[False, False])
    buffer.add(
        obs=np.zeros((1, 1), np.float32), act=np.zeros((1, 1), np.float32), rew=np.array([4.0], np.float32),
        terminated=np.array([False]), truncated=np.array([True]), obs_next=np.zeros((1, 1), np.float32),
        env_ids=np.array([0]),
    )  # fmt: skip
    g = 0.5
    returns = dataset_returns_to_go(buffer, g)
    expected_col0 = [1.0 + g * 2.0, 2.0, 3.0 + g * 4.0, 4.0]
    expected_col1 = [10.0 + g * (20.0 + g * 30.0), 20.0 + g * 30.0, 30.0]
    flat = lambda row, col: row * 2 + col  # noqa: E731  (rows x columns, row-major)
    np.testing.assert_allclose([returns[flat(r, 0)] for r in range(4)], expected_col0)
    np.testing.assert_allclose([returns[flat(r, 1)] for r in range(3)], expected_col1)


def test_returns_to_go_after_the_ring_wrapped() -> None:
    buffer = ReplayBuffer(3, seed=0)
    for r in [1.0, 2.0, 3.0, 4.0]:  # the first transition is overwritten by the fourth
        add(buffer, [0.0], [0.0], [r], term=[False], trunc=[False])
    returns = dataset_returns_to_go(buffer, 1.0)
    # stored oldest first: 2, 3, 4 (rows 1, 2, 0); no episode end: the sums up to the newest
    np.testing.assert_allclose(returns[[1, 2, 0]], [9.0, 7.0, 4.0])


# ------------------------------------------------------------------------------------------ calibrated
def _two_step_dataset(rew: tuple[float, float]) -> ReplayBuffer:
    """o = 1 then o = 2 (terminal), actions 0.5, -0.5."""
    buffer = ReplayBuffer(2, seed=0)
    add(buffer, [1.0], [0.5], [rew[0]], term=[False], trunc=[False])
    add(buffer, [2.0], [-0.5], [rew[1]], term=[True], trunc=[False])
    return buffer


def _penalty(calibrated: bool, rew: tuple[float, float], k: int = 2, temperature: float = 2.0) -> float:
    params = CQLParams(
        gamma=0.9, auto_alpha=False, cql_weight=3.0, temperature=temperature, num_sampled_actions=k,
        calibrated=calibrated,
    )  # fmt: skip
    algorithm = CQL(policy=policy(), critic=twin_critic(), params=params)
    buffer = _two_step_dataset(rew)
    algorithm.process_buffer(buffer)

    class WholeBuffer(Recorder):
        def on_sampled_batch(self, batch: TransitionBatch, /) -> TransitionBatch:
            return buffer.get(np.array([0, 1]))  # both transitions, in order

    return algorithm.update(buffer, 2, hooks=WholeBuffer()).cql_penalty


def test_calibrated_raises_every_sampled_value_to_the_return_to_go() -> None:
    # returns-to-go far above every sampled value: G_1 = 500, G_0 = 1000 + 0.9 * 500 = 1450
    k, temp = 2, 2.0
    g = [1450.0, 500.0]
    q_data = [q_twin(1.0, 0.5), q_twin(2.0, -0.5)]
    # all 3K sampled values of transition i equal G_i: T * logsumexp = G_i + T log(3K)
    expected = sum((g[i] + temp * math.log(3 * k) - q_data[i][m]) / 2 for m in range(2) for i in range(2))
    close(_penalty(True, (1000.0, 500.0), k, temp), expected, 1e-5)
    assert _penalty(False, (1000.0, 500.0), k, temp) < 100.0  # plain CQL: the Q-values only


def test_calibrated_with_returns_below_every_value_equals_plain_cql() -> None:
    low = (-1000.0, -1000.0)  # G = (-1900, -1000): the maximum keeps every sampled value
    assert _penalty(True, low) == _penalty(False, low)


def test_calibrated_update_needs_the_dataset_returns() -> None:
    algorithm = CQL(policy=policy(), critic=twin_critic(), params=CQLParams(calibrated=True))
    with pytest.raises(ConfigurationError, match="process_buffer"):
        algorithm.update(_two_step_dataset((0.0, 0.0)), 2)


# ------------------------------------------------------------------------------------------ max_grad_norm
@pytest.mark.parametrize("max_grad_norm", [None, 0.01])
def test_critic_gradient_norm_is_clipped(max_grad_norm: float | None) -> None:
    critic = twin_critic()
    params = CQLParams(gamma=0.9, auto_alpha=False, num_sampled_actions=2, max_grad_norm=max_grad_norm)
    algorithm = CQL(policy=policy(), critic=critic, params=params)
    buffer = _two_step_dataset((1.0, 0.0))
    algorithm.process_buffer(buffer)
    hooks = Recorder(critic)
    algorithm.update(buffer, 2, hooks=hooks)
    assert hooks.critic_grad_norm is not None
    if max_grad_norm is None:
        assert hooks.critic_grad_norm > 1.0  # the unclipped gradient of this batch
    else:
        close(hooks.critic_grad_norm, max_grad_norm, 1e-4)


# ------------------------------------------------------------------------------------------ weight clamp
@pytest.mark.parametrize(("log_weight", "expected"), [(10.0, 5.0), (-10.0, 0.5), (0.0, 1.0)])
def test_tuned_cql_weight_is_clamped(log_weight: float, expected: float) -> None:
    params = CQLParams(with_lagrange=True, cql_weight=1.0, cql_weight_min=0.5, cql_weight_max=5.0)
    algorithm = CQL(policy=policy(), critic=twin_critic(), params=params)
    with torch.no_grad():
        algorithm.log_cql_weight.fill_(log_weight)
    buffer = _two_step_dataset((1.0, 0.0))
    algorithm.process_buffer(buffer)
    close(algorithm.update(buffer, 2).cql_weight, expected)


# ------------------------------------------------------------------------------------------ actions
def test_dataset_actions_outside_minus_one_one_are_rejected() -> None:
    buffer = ReplayBuffer(2, seed=0)
    # an env action of Pendulum's [-2, 2], not mapped to the policy's space
    add(buffer, [1.0], [2.0], [0.0], term=[True], trunc=[False])
    algorithm = CQL(policy=policy(), critic=twin_critic())
    with pytest.raises(ConfigurationError, match=r"range over \[2, 2\].*\[-1, 1\].*map_action_inverse"):
        algorithm.process_buffer(buffer)


# ------------------------------------------------------------------------------------------ reproducibility
def test_same_seed_same_result_with_every_option() -> None:
    def run() -> list[float]:
        torch.manual_seed(0)
        pol = TanhGaussianPolicy(nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 2)), BOX, seed=1)
        params = CQLParams(
            calibrated=True, max_grad_norm=1.0, with_lagrange=True, cql_weight=1.0, cql_weight_max=2.0,
            num_sampled_actions=3,
        )  # fmt: skip
        algorithm = CQL(policy=pol, critic=QEnsemble(1, 1, (8,)), params=params)
        buffer = ReplayBuffer(16, seed=2)
        for t in range(12):
            add(buffer, [t / 10], [math.sin(t)], [-t / 5], term=[t % 5 == 4], trunc=[False])
        algorithm.process_buffer(buffer)
        out: list[float] = []
        for _ in range(3):
            stats = algorithm.update(buffer, 4)
            out += [stats.critic_loss, stats.cql_penalty, stats.actor_loss, stats.cql_weight]
        return out

    assert run() == run()
