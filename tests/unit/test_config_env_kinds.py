"""The env-kind registry of experiment files: every kind (``env.type``) is one entry of
tshtrain/config/env_kinds.py (its rules and its builder together), the config layer and ``tshtrain eval``
look kinds up there and never compare the name, and a new entry, and nothing else, is a kind that files
can name and that builds."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from tshtrain.cli import eval as cli_eval
from tshtrain.config import build, build_run, envs, load_experiment, make_any_envs, make_envs, models
from tshtrain.config import env_kinds as env_kinds_module
from tshtrain.config.env_kinds import (
    ENV_KINDS,
    KIND_OPTIONS,
    AnyVectorEnv,
    EnvInterface,
    EnvKind,
    EnvRequest,
    EnvSection,
    MultiAgent,
)
from tshtrain.config.models import ENV_TYPES, EnvConfig
from tshtrain.env import TorchCartPole
from tshtrain.errors import ExperimentError

LOOKUP_MODULES = (models, envs, build, cli_eval)
"""the modules that once compared kind names (the issue): they look kinds up now"""


def test_every_kind_is_one_entry_with_its_builder() -> None:
    assert ENV_TYPES == tuple(ENV_KINDS) == ("gymnasium", "envpool", "vmas", "torch_cartpole", "pettingzoo")
    for name, kind in ENV_KINDS.items():
        assert kind.name == name
        assert kind.build.__module__ == env_kinds_module.__name__, f"{name}'s builder lives elsewhere"
        assert kind.options <= set(KIND_OPTIONS), (
            f"{name}: unknown options {kind.options - set(KIND_OPTIONS)}"
        )
        # the entry's fields agree with each other
        assert (kind.interface is EnvInterface.TENSOR) == ("device" in kind.options), name
        assert (kind.multi_agent is MultiAgent.COLUMNS) == ("agent_layout" in kind.options), name
        if kind.interface is EnvInterface.MULTI_AGENT:
            assert kind.multi_agent is MultiAgent.ALWAYS, name


@pytest.mark.parametrize("name", list(ENV_KINDS))
def test_the_schema_accepts_exactly_the_registered_kinds(name: str) -> None:
    env = EnvConfig(type=name, id="pettingzoo.classic.tictactoe_v3")  # an id every kind's check accepts
    assert env.type == name
    assert EnvConfig.model_validate({"kind": name, "id": env.id}) == env  # the alias


def test_an_unknown_kind_is_refused_naming_every_registered_one() -> None:
    with pytest.raises(
        ExperimentError,
        match=r"env\.type: Input should be 'gymnasium', 'envpool', 'vmas', 'torch_cartpole' or 'pettingzoo' "
        r"\(got 'gym'\)",
    ):
        load_experiment(None, ["env.type=gym"])


def _kind_comparisons(source: str) -> list[str]:
    """``x == "vmas"``, ``x in ("gymnasium", "envpool")`` and the like in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        constants = [
            leaf.value
            for operand in operands
            for leaf in ast.walk(operand)
            if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str)
        ]
        found += [f"line {node.lineno}: {value!r}" for value in constants if value in ENV_KINDS]
    return found


@pytest.mark.parametrize("module", LOOKUP_MODULES, ids=lambda module: module.__name__)
def test_no_module_compares_a_kind_name(module: ModuleType) -> None:
    assert _kind_comparisons(inspect.getsource(module)) == []


def test_the_comparison_finder_finds_comparisons() -> None:
    source = 'def f(env):\n    return env.type == "vmas" or env.type in ("gymnasium", "x")\n'
    assert _kind_comparisons(source) == ["line 2: 'vmas'", "line 2: 'gymnasium'"]
    assert _kind_comparisons(inspect.getsource(env_kinds_module)) == []  # entries name kinds, compare none


@pytest.fixture
def tiny_kind(monkeypatch: pytest.MonkeyPatch) -> list[EnvRequest]:
    """A new torch-native kind registered as one entry (removed again after the test): torch CartPole
    under a new name, with its own builder that records what it is asked for."""
    requests: list[EnvRequest] = []

    def build_tiny(env: EnvSection, request: EnvRequest) -> AnyVectorEnv:
        requests.append(request)
        return TorchCartPole(request.num_envs, device="cpu", seed=request.seed, **env.kwargs)

    entry: EnvKind = dataclasses.replace(
        ENV_KINDS["torch_cartpole"], name="tiny_cartpole", summary="a test's kind", build=build_tiny
    )
    monkeypatch.setitem(ENV_KINDS, "tiny_cartpole", entry)
    return requests


def test_one_new_entry_is_a_kind_that_files_name_and_build(
    tiny_kind: list[EnvRequest], tmp_path: Path
) -> None:
    experiment = load_experiment(
        None, ["env.type=tiny_cartpole", "env.device=cpu", "env.num_training_envs=2", "env.num_test_envs=3"]
    )
    assert experiment.env.type == "tiny_cartpole"
    assert not experiment.env.multi_agent

    envs = make_any_envs(experiment, 2, seed=5, test=True)
    assert isinstance(envs, TorchCartPole) and envs.num_envs == 2
    assert (tiny_kind[-1].seed, tiny_kind[-1].test) == (5, True)

    with pytest.raises(ExperimentError, match=r"env\.type: 'tiny_cartpole' is a torch-native env"):
        make_envs(experiment.env, 1)
    experiment = experiment.model_copy(
        update={"loggers": [], "checkpoint": experiment.checkpoint.model_copy(update={"enabled": False})}
    )
    run = build_run(experiment, tmp_path)  # a run's test and training envs, their collectors and buffer
    try:
        assert [request.num_envs for request in tiny_kind[-2:]] == [3, 2]
        assert all(isinstance(env, TorchCartPole) for env in run.envs)
    finally:
        run.close()


def test_the_rules_of_a_new_entry_apply_to_it(tiny_kind: list[EnvRequest]) -> None:
    with pytest.raises(ExperimentError, match=r"Input should be .* 'pettingzoo' or 'tiny_cartpole'"):
        load_experiment(None, ["env.type=tiny"])
    with pytest.raises(
        ExperimentError, match=r"env\.wrappers apply to Gymnasium envs only, not to type 'tiny_cartpole'"
    ):
        load_experiment(
            None, ["env.type=tiny_cartpole", "env.wrappers=[{name: gymnasium.wrappers.ClipAction}]"]
        )
    with pytest.raises(
        ExperimentError, match=r"torch-native envs \(type vmas or torch_cartpole or tiny_cartpole\)"
    ):
        load_experiment(None, ["env.type=gymnasium", "env.device=cpu"])
