"""Discounted returns and GAE against hand-computed numbers and a slow per-episode reference."""

from __future__ import annotations

import numpy as np
import pytest

from tshtrain.functional import discounted_returns, gae_advantages


def reference_returns(r: dict[str, np.ndarray], *, gamma: float, bootstrap: bool) -> np.ndarray:
    """Episode by episode in plain Python: cut each column at its boundaries, recurse backwards."""
    rew_TE, terminated_TE, boundary_TE, valid_TE = r["rew"], r["terminated"], r["boundary"], r["valid"]
    next_value_TE = r["next_value"] if bootstrap else None
    out = np.full(rew_TE.shape, np.nan)
    for segment, col in _segments(boundary_TE, valid_TE):
        last = segment[-1]
        running = 0.0
        if next_value_TE is not None and not terminated_TE[last, col]:
            running = float(next_value_TE[last, col])
        for t in reversed(segment):
            running = float(rew_TE[t, col]) + gamma * running
            out[t, col] = running
    return out


def reference_gae(r: dict[str, np.ndarray], *, gamma: float, gae_lambda: float) -> np.ndarray:
    """A_t = sum_k (gamma lambda)^k delta_{t+k} over the rest of the segment, one segment at a time."""
    rew_TE, value_TE, next_value_TE = r["rew"], r["value"], r["next_value"]
    terminated_TE, boundary_TE, valid_TE = r["terminated"], r["boundary"], r["valid"]
    out = np.full(rew_TE.shape, np.nan)
    for segment, col in _segments(boundary_TE, valid_TE):
        deltas = []
        for t in segment:
            not_terminal = 0.0 if terminated_TE[t, col] else 1.0
            deltas.append(
                float(rew_TE[t, col])
                + gamma * not_terminal * float(next_value_TE[t, col])
                - float(value_TE[t, col])
            )
        for i, t in enumerate(segment):
            out[t, col] = sum((gamma * gae_lambda) ** k * d for k, d in enumerate(deltas[i:]))
    return out


def _segments(boundary_TE: np.ndarray, valid_TE: np.ndarray) -> list[tuple[list[int], int]]:
    """(time indices of one episode piece, column) for every piece of every column."""
    pieces: list[tuple[list[int], int]] = []
    for col in range(boundary_TE.shape[1]):
        current: list[int] = []
        for t in range(boundary_TE.shape[0]):
            if not valid_TE[t, col]:
                continue
            current.append(t)
            if boundary_TE[t, col]:
                pieces.append((current, col))
                current = []
        assert not current, "a valid column must end with a boundary"
    return pieces


# ---------------------------------------------------------------------- hand-computed values


def test_discounted_returns_hand_computed() -> None:
    # one env, episode of 2 steps (terminated), then 2 steps cut by the end of the rollout
    rew = np.array([[1.0], [2.0], [3.0], [4.0]], dtype=np.float32)
    terminated = np.array([[False], [True], [False], [False]])
    boundary = np.array([[False], [True], [False], [True]])
    next_value = np.array([[9.0], [9.0], [9.0], [10.0]], dtype=np.float32)
    got = discounted_returns(rew, terminated, boundary, 0.5, next_value)
    # G_1 = 2 (terminal), G_0 = 1 + 0.5 * 2 = 2; G_3 = 4 + 0.5 * 10 = 9, G_2 = 3 + 0.5 * 9 = 7.5
    np.testing.assert_allclose(got[:, 0], [2.0, 2.0, 7.5, 9.0])
    without_bootstrap = discounted_returns(rew, terminated, boundary, 0.5)
    np.testing.assert_allclose(without_bootstrap[:, 0], [2.0, 2.0, 5.0, 4.0])


def test_gae_hand_computed() -> None:
    # one env, three steps: terminal at t=1, truncated at t=2 (bootstraps from V(obs_next) = 4)
    rew = np.array([[1.0], [1.0], [1.0]], dtype=np.float32)
    value = np.array([[0.5], [1.0], [2.0]], dtype=np.float32)
    next_value = np.array([[1.0], [3.0], [4.0]], dtype=np.float32)
    terminated = np.array([[False], [True], [False]])
    boundary = np.array([[False], [True], [True]])
    got = gae_advantages(rew, value, next_value, terminated, boundary, gamma=0.9, gae_lambda=0.5)
    delta0 = 1.0 + 0.9 * 1.0 - 0.5  # 1.4
    delta1 = 1.0 - 1.0  # terminal: no bootstrap
    delta2 = 1.0 + 0.9 * 4.0 - 2.0  # 2.6: truncation bootstraps
    np.testing.assert_allclose(got[:, 0], [delta0 + 0.45 * delta1, delta1, delta2], rtol=1e-6)


def test_gae_lambda_one_is_return_minus_value() -> None:
    rew = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
    value = np.array([[1.0, 1.0], [2.0, 0.0], [3.0, -1.0]], dtype=np.float32)
    next_value = np.array([[2.0, 0.0], [3.0, -1.0], [7.0, 8.0]], dtype=np.float32)
    terminated = np.array([[False, False], [False, False], [False, True]])
    boundary = np.array([[False, False], [False, False], [True, True]])
    gae = gae_advantages(rew, value, next_value, terminated, boundary, gamma=0.99, gae_lambda=1.0)
    returns = discounted_returns(rew, terminated, boundary, 0.99, next_value)
    np.testing.assert_allclose(gae, returns - value, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- against the slow reference


def _random_rollout(rng: np.random.Generator, num_t: int, num_e: int) -> dict[str, np.ndarray]:
    lengths = rng.integers(0, num_t + 1, size=num_e)
    valid = np.arange(num_t)[:, None] < lengths[None, :]
    terminated = (rng.random((num_t, num_e)) < 0.15) & valid
    truncated = (rng.random((num_t, num_e)) < 0.1) & valid & ~terminated
    last = np.zeros_like(valid)
    has = lengths > 0
    last[lengths[has] - 1, np.flatnonzero(has)] = True
    return {
        "rew": np.where(valid, rng.normal(size=(num_t, num_e)), 0.0).astype(np.float32),
        "value": rng.normal(size=(num_t, num_e)).astype(np.float32),
        "next_value": rng.normal(size=(num_t, num_e)).astype(np.float32),
        "terminated": terminated,
        "boundary": terminated | truncated | last | ~valid,
        "valid": valid,
    }


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize(("gamma", "gae_lambda"), [(0.99, 0.95), (0.9, 0.0), (1.0, 1.0), (0.0, 0.5)])
def test_gae_matches_reference(seed: int, gamma: float, gae_lambda: float) -> None:
    r = _random_rollout(np.random.default_rng(seed), 17, 5)
    got = gae_advantages(
        r["rew"],
        r["value"],
        r["next_value"],
        r["terminated"],
        r["boundary"],
        gamma=gamma,
        gae_lambda=gae_lambda,
    )
    want = reference_gae(r, gamma=gamma, gae_lambda=gae_lambda)
    valid = r["valid"]
    assert got.dtype == np.float32 and got.shape == valid.shape
    np.testing.assert_allclose(got[valid], want[valid], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("bootstrap", [False, True])
def test_discounted_returns_match_reference(seed: int, bootstrap: bool) -> None:
    r = _random_rollout(np.random.default_rng(100 + seed), 13, 4)
    next_value = r["next_value"] if bootstrap else None
    got = discounted_returns(r["rew"], r["terminated"], r["boundary"], 0.97, next_value)
    want = reference_returns(r, gamma=0.97, bootstrap=bootstrap)
    valid = r["valid"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[valid], want[valid], rtol=1e-4, atol=1e-4)
