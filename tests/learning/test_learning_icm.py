"""Learning tests of ICM around DQN and PPO on CartPole-v1 (Tianshou's test_dqn_icm / test_ppo_icm bar:
a mean test return of 195). They run examples/icm_cartpole.py, so the example cannot rot. Seed 0 runs in
CI (well under a minute each); the other seeds carry the ``slow`` marker."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tshtrain.trainer import StopReason

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
THRESHOLD = 195.0
SEEDS = [
    0,
    pytest.param(1, marks=pytest.mark.slow),
    pytest.param(2, marks=pytest.mark.slow),
    pytest.param(3, marks=pytest.mark.slow),
    pytest.param(4, marks=pytest.mark.slow),
]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("icm_cartpole", EXAMPLES / "icm_cartpole.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["icm_cartpole"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.learning
@pytest.mark.parametrize("algorithm", ["dqn", "ppo"])
@pytest.mark.parametrize("seed", SEEDS)
def test_icm_wrapped_algorithm_solves_cartpole(algorithm: str, seed: int) -> None:
    example = _example()
    train = example.train_dqn if algorithm == "dqn" else example.train_ppo
    _, info = train(seed=seed, max_epochs=10, stop_at=THRESHOLD, verbose=False)
    print(f"RESULT {algorithm}+icm seed={seed} best_reward={info.best_reward} env_steps={info.train_step}")
    # stop_fn is not consulted at the initial test step: STOP_FN means a test after training reached it
    assert info.stop_reason is StopReason.STOP_FN, info
    assert info.best_reward is not None and info.best_reward >= THRESHOLD, info
