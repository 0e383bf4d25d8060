"""Learning tests of the first algorithms (fixed seeds). They run the scripts in examples/, so the
examples cannot rot. Seed 0 runs in CI; the other seeds carry the ``slow`` marker."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tshtrain.trainer import StopReason

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEEDS = [
    0,
    pytest.param(1, marks=pytest.mark.slow),
    pytest.param(2, marks=pytest.mark.slow),
    pytest.param(3, marks=pytest.mark.slow),
    pytest.param(4, marks=pytest.mark.slow),
]


def _example(name: str) -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as import does: dataclasses with string annotations look it up
    spec.loader.exec_module(module)
    return module


@pytest.mark.learning
@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_solves_cartpole(seed: int) -> None:
    info = _example("reinforce_cartpole").train(seed=seed, max_epochs=20, verbose=False)
    print(f"RESULT reinforce seed={seed} best_reward={info.best_reward} env_steps={info.train_step}")
    # stop_fn (score >= 195) is not consulted at the initial test step, so STOP_FN means a test step
    # after training reached the threshold
    assert info.stop_reason is StopReason.STOP_FN, info
    assert info.best_reward is not None and info.best_reward >= 195, info


@pytest.mark.learning
@pytest.mark.parametrize("seed", SEEDS)
def test_dqn_solves_cartpole(seed: int) -> None:
    _, info = _example("dqn_cartpole").train(seed=seed, max_epochs=10, verbose=False)
    print(f"RESULT dqn seed={seed} best_reward={info.best_reward} env_steps={info.train_step}")
    # stop_fn (score >= 195) is not consulted at the initial test step, so STOP_FN means a test step
    # after training reached the threshold
    assert info.stop_reason is StopReason.STOP_FN, info
    assert info.best_reward is not None and info.best_reward >= 195, info


@pytest.mark.learning
@pytest.mark.parametrize("seed", SEEDS)
def test_behavior_cloning_reaches_90_percent_of_dqn(seed: int) -> None:
    expert_return, bc_return = _example("bc_cartpole").run(seed=seed, verbose=False)
    print(f"RESULT bc seed={seed} expert_return={expert_return} bc_return={bc_return}")
    assert expert_return >= 150, f"the DQN expert did not learn: {expert_return}"
    assert bc_return >= 0.9 * expert_return, (expert_return, bc_return)
