"""n-step targets along replay-buffer episode chains, and Polyak averaging, against hand-worked numbers
and a slow per-sample reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm.blocks.offpolicy import sample_replay
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.data import ReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.functional import nstep_indices, nstep_returns, polyak_update


def fill(
    buffer: BaseReplayBuffer,
    rew: list[float],
    *,
    terminated: tuple[int, ...] = (),
    truncated: tuple[int, ...] = (),
) -> None:
    """Add single-env transitions with obs = step number, obs_next = step number + 0.5."""
    for t, r in enumerate(rew):
        buffer.add(
            obs=np.array([[float(t)]], dtype=np.float32),
            act=np.array([0]),
            rew=np.array([r], dtype=np.float32),
            terminated=np.array([t in terminated]),
            truncated=np.array([t in truncated]),
            obs_next=np.array([[t + 0.5]], dtype=np.float32),
        )


def reference_nstep(
    buffer: BaseReplayBuffer, index: int, n_step: int, gamma: float
) -> tuple[float, float, int]:
    """Slow reference: (return, bootstrap discount incl. terminal, index to bootstrap from), walking the
    column's transitions in chronological order."""
    arrays = {k: v.reshape(buffer.capacity, *v.shape[2:]) for k, v in buffer.field_arrays().items()}
    column = index % buffer.num_columns
    chain = [int(i) for i in buffer.chronological_indices() if i % buffer.num_columns == column]
    pos = chain.index(index)
    total, discount, last = 0.0, 1.0, index
    for k in range(n_step):
        if pos + k >= len(chain):
            break
        last = chain[pos + k]
        total += discount * float(arrays["rew"][last])
        discount *= gamma
        if arrays["terminated"][last] or arrays["truncated"][last]:
            break
    if arrays["terminated"][last]:
        discount = 0.0
    return total, discount, last


# ---------------------------------------------------------------------- hand-worked cases


def test_nstep_stops_at_termination_and_at_the_newest_transition() -> None:
    buffer = ReplayBuffer(10)
    # episode 1: rewards 1, 2, 3 (terminated after the third); episode 2: 4, 5, still running
    fill(buffer, [1, 2, 3, 4, 5], terminated=(2,))
    indices_KN, valid_KN = nstep_indices(np.arange(5), buffer.next_index, 3)
    assert indices_KN.tolist() == [[0, 1, 2, 3, 4], [1, 2, 2, 4, 4], [2, 2, 2, 4, 4]]
    assert valid_KN.tolist() == [
        [True] * 5,
        [True, True, False, True, False],
        [True, False, False, False, False],
    ]
    rew_KN = buffer.field_arrays()["rew"].reshape(-1)[indices_KN]
    returns, discounts = nstep_returns(rew_KN, valid_KN, 0.5)
    np.testing.assert_allclose(returns, [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3, 4 + 0.5 * 5, 5])
    np.testing.assert_allclose(discounts, [0.125, 0.25, 0.5, 0.25, 0.5])


def test_sample_replay_zeroes_the_discount_after_termination_and_bootstraps_after_truncation() -> None:
    terminal = ReplayBuffer(10, seed=0)
    fill(terminal, [1, 2, 3], terminated=(2,))
    cut = ReplayBuffer(10, seed=0)
    fill(cut, [1, 2, 3], truncated=(2,))
    for buffer, last_discount in ((terminal, 0.0), (cut, 0.25)):
        batch = sample_replay(buffer, 64, gamma=0.5, n_step=3, device=torch.device("cpu"))
        first = batch.indices == 0
        assert first.any()
        np.testing.assert_allclose(batch.returns.numpy()[first], 1 + 0.5 * 2 + 0.25 * 3)
        second = batch.indices == 1
        np.testing.assert_allclose(batch.returns.numpy()[second], 2 + 0.5 * 3)
        np.testing.assert_allclose(batch.discounts.numpy()[second], last_discount)
        # both bootstrap from the true final observation of the episode: obs_next of step 2
        assert isinstance(batch.obs_next, torch.Tensor)
        np.testing.assert_allclose(batch.obs_next.numpy()[second, 0], 2.5)


def test_one_step_sample_is_the_plain_td_target() -> None:
    buffer = ReplayBuffer(10, seed=0)
    fill(buffer, [1, 2, 3, 4], terminated=(1,))
    batch = sample_replay(buffer, 32, gamma=0.9, n_step=1, device=torch.device("cpu"))
    rew = np.array([1, 2, 3, 4], dtype=np.float32)[batch.indices]
    np.testing.assert_allclose(batch.returns.numpy(), rew)
    np.testing.assert_allclose(batch.discounts.numpy(), np.where(batch.indices == 1, 0.0, 0.9))
    assert isinstance(batch.obs_next, torch.Tensor)
    np.testing.assert_allclose(batch.obs_next.numpy()[:, 0], batch.indices + 0.5)


def test_nstep_follows_the_circular_buffer_across_its_wrap() -> None:
    buffer = ReplayBuffer(4)
    fill(buffer, [1, 2, 3, 4, 5, 6])  # rows now hold steps 4, 5, 2, 3 (row 2 is the oldest)
    indices_KN, valid_KN = nstep_indices(np.array([2, 3, 0, 1]), buffer.next_index, 3)
    assert indices_KN.tolist() == [[2, 3, 0, 1], [3, 0, 1, 1], [0, 1, 1, 1]]
    rew_KN = buffer.field_arrays()["rew"].reshape(-1)[indices_KN]
    returns, discounts = nstep_returns(rew_KN, valid_KN, 1.0)
    np.testing.assert_allclose(returns, [3 + 4 + 5, 4 + 5 + 6, 5 + 6, 6])
    np.testing.assert_allclose(discounts, [1.0, 1.0, 1.0, 1.0])


def test_nstep_keeps_env_columns_apart() -> None:
    buffer = VectorReplayBuffer(20, 2)
    for t in range(4):
        buffer.add(
            obs=np.zeros((2, 1), dtype=np.float32),
            act=np.zeros(2, dtype=np.int64),
            rew=np.array([1.0, 10.0], dtype=np.float32) * (t + 1),
            terminated=np.array([False, t == 1]),
            truncated=np.zeros(2, dtype=bool),
            obs_next=np.zeros((2, 1), dtype=np.float32),
        )
    # env 0 has flat indices 0, 2, 4, 6; env 1 has 1, 3 (terminated), 5, 7
    indices_KN, valid_KN = nstep_indices(np.array([0, 1, 5]), buffer.next_index, 3)
    returns, _ = nstep_returns(buffer.field_arrays()["rew"].reshape(-1)[indices_KN], valid_KN, 1.0)
    np.testing.assert_allclose(returns, [1 + 2 + 3, 10 + 20, 30 + 40])


def test_sample_replay_matches_the_slow_reference_on_random_episodes() -> None:
    rng = np.random.default_rng(3)
    buffer = VectorReplayBuffer(60, 3, seed=1)
    for _ in range(47):  # wraps around the 20 rows of each column
        buffer.add(
            obs=rng.normal(size=(3, 2)).astype(np.float32),
            act=np.zeros(3, dtype=np.int64),
            rew=rng.normal(size=3).astype(np.float32),
            terminated=rng.random(3) < 0.1,
            truncated=rng.random(3) < 0.1,
            obs_next=rng.normal(size=(3, 2)).astype(np.float32),
        )
    obs_next = buffer.field_arrays()["obs_next"].reshape(buffer.capacity, 2)
    for n_step in (1, 2, 5):
        batch = sample_replay(buffer, 200, gamma=0.9, n_step=n_step, device=torch.device("cpu"))
        expected = [reference_nstep(buffer, int(i), n_step, 0.9) for i in batch.indices]
        np.testing.assert_allclose(batch.returns.numpy(), [e[0] for e in expected], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batch.discounts.numpy(), [e[1] for e in expected], rtol=1e-6)
        assert isinstance(batch.obs_next, torch.Tensor)
        np.testing.assert_array_equal(batch.obs_next.numpy(), obs_next[[e[2] for e in expected]])


def test_nstep_indices_rejects_a_zero_step_count() -> None:
    with pytest.raises(ValueError, match="n_step must be >= 1, got 0"):
        nstep_indices(np.arange(3), lambda idx: idx, 0)


def test_sample_replay_bootstraps_dict_observations_from_the_chain_end() -> None:
    buffer = ReplayBuffer(10, seed=0)
    for t in range(3):
        buffer.add(
            obs={"pos": np.array([[t]], dtype=np.float32)},
            act=np.array([0]),
            rew=np.array([1.0], dtype=np.float32),
            terminated=np.array([False]),
            truncated=np.array([False]),
            obs_next={"pos": np.array([[t + 0.5]], dtype=np.float32)},
        )
    batch = sample_replay(buffer, 16, gamma=1.0, n_step=2, device=torch.device("cpu"))
    assert isinstance(batch.obs_next, dict)
    expected = np.minimum(batch.indices + 1, 2) + 0.5
    np.testing.assert_allclose(batch.obs_next["pos"].numpy()[:, 0], expected)


# ---------------------------------------------------------------------- Polyak averaging


def test_polyak_update_interpolates_and_copies() -> None:
    target = [torch.zeros(3), torch.ones(2)]
    source = [torch.full((3,), 10.0), torch.full((2,), 3.0)]
    polyak_update(target, source, 0.1)
    torch.testing.assert_close(target[0], torch.full((3,), 1.0))
    torch.testing.assert_close(target[1], torch.full((2,), 1.2))
    polyak_update(target, source, 1.0)
    torch.testing.assert_close(target[0], source[0])
    with pytest.raises(ValueError, match=r"tau must lie in \[0, 1\], got 1.5"):
        polyak_update(target, source, 1.5)


def test_target_network_is_a_frozen_copy_refreshed_by_update() -> None:
    torch.manual_seed(0)
    source = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    target = TargetNetwork(source)
    assert all(not p.requires_grad for p in target.net.parameters())
    before = [p.clone() for p in target.net.parameters()]
    with torch.no_grad():
        for p in source.parameters():
            p.add_(1.0)
        source[1].running_mean.fill_(7.0)  # type: ignore[index]
    target.update(0.25)
    for old, new in zip(before, target.net.parameters(), strict=True):
        torch.testing.assert_close(new, old + 0.25)
    torch.testing.assert_close(target.net[1].running_mean, torch.full((3,), 7.0))  # type: ignore[index]
    target.hard_update()
    for src, tgt in zip(source.parameters(), target.net.parameters(), strict=True):
        torch.testing.assert_close(src, tgt)
    copy = TargetNetwork(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)))
    copy.load_state_dict(target.state_dict())
    for a, b in zip(copy.net.parameters(), target.net.parameters(), strict=True):
        torch.testing.assert_close(a, b)
