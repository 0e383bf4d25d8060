"""Discounted returns and advantages over the time-major (T, E) layout, vectorised over envs.

``boundary_TE[t, e]`` is True where the backward recursion must not reach from step t+1 into step t
(episode end, last collected step of a column, padding); bootstrapping at such a step uses
``next_value_TE`` unless the step is terminal.
"""

from __future__ import annotations

import numpy as np
import torch


def discounted_returns(
    rew_TE: np.ndarray,
    terminated_TE: np.ndarray,
    boundary_TE: np.ndarray,
    gamma: float,
    next_value_TE: np.ndarray | None = None,
) -> np.ndarray:
    """G_t = r_t + gamma * G_{t+1} within an episode; at a boundary G_t = r_t + gamma * V(o_{t+1})
    (0 if terminal or if ``next_value_TE`` is None), float32, shape (T, E)."""
    num_steps = rew_TE.shape[0]
    returns_TE = np.zeros(rew_TE.shape, dtype=np.float32)
    not_terminal_TE = 1.0 - terminated_TE.astype(np.float32)
    bootstrap_TE = (
        np.zeros(rew_TE.shape, dtype=np.float32) if next_value_TE is None else next_value_TE * not_terminal_TE
    )
    running_E = np.zeros(rew_TE.shape[1:], dtype=np.float32)
    for t in range(num_steps - 1, -1, -1):
        running_E = np.where(boundary_TE[t], bootstrap_TE[t], running_E)
        running_E = rew_TE[t] + gamma * running_E
        returns_TE[t] = running_E
    return returns_TE


def gae_advantages(
    rew_TE: np.ndarray,
    value_TE: np.ndarray,
    next_value_TE: np.ndarray,
    terminated_TE: np.ndarray,
    boundary_TE: np.ndarray,
    *,
    gamma: float,
    gae_lambda: float,
) -> np.ndarray:
    """Generalised advantage estimation (Schulman et al. 2016), float32, shape (T, E).

    delta_t = r_t + gamma * (1 - terminated_t) * V(o_{t+1}) - V(o_t);
    A_t = delta_t + gamma * lambda * A_{t+1}, the sum cut at boundaries.
    """
    not_terminal_TE = 1.0 - terminated_TE.astype(np.float32)
    delta_TE = rew_TE + gamma * not_terminal_TE * next_value_TE - value_TE
    continues_TE = 1.0 - boundary_TE.astype(np.float32)
    advantages_TE = np.zeros(rew_TE.shape, dtype=np.float32)
    running_E = np.zeros(rew_TE.shape[1:], dtype=np.float32)
    for t in range(rew_TE.shape[0] - 1, -1, -1):
        running_E = delta_TE[t] + gamma * gae_lambda * continues_TE[t] * running_E
        advantages_TE[t] = running_E
    return advantages_TE


def gae_advantages_torch(
    rew_TE: torch.Tensor,
    value_TE: torch.Tensor,
    next_value_TE: torch.Tensor,
    terminated_TE: torch.Tensor,
    boundary_TE: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """:func:`gae_advantages` on tensors, float32, shape (T, E), on the inputs' device.

    CPU tensors run the numpy kernel on zero-copy ``.numpy()`` views, so the result is bit-identical
    to :func:`gae_advantages` (and as fast); on other devices the backward recursion is T steps of
    tensor ops (no host sync).
    """
    if rew_TE.device.type == "cpu":
        adv_TE = gae_advantages(
            rew_TE.numpy(), value_TE.numpy(), next_value_TE.numpy(), terminated_TE.numpy(),
            boundary_TE.numpy(), gamma=gamma, gae_lambda=gae_lambda,
        )  # fmt: skip
        return torch.from_numpy(adv_TE)
    not_terminal_TE = 1.0 - terminated_TE.to(torch.float32)
    delta_TE = rew_TE + gamma * not_terminal_TE * next_value_TE - value_TE
    decay_TE = (gamma * gae_lambda) * (1.0 - boundary_TE.to(torch.float32))
    advantages_TE = torch.empty_like(delta_TE)
    running_E = torch.zeros_like(delta_TE[0])
    for t in range(rew_TE.shape[0] - 1, -1, -1):
        running_E = delta_TE[t] + decay_TE[t] * running_E
        advantages_TE[t] = running_E
    return advantages_TE


def discounted_returns_torch(
    rew_TE: torch.Tensor, terminated_TE: torch.Tensor, boundary_TE: torch.Tensor, gamma: float
) -> torch.Tensor:
    """:func:`discounted_returns` (without bootstrap values) on tensors, float32, shape (T, E).

    CPU tensors run the numpy kernel on ``.numpy()`` views (bit-identical); elsewhere T steps of
    tensor ops on the device.
    """
    if rew_TE.device.type == "cpu":
        return torch.from_numpy(
            discounted_returns(rew_TE.numpy(), terminated_TE.numpy(), boundary_TE.numpy(), gamma)
        )
    returns_TE = torch.empty_like(rew_TE, dtype=torch.float32)
    running_E = torch.zeros_like(returns_TE[0])
    for t in range(rew_TE.shape[0] - 1, -1, -1):
        running_E = torch.where(boundary_TE[t], torch.zeros_like(running_E), running_E)
        running_E = rew_TE[t] + gamma * running_E
        returns_TE[t] = running_E
    return returns_TE
