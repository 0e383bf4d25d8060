"""Experiment files with torch-native envs (env.type vmas / torch_cartpole): the run gets a TensorCollector
and a TensorReplayBuffer on the env's device, `tshtrain eval` evaluates it, and what does not apply to
such envs is refused with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tshtrain.cli import main
from tshtrain.config import build_run, make_envs, resolve_experiment
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.errors import ExperimentError

_TRAINER = {
    "max_epochs": 1,
    "epoch_num_steps": 256,
    "collection_step_num_env_steps": 128,
    "test_step_num_episodes": 2,
    "show_progress": False,
}


def _experiment(name: str, **env: object) -> dict[str, object]:
    return {
        "algorithm": {"name": name},
        "device": "cpu",
        "env": {"type": "torch_cartpole", "num_training_envs": 4, "num_test_envs": 2, **env},
        "trainer": {**_TRAINER, "batch_size": 64} if name != "ppo" else dict(_TRAINER),
        "buffer": {"size": 1000, "prefill_env_steps": 64},
        "loggers": [],
    }


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_a_torch_native_env_gets_the_tensor_path(tmp_path: Path, name: str) -> None:
    run = build_run(resolve_experiment(_experiment(name)), tmp_path)
    try:
        collector = run.trainer.params.training_collector  # type: ignore[attr-defined]
        assert isinstance(collector, TensorCollector)
        assert isinstance(run.training_buffer, TensorReplayBuffer)
        assert isinstance(run.trainer.params.test_collector, TensorCollector)
        if name == "dqn":  # prefilled with random steps
            assert len(run.training_buffer) >= 64
        stats = run.trainer.run()
        assert stats.train_step >= 256
    finally:
        run.close()


def test_prioritized_replay_is_refused_for_torch_native_envs(tmp_path: Path) -> None:
    data = _experiment("dqn")
    data["buffer"] = {"size": 1000, "prioritized": True}
    with pytest.raises(ExperimentError, match=r"buffer\.prioritized: .*not available for torch-native envs"):
        build_run(resolve_experiment(data), tmp_path)


def test_gymnasium_only_builders_refuse_torch_native_envs() -> None:
    experiment = resolve_experiment(_experiment("ppo"))
    with pytest.raises(ExperimentError, match=r"env\.type: 'torch_cartpole' is a torch-native env"):
        make_envs(experiment.env, 2)


def test_bad_env_kwargs_name_the_env(tmp_path: Path) -> None:
    data = _experiment("ppo", kwargs={"gravity": 3.0})
    with pytest.raises(ExperimentError, match=r"env \(torch_cartpole .*gravity"):
        build_run(resolve_experiment(data), tmp_path)


def test_train_then_eval_a_torch_native_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    args = ["train", "--set", "algorithm.name=ppo", "--set", "env.type=torch_cartpole", "--set", "device=cpu"]
    args += ["--set", "trainer.max_epochs=1", "--set", "trainer.epoch_num_steps=512"]
    args += ["--set", "trainer.show_progress=false", "-o", str(run_dir)]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "3"]) == 0
    assert "3 episodes, return" in capsys.readouterr().out
    assert main(["eval", str(run_dir), "--video", str(tmp_path / "v")]) == 2
    assert "--video needs a Gymnasium env" in capsys.readouterr().err
