"""Learning tests of GAIL: CartPole-v1 imitating the hand-written controller of
``examples/gail_cartpole.py`` (4,000 expert env steps in a ReplayBuffer; the learner never sees a
reward), to a mean test return of 195 over 10 episodes (Tianshou's CartPole threshold) within 30,000
env steps.

* seed 0 in CI (about 10,000 env steps, a few seconds);
* ``slow``: seeds 0-2, each must reach the threshold.

The test fails if the learner does not reach the threshold, or if the expert itself falls below it
(the data would prove nothing). Every run prints a ``RESULT`` line.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tshtrain.trainer import StopReason

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
THRESHOLD = 195.0
BUDGET = 30_000


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gail_cartpole", EXAMPLES / "gail_cartpole.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gail_cartpole"] = module  # dataclasses with string annotations look it up
    spec.loader.exec_module(module)
    return module


def _run(seed: int) -> bool:
    example = _example()
    _, expert_return = example.expert_data(seed)
    assert expert_return >= THRESHOLD, f"the expert itself returns {expert_return}"
    start = time.perf_counter()
    _, info = example.train(seed=seed, max_env_steps=BUDGET, stop_at=THRESHOLD, verbose=False)
    print(
        f"RESULT gail CartPole-v1 seed={seed} expert={expert_return:.1f} best={info.best_reward:.1f} "
        f"env_steps={info.train_step} time={time.perf_counter() - start:.1f}s"
    )
    return info.stop_reason == StopReason.STOP_FN and info.best_reward >= THRESHOLD


def test_gail_imitates_the_cartpole_controller_seed_0() -> None:
    assert _run(0)


@pytest.mark.slow
def test_gail_imitates_the_cartpole_controller_seeds_0_to_2() -> None:
    reached = [_run(seed) for seed in range(3)]
    assert all(reached), reached
