"""The algorithm registry of experiment files: every algorithm is one entry (spec, builder and default
experiment together, in its family's module of tshtrain/config/algos/), and an entry is all that the
config layer needs: a new entry, and nothing else, makes a name that files can use and that builds."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from tshtrain.algorithm.base import Algorithm
from tshtrain.config import SPECS, Family, build_algorithm, default_experiment, get_spec, resolve_experiment
from tshtrain.config.algos import actor_critic, offline, on_policy, q_learning, value_decomposition
from tshtrain.config.builders import BuildContext
from tshtrain.config.registry import offline_names
from tshtrain.errors import ExperimentError

FAMILY_MODULES = (on_policy, q_learning, actor_critic, value_decomposition, offline)


def test_every_algorithm_is_one_entry_of_one_family_module() -> None:
    entries = [spec for module in FAMILY_MODULES for spec in module.SPECS]
    assert [spec.name for spec in entries] == list(SPECS)  # registry order: the modules' order
    for module in FAMILY_MODULES:
        for spec in module.SPECS:
            assert SPECS[spec.name] is spec
            assert spec.build.__module__ == module.__name__, f"{spec.name}'s builder lives elsewhere"
            assert spec.defaults, f"{spec.name} has no default experiment"
            assert "name" not in spec.defaults.get("algorithm", {})


def test_each_family_module_holds_one_trainer_family() -> None:
    assert {spec.family for spec in on_policy.SPECS} == {Family.ON_POLICY}
    off_policy = (*q_learning.SPECS, *actor_critic.SPECS, *value_decomposition.SPECS)
    assert {spec.family for spec in off_policy} == {Family.OFF_POLICY}
    assert [spec.name for spec in SPECS.values() if spec.team] == [s.name for s in value_decomposition.SPECS]
    assert {spec.family for spec in offline.SPECS} == {Family.OFFLINE}
    assert offline_names() == [spec.name for spec in offline.SPECS]


def test_no_module_of_the_config_layer_names_an_algorithm_outside_its_entry() -> None:
    """The lookups go through the registry: no other config module spells an algorithm's builder."""
    from tshtrain.config import algorithms, builders, resolve

    for module in (algorithms, builders, resolve):
        source = inspect.getsource(module)
        for name in SPECS:
            assert f"build_{name}(" not in source, f"{module.__name__} spells build_{name}"


def _tiny_reinforce_entry(calls: list[str]) -> Any:
    """A new algorithm written as one entry: REINFORCE's params and network under a new name, with its
    own builder and its own default experiment."""
    reinforce = get_spec("reinforce")

    def build_tiny(ctx: BuildContext) -> Algorithm[Any]:
        calls.append(type(ctx.params).__name__)
        return reinforce.build(ctx)

    return dataclasses.replace(
        reinforce,
        name="tiny_reinforce",
        summary="REINFORCE registered by a test",
        build=build_tiny,
        defaults={
            "env": {"id": "CartPole-v1", "num_training_envs": 2},
            "algorithm": {"params": {"lr": 0.01}},
        },
    )


def test_one_new_entry_is_an_algorithm_that_files_name_and_build(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(SPECS, "tiny_reinforce", _tiny_reinforce_entry(calls))

    defaults = default_experiment("tiny_reinforce")  # `tshtrain config tiny_reinforce`
    assert defaults.algorithm.name == "tiny_reinforce"
    assert defaults.algorithm.params["lr"] == 0.01
    assert defaults.env.num_training_envs == 2

    experiment = resolve_experiment({"algorithm": {"name": "tiny_reinforce", "params": {"gamma": 0.5}}})
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    algorithm = build_algorithm(experiment, space, gym.spaces.Discrete(2))
    assert calls == ["ReinforceParams"]
    assert type(algorithm).__name__ == "Reinforce"
    assert algorithm.params.gamma == 0.5  # type: ignore[attr-defined]  # Algorithm[Any] has no params type


def test_an_unregistered_name_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(
        ExperimentError,
        match=r"unknown algorithm 'tiny_reinforce' \(did you mean 'reinforce'\?\); allowed: ppo, a2c",
    ):
        resolve_experiment({"algorithm": {"name": "tiny_reinforce"}})
