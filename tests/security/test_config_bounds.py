"""Sizes and places an experiment file chooses are bounded before anything is allocated or written, and
the params' function fields are checked when the params are built (issue 30, items 2, 9 and 10b).

Memory limits are faked (``tshtrain.config.bounds.memory_bytes``) so that the outcome does not depend on
the machine; nothing here allocates the sizes it refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.conftest import TINY, assert_one_line_error
from tshtrain.cli import main
from tshtrain.config import bounds, load_experiment
from tshtrain.config.models import MAX_SUB_ENVS_PER_OBJECT, MAX_SUB_ENVS_PER_PROCESS
from tshtrain.errors import ConfigurationError, ExperimentError

ONE_GB = 1 << 30


def _file(tmp_path: Path, data: dict[str, object], name: str = "e.yaml") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else _yaml(data))
    return path


def _yaml(data: dict[str, object]) -> str:
    import yaml

    return yaml.safe_dump(data)


# --- item 2: output_dir from an experiment file stays under the working directory -----------------------


@pytest.mark.parametrize("where", ["../escaped", "a/../../escaped", "ABSOLUTE", "~/escaped"])
@pytest.mark.parametrize("nproc", [[], ["--nproc", "2"]])
def test_an_experiment_file_cannot_write_outside_the_working_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
    nproc: list[str],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    target = str(tmp_path / "escaped") if where == "ABSOLUTE" else where
    config = _file(tmp_path, {"output_dir": target})
    assert main(["train", str(config), *TINY, *nproc]) == 1
    line = assert_one_line_error(capsys.readouterr().err, "train", "output_dir", target, "-o DIR")
    assert str(config) in line
    assert not (tmp_path / "escaped").exists()
    assert list(work.iterdir()) == []


def test_an_experiment_file_may_write_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = _file(tmp_path, {"output_dir": "runs/../runs/here"})
    assert main(["train", str(config), *TINY]) == 0
    assert (tmp_path / "runs" / "here" / "config.yaml").is_file()


def test_the_command_line_may_write_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config = _file(tmp_path, {"output_dir": "/nowhere/at/all"})  # -o wins: the file's value is not used
    assert main(["train", str(config), *TINY, "-o", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "config.yaml").is_file()


def test_checked_output_dir_keeps_relative_paths() -> None:
    assert bounds.checked_output_dir(None, "e.yaml") is None
    assert bounds.checked_output_dir("runs/a/../b", "e.yaml") == "runs/a/../b"
    with pytest.raises(ExperimentError, match=r"^e.yaml: output_dir '\.\./x' is outside the working"):
        bounds.checked_output_dir("../x", "e.yaml")


# --- item 9: seeds, env counts, network and buffer sizes ---------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "message"),
    [(2**63, "seed: Input should be less than 9223372036854775808"), (-1, "seed: Input should be greater")],
)
def test_a_seed_outside_0_to_2_63_is_refused_when_loaded(seed: int, message: str) -> None:
    with pytest.raises(ExperimentError, match=message):
        load_experiment(None, [f"seed={seed}"])


def test_the_largest_seed_is_accepted() -> None:
    assert load_experiment(None, [f"seed={2**63 - 1}"]).seed == 2**63 - 1


@pytest.mark.parametrize(
    ("overrides", "field", "limit"),
    [
        (["env.num_training_envs=100000"], "env.num_training_envs 100000", MAX_SUB_ENVS_PER_OBJECT),
        (["env.num_test_envs=2000"], "env.num_test_envs 2000", MAX_SUB_ENVS_PER_OBJECT),
        (
            ["env.vector=async", "env.num_training_envs=300"],
            "env.num_training_envs 300",
            MAX_SUB_ENVS_PER_PROCESS,
        ),
    ],
)
def test_too_many_sub_envs_are_refused_when_loaded(
    overrides: list[str], field: str, limit: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ExperimentError, match=f"{field}: at most {limit} sub-envs"):
        load_experiment(None, overrides)
    assert main(["train", *(f"--set={text}" for text in overrides)]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", field, str(limit))


def test_batched_simulators_take_many_sub_envs() -> None:
    experiment = load_experiment(None, ["env.type=torch_cartpole", "env.num_training_envs=4096"])
    assert experiment.env.num_training_envs == 4096


def test_huge_hidden_sizes_are_refused_before_allocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bounds, "memory_bytes", lambda: ONE_GB)
    config = tmp_path / "e.yaml"
    config.write_text("algorithm:\n  name: ppo\n  network:\n    hidden_sizes: [1.0e+5, 1.0e+5]\n")
    run = tmp_path / "run"
    assert main(["train", str(config), *TINY, "-o", str(run)]) == 1
    line = assert_one_line_error(
        capsys.readouterr().err,
        "train",
        "algorithm.network.hidden_sizes [100000, 100000]",
        "160.0 GB",
        "1.1 GB",
    )
    assert "1e+10 parameters" in line, line
    assert not run.exists()


def test_a_critic_ensemble_counts_every_critic(monkeypatch: pytest.MonkeyPatch) -> None:
    network = {"hidden_sizes": [8], "critic_hidden_sizes": [1000, 1000], "num_critics": 10}
    one_critic = (4 * 1000 + 1000) + (1000 * 1000 + 1000) + (1000 * 2 + 2)
    limit = 5 * one_critic * bounds.BYTES_PER_PARAMETER  # fits one critic's worth, not ten
    monkeypatch.setattr(bounds, "memory_bytes", lambda: limit)
    with pytest.raises(ExperimentError, match=r"^algorithm.network.critic_hidden_sizes \[1000, 1000\]"):
        bounds.check_network_memory(network, "algorithm.network", 4, 2)
    bounds.check_network_memory({**network, "num_critics": 2}, "algorithm.network", 4, 2)


@pytest.mark.parametrize("env", [[], ["--set", "env.type=torch_cartpole"]])
def test_a_huge_buffer_is_refused_before_allocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: list[str]
) -> None:
    monkeypatch.setattr(bounds, "memory_bytes", lambda: ONE_GB)
    config = tmp_path / "e.yaml"
    config.write_text("algorithm: {name: dqn}\nbuffer:\n  size: 1.0e+12\n")
    run = tmp_path / "run"
    assert main(["train", str(config), *env, "--set", "env.num_test_envs=1", "-o", str(run)]) == 1
    line = assert_one_line_error(capsys.readouterr().err, "train", "buffer.size 1000000000000", "1.1 GB")
    if not env:  # CartPole: 4 float32 observations (twice), an int64 action, 32 bytes: 72 bytes
        assert "72.0 TB (1000000000000 transitions x 72 bytes)" in line, line
    assert not run.exists()


def test_a_buffer_that_fits_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium as gym

    monkeypatch.setattr(bounds, "memory_bytes", lambda: 72 * 1000)
    obs, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    bounds.check_buffer_memory("buffer.size", 1000, obs, act)
    message = r"buffer\.size 1001: the replay buffer would need about 72\.1 kB"
    with pytest.raises(ExperimentError, match=message):
        bounds.check_buffer_memory("buffer.size", 1001, obs, act)


def test_a_huge_on_policy_rollout_names_its_field(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(bounds, "memory_bytes", lambda: ONE_GB)
    args = ["train", *TINY, "--set", "trainer.collection_step_num_env_steps=1000000000000"]
    assert main([*args, "-o", str(tmp_path / "run")]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", "trainer.collection_step_num_env_steps")


# --- item 10b: the params' functions are callables ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "training_fn",
        "test_fn",
        "stop_fn",
        "compute_score_fn",
        "save_best_fn",
        "save_checkpoint_fn",
        "multi_agent_return_reduction",
    ],
)
def test_a_params_function_that_is_not_callable_is_refused_at_construction(name: str) -> None:
    from tshtrain.data import ReplayBuffer
    from tshtrain.trainer import OfflineTrainerParams

    match = rf"^OfflineTrainerParams\.{name} must be a function or None, got 'yes'\.$"
    with pytest.raises(ConfigurationError, match=match):
        OfflineTrainerParams(buffer=ReplayBuffer(4), **{name: "yes"})  # type: ignore[arg-type]  # the point
    assert isinstance(ConfigurationError("x"), ValueError)
