"""Env ids and missing packages: Gymnasium's own hints reach the user, and the command line reports a
missing optional dependency in one line that names what to install."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from tshtrain.cli import main
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError

NEEDS_PACKAGE_ID = "TshtrainTestNeedsBox2D-v0"
BOX2D_MESSAGE = (
    "Box2D is not installed, you can install it by run `pip install swig` followed by "
    '`pip install "gymnasium[box2d]"`'
)


def _needs_box2d(**kwargs: Any) -> gym.Env[Any, Any]:
    raise gym.error.DependencyNotInstalled(BOX2D_MESSAGE)  # what Gymnasium's Box2D envs raise


@pytest.fixture
def env_needing_a_package() -> Iterator[str]:
    gym.register(id=NEEDS_PACKAGE_ID, entry_point=_needs_box2d)
    try:
        yield NEEDS_PACKAGE_ID
    finally:
        del gym.registry[NEEDS_PACKAGE_ID]


def _train(tmp_path: Path, env_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The stderr of ``tshtrain train`` on ``env_id``, checked to be one error line (exit code 1)."""
    run_dir = tmp_path / "run"
    assert main(["train", "--set", f"env.id={env_id}", "-o", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("tshtrain train: error: ")
    assert not run_dir.exists()  # nothing half-made is left
    return err


@pytest.mark.parametrize(
    ("env_id", "hint"),
    [
        ("Cartpole-v1", "Did you mean: `CartPole`?"),
        ("CartPole-v9", "It provides versioned environments: [ `v0`, `v1` ]."),
        ("NoSuchNamespace/Pong-v5", "Have you installed the proper package for NoSuchNamespace?"),
    ],
)
def test_gymnasium_hints_for_unknown_ids_reach_the_user(
    tmp_path: Path, env_id: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigurationError, match=f"unknown Gymnasium id {env_id!r}: ") as error:
        make_vector_env(env_id, 2)
    assert hint in str(error.value)
    err = _train(tmp_path, env_id, capsys)
    assert f"unknown Gymnasium id {env_id!r}: " in err and hint in err


def test_a_missing_optional_dependency_is_one_line_naming_the_package(
    tmp_path: Path, env_needing_a_package: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _train(tmp_path, env_needing_a_package, capsys)
    assert 'pip install "gymnasium[box2d]"' in err
    assert f"make_vector_env could not build {env_needing_a_package!r} without it" in err


def test_a_missing_dependency_keeps_its_type_and_gains_a_note_in_python(env_needing_a_package: str) -> None:
    with pytest.raises(gym.error.DependencyNotInstalled, match="gymnasium\\[box2d\\]") as error:
        make_vector_env(env_needing_a_package, 2)
    assert error.value.__notes__ == [f"make_vector_env could not build {env_needing_a_package!r} without it"]


def test_a_factory_that_cannot_import_a_module_names_it() -> None:
    def needs_foo() -> gym.Env[Any, Any]:
        raise ModuleNotFoundError("No module named 'foo_sim'", name="foo_sim")

    with pytest.raises(ModuleNotFoundError) as error:
        make_vector_env(needs_foo, 2)
    assert error.value.__notes__ == [
        "make_vector_env could not build the env of needs_foo without it (module 'foo_sim'; install the "
        "package that provides it)"
    ]


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed here")
def test_lunar_lander_without_box2d(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _train(tmp_path, "LunarLander-v3", capsys)
    assert "gymnasium[box2d]" in err and "'LunarLander-v3'" in err
