"""Activations in tshtrain's network builders (issue 37): tanh and ReLU in place (bit for bit), and the
opt-in FastTanh (from expm1, within 1.7e-7 of the exact tanh)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tshtrain.algorithm.blocks.nets import FastTanh, InplaceTanh, activation_layer, expm1_tanh_


def _values_and_derivatives(
    act: nn.Module, x: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(x.shape[1], 8), act, nn.Linear(8, 1)).to(x.dtype)
    out = net(x).square().sum()
    grads = torch.autograd.grad(out, list(net.parameters()), create_graph=True)
    second = torch.autograd.grad(sum(g.square().sum() for g in grads), list(net.parameters()))
    return out.detach(), [g.detach() for g in grads], list(second)


def test_builders_write_tanh_and_relu_in_place_and_take_other_classes_as_given() -> None:
    assert type(activation_layer(nn.Tanh)) is InplaceTanh and isinstance(activation_layer(nn.Tanh), nn.Tanh)
    assert type(activation_layer(FastTanh)) is FastTanh  # opt-in
    relu = activation_layer(nn.ReLU)
    assert isinstance(relu, nn.ReLU) and relu.inplace
    elu = activation_layer(nn.ELU)
    assert type(elu) is nn.ELU and not elu.inplace


@pytest.mark.parametrize("plain_and_in_place", [(nn.Tanh, InplaceTanh), (nn.ReLU, nn.ReLU)])
def test_in_place_modules_give_the_same_numbers_and_derivatives_bit_for_bit(
    plain_and_in_place: tuple[type[nn.Module], type[nn.Module]],
) -> None:
    plain, in_place = plain_and_in_place
    x = torch.randn(64, 5, generator=torch.Generator().manual_seed(0))
    fast = activation_layer(plain)
    assert type(fast) is in_place
    (o1, g1, s1), (o2, g2, s2) = _values_and_derivatives(plain(), x), _values_and_derivatives(fast, x)
    assert torch.equal(o1, o2)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(s1, s2, strict=True))


def test_fast_tanh_is_within_1_7e_7_relative_error_of_the_exact_tanh() -> None:
    x = torch.cat([
        torch.randn(200_000, generator=torch.Generator().manual_seed(0)) * 4,
        torch.logspace(-30, 1.5, 2_000),
        -torch.logspace(-30, 1.5, 2_000),
    ])  # fmt: skip
    exact = torch.tanh(x.double())
    got = FastTanh()(x.clone()).double()
    relative = (got - exact).abs() / exact.abs().clamp_min(1e-300)
    assert relative.max().item() <= 1.7e-7
    special = torch.tensor([0.0, -0.0, 10.0, 1e4, -1e4, float("inf"), -float("inf")])
    assert FastTanh()(special.clone()).tolist() == [0.0, 0.0, 1.0, 1.0, -1.0, 1.0, -1.0]
    assert torch.isnan(FastTanh()(torch.tensor([float("nan")]))).all()


def test_fast_tanh_gives_an_element_the_same_value_in_any_batch_and_with_or_without_gradients() -> None:
    """Collection (small batches, no gradients) and the update (large batches) see the same numbers for
    the same row: no element is computed by other code for sitting in a tensor's tail."""
    x = torch.randn(4096, 7, generator=torch.Generator().manual_seed(0)) * 3
    full = expm1_tanh_(x.clone())
    for rows in (1, 2, 3, 5, 17, 31, 33, 100, 257):
        assert torch.equal(expm1_tanh_(x[:rows].clone()), full[:rows]), rows
    single = torch.stack([expm1_tanh_(x.flatten()[i : i + 1].clone())[0] for i in range(500)])
    assert torch.equal(single, full.flatten()[:500])
    with_grad = x.clone().requires_grad_(True)
    assert torch.equal(FastTanh()(with_grad * 1.0).detach(), full)
    with torch.no_grad():
        assert torch.equal(FastTanh()(x.clone()), full)


def test_fast_tanh_derivatives_are_tanhs() -> None:
    x = torch.randn(6, 3, dtype=torch.double, generator=torch.Generator().manual_seed(0), requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: FastTanh()(t * 1.0), (x,))
    assert torch.autograd.gradgradcheck(lambda t: FastTanh()(t * 1.0), (x,))
    x32 = torch.randn(64, 5, generator=torch.Generator().manual_seed(0))
    (o1, g1, s1), (o2, g2, s2) = (
        _values_and_derivatives(nn.Tanh(), x32),
        _values_and_derivatives(FastTanh(), x32),
    )
    torch.testing.assert_close(o1, o2, rtol=1e-6, atol=1e-6)
    for a, b in zip([*g1, *s1], [*g2, *s2], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_an_experiment_file_asks_for_fast_tanh_by_name() -> None:
    from tshtrain.algorithm import mlp
    from tshtrain.config.builders import ACTIVATIONS

    net = mlp(4, 2, (8, 8), ACTIVATIONS["fast_tanh"])
    assert [type(m) for m in net if not isinstance(m, nn.Linear)] == [FastTanh, FastTanh]
