"""Network builders. Any ``torch.nn.Module`` can be used wherever a network is taken."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from tshtrain.errors import UnsupportedSpaceError


def mlp(
    input_dim: int,
    output_dim: int,
    hidden_sizes: Sequence[int] = (64, 64),
    activation: type[nn.Module] = nn.Tanh,
) -> nn.Sequential:
    """A multi-layer perceptron: Linear -> activation, ..., Linear (no output activation)."""
    layers: list[nn.Module] = []
    last = input_dim
    for size in hidden_sizes:
        layers += [nn.Linear(last, size), activation()]
        last = size
    layers.append(nn.Linear(last, output_dim))
    return nn.Sequential(*layers)


def flat_dim(space: gym.Space[Any]) -> int:
    """Number of inputs an MLP needs for observations of a Box space (flattened)."""
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise UnsupportedSpaceError(
        f"flat_dim: {space!r} is not a Box space; MLP builders take Box observations. Wrap the env "
        f"(e.g. gymnasium.wrappers.FlattenObservation) or pass your own network."
    )


def num_actions(space: gym.Space[Any]) -> int:
    """Number of discrete actions of a Discrete space (the output size of a Q or logits network)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    raise UnsupportedSpaceError(f"num_actions: {space!r} is not a Discrete action space.")
