"""Learning tests of the offline algorithms. They run the scripts in examples/, so the examples cannot
rot, and print one ``RESULT`` line per seed.

* CQL and TD3+BC, Pendulum-v1: trained on the replay buffer of a SAC run (``cql_pendulum.pendulum_dataset``:
  11k env steps of SAC seed 0 after 1000 random steps, so random, mediocre and good behaviour), the final
  policy reaches a normalised score ``(R - R_random) / (R_expert - R_random) >= 0.8`` over 10 test
  episodes, ``R_expert`` the SAC agent's final test return and ``R_random`` a uniformly random policy's.
* Discrete CQL, CartPole-v1: trained on 20k steps of a DQN agent (half greedy, half epsilon 0.3), the
  final policy averages >= 450 over 10 test episodes.

The datasets are made once and cached under ``$TSHTRAIN_DATASET_CACHE`` (default: the system temp dir's
``tshtrain_datasets``), so the two Pendulum tests share theirs. Every run takes minutes on one CPU
thread (making the SAC dataset about seven), so all tests carry the ``slow`` marker
(``pytest -m slow tests/learning/test_offline_learning.py``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEEDS = range(3)


def _example(name: str) -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as import does: dataclasses with string annotations look it up
    spec.loader.exec_module(module)
    return module


def _cache_dir() -> str | None:
    return os.environ.get("TSHTRAIN_DATASET_CACHE")


def _pendulum_scores(example: str, label: str, seeds: Iterable[int]) -> list[float]:
    torch.set_num_threads(1)
    module = _example(example)
    scores = []
    for seed in seeds:
        start = time.perf_counter()
        ret, score = module.run(seed=seed, cache_dir=_cache_dir(), verbose=False)
        print(
            f"RESULT {label} seed={seed} return={ret:.1f} normalised_score={score:.2f} "
            f"solved={score >= 0.8} wall_time={time.perf_counter() - start:.0f}s",
            flush=True,
        )
        scores.append(score)
    return scores


@pytest.mark.learning
@pytest.mark.slow
def test_td3_bc_reaches_normalised_score_0_8_on_pendulum() -> None:
    scores = _pendulum_scores("td3_bc_pendulum", "td3_bc", SEEDS)
    assert sum(s >= 0.8 for s in scores) >= 2, scores


@pytest.mark.learning
@pytest.mark.slow
def test_cql_reaches_normalised_score_0_8_on_pendulum() -> None:
    scores = _pendulum_scores("cql_pendulum", "cql", SEEDS)
    assert sum(s >= 0.8 for s in scores) >= 2, scores


@pytest.mark.learning
@pytest.mark.slow
def test_discrete_cql_reaches_450_on_cartpole() -> None:
    torch.set_num_threads(1)
    module = _example("discrete_cql_cartpole")
    returns = []
    for seed in SEEDS:
        start = time.perf_counter()
        ret, expert = module.run(seed=seed, cache_dir=_cache_dir(), verbose=False)
        print(
            f"RESULT discrete_cql seed={seed} return={ret:.1f} dqn_return={expert:.1f} solved={ret >= 450} "
            f"wall_time={time.perf_counter() - start:.0f}s",
            flush=True,
        )
        returns.append(ret)
    assert sum(r >= 450 for r in returns) >= 2, returns
