"""Every algorithm on CUDA: build, collect, update, state_dict round trip, the device of every tensor
and generator; checkpoints across devices (saved on CUDA, loaded on the CPU, and the reverse).

Run with ``pytest -m cuda`` on a machine with a GPU (skipped elsewhere, see ``conftest.py``). The
runtime check of ``tests/unit/test_devices.py`` (actions and updates under
``torch.set_default_device("meta")``) runs on CUDA too with its ``cuda`` parameter.
"""

from __future__ import annotations

import copy
import io
import warnings
from typing import Any

import pytest
import torch

from tests.cuda._algorithms import (
    CASES,
    IDS,
    AlgorithmCase,
    collect_data,
    exercise,
    misplaced_state,
    probe_obs,
)
from tshtrain.devices import resolve_device


def _saved(algorithm: Any) -> dict[str, Any]:
    blob = io.BytesIO()
    torch.save(algorithm.state_dict(), blob)
    blob.seek(0)
    state: dict[str, Any] = torch.load(blob, weights_only=True, map_location="cpu")
    return state


def _assert_close_stats(a: list[Any], b: list[Any]) -> None:
    """The same statistics up to CUDA's non-deterministic reductions (atomic adds in backward passes)."""
    assert [s.num_gradient_steps for s in a] == [s.num_gradient_steps for s in b]
    for x, y in zip(a, b, strict=True):
        assert x.as_scalars() == pytest.approx(y.as_scalars(), rel=1e-4, abs=1e-6, nan_ok=True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_contract_on_cuda(case: AlgorithmCase) -> None:
    cuda = resolve_device("cuda")
    algorithm = case.build(0, "cuda")
    assert algorithm.device == cuda
    assert misplaced_state(algorithm, cuda) == []
    stats = exercise(algorithm, collect_data(case, algorithm), num_updates=3)
    assert all(stat.num_gradient_steps >= 1 for stat in stats)
    assert misplaced_state(algorithm, cuda) == []
    fresh = case.build(5, "cuda")
    fresh.load_state_dict(_saved(algorithm))
    assert misplaced_state(fresh, cuda) == []
    obs = probe_obs(case).to(cuda)
    with torch.inference_mode():
        torch.testing.assert_close(
            fresh.policy.actions(obs, deterministic=True), algorithm.policy.actions(obs, deterministic=True)
        )
    stats_fresh = exercise(fresh, collect_data(case, case.build(3), seed=3), num_updates=1)
    stats_trained = exercise(algorithm, collect_data(case, case.build(3), seed=3), num_updates=1)
    _assert_close_stats(stats_fresh, stats_trained)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize(("saved_on", "loaded_on"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_a_checkpoint_moves_across_devices(case: AlgorithmCase, saved_on: str, loaded_on: str) -> None:
    trained = case.build(0, saved_on)
    exercise(trained, collect_data(case, trained), num_updates=2)
    state = _saved(trained)
    fresh = case.build(9, loaded_on)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # generator states are not portable: reseeded
        fresh.load_state_dict(copy.deepcopy(state))
    target = resolve_device(loaded_on)
    assert fresh.device == target
    assert misplaced_state(fresh, target) == []
    obs = probe_obs(case)
    with torch.inference_mode():
        expected = trained.policy.actions(obs.to(trained.device), deterministic=True).cpu()
        actual = fresh.policy.actions(obs.to(target), deterministic=True).cpu()
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)  # CPU and CUDA kernels differ in ulps
    exercise(fresh, collect_data(case, case.build(3), seed=3), num_updates=2)
    assert misplaced_state(fresh, target) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_to_moves_back_and_forth(case: AlgorithmCase) -> None:
    algorithm = case.build(0)
    exercise(algorithm, collect_data(case, algorithm), num_updates=1)
    params = list(algorithm.policy.parameters())
    algorithm.to("cuda")
    assert misplaced_state(algorithm, resolve_device("cuda")) == []
    assert all(a is b for a, b in zip(params, algorithm.policy.parameters(), strict=True))
    exercise(algorithm, collect_data(case, case.build(3), seed=3), num_updates=1)
    algorithm.to("cpu")
    assert misplaced_state(algorithm, torch.device("cpu")) == []
    exercise(algorithm, collect_data(case, case.build(3), seed=3), num_updates=1)
