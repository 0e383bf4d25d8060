"""Network builders. Any ``torch.nn.Module`` can be used wherever a network is taken."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tshtrain.errors import UnsupportedSpaceError


class InplaceTanh(nn.Tanh):
    """``nn.Tanh`` computed in place on its input: the same values and gradients, bit for bit, without
    allocating an output (for the output of a linear layer, which nothing else keeps: a linear layer's
    backward needs its input and weight, not its output). The builders' tanh."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return input.tanh_()


_TANH_ARG_MAX = 10.0
"""tanh(10) rounds to 1.0 in float32 and float64's error there is below 1e-8; larger arguments would
overflow expm1(2x) to inf (and inf / inf is NaN)"""


def expm1_tanh_(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x) = e / (e + 2)`` with ``e = expm1(2 min(x, 10))``, written over ``x`` (one temporary).
    On the CPU, torch's tanh kernel costs about as much per element as a scalar ``tanhf``; this costs
    half as much (measured 2.4 ms against 4.5 ms for 32,768 x 64 floats on one AVX-512 core) and is as
    accurate as the float format allows, within 1.7e-7 relative error of the exact tanh everywhere, 0 at
    0 and +-1 from |x| = 9 on. Every step is either correctly rounded (clamp, doubling, addition,
    division) or computed by the same code for every element (torch's expm1), so an element's result
    does not depend on where it sits in the tensor or how many rows the batch has (torch's sigmoid, for
    one, computes a tensor's tail elements with other code than its body)."""
    e = x.clamp_max_(_TANH_ARG_MAX).mul_(2.0).expm1_()
    return e.div_(e + 2.0)


class _Expm1Tanh(torch.autograd.Function):
    """:func:`expm1_tanh_` with tanh's backward from its output, ``grad * (1 - y^2)`` (torch's own
    ``tanh_backward``, differentiable again for second derivatives)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = expm1_tanh_(x)
        ctx.mark_dirty(y)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        grad_input: torch.Tensor = torch.ops.aten.tanh_backward(grad, y)
        return grad_input


class FastTanh(nn.Tanh):
    """An opt-in tanh for large CPU batches (``activation=FastTanh``, ``activation: fast_tanh`` in an
    experiment file): in place on its input (a linear layer's output), and on the CPU computed from
    ``expm1`` (:func:`expm1_tanh_`: within 1.7e-7 relative error of the exact tanh; the same number for
    an element in any batch, with or without gradients). It pays from about 16,000 elements per call
    (half the cost of torch's tanh kernel on 32,768 x 64 floats; PPO on VMAS with 1,024-4,096 envs:
    17-20% more env steps per second); on tiny batches its five kernel launches and its Python backward
    cost more than torch's one (PPO on CartPole with 8 envs: 4% slower), which is why it is not the
    default. On other devices, and inside ``torch.compile`` (which generates its own fused tanh),
    torch's tanh."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.device.type != "cpu" or torch.compiler.is_compiling():
            return input.tanh_()
        if input.requires_grad and torch.is_grad_enabled():
            result: torch.Tensor = _Expm1Tanh.apply(input)  # type: ignore[no-untyped-call]
            return result
        return expm1_tanh_(input)


def activation_layer(activation: type[nn.Module]) -> nn.Module:
    """The activation after a linear layer in tshtrain's builders: ``nn.Tanh`` and ``nn.ReLU`` in place
    (the same numbers and gradients bit for bit; one allocation of the layer's output fewer per pass,
    measured 9% less CPU time for a PPO gradient step of two 64-64 tanh MLPs on 32,768 rows), any other
    class (:class:`FastTanh` too) as given. A forward hook on the linear layer sees its output before
    the activation changes it."""
    if activation is nn.Tanh:
        return InplaceTanh()
    if activation is nn.ReLU:
        return nn.ReLU(inplace=True)
    return activation()


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
        layers += [nn.Linear(last, size), activation_layer(activation)]
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
