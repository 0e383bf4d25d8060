"""Value targets in units of the running standard deviation of the returns (PPO's ``return_scaling``).

The critic learns ``V(o) / s`` where ``s = sqrt(var + eps)`` and ``var`` is the running variance of
all (unscaled) GAE returns seen so far; the mean is not subtracted, so signs are kept. Per update:

1. ``V = s * critic(o)`` are the values in reward units used by GAE, so the advantages keep the units
   of the rewards (what the policy loss sees);
2. the value targets are ``returns / s`` (what the critic's squared error sees);
3. then the returns of the rollout are merged into the running variance.

Dividing the rewards by ``s`` before GAE gives exactly these quantities, because GAE is linear in the
rewards and values together: ``GAE(r / s, V / s) = GAE(r, V) / s``. :func:`scale_rollout_rewards`
does that; the update multiplies the advantages back by ``s``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, final

import torch

from tshtrain.algorithm.blocks.onpolicy import rollout_to_torch
from tshtrain.data.batch import AnyRolloutBatch, TensorRolloutBatch

RETURN_SCALE_EPS = 1e-8
"""added to the running variance before the square root"""


@final
class ReturnScale:
    """The running variance of the returns (Chan et al.'s parallel merge, in float64) and the scale
    ``s = sqrt(var + eps)`` derived from it. Starts at variance 1 with no samples (``s`` ~= 1), so
    the first update's targets are unscaled; the first merge replaces the initial variance."""

    def __init__(self) -> None:
        self.mean = 0.0
        """running mean of the returns (used only to merge variances)"""
        self.var = 1.0
        """running (population) variance of the returns"""
        self.count = 0
        """number of returns merged"""

    @property
    def scale(self) -> float:
        """``sqrt(var + eps)``."""
        return math.sqrt(self.var + RETURN_SCALE_EPS)

    @torch.no_grad()
    def update(self, returns_N: torch.Tensor) -> None:
        """Merge a batch of unscaled returns, shape (N,), into the statistics."""
        if len(returns_N) == 0:
            return
        x = returns_N.to(torch.float64)
        batch_mean, batch_var = (float(v) for v in torch.stack([x.mean(), x.var(unbiased=False)]).tolist())
        batch_count = len(x)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.mean += delta * batch_count / total
        self.var = m2 / total
        self.count = total

    def state(self) -> dict[str, float | int]:
        """The statistics, for the algorithm's extra state."""
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state`."""
        self.mean = float(state["mean"])
        self.var = float(state["var"])
        self.count = int(state["count"])

    def scale_rollout_rewards(self, rollout: AnyRolloutBatch, device: torch.device) -> TensorRolloutBatch:
        """The rollout (as tensors on ``device``) with its rewards divided by :attr:`scale`."""
        data = rollout_to_torch(rollout, device)
        return dataclasses.replace(data, rew=data.rew / self.scale)
