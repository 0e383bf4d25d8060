"""In-place activations in tshtrain's network builders (issue 37): the same numbers as nn.Tanh / nn.ReLU."""

from __future__ import annotations

import torch
from torch import nn


def test_in_place_activations_give_the_same_numbers_and_gradients() -> None:
    """``activation_layer`` writes tanh and ReLU over the linear layer's output: forward values, first
    and second derivatives equal to the out-of-place modules', bit for bit; other classes as given."""
    from tshtrain.algorithm.blocks.nets import InplaceTanh, activation_layer

    assert isinstance(activation_layer(nn.Tanh), InplaceTanh) and isinstance(
        activation_layer(nn.Tanh), nn.Tanh
    )
    relu = activation_layer(nn.ReLU)
    assert isinstance(relu, nn.ReLU) and relu.inplace
    assert type(activation_layer(nn.ELU)) is nn.ELU and not activation_layer(nn.ELU).inplace  # type: ignore[attr-defined]
    x = torch.randn(64, 5, generator=torch.Generator().manual_seed(0))
    for plain, fast in ((nn.Tanh(), activation_layer(nn.Tanh)), (nn.ReLU(), activation_layer(nn.ReLU))):
        results = []
        for act in (plain, fast):
            torch.manual_seed(1)
            net = nn.Sequential(nn.Linear(5, 8), act, nn.Linear(8, 1))
            out = net(x).square().sum()
            grads = torch.autograd.grad(out, list(net.parameters()), create_graph=True)
            second = torch.autograd.grad(sum(g.square().sum() for g in grads), list(net.parameters()))
            results.append((out.detach(), [g.detach() for g in grads], second))
        (o1, g1, s1), (o2, g2, s2) = results
        assert torch.equal(o1, o2)
        assert all(torch.equal(a, b) for a, b in zip(g1, g2, strict=True))
        assert all(torch.equal(a, b) for a, b in zip(s1, s2, strict=True))
