"""Monte-Carlo returns of a dataset, for Cal-QL's calibrated conservative penalty (CQL ``calibrated``).

Cal-QL (Nakamoto et al. 2023) lower-bounds the Q-values of sampled (out-of-distribution) actions by
the discounted return-to-go of the dataset's behaviour from the same state, so the penalty stops
pushing Q below what the data itself achieves. :class:`DatasetReturns` computes the return-to-go of
every stored transition once, when the offline run starts, and looks them up by the flat buffer
indices of each sampled batch.

As in Tianshou (``compute_episodic_return`` with zero values and ``gae_lambda=1``) the return of an
episode that was cut (truncated, or unfinished at the end of its column) is summed up to the cut
with nothing bootstrapped after it.
"""

from __future__ import annotations

from typing import final

import numpy as np
import torch

from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.functional.returns import discounted_returns


def dataset_returns_to_go(buffer: BaseReplayBuffer, gamma: float) -> np.ndarray:
    """``G_i = r_i + gamma * G_next(i)`` within each stored episode (0 after its last stored step),
    float32, indexed by flat buffer index (shape ``(buffer.capacity,)``; 0 where nothing is stored)."""
    rollout = buffer.rollout()  # time-major (T, E); its valid steps are chronological_indices' order
    returns_TE = discounted_returns(rollout.rew, rollout.terminated, rollout.boundary, gamma)
    returns = np.zeros(buffer.capacity, dtype=np.float32)
    returns[buffer.chronological_indices()] = returns_TE[rollout.valid]
    return returns


@final
class DatasetReturns:
    """The return-to-go of every transition of an offline dataset, on a device."""

    def __init__(self, buffer: BaseReplayBuffer, gamma: float, device: torch.device):
        """Compute the returns of ``buffer`` (O(dataset), once) and move them to ``device``."""
        self.returns = torch.as_tensor(dataset_returns_to_go(buffer, gamma), device=device)
        """return-to-go per flat buffer index"""

    def at(self, indices: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The returns of the transitions at flat buffer ``indices``, shape (N,)."""
        idx = torch.as_tensor(indices, device=self.returns.device, dtype=torch.long)
        return self.returns.index_select(0, idx)
