"""Data-parallel training on torch.distributed: 2 local gloo ranks (spawned processes, loopback only)
against one process with twice the envs.

* On-policy (PPO, collection with deterministic actions so that rollouts depend on the env seeds only,
  whole-rollout updates without advantage normalisation): 2 ranks x 2 envs give the same counters, the
  same first (averaged) gradient and the same weights as 1 process x 4 envs, up to float tolerance.
* Off-policy (DQN): each rank samples its own replay buffer, so gradients equal one process's only if
  sampling were aligned, which it is not; what is meaningful and tested: the same counters (env steps,
  gradient steps, epochs) as one process with twice the envs, and identical weights on both ranks.
* A rank raising an error stops the other with that error's message (no hang).
* Resume with the same number of ranks is bit-exact without trusted=True (every rank signs its own
  checkpoint with the one key and verifies it); another number of ranks is refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.contract._distributed_runs import failing_dqn, resume_dqn, run_ranks, train_dqn, train_ppo
from tshtrain.checkpoint.files import read_manifest
from tshtrain.errors import CheckpointError


def _ok(results: dict[int, tuple[str, object]]) -> list[dict[str, object]]:
    for rank, (kind, value) in sorted(results.items()):
        assert kind == "ok", f"rank {rank}: {value}"
    return [value for _, (_, value) in sorted(results.items())]  # type: ignore[misc]


def test_ppo_two_ranks_match_one_process_with_twice_the_envs() -> None:
    one = train_ppo(None, 4)
    rank0, rank1 = _ok(run_ranks(train_ppo, 2, 2))
    assert rank0["counters"] == one["counters"] == rank1["counters"]
    assert one["counters"]["env_step"] == 256 and one["counters"]["gradient_step"] == 4
    for g_one, g_dist in zip(one["grads"], rank0["grads"], strict=True):  # type: ignore[call-overload]
        np.testing.assert_allclose(g_dist, g_one, rtol=1e-5, atol=1e-7)
    assert any(np.abs(g).max() > 1e-3 for g in one["grads"])  # type: ignore[attr-defined]
    for name, w in one["weights"].items():  # type: ignore[attr-defined]
        np.testing.assert_array_equal(rank0["weights"][name], rank1["weights"][name])  # type: ignore[index]
        np.testing.assert_allclose(rank0["weights"][name], w, rtol=1e-5, atol=1e-6)  # type: ignore[index]
    assert rank0["best"] == one["best"] == rank1["best"]


def test_dqn_two_ranks_count_like_one_process_and_stay_replicated() -> None:
    one = train_dqn(None, 4)
    rank0, rank1 = _ok(run_ranks(train_dqn, 2, 2))
    keys = ("epoch", "env_step", "update_step", "gradient_step")
    assert {k: rank0["counters"][k] for k in keys} == {k: one["counters"][k] for k in keys}  # type: ignore[index]
    assert rank0["counters"] == rank1["counters"]
    for name, w in rank0["weights"].items():  # type: ignore[attr-defined]
        np.testing.assert_array_equal(w, rank1["weights"][name])  # type: ignore[index]
    # each rank draws its own action noise; rank 0 keeps the one-process generator
    assert rank0["action_seed"] == one["action_seed"] != rank1["action_seed"]


def test_a_failing_rank_stops_the_other_with_its_error() -> None:
    results = run_ranks(failing_dqn, 2, 2, timeout=30.0)
    kind1, text1 = results[1]
    kind0, text0 = results[0]
    assert kind1 == "error" and "ValueError: rank 1 breaks at env step" in str(text1)
    assert kind0 == "error" and "DistributedRunError" in str(text0)
    assert "rank 1 failed: ValueError: rank 1 breaks at env step" in str(text0)


def test_resume_with_the_same_ranks_is_bit_exact(tmp_path: Path) -> None:
    full = _ok(run_ranks(train_dqn, 2, 2, tmp_path / "full"))
    periodic = sorted((tmp_path / "full").glob("periodic-*"))
    assert len(periodic) == 3 and (tmp_path / "full" / "rank1" / periodic[0].name).is_dir()
    for checkpoint in (periodic[0], tmp_path / "full" / "rank1" / periodic[0].name):
        manifest = read_manifest(checkpoint)  # each rank signed its own checkpoint with the one key
        assert manifest.provenance.own and "envs/training.pkl" in manifest.files, checkpoint
    resumed = _ok(run_ranks(resume_dqn, 2, 2, periodic[0]))  # no trusted=True: the envs come back
    for before, after in zip(full, resumed, strict=True):
        assert after["counters"] == before["counters"]
        for name, w in before["weights"].items():  # type: ignore[attr-defined]
            np.testing.assert_array_equal(after["weights"][name], w)  # type: ignore[index]
    with pytest.raises(CheckpointError, match=r"world_size 2, this is none \(one process\)"):
        resume_dqn(None, 2, periodic[0])
