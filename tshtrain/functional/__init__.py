"""Pure math: discounted returns, GAE, n-step targets, Polyak averaging (numpy/torch only)."""

from tshtrain.functional.returns import (
    discounted_returns,
    discounted_returns_torch,
    gae_advantages,
    gae_advantages_torch,
)
from tshtrain.functional.targets import NextIndexFn, nstep_indices, nstep_returns, polyak_update

__all__ = [
    "NextIndexFn",
    "discounted_returns",
    "discounted_returns_torch",
    "gae_advantages",
    "gae_advantages_torch",
    "nstep_indices",
    "nstep_returns",
    "polyak_update",
]
