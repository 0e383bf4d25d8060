"""GAE and discounted returns on random (T, E) rollouts: a slow per-episode reference and invariants.

A rollout is drawn per column as a number of valid steps (the rest is padding) and, per step, whether
the episode terminates, is truncated, or goes on; the last valid step of a column is a boundary, as in
:meth:`tshtrain.data.buffer.BaseReplayBuffer.rollout`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tshtrain.functional import discounted_returns, gae_advantages

_FLOATS = st.floats(-10, 10, allow_nan=False, width=32)


@dataclass(frozen=True)
class Rollout:
    rew: np.ndarray
    value: np.ndarray
    next_value: np.ndarray
    terminated: np.ndarray
    boundary: np.ndarray
    valid: np.ndarray


@st.composite
def rollouts(draw: st.DrawFn) -> Rollout:
    num_t = draw(st.integers(1, 12))
    num_e = draw(st.integers(1, 4))
    shape = (num_t, num_e)
    lengths = [draw(st.integers(0, num_t)) for _ in range(num_e)]
    valid = np.arange(num_t)[:, None] < np.array(lengths)[None, :]
    ends = np.array(
        [
            [draw(st.sampled_from(["open", "open", "terminated", "truncated"])) for _ in range(num_e)]
            for _ in range(num_t)
        ]
    )
    terminated = (ends == "terminated") & valid
    truncated = (ends == "truncated") & valid
    last = np.zeros(shape, dtype=bool)
    for col, length in enumerate(lengths):
        if length:
            last[length - 1, col] = True

    def floats() -> np.ndarray:
        return np.array([[draw(_FLOATS) for _ in range(num_e)] for _ in range(num_t)], dtype=np.float32)

    return Rollout(
        rew=np.where(valid, floats(), 0.0).astype(np.float32),
        value=floats(),
        next_value=floats(),
        terminated=terminated,
        boundary=terminated | truncated | last | ~valid,
        valid=valid,
    )


def _pieces(r: Rollout) -> list[tuple[list[int], int]]:
    pieces: list[tuple[list[int], int]] = []
    for col in range(r.valid.shape[1]):
        current: list[int] = []
        for t in range(r.valid.shape[0]):
            if r.valid[t, col]:
                current.append(t)
                if r.boundary[t, col]:
                    pieces.append((current, col))
                    current = []
    return pieces


def slow_gae(r: Rollout, gamma: float, gae_lambda: float) -> np.ndarray:
    out = np.zeros(r.rew.shape)
    for piece, col in _pieces(r):
        running = 0.0
        for t in reversed(piece):
            bootstrap = 0.0 if r.terminated[t, col] else float(r.next_value[t, col])
            delta = float(r.rew[t, col]) + gamma * bootstrap - float(r.value[t, col])
            is_last = t == piece[-1]
            running = delta + (0.0 if is_last else gamma * gae_lambda * running)
            out[t, col] = running
    return out


def slow_returns(r: Rollout, gamma: float) -> np.ndarray:
    out = np.zeros(r.rew.shape)
    for piece, col in _pieces(r):
        last = piece[-1]
        running = 0.0 if r.terminated[last, col] else float(r.next_value[last, col])
        for t in reversed(piece):
            running = float(r.rew[t, col]) + gamma * running
            out[t, col] = running
    return out


def _gae(r: Rollout, gamma: float, gae_lambda: float, **changes: np.ndarray) -> np.ndarray:
    fields = {
        "rew_TE": r.rew,
        "value_TE": r.value,
        "next_value_TE": r.next_value,
        "terminated_TE": r.terminated,
        "boundary_TE": r.boundary,
        **changes,
    }
    return gae_advantages(**fields, gamma=gamma, gae_lambda=gae_lambda)


def _close(a: np.ndarray, b: np.ndarray, valid: np.ndarray) -> None:
    np.testing.assert_allclose(a[valid], b[valid], rtol=1e-4, atol=2e-3)


_GAMMA = st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0])
_LAMBDA = st.sampled_from([0.0, 0.3, 0.95, 1.0])


@settings(max_examples=150, deadline=None)
@given(rollouts(), _GAMMA, _LAMBDA)
def test_gae_matches_slow_reference(r: Rollout, gamma: float, gae_lambda: float) -> None:
    _close(_gae(r, gamma, gae_lambda), slow_gae(r, gamma, gae_lambda), r.valid)


@settings(max_examples=150, deadline=None)
@given(rollouts(), _GAMMA)
def test_discounted_returns_match_slow_reference(r: Rollout, gamma: float) -> None:
    got = discounted_returns(r.rew, r.terminated, r.boundary, gamma, r.next_value)
    _close(got, slow_returns(r, gamma), r.valid)


@settings(max_examples=100, deadline=None)
@given(rollouts(), _GAMMA)
def test_gae_lambda_zero_is_the_td_error(r: Rollout, gamma: float) -> None:
    delta = r.rew + gamma * (1.0 - r.terminated) * r.next_value - r.value
    _close(_gae(r, gamma, 0.0), delta, r.valid)


@settings(max_examples=100, deadline=None)
@given(rollouts(), _GAMMA)
def test_gae_lambda_one_is_the_bootstrapped_return_minus_the_value(r: Rollout, gamma: float) -> None:
    # inside an episode V(o_{t+1}) is the next row's value; only boundaries use next_value
    next_value = r.next_value.copy()
    inside = ~r.boundary[:-1]
    next_value[:-1][inside] = r.value[1:][inside]
    returns = discounted_returns(r.rew, r.terminated, r.boundary, gamma, next_value)
    _close(_gae(r, gamma, 1.0, next_value_TE=next_value), returns - r.value, r.valid)


@settings(max_examples=100, deadline=None)
@given(rollouts(), _GAMMA, _LAMBDA, st.floats(0.1, 10))
def test_gae_is_linear_in_rewards_and_values(
    r: Rollout, gamma: float, gae_lambda: float, scale: float
) -> None:
    scaled = _gae(
        r,
        gamma,
        gae_lambda,
        rew_TE=r.rew * scale,
        value_TE=r.value * scale,
        next_value_TE=r.next_value * scale,
    )
    np.testing.assert_allclose(
        scaled[r.valid], scale * _gae(r, gamma, gae_lambda)[r.valid], rtol=1e-3, atol=2e-3 * scale
    )


@settings(max_examples=100, deadline=None)
@given(rollouts(), _GAMMA, _LAMBDA, st.randoms(use_true_random=False))
def test_columns_are_independent(r: Rollout, gamma: float, gae_lambda: float, rnd: random.Random) -> None:
    order = list(range(r.rew.shape[1]))
    rnd.shuffle(order)
    perm = np.array(order)
    permuted = _gae(
        r, gamma, gae_lambda,
        rew_TE=r.rew[:, perm], value_TE=r.value[:, perm], next_value_TE=r.next_value[:, perm],
        terminated_TE=r.terminated[:, perm], boundary_TE=r.boundary[:, perm],
    )  # fmt: skip
    np.testing.assert_array_equal(permuted, _gae(r, gamma, gae_lambda)[:, perm])


@settings(max_examples=100, deadline=None)
@given(rollouts(), _GAMMA, _LAMBDA)
def test_a_boundary_cuts_the_recursion(r: Rollout, gamma: float, gae_lambda: float) -> None:
    # what follows a boundary never changes the advantages before it
    changed = np.where(np.cumsum(r.boundary, axis=0) > 0, r.rew + 1.0, r.rew)
    first_boundary = np.argmax(r.boundary, axis=0)
    before = np.arange(r.rew.shape[0])[:, None] <= first_boundary[None, :]
    changed = np.where(before, r.rew, changed)
    _close(_gae(r, gamma, gae_lambda, rew_TE=changed), _gae(r, gamma, gae_lambda), before & r.valid)
