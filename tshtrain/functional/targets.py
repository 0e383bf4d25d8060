"""Targets of off-policy updates: n-step returns along a replay buffer's episode chains, Polyak averaging.

The n-step functions know nothing of buffers: they take ``next_index``, a function mapping flat
indices to the flat index of the following transition of the same episode, mapping an episode's last
stored transition (or the newest of its column) to itself. ``BaseReplayBuffer.next_index`` is one.
Shape suffixes: ``N`` = sampled transitions, ``K`` = steps along the chain (``n_step``).

The n-step target of transition ``t`` (Sutton & Barto 7.1) is

    G_t = sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - terminated_{t+m-1}) Q(o_{t+m}),

with ``m = min(n_step, steps until the chain stops)``: the sum stops early at an episode end
(terminated or truncated) or at the newest stored transition, and bootstraps from the ``obs_next`` of
the last transition it used, unless that one is terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

NextIndexFn = Callable[[np.ndarray], np.ndarray]
"""Flat indices -> flat indices of the following transitions of the same episodes (fixed points at
episode ends); e.g. ``buffer.next_index``."""


def nstep_indices(
    indices_N: np.ndarray, next_index: NextIndexFn, n_step: int
) -> tuple[np.ndarray, np.ndarray]:
    """Follow each episode chain for up to ``n_step`` transitions.

    Args:
        indices_N: flat indices of the sampled transitions (int64).
        next_index: see :data:`NextIndexFn`.
        n_step: number of transitions to sum, >= 1.

    Returns:
        ``(indices_KN, valid_KN)``: row k holds the index k steps along the chain; where the chain
        stopped earlier it repeats the last valid index and ``valid_KN`` is False. Row 0 is
        ``indices_N``, always valid.
    """
    if n_step < 1:
        raise ValueError(f"nstep_indices: n_step must be >= 1, got {n_step!r}.")
    idx_N = np.asarray(indices_N, dtype=np.int64)
    indices_KN = np.empty((n_step, len(idx_N)), dtype=np.int64)
    valid_KN = np.empty((n_step, len(idx_N)), dtype=bool)
    indices_KN[0], valid_KN[0] = idx_N, True
    alive_N = np.ones(len(idx_N), dtype=bool)
    for k in range(1, n_step):  # n_step is small; every step is vectorised over the batch
        nxt_N = next_index(idx_N)
        alive_N &= nxt_N != idx_N
        idx_N = np.where(alive_N, nxt_N, idx_N)
        indices_KN[k], valid_KN[k] = idx_N, alive_N
    return indices_KN, valid_KN


def nstep_returns(rew_KN: np.ndarray, valid_KN: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Discounted partial sums along chains from :func:`nstep_indices`.

    Args:
        rew_KN: reward at each chain index (values where ``valid_KN`` is False are ignored).
        valid_KN: which chain entries count.
        gamma: discount factor.

    Returns:
        ``(return_N, discount_N)``: ``sum_k gamma^k r_k`` over the valid entries (float32), and
        ``gamma^m`` (float32) with ``m`` the number of valid entries, the factor of the bootstrap value.
    """
    num_steps = rew_KN.shape[0]
    gamma_pow_K = np.power(np.float64(gamma), np.arange(num_steps, dtype=np.float64))
    weights_KN = np.where(valid_KN, gamma_pow_K[:, None], 0.0)
    return_N = np.einsum("kn,kn->n", weights_KN, rew_KN.astype(np.float64))
    discount_N = np.power(np.float64(gamma), valid_KN.sum(axis=0))
    return return_N.astype(np.float32), discount_N.astype(np.float32)


@torch.no_grad()
def polyak_update(target: Sequence[torch.Tensor], source: Sequence[torch.Tensor], tau: float) -> None:
    """In place, ``target <- (1 - tau) * target + tau * source`` for every pair (one fused kernel
    per device and dtype). ``tau = 1`` copies."""
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"polyak_update: tau must lie in [0, 1], got {tau!r}.")
    if tau == 1.0:
        torch._foreach_copy_(list(target), list(source))
    else:
        torch._foreach_lerp_(list(target), list(source), tau)
