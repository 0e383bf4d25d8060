"""``DQN.stacked_update`` (issue 35): K DQN members' gradient steps on stacked online and target
networks equal K separate ``update`` calls to float rounding (target copies, double Q, n-step,
prioritized replay included), no number crosses members, and what cannot be stacked is refused."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from tshtrain.algorithm import DQN, DQNParams, QValuePolicy, dueling_mlp, mlp
from tshtrain.algorithm.blocks.stacked_update import StackCache
from tshtrain.data import PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError

OBS = 4


def make_dqn(seed: int, dueling: bool = False, **overrides: object) -> DQN:
    """A plain MLP Q-network (the stacked update's baddbmm path) or a dueling one (its vmap path)."""
    torch.manual_seed(seed)
    q_net = dueling_mlp(OBS, 2, (16,), (8,)) if dueling else mlp(OBS, 2, (16, 16))
    policy = QValuePolicy(q_net, gym.spaces.Discrete(2), seed=seed)
    settings: dict[str, object] = {"lr": 1e-3, "target_update_freq": 3, "max_grad_norm": 1.0, **overrides}
    return DQN(policy=policy, params=DQNParams(**settings))  # type: ignore[arg-type]


def filled(seed: int, prioritized: bool = False, shift: float = 0.0) -> BaseReplayBuffer:
    rng = np.random.default_rng(seed)
    buffer: BaseReplayBuffer = (
        PrioritizedVectorReplayBuffer(200, 2, alpha=0.6, beta=0.4, seed=seed)
        if prioritized
        else VectorReplayBuffer(200, 2, seed=seed)
    )
    obs = rng.normal(size=(2, OBS)).astype(np.float32)
    for _ in range(60):
        nxt = rng.normal(size=(2, OBS)).astype(np.float32)
        terminated = rng.random(2) < 0.1
        buffer.add(
            obs=obs,
            act=rng.integers(0, 2, 2),
            rew=(rng.normal(size=2) + shift).astype(np.float32),
            terminated=terminated,
            truncated=np.zeros(2, dtype=bool),
            obs_next=nxt,
        )
        obs = nxt
    return buffer


def weights(dqn: DQN) -> list[torch.Tensor]:
    return [p.detach().clone() for p in [*dqn.policy.q_net.parameters(), *dqn.target_q_net.net.parameters()]]


@pytest.mark.parametrize(
    "overrides",
    [{}, {"is_double": False, "huber_loss": False, "n_step": 3}, {"max_grad_norm": None}],
    ids=["double-huber", "plain-mse-nstep", "no-clip"],
)
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("dueling", [False, True], ids=["mlp", "dueling"])
def test_each_member_gets_its_own_gradient_steps(
    overrides: dict[str, object], prioritized: bool, dueling: bool
) -> None:
    k = 3
    solo = [make_dqn(s, dueling, **overrides) for s in range(k)]
    stacked = [make_dqn(s, dueling, **overrides) for s in range(k)]
    solo_buffers = [filled(s, prioritized) for s in range(k)]
    stacked_buffers = [filled(s, prioritized) for s in range(k)]
    for _ in range(2):  # 2 x 4 steps: target copies at 3 and 6, state written back in between
        expected = [[m.update(b, 16) for _ in range(4)] for m, b in zip(solo, solo_buffers, strict=True)]
        got = DQN.stacked_update(stacked, stacked_buffers, 16, 4)
        for e_steps, g_steps in zip(expected, got, strict=True):
            for e, g in zip(e_steps, g_steps, strict=True):
                assert g.loss == pytest.approx(e.loss, rel=1e-4, abs=1e-6)
                assert g.q_mean == pytest.approx(e.q_mean, rel=1e-4, abs=1e-6)
                assert g.grad_norm == pytest.approx(e.grad_norm, rel=1e-4, abs=1e-6)
                assert g.epsilon == e.epsilon
    for s, m, sb, mb in zip(solo, stacked, solo_buffers, stacked_buffers, strict=True):
        for a, b in zip(weights(s), weights(m), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        assert m.learner.num_gradient_steps == s.learner.num_gradient_steps == 8
        if prioritized:  # the same priorities written back, per member
            np.testing.assert_allclose(mb.priorities(), sb.priorities(), rtol=1e-4)  # type: ignore[attr-defined]


def test_no_number_crosses_members() -> None:
    runs = []
    for shift in (0.0, 3.0):
        members = [make_dqn(s) for s in range(3)]
        buffers = [filled(s, shift=shift if s == 1 else 0.0) for s in range(3)]
        DQN.stacked_update(members, buffers, 16, 5)
        runs.append([weights(m) for m in members])
    plain, changed = runs
    for k in (0, 2):
        assert all(torch.equal(a, b) for a, b in zip(plain[k], changed[k], strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(plain[1], changed[1], strict=True))


def test_members_that_cannot_be_stacked_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="DQNParams differ"):
        DQN.stacked_update([make_dqn(0), make_dqn(1, lr=3e-4)], [filled(0), filled(1)], 16, 1)
    with pytest.raises(ConfigurationError, match="differ from member 0's"):  # another architecture
        DQN.stacked_update([make_dqn(0), make_dqn(1, dueling=True)], [filled(0), filled(1)], 16, 1)
    ahead = make_dqn(1)
    ahead.update(filled(1), 16)
    with pytest.raises(ConfigurationError, match="lockstep"):
        DQN.stacked_update([make_dqn(0), ahead], [filled(0), filled(1)], 16, 1)
    with pytest.raises(ConfigurationError, match="prioritized and some are not"):
        DQN.stacked_update([make_dqn(0), make_dqn(1)], [filled(0), filled(1, prioritized=True)], 16, 1)
    assert DQN.stacked_update([make_dqn(0)], [filled(0)], 16, 0) == [[]]


def test_a_cached_stack_gives_the_same_numbers_and_is_built_once() -> None:
    """Calls through one StackCache (a seed batch's training steps) reuse the stack and end bit for bit
    where calls that stack afresh end; a target copy inside a call and a weight changed between calls
    are both seen."""
    fresh = [make_dqn(s, target_update_freq=3) for s in range(3)]
    cached = [make_dqn(s, target_update_freq=3) for s in range(3)]
    fresh_buffers, cached_buffers = [filled(s) for s in range(3)], [filled(s) for s in range(3)]
    cache = StackCache()
    for call in range(4):
        if call == 2:  # a change between calls: stacked again
            for dqn in (fresh[0], cached[0]):
                with torch.no_grad():
                    next(dqn.policy.q_net.parameters()).mul_(0.9)
        DQN.stacked_update(fresh, fresh_buffers, 16, 2)
        DQN.stacked_update(cached, cached_buffers, 16, 2, cache=cache)
    assert cache.num_builds == 2
    for a, b in zip(fresh, cached, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(weights(a), weights(b), strict=True))
