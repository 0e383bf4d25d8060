"""TensorReplayBuffer against VectorReplayBuffer on the same data: layout, circularity, rollout,
sampling, n-step targets, truncation, save / load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tshtrain.data import TensorReplayBuffer, VectorReplayBuffer, load_buffer_into, save_buffer
from tshtrain.errors import ConfigurationError

CPU = torch.device("cpu")
E = 3


def _steps(num: int, seed: int = 0, *, dict_obs: bool = False) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    steps = []
    for t in range(num):
        obs = rng.integers(0, 255, size=(E, 2, 2), dtype=np.uint8)
        steps.append(
            {
                "obs": obs,
                "act": rng.integers(0, 4, size=E),
                "rew": rng.normal(size=E).astype(np.float32),
                "terminated": rng.random(E) < 0.2,
                "truncated": rng.random(E) < 0.1,
                "obs_next": (obs + 1).astype(np.uint8),
                "vec": rng.normal(size=(E, 3)).astype(np.float32) + t,
            }
        )
    if dict_obs:
        for s in steps:
            s["obs"] = {"img": s["obs"], "vec": s.pop("vec")}  # type: ignore[assignment]
            s["obs_next"] = {"img": s["obs_next"], "vec": s["obs"]["vec"] + 1}  # type: ignore[index,assignment]
    else:
        for s in steps:
            s.pop("vec")
    return steps


def _torch(value: object) -> object:
    if isinstance(value, dict):
        return {k: torch.from_numpy(v) for k, v in value.items()}
    assert isinstance(value, np.ndarray)
    return torch.from_numpy(value)


def _fill(
    steps: list[dict[str, np.ndarray]], size: int, env_ids: list[np.ndarray] | None = None
) -> tuple[VectorReplayBuffer, TensorReplayBuffer]:
    numpy_buf = VectorReplayBuffer(size, E, seed=1)
    tensor_buf = TensorReplayBuffer(size, E, device=CPU, seed=1)
    for i, step in enumerate(steps):
        ids = None if env_ids is None else env_ids[i]
        rows = slice(None) if ids is None else ids

        def pick(v: object) -> object:
            return {k: x[rows] for k, x in v.items()} if isinstance(v, dict) else v[rows]  # type: ignore[index]

        fields = {k: pick(v) for k, v in step.items()}
        numpy_buf.add(**fields, env_ids=ids)  # type: ignore[arg-type]
        tensor_buf.add(**{k: _torch(v) for k, v in fields.items()}, env_ids=ids)  # type: ignore[arg-type]
    return numpy_buf, tensor_buf


def _same_storage(numpy_buf: VectorReplayBuffer, tensor_buf: TensorReplayBuffer) -> None:
    assert numpy_buf.layout() == tensor_buf.layout()
    assert len(numpy_buf) == len(tensor_buf)
    expected = numpy_buf.field_arrays()
    got = tensor_buf.field_arrays()
    assert set(expected) == set(got)
    for name, arr in expected.items():
        assert got[name].dtype == arr.dtype, name
        np.testing.assert_array_equal(got[name], arr, err_msg=name)


@pytest.mark.parametrize("dict_obs", [False, True])
@pytest.mark.parametrize("num_steps", [3, 9, 20])
def test_contents_match_the_numpy_buffer_including_wraparound(num_steps: int, dict_obs: bool) -> None:
    numpy_buf, tensor_buf = _fill(_steps(num_steps, dict_obs=dict_obs), size=8 * E)
    _same_storage(numpy_buf, tensor_buf)
    assert tensor_buf.capacity == 24 and tensor_buf.num_columns == E and tensor_buf.column_capacity == 8


def test_dtypes_are_kept_and_rewards_are_float32() -> None:
    _, tensor_buf = _fill(_steps(2), size=4 * E)
    arrays = tensor_buf._arrays
    assert arrays["obs"].dtype == torch.uint8
    assert arrays["rew"].dtype == torch.float32
    assert arrays["terminated"].dtype == torch.bool
    assert tensor_buf.nbytes == sum(a.nbytes for a in tensor_buf.field_arrays().values())


def test_adding_some_columns_matches_the_numpy_buffer() -> None:
    ids = [np.array([0, 2]), np.array([1]), np.array([0, 1, 2]), np.array([2])] * 3
    steps = _steps(len(ids))
    numpy_buf, tensor_buf = _fill(steps, size=4 * E, env_ids=ids)
    _same_storage(numpy_buf, tensor_buf)
    expected, got = numpy_buf.rollout(), tensor_buf.rollout()
    for name in ("act", "rew", "terminated", "truncated", "boundary", "valid"):
        np.testing.assert_array_equal(getattr(got, name).numpy(), getattr(expected, name), err_msg=name)
    assert got.num_steps == expected.num_steps


@pytest.mark.parametrize("num_steps", [5, 8])
def test_rollout_matches_and_is_a_view_when_columns_are_synced(num_steps: int) -> None:
    numpy_buf, tensor_buf = _fill(_steps(num_steps), size=8 * E)
    expected, got = numpy_buf.rollout(), tensor_buf.rollout()
    assert got.shape == expected.shape
    for name in ("obs", "act", "rew", "terminated", "truncated", "obs_next", "boundary", "valid"):
        np.testing.assert_array_equal(getattr(got, name).numpy(), getattr(expected, name), err_msg=name)
    assert got.obs.data_ptr() == tensor_buf._arrays["obs"].data_ptr()  # type: ignore[union-attr]


def test_sample_returns_the_stored_transitions_at_its_indices() -> None:
    numpy_buf, tensor_buf = _fill(_steps(11), size=8 * E)
    batch = tensor_buf.sample(64)
    assert batch.indices is not None and len(batch) == 64
    idx = batch.indices.numpy()
    assert idx.min() >= 0 and idx.max() < tensor_buf.capacity
    expected = numpy_buf.get(idx)
    for name in ("obs", "act", "rew", "terminated", "truncated", "obs_next"):
        np.testing.assert_array_equal(getattr(batch, name).numpy(), getattr(expected, name), err_msg=name)


def test_sample_of_unsynced_columns_draws_only_stored_rows() -> None:
    ids = [np.array([0]), np.array([0, 1]), np.array([0])]
    _, tensor_buf = _fill(_steps(3), size=8 * E, env_ids=ids)
    idx = tensor_buf.sample_indices(500).numpy()
    rows, cols = np.divmod(idx, E)
    assert set(zip(rows.tolist(), cols.tolist(), strict=True)) == {(0, 0), (1, 0), (2, 0), (0, 1)}


def test_same_seed_same_samples() -> None:
    _, first = _fill(_steps(5), size=8 * E)
    _, second = _fill(_steps(5), size=8 * E)
    assert torch.equal(first.sample_indices(32), second.sample_indices(32))


@pytest.mark.parametrize("n_step", [1, 2, 4])
def test_nstep_targets_and_next_index_match_the_numpy_buffer(n_step: int) -> None:
    numpy_buf, tensor_buf = _fill(_steps(13), size=8 * E)
    idx = np.arange(tensor_buf.capacity)
    np.testing.assert_array_equal(tensor_buf.next_index(torch.from_numpy(idx)).numpy(), numpy_buf.next_index(idx))
    expected = numpy_buf.nstep_targets(idx, n_step=n_step, gamma=0.9)
    got = tensor_buf.nstep_targets(torch.from_numpy(idx), n_step=n_step, gamma=0.9)
    np.testing.assert_allclose(got.returns.numpy(), expected.returns, rtol=1e-6)
    np.testing.assert_allclose(got.discounts.numpy(), expected.discounts, rtol=1e-6)
    np.testing.assert_array_equal(got.obs_next.numpy(), expected.obs_next)  # type: ignore[union-attr]


def test_truncate_episodes_and_new_indices_match_the_numpy_buffer() -> None:
    numpy_buf, tensor_buf = _fill(_steps(6), size=8 * E)
    before_np, before_t = numpy_buf.layout(), tensor_buf.layout()
    numpy_buf.truncate_episodes(np.array([0, 2]))
    tensor_buf.truncate_episodes(np.array([0, 2]))
    _same_storage(numpy_buf, tensor_buf)
    steps = _steps(2, seed=5)
    for step in steps:
        numpy_buf.add(**step)  # type: ignore[arg-type]
        tensor_buf.add(**{k: _torch(v) for k, v in step.items()})  # type: ignore[arg-type]
    np.testing.assert_array_equal(tensor_buf.new_indices(before_t, 2 * E), numpy_buf.new_indices(before_np, 2 * E))
    new = tensor_buf.new_transitions(before_t, 2 * E)
    np.testing.assert_array_equal(new.rew.numpy(), numpy_buf.new_transitions(before_np, 2 * E).rew)


def test_reset_forgets_and_empty_buffer_refuses_to_sample() -> None:
    _, tensor_buf = _fill(_steps(4), size=8 * E)
    tensor_buf.reset()
    assert len(tensor_buf) == 0 and tensor_buf.is_allocated
    with pytest.raises(ConfigurationError, match="the buffer is empty"):
        tensor_buf.sample(4)


def test_bad_sizes_and_env_ids_are_rejected() -> None:
    with pytest.raises(ConfigurationError, match="total_size=2 is smaller than buffer_num=3"):
        TensorReplayBuffer(2, 3, device=CPU)
    _, tensor_buf = _fill(_steps(1), size=8 * E)
    step = {k: _torch(v[:2]) for k, v in _steps(1)[0].items()}
    with pytest.raises(ConfigurationError, match="contain duplicates"):
        tensor_buf.add(**step, env_ids=np.array([1, 1]))  # type: ignore[arg-type]


@pytest.mark.parametrize("num_steps", [3, 10])  # partly filled (3 rows written) and wrapped
def test_save_and_load_round_trip_between_numpy_and_tensor_buffers(tmp_path: Path, num_steps: int) -> None:
    numpy_buf, tensor_buf = _fill(_steps(num_steps), size=8 * E)
    save_buffer(tensor_buf, tmp_path / "t")
    assert np.load(tmp_path / "t" / "act.npy").shape[0] == min(num_steps, 8)
    restored = load_buffer_into(TensorReplayBuffer(8 * E, E, device=CPU), tmp_path / "t")
    _same_storage(numpy_buf, restored)
    as_numpy = load_buffer_into(VectorReplayBuffer(8 * E, E), tmp_path / "t")
    _same_storage(as_numpy, tensor_buf)
