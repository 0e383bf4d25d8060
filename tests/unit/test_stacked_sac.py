"""``SAC.stacked_update`` (issue 35): K SAC members' gradient steps (critic, actor, temperature, Polyak
target) on stacked networks equal K separate ``update`` calls to float rounding, each member's action
noise drawn from its own generator in its own update's order; no number crosses members; what cannot
be stacked is refused."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import SAC, QEnsemble, SACParams, TanhGaussianPolicy, mlp
from tshtrain.algorithm.blocks.schedules import LinearSchedule
from tshtrain.algorithm.blocks.stacked_update import StackCache
from tshtrain.data import PrioritizedVectorReplayBuffer, TensorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError

OBS, ACT = 3, 2
SPACE = gym.spaces.Box(-2.0, 2.0, (ACT,), np.float32)


def make_sac(
    seed: int, critic_hidden: tuple[int, ...] = (16, 16), *, plain: bool = True, **overrides: object
) -> SAC:
    """``plain``: an MLP actor (the stacked update's baddbmm path); else one with a LayerNorm (its vmap
    path)."""
    torch.manual_seed(seed)
    actor = (
        mlp(OBS, 2 * ACT, (16, 16)) if plain else nn.Sequential(nn.LayerNorm(OBS), mlp(OBS, 2 * ACT, (16,)))
    )
    policy = TanhGaussianPolicy(actor, SPACE, seed=seed)
    settings: dict[str, object] = {"tau": 0.05, **overrides}
    return SAC(
        policy=policy,
        critic=QEnsemble(OBS, ACT, critic_hidden),
        params=SACParams(**settings),  # type: ignore[arg-type]
    )


def filled(seed: int, kind: str = "uniform", shift: float = 0.0) -> BaseReplayBuffer | TensorReplayBuffer:
    rng = np.random.default_rng(seed)
    if kind == "tensor":
        buffer: BaseReplayBuffer | TensorReplayBuffer = TensorReplayBuffer(200, 2, device="cpu", seed=seed)
    elif kind == "prioritized":
        buffer = PrioritizedVectorReplayBuffer(200, 2, alpha=0.6, beta=0.4, seed=seed)
    else:
        buffer = VectorReplayBuffer(200, 2, seed=seed)
    obs = rng.normal(size=(2, OBS)).astype(np.float32)
    for _ in range(60):
        nxt = rng.normal(size=(2, OBS)).astype(np.float32)
        fields = {
            "obs": obs,
            "act": rng.uniform(-1, 1, (2, ACT)).astype(np.float32),
            "rew": (rng.normal(size=2) + shift).astype(np.float32),
            "terminated": rng.random(2) < 0.1,
            "truncated": np.zeros(2, dtype=bool),
            "obs_next": nxt,
        }
        if kind == "tensor":
            buffer.add(**{k: torch.as_tensor(v) for k, v in fields.items()})  # type: ignore[arg-type]
        else:
            buffer.add(**fields)  # type: ignore[arg-type]
        obs = nxt
    return buffer


def state(sac: SAC) -> list[torch.Tensor]:
    nets = [sac.policy.actor, sac.nets.critic, sac.nets.target_critic.net]
    tensors = [p.detach().clone() for net in nets for p in net.parameters()]
    return [*tensors, sac.temperature.log_alpha.detach().clone()]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"auto_alpha": False, "alpha": 0.2, "n_step": 3},
        {"lr_schedule": LinearSchedule(num_update_steps=20)},
    ],
    ids=["auto-alpha", "fixed-alpha-nstep", "lr-schedule"],
)
@pytest.mark.parametrize("kind", ["uniform", "prioritized", "tensor"])
@pytest.mark.parametrize("plain", [True, False], ids=["baddbmm", "vmap"])
def test_each_member_gets_its_own_gradient_steps(
    overrides: dict[str, object], kind: str, plain: bool
) -> None:
    k = 3
    solo = [make_sac(s, plain=plain, **overrides) for s in range(k)]
    stacked = [make_sac(s, plain=plain, **overrides) for s in range(k)]
    solo_buffers = [filled(s, kind) for s in range(k)]
    stacked_buffers = [filled(s, kind) for s in range(k)]
    for _ in range(2):  # 2 x 3 steps: Adam state and the generators' positions written back in between
        expected = [[m.update(b, 16) for _ in range(3)] for m, b in zip(solo, solo_buffers, strict=True)]
        got = SAC.stacked_update(stacked, stacked_buffers, 16, 3)
        for e_steps, g_steps in zip(expected, got, strict=True):
            for e, g in zip(e_steps, g_steps, strict=True):
                for name in ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy"):
                    assert getattr(g, name) == pytest.approx(getattr(e, name), rel=1e-4, abs=1e-5), name
    for s, m, sb, mb in zip(solo, stacked, solo_buffers, stacked_buffers, strict=True):
        for a, b in zip(state(s), state(m), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        assert m.lrs.num_updates == s.lrs.num_updates == 6
        assert m.nets.actor_optim.param_groups[0]["lr"] == s.nets.actor_optim.param_groups[0]["lr"]
        assert torch.equal(m.policy.generator.get_state(), s.policy.generator.get_state())
        if kind == "prioritized":
            np.testing.assert_allclose(mb.priorities(), sb.priorities(), rtol=1e-4)  # type: ignore[union-attr]


@pytest.mark.parametrize("plain", [True, False], ids=["baddbmm", "vmap"])
def test_no_number_crosses_members(plain: bool) -> None:
    runs = []
    for shift in (0.0, 3.0):
        members = [make_sac(s, plain=plain) for s in range(3)]
        buffers = [filled(s, shift=shift if s == 1 else 0.0) for s in range(3)]
        SAC.stacked_update(members, buffers, 16, 4)
        runs.append([state(m) for m in members])
    plain, changed = runs
    for k in (0, 2):
        assert all(torch.equal(a, b) for a, b in zip(plain[k], changed[k], strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(plain[1], changed[1], strict=True))


def test_members_that_cannot_be_stacked_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="SACParams differ"):
        SAC.stacked_update([make_sac(0), make_sac(1, tau=0.1)], [filled(0), filled(1)], 16, 1)
    ahead = make_sac(1)
    ahead.update(filled(1), 16)
    with pytest.raises(ConfigurationError, match="lockstep"):
        SAC.stacked_update([make_sac(0), ahead], [filled(0), filled(1)], 16, 1)
    with pytest.raises(ConfigurationError, match="prioritized and some are not"):
        SAC.stacked_update([make_sac(0), make_sac(1)], [filled(0), filled(1, "prioritized")], 16, 1)
    with pytest.raises(ConfigurationError, match="differ from member 0's"):  # another critic
        SAC.stacked_update([make_sac(0), make_sac(1, (32, 16))], [filled(0), filled(1)], 16, 1)
    assert SAC.stacked_update([make_sac(0)], [filled(0)], 16, 0) == [[]]


@pytest.mark.parametrize("plain", [True, False], ids=["baddbmm", "vmap"])
def test_plain_networks_take_the_batched_matmul_path(plain: bool) -> None:
    """An MLP actor and a QEnsemble critic: the K seeds' twin critics run as one ensemble of 2K
    (no vmap); any other actor goes through vmap."""
    from tshtrain.algorithm.algos.sac import _member_terms, stack_members

    members = [make_sac(s, plain=plain) for s in range(2)]
    stack = stack_members(members)
    assert _member_terms(members[0], stack)[1] is plain
    ensemble = stack.stacked_ensemble("critic.net")
    assert ensemble is not None
    x = torch.randn(2, 5, OBS + ACT)
    q = ensemble(x.unsqueeze(1).expand(2, 2, 5, OBS + ACT))  # (seeds, critics, N, 1)
    for k, member in enumerate(members):
        torch.testing.assert_close(q[k].squeeze(-1), member.nets.critic(x[k, :, :OBS], x[k, :, OBS:]))


def test_a_parameter_held_by_two_optimizers_is_refused() -> None:
    """Its own update would step it twice, a stacked update once: refused in one line."""
    from tshtrain.algorithm.algos.sac import stack_members

    members = [make_sac(s) for s in range(2)]
    for m in members:
        m.nets.actor_optim.param_groups[0]["params"].append(next(m.nets.critic.parameters()))
    with pytest.raises(ConfigurationError, match="is held by its optimizers 0 and 1"):
        stack_members(members)


def adam_state(sac: SAC) -> list[torch.Tensor]:
    optimizers = [sac.nets.critic_optim, sac.nets.actor_optim, sac.temperature.optim]
    return [
        v.clone()
        for o in optimizers
        for s in o.state.values()
        for v in s.values()
        if isinstance(v, torch.Tensor)
    ]


def test_a_cached_stack_gives_the_same_numbers_and_is_built_once() -> None:
    """Calls through one StackCache reuse the stack (built once) and end bit for bit where calls
    that stack afresh end: weights, Adam state, generators."""
    fresh = [make_sac(s) for s in range(3)]
    cached = [make_sac(s) for s in range(3)]
    fresh_buffers = [filled(s) for s in range(3)]
    cached_buffers = [filled(s) for s in range(3)]
    cache = StackCache()
    for _ in range(4):
        SAC.stacked_update(fresh, fresh_buffers, 16, 2)
        SAC.stacked_update(cached, cached_buffers, 16, 2, cache=cache)
    assert cache.num_builds == 1
    for a, b in zip(fresh, cached, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(state(a), state(b), strict=True))
        assert all(torch.equal(x, y) for x, y in zip(adam_state(a), adam_state(b), strict=True))
        assert torch.equal(a.policy.generator.get_state(), b.policy.generator.get_state())


def _nudge(sac: SAC) -> None:
    with torch.no_grad():
        next(sac.policy.actor.parameters()).add_(0.01)


def _reload_optimizer(sac: SAC) -> None:
    saved = copy.deepcopy(sac.nets.critic_optim.state_dict())
    saved["state"][0]["exp_avg"].mul_(0.5)
    sac.nets.critic_optim.load_state_dict(saved)  # other state tensors, other values


def _new_target(sac: SAC) -> None:
    layer = next(
        m
        for m in sac.nets.target_critic.net.modules()
        if isinstance(getattr(m, "weight", None), nn.Parameter)
    )
    layer.weight = nn.Parameter(layer.weight.detach() * 0.5, requires_grad=False)


@pytest.mark.parametrize(
    "change", [_nudge, _reload_optimizer, _new_target], ids=["in-place", "optimizer", "replaced"]
)
def test_a_member_changed_between_calls_is_stacked_again(change: object) -> None:
    """A change to member 1 between two calls (a weight changed in place, its optimizer state loaded, a
    parameter replaced) makes the cache stack again: the numbers are those of calls that stack afresh."""
    assert callable(change)
    fresh = [make_sac(s) for s in range(3)]
    cached = [make_sac(s) for s in range(3)]
    fresh_buffers = [filled(s) for s in range(3)]
    cached_buffers = [filled(s) for s in range(3)]
    cache = StackCache()
    SAC.stacked_update(fresh, fresh_buffers, 16, 2)
    SAC.stacked_update(cached, cached_buffers, 16, 2, cache=cache)
    change(fresh[1])
    change(cached[1])
    SAC.stacked_update(fresh, fresh_buffers, 16, 2)
    SAC.stacked_update(cached, cached_buffers, 16, 2, cache=cache)
    assert cache.num_builds == 2
    for a, b in zip(fresh, cached, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(state(a), state(b), strict=True))


def test_a_failed_call_leaves_no_stale_stack() -> None:
    """A call that fails after a gradient step (here: member 2's buffer at the second step) leaves the
    members unchanged and the cache stacks again at the next call."""
    members = [make_sac(s) for s in range(3)]
    buffers = [filled(s) for s in range(3)]
    cache = StackCache()
    SAC.stacked_update(members, buffers, 16, 1, cache=cache)
    before = [state(m) for m in members]
    calls = {"n": 0}

    def failing_scope() -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("sampling failed")
        return contextlib.nullcontext()

    scopes = [contextlib.nullcontext, contextlib.nullcontext, failing_scope]
    with pytest.raises(RuntimeError, match="sampling failed"):
        SAC.stacked_update(members, buffers, 16, 2, scopes=scopes, cache=cache)
    for m, saved in zip(members, before, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(state(m), saved, strict=True))
    SAC.stacked_update(members, buffers, 16, 1, cache=cache)
    assert cache.num_builds == 2
