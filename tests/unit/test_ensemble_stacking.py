"""Stacked members (tshtrain/algorithm/blocks/ensemble.py, issue 35): K separately built MLPs stacked
into one network with a leading member axis and back, per-member gradient clipping, and the property
seed batching rests on: one Adam over the stacked parameters with per-member clipping trains each
member as its own run would (bit for bit independent of the other members' data; equal to separate
runs within float rounding)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    EnsembleLinear,
    clip_grad_norm_per_member_,
    ensemble_mlp,
    mlp,
    stack_mlps,
    unstack_mlp,
)
from tshtrain.errors import ConfigurationError

K = 4
OBS_DIM, ACT_DIM, HIDDEN = 4, 2, (64, 64)


def seeded_mlps(
    num: int, hidden: tuple[int, ...] = HIDDEN, dtype: torch.dtype = torch.float32, first_seed: int = 0
) -> list[nn.Sequential]:
    """``num`` actors 4-64-64-2 (tanh), member k built after ``torch.manual_seed(first_seed + k)``, as K
    separate runs would build them (the global RNG is restored afterwards)."""
    nets = []
    with torch.random.fork_rng():
        for k in range(num):
            torch.manual_seed(first_seed + k)
            nets.append(mlp(OBS_DIM, ACT_DIM, hidden).to(dtype))
    return nets


def params_equal(a: nn.Module, b: nn.Module) -> bool:
    pa, pb = list(a.parameters()), list(b.parameters())
    return len(pa) == len(pb) and all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True))


def max_abs_diff(a: nn.Module, b: nn.Module) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a.parameters(), b.parameters(), strict=True))


# ------------------------------------------------------------------------- stacking and unstacking
def test_stacked_forward_equals_each_mlp_on_its_slice() -> None:
    """Not bit-identical on this CPU (AMD EPYC, torch 2.13, float32): the first layer (4 inputs) gives
    the same bits as nn.Linear, the 64-input layers differ in the last bits (``baddbmm`` and
    ``addmm`` sum the 64 products in different orders); the largest difference at the output seen here
    is 7.5e-8, 8.2e-8 and 2.4e-7 for 1, 7 and 256 rows. Asserted: allclose, atol 1e-6 and rtol 1e-5."""
    mlps = seeded_mlps(K)
    net = stack_mlps(mlps)
    gen = torch.Generator().manual_seed(1)
    for rows in (1, 7, 256):
        x_KNI = torch.randn(K, rows, OBS_DIM, generator=gen)
        with torch.no_grad():
            y_KNO = net(x_KNI.clone())  # in-place tanh: every forward gets its own input
            expected = torch.stack([m(x_KNI[k].clone()) for k, m in enumerate(mlps)])
        assert y_KNO.shape == (K, rows, ACT_DIM)
        torch.testing.assert_close(y_KNO, expected, atol=1e-6, rtol=1e-5)


def test_stack_then_unstack_gives_the_originals_bit_for_bit() -> None:
    for dtype in (torch.float32, torch.float64):
        mlps = seeded_mlps(K, dtype=dtype)
        state = torch.get_rng_state()
        net = stack_mlps(mlps)
        assert torch.equal(torch.get_rng_state(), state), "stacking must not draw from the global RNG"
        assert [type(m) for m in net] == [EnsembleLinear, type(mlps[0][1])] * 2 + [EnsembleLinear]
        for k, original in enumerate(mlps):
            copy_k = unstack_mlp(net, k)
            assert [type(m) for m in copy_k] == [type(m) for m in original]
            assert params_equal(copy_k, original)
            assert all(p.dtype == dtype and p.is_contiguous() for p in copy_k.parameters())
        # copies, not views: changing the copy changes neither the stacked net nor the original
        with torch.no_grad():
            for p in unstack_mlp(net, 1).parameters():
                p.add_(1.0)
        assert params_equal(unstack_mlp(net, 1), mlps[1])


def test_from_linears_and_member_linear_copy_bit_for_bit() -> None:
    with torch.random.fork_rng():
        torch.manual_seed(3)
        linears = [nn.Linear(5, 1) for _ in range(3)]  # out_features 1: a transposed weight is contiguous
    layer = EnsembleLinear.from_linears(linears)
    assert layer.weight.shape == (3, 5, 1) and layer.bias.shape == (3, 1, 1)
    for k, linear in enumerate(linears):
        back = layer.member_linear(k)
        assert type(back) is nn.Linear
        assert torch.equal(back.weight, linear.weight) and torch.equal(back.bias, linear.bias)
        assert back.weight.data_ptr() != layer.weight.data_ptr()
    with torch.no_grad():
        layer.member_linear(0).weight.add_(1.0)
        linears[0].weight.add_(1.0)
    assert not torch.equal(layer.member_linear(0).weight, linears[0].weight)


def test_unstack_of_an_ensemble_mlp_runs_like_its_member() -> None:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = ensemble_mlp(3, OBS_DIM, 1, (16,))
    x_NI = torch.randn(5, OBS_DIM, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        stacked = net(x_NI.expand(3, *x_NI.shape).clone())
        for k in range(3):
            torch.testing.assert_close(unstack_mlp(net, k)(x_NI.clone()), stacked[k], atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------------------- per-member clipping
def test_clip_per_member_hand_computed() -> None:
    """Member 0's gradient (3, 0, 0 | 4, 0) has norm 5 and is scaled by 1 / (5 + 1e-6); member 1's
    (0.3, 0, 0 | 0.4, 0) has norm 0.5 < 1 and is left as it is (coef clamped to 1); a parameter
    without a gradient is skipped."""
    a = torch.zeros(2, 3, requires_grad=True)
    b = torch.zeros(2, 2, requires_grad=True)
    no_grad = torch.zeros(2, 7, requires_grad=True)
    a.grad = torch.tensor([[3.0, 0.0, 0.0], [0.3, 0.0, 0.0]])
    b.grad = torch.tensor([[4.0, 0.0], [0.4, 0.0]])
    norms = clip_grad_norm_per_member_([a, no_grad, b], 1.0, 2)
    torch.testing.assert_close(norms, torch.tensor([5.0, 0.5]))
    coef = torch.tensor(1.0) / (torch.tensor(5.0) + 1e-6)
    torch.testing.assert_close(a.grad, torch.tensor([[3.0 * coef.item(), 0.0, 0.0], [0.3, 0.0, 0.0]]))
    torch.testing.assert_close(b.grad, torch.tensor([[4.0 * coef.item(), 0.0], [0.4, 0.0]]))
    assert no_grad.grad is None
    torch.testing.assert_close(clip_grad_norm_per_member_([no_grad], 1.0, 2), torch.zeros(2))


def test_clip_per_member_equals_torch_clip_of_each_unstacked_member() -> None:
    """Member k's loss is scaled by 10^k so that some members are clipped and some are not. Not
    bit-identical (the weights are transposed, so the squares are summed in another order); measured
    here: the norms within 1.04e-7 relative of torch's, the clipped gradients within 1.35e-7 (about one
    float32 ulp). Asserted: rtol 1e-6."""
    mlps = seeded_mlps(K)
    net = stack_mlps(mlps)
    x_KNI = torch.randn(K, 32, OBS_DIM, generator=torch.Generator().manual_seed(2))
    scale_K11 = (10.0 ** torch.arange(K, dtype=torch.float32)).view(K, 1, 1)
    (net(x_KNI) * scale_K11).pow(2).mean(dim=(1, 2)).sum().backward()
    members = [unstack_mlp(net, k) for k in range(K)]
    for k, member in enumerate(members):
        for p_member, p_stacked in zip(member.parameters(), net.parameters(), strict=True):
            assert p_stacked.grad is not None
            grad_k = p_stacked.grad[k]
            p_member.grad = (grad_k.t() if p_member.dim() == 2 else grad_k[0]).clone()
    max_norm = 1.0
    norms = clip_grad_norm_per_member_(list(net.parameters()), max_norm, K)
    expected = torch.stack([torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm) for m in members])
    assert bool((norms > max_norm).any()) and bool((norms < max_norm).any()), norms
    torch.testing.assert_close(norms, expected, rtol=1e-6, atol=0.0)
    for k, member in enumerate(members):
        for p_member, p_stacked in zip(member.parameters(), net.parameters(), strict=True):
            assert p_stacked.grad is not None and p_member.grad is not None
            grad_k = p_stacked.grad[k]
            clipped = grad_k.t() if p_member.dim() == 2 else grad_k[0]
            torch.testing.assert_close(clipped, p_member.grad, rtol=1e-6, atol=1e-12)


# ------------------------------------------------------------------------- independence
def train_stacked(net: nn.Sequential, x_KNI: torch.Tensor, y_KNO: torch.Tensor, steps: int) -> None:
    """``steps`` Adam steps on the members' summed regression losses, each member's gradient clipped
    to norm 0.05 on its own."""
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        (net(x_KNI) - y_KNO).pow(2).mean(dim=(1, 2)).sum().backward()
        norms = clip_grad_norm_per_member_(list(net.parameters()), 0.05, K)
        assert bool((norms > 0.05).all()), "the test should exercise the clipping"
        optimizer.step()


def test_a_members_data_changes_no_other_member() -> None:
    gen = torch.Generator().manual_seed(4)
    x_KNI = torch.randn(K, 64, OBS_DIM, generator=gen)
    y_KNO = torch.randn(K, 64, ACT_DIM, generator=gen)
    j = 2
    x_other, y_other = x_KNI.clone(), y_KNO.clone()
    x_other[j] = torch.randn(64, OBS_DIM, generator=gen)
    y_other[j] = 10.0 * torch.randn(64, ACT_DIM, generator=gen)
    nets = [stack_mlps(seeded_mlps(K)) for _ in range(2)]
    train_stacked(nets[0], x_KNI, y_KNO, steps=5)
    train_stacked(nets[1], x_other, y_other, steps=5)
    for k in range(K):
        same = params_equal(unstack_mlp(nets[0], k), unstack_mlp(nets[1], k))
        assert same is (k != j), f"member {k}: parameters equal = {same}"


# ------------------------------------------------------------------------- a PPO actor update
def ppo_actor_loss(
    logits: torch.Tensor, act: torch.Tensor, old_log_prob: torch.Tensor, adv: torch.Tensor
) -> torch.Tensor:
    """PPO's clipped surrogate plus an entropy bonus, the mean over the last (row) axis: a scalar for
    one member's (N, ...) tensors, (K,) for stacked (K, N, ...) ones. Advantages are normalised over
    each member's own rows."""
    adv = (adv - adv.mean(dim=-1, keepdim=True)) / (adv.std(dim=-1, keepdim=True) + 1e-8)
    dist = torch.distributions.Categorical(logits=logits)
    ratio = (dist.log_prob(act) - old_log_prob).exp()
    surrogate = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    return -(surrogate.mean(dim=-1)) - 0.01 * dist.entropy().mean(dim=-1)


MAX_GRAD_NORM = 0.1
STEPS = 4
LR = 3e-3


def ppo_data(num: int, rows: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    obs = torch.randn(num, rows, OBS_DIM, generator=gen, dtype=dtype)
    act = torch.randint(0, ACT_DIM, (num, rows), generator=gen)
    adv = 3.0 * torch.randn(num, rows, generator=gen, dtype=dtype) + torch.arange(num).view(num, 1)
    return obs, act, adv


def separate_updates(
    mlps: list[nn.Sequential], obs: torch.Tensor, act: torch.Tensor, adv: torch.Tensor
) -> None:
    """K runs, one after the other: each its own Adam and torch's clipping."""
    for k, net in enumerate(mlps):
        optimizer = torch.optim.Adam(net.parameters(), lr=LR)
        with torch.no_grad():
            old = torch.distributions.Categorical(logits=net(obs[k])).log_prob(act[k])
        for _ in range(STEPS):
            optimizer.zero_grad()
            ppo_actor_loss(net(obs[k]), act[k], old, adv[k]).backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), MAX_GRAD_NORM)
            optimizer.step()


def stacked_update(
    net: nn.Sequential, obs: torch.Tensor, act: torch.Tensor, adv: torch.Tensor, *, per_member: bool
) -> list[float]:
    """All K in one network: one Adam, the members' losses summed, clipping per member (or, to show
    the comparison can fail, torch's clipping of all members at once). Returns the first step's norms."""
    optimizer = torch.optim.Adam(net.parameters(), lr=LR)
    num = obs.shape[0]
    with torch.no_grad():
        old = torch.distributions.Categorical(logits=net(obs)).log_prob(act)
    first_norms: list[float] = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        ppo_actor_loss(net(obs), act, old, adv).sum().backward()
        if per_member:
            norms = clip_grad_norm_per_member_(list(net.parameters()), MAX_GRAD_NORM, num)
        else:
            norms = torch.nn.utils.clip_grad_norm_(net.parameters(), MAX_GRAD_NORM).expand(num)
        first_norms = first_norms or norms.tolist()
        optimizer.step()
    return first_norms


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 5e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("per_member", [True, False])
def test_a_stacked_ppo_actor_update_equals_separate_updates(
    dtype: torch.dtype, tolerance: float, per_member: bool
) -> None:
    """3 members (actors 4-64-64-2, tanh, seeds 0-2), 256 rows each, 4 Adam steps (lr 3e-3) of PPO's
    clipped surrogate with an entropy bonus, advantages normalised per member, gradient norms clipped to
    0.1 (every member's first gradient norm is 0.16-0.18). Measured here, the largest difference between
    a stacked member's weights and its separate run's: float32 8.7e-6, float64 9.9e-15 (asserted: 5e-5 and
    1e-12). Most weights end bit for bit equal (median difference 0); the largest difference sits at a
    weight whose gradient is near zero, where Adam's ``m / sqrt(v)`` magnifies the last-bit differences
    of the forward (stacked ``baddbmm`` against ``nn.Linear``). Clipping all members at once instead
    ends 1.2e-3 to 4.4e-3 away (asserted: more than the tolerance), which shows the comparison can fail."""
    num = 3
    obs, act, adv = ppo_data(num, 256, dtype)
    separate = seeded_mlps(num, dtype=dtype)
    net = stack_mlps([copy.deepcopy(m) for m in separate])
    separate_updates(separate, obs, act, adv)
    norms = stacked_update(net, obs, act, adv, per_member=per_member)
    assert min(norms) > MAX_GRAD_NORM, norms
    diffs = [max_abs_diff(unstack_mlp(net, k), separate[k]) for k in range(num)]
    if per_member:
        assert max(diffs) < tolerance, diffs
    else:
        assert min(diffs) > tolerance, diffs


# ------------------------------------------------------------------------- refusals
def _tanh_mlp(hidden: tuple[int, ...] = HIDDEN) -> nn.Sequential:
    return seeded_mlps(1, hidden=hidden)[0]


REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    ("no mlps", lambda: stack_mlps([]), "stack_mlps: needs at least one MLP"),
    (
        "sizes",
        lambda: stack_mlps([_tanh_mlp(), _tanh_mlp((32, 64))]),
        "stack_mlps: mlps[1][0] has out_features 32, mlps[0][0] has 64; all members must match.",
    ),
    (
        "lengths",
        lambda: stack_mlps([_tanh_mlp(), _tanh_mlp((64,))]),
        "stack_mlps: mlps[1] has 3 modules, mlps[0] has 5",
    ),
    (
        "activation types",
        lambda: stack_mlps([_tanh_mlp(), mlp(OBS_DIM, ACT_DIM, HIDDEN, activation=nn.ReLU)]),
        "stack_mlps: mlps[1][1] is ReLU(inplace=True), mlps[0][1] is InplaceTanh()",
    ),
    (
        "activation settings",
        lambda: stack_mlps(
            [
                nn.Sequential(nn.Linear(4, 2), nn.LeakyReLU(0.1)),
                nn.Sequential(nn.Linear(4, 2), nn.LeakyReLU(0.2)),
            ]
        ),
        "mlps[1][1] is LeakyReLU(negative_slope=0.2), mlps[0][1] is LeakyReLU(negative_slope=0.1)",
    ),
    (
        "dtypes",
        lambda: stack_mlps([_tanh_mlp(), _tanh_mlp().double()]),
        "stack_mlps: mlps[1][0] has dtype torch.float64, mlps[0][0] has torch.float32",
    ),
    (
        "module with parameters",
        lambda: stack_mlps([nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))]),
        "stack_mlps: mlps[0][1] is LayerNorm; allowed: nn.Linear or a parameter-free element-wise activation",
    ),
    (
        "activation with parameters",
        lambda: stack_mlps([nn.Sequential(nn.Linear(4, 8), nn.PReLU(), nn.Linear(8, 2))]),
        "stack_mlps: mlps[0][1] is PReLU; allowed",
    ),
    (
        "not element-wise",
        lambda: stack_mlps([nn.Sequential(nn.Linear(4, 8), nn.Softmax(dim=0))]),
        "stack_mlps: mlps[0][1] is Softmax; allowed",
    ),
    ("no linear", lambda: stack_mlps([nn.Sequential(nn.Tanh())]), "mlps[0] has no nn.Linear layer"),
    ("not sequential", lambda: stack_mlps([nn.Linear(4, 2)]), "mlps[0] is Linear; allowed: nn.Sequential"),
    ("no linears", lambda: EnsembleLinear.from_linears([]), "needs at least one nn.Linear"),
    (
        "no bias",
        lambda: EnsembleLinear.from_linears([nn.Linear(4, 2, bias=False)]),
        "EnsembleLinear.from_linears: linears[0] has bias=False; allowed: nn.Linear with a bias.",
    ),
    (
        "in_features",
        lambda: EnsembleLinear.from_linears([nn.Linear(4, 2), nn.Linear(3, 2)]),
        "EnsembleLinear.from_linears: linears[1] has in_features 3, linears[0] has 4",
    ),
    (
        "not linear",
        lambda: EnsembleLinear.from_linears([nn.Linear(4, 2), nn.Bilinear(4, 4, 2)]),
        "linears[1] is Bilinear; allowed: nn.Linear.",
    ),
    (
        "member index",
        lambda: EnsembleLinear(2, 3, 4).member_linear(2),
        "EnsembleLinear.member_linear: k=2 is out of range; allowed 0..1.",
    ),
    (
        "unstack a plain mlp",
        lambda: unstack_mlp(nn.Sequential(nn.Linear(4, 2)), 0),
        "unstack_mlp: net[0] is Linear; allowed: EnsembleLinear",
    ),
    (
        "member axis",
        lambda: clip_grad_norm_per_member_([torch.zeros(3, 2)], 1.0, 2),
        "clip_grad_norm_per_member_: params[0] has shape (3, 2); its first dim must be num_members=2",
    ),
    ("scalar", lambda: clip_grad_norm_per_member_([torch.tensor(1.0)], 1.0, 2), "params[0] has shape ()"),
    ("num_members", lambda: clip_grad_norm_per_member_([], 1.0, 0), "num_members must be >= 1, got 0"),
]


@pytest.mark.parametrize(("call", "expected"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusals_are_one_line_and_name_the_problem(call: Callable[[], object], expected: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    assert expected in message, message
