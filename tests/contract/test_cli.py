"""The ``tshtrain`` command line: train, resume, eval, list, config, and the example experiment files.

Runs use tiny budgets; the default experiment's learning result is checked in tests/learning.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from tests.contract import _held_runs as held
from tests.extras import need
from tshtrain.cli import main
from tshtrain.config import default_experiment, load_experiment, resolve_experiment
from tshtrain.data import Collector, ReplayBuffer, save_buffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ExperimentError

EXAMPLE_CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"
TINY_PPO = [
    "--set", "trainer.max_epochs=2",
    "--set", "trainer.epoch_num_steps=256",
    "--set", "trainer.test_step_num_episodes=2",
    "--set", "trainer.update_step_num_repetitions=2",
    "--set", "trainer.show_progress=false",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip


def _info(run_dir: Path) -> dict[str, object]:
    info: dict[str, object] = json.loads((run_dir / "info_stats.json").read_text())
    info.pop("timing")
    return info


def _curve(run_dir: Path) -> list[dict[str, str]]:
    """The test scope's CSV records without the wall-clock columns (times and speeds)."""
    with (run_dir / "csv" / "test.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    return [{k: v for k, v in row.items() if "time" not in k and "speed" not in k} for row in rows]


def test_train_writes_config_logs_checkpoints_and_info_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    assert main(["train", *TINY_PPO, "-o", str(run_dir)]) == 0
    assert f"results in {run_dir}" in capsys.readouterr().out
    info = _info(run_dir)
    assert info["train_step"] == 512 and info["stop_reason"] == "max_epochs"
    assert isinstance(info["best_reward"], float) and info["best_score"] == info["best_reward"]
    experiment = load_experiment(str(run_dir / "config.yaml"))
    assert experiment.output_dir == str(run_dir)
    assert experiment.trainer["max_epochs"] == 2
    assert (run_dir / "csv" / "test.csv").is_file()
    assert {p.name for p in (run_dir / "checkpoints").iterdir()} >= {"best", "final"}
    assert not [p for p in run_dir.rglob("*.tmp")]


def test_the_written_config_reproduces_the_run(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["train", *TINY_PPO, "-o", str(first)]) == 0
    assert main(["train", str(first / "config.yaml"), "-o", str(second)]) == 0
    assert _info(first) == _info(second)
    assert _curve(first) == _curve(second)


def test_train_refuses_a_directory_that_holds_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", *TINY_PPO, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["train", *TINY_PPO, "-o", str(tmp_path)]) == 1
    assert f"tshtrain train --resume {tmp_path}" in capsys.readouterr().err


def test_a_bad_experiment_exits_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    assert main(["train", "--set", "trainer.max_epochs=0", "-o", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert (
        "tshtrain train: error: the default experiment with --set: trainer.max_epochs: 0 is not allowed "
        "(Input should be greater than or equal to 1); expected an int >= 1." in err
    )
    assert not run_dir.exists()


@pytest.mark.parametrize("point", ["after:2", "during:3"])
def test_resume_continues_a_killed_run_to_the_same_result(tmp_path: Path, point: str) -> None:
    """A run killed with SIGKILL after its second checkpoint, or inside the write of its third, and
    resumed with no flag ends like the run that was never stopped."""
    overrides = [*TINY_PPO, "--set", "trainer.max_epochs=8"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["train", *overrides, "-o", str(whole)]) == 0
    marker = tmp_path / "held"  # the child holds at the point until killed
    held.wait_then_kill(held.start(marker, point, "cli", "train", *overrides, "-o", str(killed)), marker)
    assert not (killed / "info_stats.json").exists()
    if point.startswith("during"):
        assert list((killed / "checkpoints").glob(".periodic-*.tmp-*")), "the kill did not land mid-write"
    assert main(["train", "--resume", str(killed)]) == 0  # our own run, signed with our key: its envs too
    assert _info(killed) == _info(whole)
    assert _curve(killed) == _curve(whole)


def test_resume_of_a_finished_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *TINY_PPO, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path)]) == 0
    assert "the run already finished (max_epochs); nothing to resume" in capsys.readouterr().out


def test_resume_needs_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--resume", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tshtrain train: error: {tmp_path}: a directory without the run marker")


def test_eval_a_run_and_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *TINY_PPO, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["eval", str(tmp_path), "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'checkpoints' / 'best'}: 3 episodes, return" in out
    assert main(["eval", str(tmp_path / "checkpoints" / "final"), "-n", "2"]) == 0
    assert "final: 2 episodes" in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "nowhere")]) == 1
    assert "neither a checkpoint (no manifest.json) nor a run directory" in capsys.readouterr().err


@pytest.mark.integration
def test_eval_records_videos(tmp_path: Path) -> None:
    need("moviepy", "video")
    need("pygame", "video")
    run_dir = tmp_path / "run"
    assert main(["train", *TINY_PPO, "-o", str(run_dir)]) == 0
    assert main(["eval", str(run_dir), "-n", "2", "--video", str(tmp_path / "videos")]) == 0
    assert len(list((tmp_path / "videos").glob("*.mp4"))) >= 2


def test_list_and_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("ppo", "dqn", "sac", "td3_bc", "discrete_cql"):
        assert f"\n{name} " in f"\n{out}"
    assert (
        "algorithm.params (default experiment, `tshtrain config ppo`): lr=0.001, lr_schedule='linear'" in out
    )
    assert "PPOParams() in Python differs in: lr, lr_schedule, gamma, gae_lambda, clip_schedule" in out
    assert main(["config", "sac", "--format", "toml"]) == 0
    (tmp_path / "sac.toml").write_text(capsys.readouterr().out)
    assert load_experiment(str(tmp_path / "sac.toml")).algorithm.name == "sac"
    assert main(["config", "sack"]) == 1
    assert "ALGO: unknown algorithm 'sack' (did you mean 'sac'?)" in capsys.readouterr().err


def test_list_and_config_show_the_same_defaults_for_every_algorithm(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tshtrain.config import SPECS

    assert main(["list"]) == 0
    listed = {}
    for line in capsys.readouterr().out.splitlines():
        if "algorithm.params (default experiment, `tshtrain config " in line:
            name = line.split("`tshtrain config ")[1].split("`")[0]
            listed[name] = line.split("`): ", 1)[1]
    assert set(listed) == set(SPECS)
    for name in SPECS:
        assert main(["config", name, "--format", "json"]) == 0
        params = json.loads(capsys.readouterr().out)["algorithm"]["params"]
        assert listed[name] == ", ".join(f"{key}={value!r}" for key, value in params.items()), name


def test_config_shows_only_keys_that_apply(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "ppo", "--format", "json"]) == 0
    ppo = json.loads(capsys.readouterr().out)
    assert ppo["buffer"] == {"save_on_exit": False}  # an on-policy buffer holds one collection step
    assert "save_checkpoint_every_num_epochs" not in ppo["trainer"]  # checkpoint.every_num_epochs says it
    assert ppo["checkpoint"]["every_num_epochs"] == 1
    assert not {"device", "ray", "agent_id", "global_state", "pettingzoo_api", "agent_layout"} & set(
        ppo["env"]
    )
    assert not {"centralised_critic", "critic_per_world"} & set(ppo["algorithm"]["network"])
    assert main(["config", "dqn", "--format", "json"]) == 0
    dqn = json.loads(capsys.readouterr().out)
    assert {"size", "prioritized", "alpha", "beta", "prefill_env_steps", "save_on_exit"} == set(dqn["buffer"])
    # what is left out takes its default: the printed experiment resolves to the default one
    for name, data in (("ppo", ppo), ("dqn", dqn)):
        assert resolve_experiment(data, "printed") == default_experiment(name)


def test_a_file_sets_checkpoints_in_the_checkpoint_section_only() -> None:
    with pytest.raises(
        ExperimentError, match=r"trainer.save_checkpoint_every_num_epochs: .*checkpoint.every_num_epochs"
    ):
        resolve_experiment({"trainer": {"save_checkpoint_every_num_epochs": 2}}, "x.yaml")


@pytest.mark.parametrize("command", ["train", "eval", "list", "config", "plot"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: tshtrain {command}" in capsys.readouterr().out


def _dataset(tmp_path: Path, env_id: str) -> Path:
    """A small dataset of uniformly random transitions, saved as a buffer directory."""
    envs = make_vector_env(env_id, 1)
    buffer = ReplayBuffer(600, seed=0)
    Collector(_RandomPolicy(envs.single_action_space), envs, buffer, seed=0).collect(n_step=600, random=True)
    envs.close()
    path = tmp_path / f"{env_id}-dataset"
    save_buffer(buffer, path)
    return path


class _RandomPolicy:
    """Stands in for a policy when only random collection is used."""

    def __new__(cls, space: gym.Space[object]) -> object:
        from tshtrain.algorithm import CategoricalPolicy, DeterministicActorPolicy, mlp

        if isinstance(space, gym.spaces.Discrete):
            return CategoricalPolicy(mlp(4, int(space.n), (8,)), space, seed=0)
        return DeterministicActorPolicy(mlp(3, 1, (8,)), space, seed=0)


def _example_param(path: Path) -> Any:
    """An example file as a test case; one that needs an optional extra is an integration test."""
    experiment = load_experiment(str(path))
    env = experiment.env
    needs = {"vmas": ("vmas", "vmas"), "pettingzoo": ("pettingzoo", "pettingzoo")}.get(env.type)
    if "atari" in env.id:
        needs = ("ale_py", "atari")
    elif "minigrid" in env.id:
        needs = ("minigrid", "minigrid")
    elif env.id.startswith("mpe2."):
        needs = ("mpe2", "pettingzoo")
    if needs is None:
        return pytest.param(path, None, id=path.stem)
    return pytest.param(path, needs, id=path.stem, marks=pytest.mark.integration)


@pytest.mark.parametrize(
    ("path", "needs"), [_example_param(p) for p in sorted(EXAMPLE_CONFIGS.glob("*.yaml"))]
)
def test_example_configs_train_with_a_tiny_budget(
    path: Path, needs: tuple[str, str] | None, tmp_path: Path
) -> None:
    if needs is not None:
        need(*needs)
    experiment = load_experiment(str(path))
    tiny = [
        "--set", "trainer.max_epochs=1",
        "--set", "trainer.test_step_num_episodes=1",
        "--set", "trainer.show_progress=false",
        "--set", "trainer.verbose=false",
        "--set", "env.num_test_envs=1",
        "--set", "loggers=[{kind: csv}]",
    ]  # fmt: skip
    family = experiment.trainer.keys()
    if "collection_step_num_episodes" in family and experiment.trainer.get("collection_step_num_env_steps"):
        tiny += ["--set", "trainer.epoch_num_steps=64"]
    elif "collection_step_num_episodes" in family:
        tiny += ["--set", "trainer.epoch_num_steps=64", "--set", "trainer.collection_step_num_episodes=2"]
    else:
        tiny += ["--set", "trainer.epoch_num_steps=20"]
    agents = experiment.agents
    if agents is not None and agents.agents_scope is not None:  # test envs split like the training envs
        tiny += ["--set", f"env.num_test_envs={sum(agents.agents_scope)}"]
    elif agents is not None:  # multi-agent envs: two envs, a small rollout
        tiny += ["--set", "env.num_training_envs=2", "--set", "trainer.batch_size=16"]
        if "collection_step_num_episodes" in family:
            tiny += ["--set", "trainer.collection_step_num_env_steps=32"]
    if experiment.dataset is not None:
        tiny += ["--set", f"dataset.path={_dataset(tmp_path, experiment.env.id)}"]
    else:
        tiny += ["--set", "buffer.prefill_env_steps=64"]
    run_dir = tmp_path / "run"
    assert main(["train", str(path), *tiny, "-o", str(run_dir)]) == 0
    assert _info(run_dir)["stop_reason"] in ("max_epochs", "stop_fn")
    if experiment.buffer.save_on_exit and experiment.dataset is None:
        assert (run_dir / "buffer" / "manifest.json").is_file()
