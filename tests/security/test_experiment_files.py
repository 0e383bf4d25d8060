"""Experiment files from strangers: they name only allow-listed code, and malformed or hostile files are
refused with one clear error (duplicate keys, alias bombs, deep nesting, huge files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.security.conftest import TINY, assert_one_line_error, cli_env
from tshtrain.cli import main
from tshtrain.config import load_experiment, make_envs
from tshtrain.config.files import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, read_file
from tshtrain.errors import ExperimentError


@pytest.fixture
def evil_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A module on sys.path whose import creates a marker directory (the proof that it ran)."""
    name = f"evil_wrappers_{tmp_path.name.replace('-', '_')}"
    marker = tmp_path / "pwned"
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{name}.py").write_text(
        f"import os\nos.mkdir({str(marker)!r})\n\ndef Wrap(env, **kwargs):\n    return env\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", f"{site}:{cli_env()['PYTHONPATH']}")
    return name, marker


def _experiment(tmp_path: Path, env: dict[str, object]) -> Path:
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"env": env}))
    return path


@pytest.mark.parametrize("form", ["{}.Wrap", "{}:Wrap"])
def test_a_wrapper_outside_the_allow_list_is_not_imported(
    evil_module: tuple[str, Path], tmp_path: Path, form: str
) -> None:
    name, marker = evil_module
    wrapper = form.format(name)
    experiment = load_experiment(str(_experiment(tmp_path, {"wrappers": [{"name": wrapper}]})))
    with pytest.raises(ExperimentError, match=rf"would import the module '{name}'.*--allow-module {name}"):
        make_envs(experiment.env, 1)
    assert not marker.exists() and name not in sys.modules
    make_envs(experiment.env, 1, allowed_modules=[name]).close()  # the user's own opt-in
    assert marker.exists()


def test_a_module_env_id_outside_the_allow_list_is_not_imported(
    evil_module: tuple[str, Path], tmp_path: Path
) -> None:
    name, marker = evil_module
    experiment = load_experiment(str(_experiment(tmp_path, {"id": f"{name}:Evil-v0"})))
    with pytest.raises(ExperimentError, match=rf"env.id: '{name}:Evil-v0' would import the module '{name}'"):
        make_envs(experiment.env, 1)
    assert not marker.exists()


def test_pydoc_pipepager_from_a_file_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    wrapper = {"name": "pydoc:pipepager", "kwargs": {"cmd": f"mkdir {marker}"}}
    experiment = load_experiment(str(_experiment(tmp_path, {"wrappers": [wrapper]})))
    with pytest.raises(ExperimentError, match=r"would import the module 'pydoc'"):
        make_envs(experiment.env, 1)
    assert not marker.exists()


def test_gymnasium_wrappers_stay_allowed(tmp_path: Path) -> None:
    wrapper = {"name": "gymnasium.wrappers.TimeLimit", "kwargs": {"max_episode_steps": 7}}
    experiment = load_experiment(str(_experiment(tmp_path, {"wrappers": [wrapper]})))
    envs = make_envs(experiment.env, 1)
    envs.close()


def test_the_cli_refuses_the_wrapper_in_one_line_and_allows_it_when_asked(
    evil_module: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, marker = evil_module
    args = ["train", *TINY, "--set", f"env.wrappers=[{{name: {name}.Wrap}}]"]
    assert main([*args, "-o", str(tmp_path / "refused")]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", f"--allow-module {name}")
    assert not marker.exists() and not (tmp_path / "refused" / "config.yaml").exists()
    assert main([*args, "--allow-module", name, "-o", str(tmp_path / "allowed")]) == 0
    assert marker.exists()


def test_eval_of_a_run_whose_config_names_a_foreign_wrapper_is_refused(
    finished_run: Path, evil_module: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    name, marker = evil_module
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("wrappers: []", f"wrappers: [{{name: '{name}.Wrap'}}]"))
    assert f"{name}.Wrap" in config.read_text()
    assert main(["eval", str(run_dir), "-n", "1"]) == 1
    assert_one_line_error(capsys.readouterr().err, "eval", f"would import the module '{name}'")
    assert not marker.exists()


# ---------------------------------------------------------------------------- malformed files
@pytest.mark.parametrize(
    ("suffix", "text", "message"),
    [
        (".yaml", "trainer:\n  max_epochs: 1\n  max_epochs: 2\n", r"line 3: key 'max_epochs' appears twice"),
        (".yaml", "seed: 1\nseed: 2\n", r"line 2: key 'seed' appears twice"),
        (".json", '{"seed": 1, "seed": 2}', r"key 'seed' appears twice in one object"),
        (".toml", "seed = 1\nseed = 2\n", r"not valid TOML"),
    ],
    ids=["yaml-nested", "yaml-top", "json", "toml"],
)
def test_duplicate_keys_are_refused(tmp_path: Path, suffix: str, text: str, message: str) -> None:
    path = tmp_path / f"e{suffix}"
    path.write_text(text)
    with pytest.raises(ExperimentError, match=message):
        read_file(path)


@pytest.mark.parametrize(
    ("levels", "message"),
    [(13, rf"more than {MAX_ALIASES} YAML aliases"), (11, rf"more than {MAX_NODES} values once its YAML")],
    ids=["too-many-aliases", "few-aliases-huge-expansion"],
)
def test_a_yaml_alias_bomb_is_refused(tmp_path: Path, levels: int, message: str) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ExperimentError, match=message):
        read_file(path)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_deep_nesting_is_refused(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text('{"a": ' + "[" * (MAX_DEPTH + 5) + "1" + "]" * (MAX_DEPTH + 5) + "}")
    with pytest.raises(ExperimentError, match=rf"nested more than {MAX_DEPTH} levels deep"):
        read_file(path)


def test_very_deep_nesting_is_one_error_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deeper.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ExperimentError, match=r"nested more than"):
        read_file(path)


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("seed: 1\n" + "#" * MAX_FILE_BYTES)
    with pytest.raises(ExperimentError, match=rf"experiment files are limited to {MAX_FILE_BYTES} bytes"):
        read_file(path)


def test_a_duplicate_key_in_a_set_value_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert (
        main(
            [
                "train",
                "--set",
                "algorithm.network={hidden_sizes: [4], hidden_sizes: [8]}",
                "-o",
                str(tmp_path),
            ]
        )
        == 1
    )
    assert_one_line_error(capsys.readouterr().err, "train", "key 'hidden_sizes' appears twice")
