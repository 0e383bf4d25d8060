"""Every Python example runs with a tiny budget, so none of them can rot between the (slow) learning
tests that run them at full length. Dataset-making helpers are shrunk by patching their budgets."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples() -> Iterator[Callable[[str], ModuleType]]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(EXAMPLES))


def _shrink(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, **kwargs: Any) -> None:
    """Replace ``module.name`` by a version called with ``kwargs`` (which win over the caller's)."""
    original = getattr(module, name)

    def shrunk(*args: Any, **given: Any) -> Any:
        return original(*args, **{**given, **kwargs})

    monkeypatch.setattr(module, name, shrunk)


def _short_epochs(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> None:
    """Epochs of 100 steps in whatever trainer params the modules build."""
    for module in modules:
        for name in ("OnPolicyTrainerParams", "OffPolicyTrainerParams", "OfflineTrainerParams"):
            if hasattr(module, name):
                _shrink(monkeypatch, module, name, epoch_num_steps=100)


def test_every_example_script_is_covered() -> None:
    scripts = {p.stem for p in EXAMPLES.glob("*.py")}
    assert scripts == set(RUNS)


def _reinforce(m: ModuleType, _: Path, __: pytest.MonkeyPatch) -> None:
    m.train(max_epochs=1, epoch_num_steps=200, verbose=False)


def _on_policy(m: ModuleType, _: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m)
    m.train(max_env_steps=m.EPOCH_NUM_STEPS, stop_at=1e9, verbose=False)


def _off_policy(m: ModuleType, _: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m)
    m.train(max_epochs=1, verbose=False)


def _bc(m: ModuleType, _: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m, sys.modules["dqn_cartpole"])
    _shrink(monkeypatch, m, "train_dqn", max_epochs=1)
    m.run(dataset_size=800, verbose=False)


def _pendulum_offline(m: ModuleType, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m, sys.modules["cql_pendulum"])
    _shrink(monkeypatch, m, "pendulum_dataset", num_epochs=1)
    m.run(num_epochs=1, cache_dir=cache, verbose=False)


def _discrete_cql(m: ModuleType, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m, sys.modules["dqn_cartpole_475"])
    _shrink(monkeypatch, m, "train_dqn", max_epochs=1)
    _shrink(monkeypatch, m, "cartpole_dataset", num_env_steps=800)
    m.run(num_epochs=1, cache_dir=cache, verbose=False)


def _stepwise(m: ModuleType, _: Path, __: pytest.MonkeyPatch) -> None:
    m.train(max_epochs=1, epoch_num_steps=300, verbose=False)


def _distributional(m: ModuleType, _: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = sys.modules["distributional_cartpole"]  # imported by the script; it builds the params
    _short_epochs(monkeypatch, helper)
    m.train(max_epochs=1, verbose=False)


def _distributional_helper(m: ModuleType, _: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m)
    for name in ("c51", "qrdqn", "iqn", "rainbow"):
        _, params = m.build(name, 0, 1, False)
        m.close(params)


def _icm(m: ModuleType, _: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _short_epochs(monkeypatch, m)
    m.train_dqn(max_epochs=1, verbose=False)
    m.train_ppo(max_epochs=1, verbose=False)


RUNS: dict[str, Callable[[ModuleType, Path, pytest.MonkeyPatch], None]] = {
    "reinforce_cartpole": _reinforce,
    "a2c_cartpole": _on_policy,
    "ppo_cartpole": _on_policy,
    "ppo_pendulum": _on_policy,
    "gail_cartpole": _on_policy,
    "dqn_cartpole": _off_policy,
    "dqn_cartpole_475": _off_policy,
    "ddpg_pendulum": _off_policy,
    "td3_pendulum": _off_policy,
    "sac_pendulum": _off_policy,
    "discrete_sac_cartpole": _off_policy,
    "bc_cartpole": _bc,
    "cql_pendulum": _pendulum_offline,
    "td3_bc_pendulum": _pendulum_offline,
    "discrete_cql_cartpole": _discrete_cql,
    "stepwise_training": _stepwise,
    "c51_cartpole": _distributional,
    "qrdqn_cartpole": _distributional,
    "iqn_cartpole": _distributional,
    "rainbow_cartpole": _distributional,
    "distributional_cartpole": _distributional_helper,
    "icm_cartpole": _icm,
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_runs_with_a_tiny_budget(
    name: str, examples: Callable[[str], ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    RUNS[name](examples(name), tmp_path, monkeypatch)
