"""Stacked members: K networks of one structure as one network whose parameters have a leading member
axis, so that all K run in one batched matmul per layer (``torch.baddbmm``).

The twin critics of TD3 / SAC, REDQ's ensemble and discrete SAC's critics are built this way
(:func:`ensemble_mlp`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.blocks.nets import activation_layer
from tshtrain.errors import ConfigurationError


@final
class EnsembleLinear(nn.Module):
    """``num_members`` independent linear layers applied to a (members, N, in) batch with one bmm."""

    def __init__(
        self, num_members: int, in_features: int, out_features: int, *, device: torch.device | None = None
    ):
        """``device``: where the weights are made (None: torch's default device, like ``nn.Linear``)."""
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialisation, per member
        self.weight = nn.Parameter(
            torch.empty(num_members, in_features, out_features, device=device).uniform_(-bound, bound)
        )
        self.bias = nn.Parameter(
            torch.empty(num_members, 1, out_features, device=device).uniform_(-bound, bound)
        )

    @override
    def forward(self, x_MNI: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x_MNI, self.weight)


def ensemble_mlp(
    num_members: int,
    input_dim: int,
    output_dim: int,
    hidden_sizes: Sequence[int],
    activation: type[nn.Module] = nn.ReLU,
) -> nn.Sequential:
    """``num_members`` independent MLPs as one network, (members, N, input_dim) -> (members, N, output_dim)
    (the input may be expanded from (N, input_dim))."""
    if num_members < 1:
        raise ConfigurationError(f"ensemble_mlp: num_members must be >= 1, got {num_members!r}.")
    sizes = [input_dim, *hidden_sizes, output_dim]
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(EnsembleLinear(num_members, sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation_layer(activation))
    return nn.Sequential(*layers)
