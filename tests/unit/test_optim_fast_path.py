"""The gradient step's fast paths (issue 36: ``tshtrain.algorithm.blocks.optim``) are torch's arithmetic
without its per-call setup: parameters, optimizer states and norms must be bit-identical to torch's
``Adam.step`` / ``zero_grad`` / ``clip_grad_norm_`` over many steps, and anything they do not cover must
take torch's own path (hooks run, schedulers see the step)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tshtrain.algorithm.blocks import optim as fast


def _net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


OptimizerFactory = Callable[[list[Any]], torch.optim.Optimizer]

CASES: dict[str, OptimizerFactory] = {
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2, fused=True),
    "adam eps amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, eps=1e-5, amsgrad=True, fused=True),
    "adam decay maximize": lambda p: torch.optim.Adam(
        p, lr=1e-2, weight_decay=0.1, maximize=True, fused=True
    ),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.05, fused=True),
    "two groups": lambda p: torch.optim.Adam(
        [{"params": p[:2], "lr": 1e-2}, {"params": p[2:], "lr": 3e-3, "betas": (0.8, 0.99)}], fused=True
    ),
    "not fused": lambda p: torch.optim.Adam(p, lr=1e-2),
    "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
}


def _train(
    make: OptimizerFactory, use_fast: bool, *, clip: float | None = 0.5
) -> tuple[list[torch.Tensor], ...]:
    net = _net()
    params = list(net.parameters())
    optimizer = make(params)
    generator = torch.Generator().manual_seed(1)
    norms = []
    for i in range(40):
        if i == 20:  # a schedule changes the learning rate between steps
            for group in optimizer.param_groups:
                group["lr"] = group["lr"] * 0.5
        if use_fast:
            fast.zero_grad(optimizer)
        else:
            optimizer.zero_grad(set_to_none=True)
        x = torch.randn(32, 4, generator=generator)
        loss = (net(x) ** 2).mean() * (10.0 if i % 3 == 0 else 1.0)
        loss.backward()
        if i == 7:  # a parameter without a gradient in one step
            params[0].grad = None
        if clip is not None:
            norm = (
                fast.clip_grad_norm(params, clip)
                if use_fast
                else torch.nn.utils.clip_grad_norm_(params, clip)
            )
            norms.append(norm.clone())
        if use_fast:
            fast.step(optimizer)
        else:
            optimizer.step()
    states = [t.clone() for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return [p.detach().clone() for p in params], states, norms


@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_paths_are_bit_identical_to_torchs(case: str) -> None:
    expected = _train(CASES[case], use_fast=False)
    got = _train(CASES[case], use_fast=True)
    for want, have in zip(expected, got, strict=True):
        assert len(want) == len(have) > 0
        assert all(torch.equal(a, b) for a, b in zip(want, have, strict=True))


def test_a_loaded_optimizer_state_is_the_one_stepped() -> None:
    """After ``load_state_dict`` the optimizer holds new state tensors: the fast step must use them."""
    net_a, net_b = _net(), _net()
    opt_a = torch.optim.Adam(net_a.parameters(), lr=1e-2, fused=True)
    opt_b = torch.optim.Adam(net_b.parameters(), lr=1e-2, fused=True)
    for net, opt in ((net_a, opt_a), (net_b, opt_b)):
        for _ in range(3):
            opt.zero_grad()
            net(torch.ones(2, 4)).sum().backward()
            opt.step()
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))  # (else the two share state tensors)
    net_b.load_state_dict(net_a.state_dict())
    for net, opt, stepper in ((net_a, opt_a, torch.optim.Adam.step), (net_b, opt_b, None)):
        opt.zero_grad()
        net(torch.ones(2, 4)).sum().backward()
        if stepper is None:
            fast.step(opt)
        else:
            stepper(opt)
    assert all(torch.equal(a, b) for a, b in zip(net_a.parameters(), net_b.parameters(), strict=True))


def test_hooks_and_schedulers_see_every_step() -> None:
    net = _net()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    calls: list[str] = []
    handle = optimizer.register_step_post_hook(lambda *_: calls.append("post"))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for _ in range(3):
        fast.zero_grad(optimizer)
        net(torch.ones(2, 4)).sum().backward()
        fast.step(optimizer)  # the first step makes the state (torch's path), then the hook keeps it there
    assert calls == ["post"] * 3
    handle.remove()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "lr_scheduler.step() before optimizer.step()" would fail here
        for _ in range(2):
            fast.zero_grad(optimizer)
            net(torch.ones(2, 4)).sum().backward()
            fast.step(optimizer)
            scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**2)


def test_zero_grad_clears_every_gradient() -> None:
    net = _net()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    net(torch.ones(2, 4)).sum().backward()
    fast.zero_grad(optimizer)
    assert all(p.grad is None for p in net.parameters())


def test_clipping_without_foreach_or_gradients_is_torchs() -> None:
    net = _net()
    assert float(fast.clip_grad_norm(net.parameters(), 1.0)) == 0.0  # no gradients yet
    net(torch.ones(2, 4)).sum().backward()
    grads = [p.grad.clone() for p in net.parameters() if p.grad is not None]
    norm = fast.clip_grad_norm(net.parameters(), 1e-3, foreach=False)
    expected = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    assert torch.equal(norm, expected)
    assert (
        float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in net.parameters()]))) <= 1.001e-3
    )


def test_a_step_replaced_on_the_optimizer_is_called() -> None:
    """A wrapper set on the instance (logging, EMA, a compiled step) is not bypassed; an LR scheduler's
    wrapper of the class's step still allows the fast path."""
    net = _net()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    net(torch.ones(2, 4)).sum().backward()
    optimizer.step()  # the state exists now
    torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    assert fast._fused_adam_groups(optimizer) is not None
    calls: list[str] = []
    original = optimizer.step

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append("step")
        return original(*args, **kwargs)

    optimizer.step = wrapper  # type: ignore[method-assign]
    assert fast._fused_adam_groups(optimizer) is None
    fast.step(optimizer)
    assert calls == ["step"]


def test_adamw_groups_that_do_not_name_their_weight_decay_take_torchs_step() -> None:
    """torch < 2.7's AdamW has no ``decoupled_weight_decay`` group key: the fused Adam kernel would apply
    weight decay the other way, so such groups take AdamW's own step."""
    optimizer = torch.optim.AdamW(_net().parameters(), lr=1e-2, fused=True)
    assert fast._fused_adam_groups(optimizer) is not None
    del optimizer.param_groups[0]["decoupled_weight_decay"]
    assert fast._fused_adam_groups(optimizer) is None
