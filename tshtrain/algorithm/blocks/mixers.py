"""Mixers of value decomposition (:mod:`tshtrain.algorithm.value_decomposition`): the team's value
``Q_tot`` from the agents' chosen ``Q_a`` (shape ``(N, A)``) and, for state-conditioned mixers, the
env's global state (shape ``(N, S)``).

* :class:`SumMixer`: ``Q_tot = sum_a Q_a`` (VDN, Sunehag et al. 2018).
* :class:`QMixer`: a monotonic mixing network whose weights come from hypernetworks over the state,
  made non-negative by an absolute value, so that ``dQ_tot / dQ_a >= 0`` (QMIX, Rashid et al. 2018).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import final

import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.errors import ConfigurationError


class Mixer(nn.Module, ABC):
    """``(Q_NA, state_NS) -> Q_tot_N``; monotonic in every ``Q_a``."""

    state_key: str | None = None
    """the key of the Dict observations that holds the global state the mixer reads (None: no state)"""

    @abstractmethod
    def mix(self, q_NA: torch.Tensor, state_NS: torch.Tensor | None) -> torch.Tensor:
        """The team's value, shape ``(N,)``, of the agents' values ``q_NA`` in states ``state_NS``."""

    @override
    def forward(self, q_NA: torch.Tensor, state_NS: torch.Tensor | None) -> torch.Tensor:
        return self.mix(q_NA, state_NS)


@final
class SumMixer(Mixer):
    """VDN: ``Q_tot = sum_a Q_a``; no parameters, no state."""

    @override
    def mix(self, q_NA: torch.Tensor, state_NS: torch.Tensor | None) -> torch.Tensor:
        del state_NS
        return q_NA.sum(dim=-1)


@final
class QMixer(Mixer):
    """QMIX's mixing network: with the state ``s``,

    ``h = elu(Q_NA @ |W1(s)| + b1(s))`` (``W1(s)`` of shape ``(A, embed_dim)``),
    ``Q_tot = h @ |w2(s)| + V(s)``,

    where ``W1``, ``b1`` and ``w2`` are linear maps of ``s`` (hypernetworks; ``hypernet_hidden_dim``
    adds a hidden ReLU layer to the weight hypernetworks) and ``V`` is a ReLU MLP with one hidden layer
    of ``embed_dim`` units. The absolute values keep ``Q_tot`` monotonic in every ``Q_a``.
    """

    def __init__(
        self,
        *,
        num_agents: int,
        state_dim: int,
        embed_dim: int = 32,
        hypernet_hidden_dim: int | None = None,
        state_key: str = "state",
    ):
        """Args:
        num_agents: A, the agents mixed.
        state_dim: S, the width of the (flat) global state.
        embed_dim: width of the mixing layer.
        hypernet_hidden_dim: a hidden ReLU layer of this width in the weight hypernetworks; None:
            linear hypernetworks.
        state_key: the key of the Dict observations holding the global state (the env's ``state``).
        """
        super().__init__()
        for name, value in (("num_agents", num_agents), ("state_dim", state_dim), ("embed_dim", embed_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"QMixer: {name} must be an int >= 1, got {value!r}.")
        if hypernet_hidden_dim is not None and (
            isinstance(hypernet_hidden_dim, bool)
            or not isinstance(hypernet_hidden_dim, int)
            or hypernet_hidden_dim < 1
        ):
            raise ConfigurationError(
                f"QMixer: hypernet_hidden_dim must be None or an int >= 1, got {hypernet_hidden_dim!r}."
            )
        self.num_agents = num_agents
        self.embed_dim = embed_dim
        self.state_key = state_key
        self.hyper_w1 = _hypernet(state_dim, num_agents * embed_dim, hypernet_hidden_dim)
        self.hyper_b1 = nn.Linear(state_dim, embed_dim)
        self.hyper_w2 = _hypernet(state_dim, embed_dim, hypernet_hidden_dim)
        self.value = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    @override
    def mix(self, q_NA: torch.Tensor, state_NS: torch.Tensor | None) -> torch.Tensor:
        if state_NS is None:
            raise ConfigurationError(
                f"QMixer needs the global state (the {self.state_key!r} key of the observations), got none."
            )
        n = q_NA.shape[0]
        state = state_NS.reshape(n, -1).float()
        w1_NAE = self.hyper_w1(state).abs().view(n, self.num_agents, self.embed_dim)
        b1_N1E = self.hyper_b1(state).view(n, 1, self.embed_dim)
        hidden_N1E = F.elu(torch.bmm(q_NA.view(n, 1, self.num_agents), w1_NAE) + b1_N1E)
        w2_NE1 = self.hyper_w2(state).abs().view(n, self.embed_dim, 1)
        v_N: torch.Tensor = self.value(state).view(n)
        return torch.bmm(hidden_N1E, w2_NE1).view(n) + v_N


def _hypernet(state_dim: int, out_dim: int, hidden_dim: int | None) -> nn.Module:
    if hidden_dim is None:
        return nn.Linear(state_dim, out_dim)
    return nn.Sequential(nn.Linear(state_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, out_dim))


__all__ = ["Mixer", "QMixer", "SumMixer"]
