"""``sample_replay`` on numpy buffers gathers into staging tensors (issue 36); it must draw the same
transitions from the same generator state as the path it replaced, which is kept here as the
reference: ``buffer.sample`` (a TransitionBatch), then numpy targets, then one conversion per field."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from tshtrain.algorithm import ReplaySample, sample_replay
from tshtrain.data import (
    BaseReplayBuffer,
    ObsTensor,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    VectorReplayBuffer,
    obs_to_torch,
)
from tshtrain.data.batch import ObsArray, TransitionBatch, array_to_torch

CPU = torch.device("cpu")


def reference_sample_replay(
    buffer: BaseReplayBuffer, batch_size: int, *, gamma: float, n_step: int
) -> ReplaySample:
    """The numpy path of ``sample_replay`` before issue 36, without hooks."""
    batch = buffer.sample(batch_size)
    if n_step == 1:
        returns = batch.rew
        discounts = np.where(batch.terminated, np.float32(0.0), np.float32(gamma))
        obs_next = batch.obs_next
    else:
        targets = buffer.nstep_targets(batch.indices, n_step=n_step, gamma=gamma)
        returns, discounts, obs_next = targets.returns, targets.discounts, targets.obs_next
    return ReplaySample(
        obs=obs_to_torch(batch.obs, CPU),
        act=array_to_torch(batch.act, CPU),
        returns=array_to_torch(returns, CPU),
        discounts=array_to_torch(discounts, CPU),
        obs_next=obs_to_torch(obs_next, CPU),
        weight=None,
        indices=batch.indices,
    )


def _assert_obs_equal(got: ObsTensor, want: ObsTensor) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    else:
        assert isinstance(got, dict) and got.keys() == want.keys()
        for key in want:
            _assert_obs_equal(got[key], want[key])


def assert_same_sample(got: ReplaySample, want: ReplaySample) -> None:
    _assert_obs_equal(got.obs, want.obs)
    _assert_obs_equal(got.obs_next, want.obs_next)
    for name in ("act", "returns", "discounts"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert torch.equal(a, b), name
    assert got.weight is None
    np.testing.assert_array_equal(got.indices, want.indices)


def _fill(buffer: BaseReplayBuffer, num_rows: int, num_envs: int, *, dict_obs: bool, float64: bool) -> None:
    rng = np.random.default_rng(7)
    dtype = np.float64 if float64 else np.float32
    for _ in range(num_rows):
        obs_arr = rng.standard_normal((num_envs, 3)).astype(dtype)
        nxt_arr = rng.standard_normal((num_envs, 3)).astype(dtype)
        obs: ObsArray = {"a": obs_arr, "b": rng.integers(0, 5, (num_envs, 2))} if dict_obs else obs_arr
        nxt: ObsArray = {"a": nxt_arr, "b": rng.integers(0, 5, (num_envs, 2))} if dict_obs else nxt_arr
        buffer.add(
            obs=obs,
            act=rng.integers(0, 4, num_envs),
            rew=rng.standard_normal(num_envs),
            terminated=rng.random(num_envs) < 0.1,
            truncated=rng.random(num_envs) < 0.05,
            obs_next=nxt,
        )


BufferFactory = Callable[[int], BaseReplayBuffer]
CASES: dict[str, tuple[BufferFactory, int, int]] = {
    "one env, wrapped": (lambda seed: ReplayBuffer(50, seed=seed), 80, 1),
    "one env, part full": (lambda seed: ReplayBuffer(500, seed=seed), 80, 1),
    "four envs": (lambda seed: VectorReplayBuffer(200, 4, seed=seed), 70, 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("obs_kind", ["array", "dict", "float64"])
def test_same_samples_as_the_reference_path(case: str, n_step: int, obs_kind: str) -> None:
    make, rows, envs = CASES[case]
    fast, slow = make(11), make(11)
    for buffer in (fast, slow):
        _fill(buffer, rows, envs, dict_obs=obs_kind == "dict", float64=obs_kind == "float64")
    for batch_size in (32, 32, 7, 32):  # staging reused, and a second batch size beside it
        got = sample_replay(fast, batch_size, gamma=0.97, n_step=n_step, device=CPU)
        want = reference_sample_replay(slow, batch_size, gamma=0.97, n_step=n_step)
        assert_same_sample(got, want)
    assert fast.rng.random() == slow.rng.random()  # the generators are in the same state


def test_unsynced_columns_and_column_scopes_sample_the_same() -> None:
    fast, slow = VectorReplayBuffer(120, 3, seed=5), VectorReplayBuffer(120, 3, seed=5)
    for buffer in (fast, slow):
        _fill(buffer, 10, 3, dict_obs=False, float64=False)
        buffer.add(  # column 1 only: the columns are no longer in step
            obs=np.ones((1, 3), np.float32),
            act=np.zeros(1, np.int64),
            rew=np.ones(1),
            terminated=np.zeros(1, bool),
            truncated=np.zeros(1, bool),
            obs_next=np.ones((1, 3), np.float32),
            env_ids=np.array([1]),
        )
    assert_same_sample(
        sample_replay(fast, 16, gamma=0.9, n_step=1, device=CPU),
        reference_sample_replay(slow, 16, gamma=0.9, n_step=1),
    )
    with fast.column_scope(slice(1, 3)), slow.column_scope(slice(1, 3)):
        got = sample_replay(fast, 16, gamma=0.9, n_step=1, device=CPU)
        assert_same_sample(got, reference_sample_replay(slow, 16, gamma=0.9, n_step=1))
    assert np.all(got.indices % 3 >= 1)


def test_the_indices_of_a_fixed_seed_are_pinned() -> None:
    """Recorded with the path before issue 36 (``rng.integers(0, stored, size)`` of the buffer's
    generator): a change of the draw shows here even if both paths changed together."""
    buffer = ReplayBuffer(100, seed=123)
    _fill(buffer, 40, 1, dict_obs=False, float64=False)
    sample = sample_replay(buffer, 8, gamma=0.99, n_step=1, device=CPU)
    np.testing.assert_array_equal(sample.indices, [0, 27, 23, 2, 36, 8, 10, 7])
    want_returns = [1.3402152061462402, 0.5525673031806946, -0.06139862909913063, -2.5167596340179443]
    want_returns += [1.4791442155838013, -0.12077044695615768, 0.1640527993440628, -0.09728692471981049]
    assert sample.returns.tolist() == want_returns
    flat = buffer.field_arrays()
    np.testing.assert_array_equal(sample.act.numpy(), flat["act"][sample.indices, 0])


def test_staging_is_reused_and_the_reference_path_serves_hooks_and_prioritized_buffers() -> None:
    buffer = ReplayBuffer(64, seed=0)
    _fill(buffer, 64, 1, dict_obs=False, float64=False)
    first = sample_replay(buffer, 16, gamma=0.99, n_step=1, device=CPU)
    second = sample_replay(buffer, 16, gamma=0.99, n_step=1, device=CPU)
    assert first.obs.data_ptr() == second.obs.data_ptr()  # one staging tensor, no allocation per call

    class Doubling:
        def on_sampled_batch(self, batch: TransitionBatch, /) -> TransitionBatch:
            return TransitionBatch(**{**batch.__dict__, "rew": batch.rew * 2})

        def on_loss(self, losses: object, /) -> None: ...

        def on_optimizer_step(self, name: str, optimizer: object, /) -> None: ...

    state = buffer.sampler_state()
    hooked = sample_replay(buffer, 16, gamma=0.99, n_step=1, device=CPU, hooks=Doubling())  # type: ignore[arg-type]  # a test double
    buffer.load_sampler_state(state)
    plain = sample_replay(buffer, 16, gamma=0.99, n_step=1, device=CPU)
    assert torch.equal(hooked.returns, plain.returns * 2)

    prioritized = PrioritizedReplayBuffer(64, alpha=0.6, beta=0.4, seed=0)
    _fill(prioritized, 64, 1, dict_obs=False, float64=False)
    weighted = sample_replay(prioritized, 16, gamma=0.99, n_step=1, device=CPU)
    assert weighted.weight is not None and weighted.weight.shape == (16,)
