"""Target networks: a frozen copy of a network, refreshed by Polyak averaging or hard copies."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, final

from torch import nn

from tshtrain.functional.targets import polyak_update


@final
class TargetNetwork:
    """A frozen copy of ``source`` (no gradients) with cheap in-place refreshes.

    ``update(tau)`` moves every parameter of the copy towards the source's,
    ``target <- (1 - tau) * target + tau * source`` (Polyak averaging, Lillicrap et al. 2016);
    ``hard_update()`` copies. Buffers (e.g. normalisation statistics) are copied on every refresh.
    Call the target with ``target.net(...)``. Saved and restored through ``state_dict`` like a module.
    """

    def __init__(self, source: nn.Module):
        """Args:
        source: the online network; its current weights are copied.
        """
        self.source = source
        self.net = copy.deepcopy(source)
        """the target network itself"""
        self.net.requires_grad_(False)
        self._source_params = list(source.parameters())
        self._target_params = list(self.net.parameters())
        self._source_buffers = list(source.buffers())
        self._target_buffers = list(self.net.buffers())

    def update(self, tau: float) -> None:
        """Polyak-average the target towards the source by ``tau`` in [0, 1]."""
        polyak_update(self._target_params, self._source_params, tau)
        if self._target_buffers:
            polyak_update(self._target_buffers, self._source_buffers, 1.0)

    def hard_update(self) -> None:
        """Copy the source's weights into the target."""
        self.update(1.0)

    def state_dict(self) -> dict[str, Any]:
        """The target network's weights."""
        return self.net.state_dict()

    def load_state_dict(self, state_dict: Mapping[str, Any], /) -> Any:
        """Restore weights saved by :meth:`state_dict`."""
        return self.net.load_state_dict(state_dict)
