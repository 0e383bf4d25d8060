"""What ``tshtrain train`` logs, read back with each writer's own library: TensorBoard's
EventAccumulator (tags, steps, the hparams plugin's data), MLflow's client (params, metric steps, the
runs of one project in one store), the CSV files and an offline W&B run's records (config, history).
Plus the default intervals (every update step on-policy) and MLflow's failure modes (an unreachable
server fails fast, a SQL URI without sqlalchemy is refused)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tshtrain.cli import main
from tshtrain.errors import ConfigurationError
from tshtrain.logger import (
    HPARAM_METRICS,
    MLflowLogger,
    flatten_hparams,
    read_csv_log,
    read_tensorboard_hparams,
)
from tshtrain.logger.base import LogScope
from tshtrain.logger.tensorboard import read_tensorboard_scalars

HAS_WANDB = importlib.util.find_spec("wandb") is not None
HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None

TINY_PPO = [
    "--set", "trainer.max_epochs=2",
    "--set", "trainer.epoch_num_steps=256",
    "--set", "trainer.test_step_num_episodes=2",
    "--set", "trainer.update_step_num_repetitions=2",
    "--set", "trainer.show_progress=false",
    "--set", "trainer.verbose=false",
]  # fmt: skip
"""2 epochs of 1 training step of 256 env steps (8 envs): 2 update steps of 2 gradient steps each"""


def _train(run_dir: Path, loggers: str, *extra: str) -> dict[str, Any]:
    assert main(["train", *TINY_PPO, "--set", f"loggers={loggers}", *extra, "-o", str(run_dir)]) == 0
    config: dict[str, Any] = yaml.safe_load((run_dir / "config.yaml").read_text())
    return config


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One tiny PPO run logged by TensorBoard and CSV (and MLflow when installed), default intervals;
    the run directory is the only one in its project directory (where the MLflow store goes)."""
    run_dir = tmp_path_factory.mktemp("ppo") / "run"
    loggers = "[{kind: tensorboard}, {kind: csv}" + (", {kind: mlflow}]" if HAS_MLFLOW else "]")
    return run_dir, _train(run_dir, loggers)


def test_config_states_the_resolved_intervals(ppo_run: tuple[Path, dict[str, Any]]) -> None:
    _, config = ppo_run
    assert config["log_intervals"] == {
        "training_interval": 1, "test_interval": 1, "update_interval": 1, "info_interval": 1,
    }  # fmt: skip


def test_tensorboard_has_every_update_step_with_env_step(ppo_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, _ = ppo_run
    scalars = read_tensorboard_scalars(run_dir / "tensorboard")
    info = json.loads((run_dir / "info_stats.json").read_text())
    # on-policy default: one update record per update step, at the gradient step it ends on
    assert info["update_step"] == 2 and info["gradient_step"] == 4
    assert scalars["update/env_step"] == [(2, 256.0), (4, 512.0)]
    # every collection step and every test step, on the env_step axis
    assert [step for step, _ in scalars["training/n_collected_steps"]] == [256, 512]
    assert [step for step, _ in scalars["test/returns/mean"]] == [0, 256, 512]
    # throughput in the info records (epoch axis) and in info_stats.json
    assert [step for step, _ in scalars["info/timing/env_speed"]] == [1, 2]
    assert [step for step, _ in scalars["info/timing/epoch_env_speed"]] == [1, 2]
    assert info["timing"]["env_speed"] == pytest.approx(512 / info["timing"]["total_time"])


def test_tensorboard_hparams_tab_holds_the_flattened_experiment(ppo_run: tuple[Path, dict[str, Any]]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    run_dir, config = ppo_run
    hparams = read_tensorboard_hparams(run_dir / "tensorboard")
    expected = flatten_hparams(config)
    assert set(hparams) == set(expected)
    assert hparams["algorithm.name"] == "ppo"
    assert hparams["trainer.max_epochs"] == 2.0  # TensorBoard stores numbers as doubles
    assert hparams["env.id"] == "CartPole-v1"
    assert hparams["log_intervals.update_interval"] == 1.0
    # the experiment summary names the metrics the HPARAMS tab shows next to the values
    accumulator = EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    content = accumulator.PluginTagToContent(metadata.PLUGIN_NAME)
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    assert {info.name.tag for info in experiment.metric_infos} == set(HPARAM_METRICS)
    assert {info.name for info in experiment.hparam_infos} == set(expected)


def test_csv_update_records_carry_env_step(ppo_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, _ = ppo_run
    records = read_csv_log(run_dir / "csv")
    assert [(step, data["env_step"]) for step, data in records[LogScope.UPDATE]] == [(2, 256.0), (4, 512.0)]
    header = (run_dir / "csv" / "update.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["gradient_step", "env_step"]
    assert {"timing/env_speed", "timing/epoch_env_speed", "env_step"} <= set(records[LogScope.INFO][-1][1])


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_default_store_works_and_holds_params_and_metrics(
    ppo_run: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    run_dir, config = ppo_run
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # the project's store needs no opt-in
    assert not (run_dir / "mlruns").exists()
    store = run_dir.parent / "mlflow.db"
    assert store.is_file()
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "tshtrain"]
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert run.data.params == {key: str(value) for key, value in flatten_hparams(config).items()}
    assert run.data.params["algorithm.name"] == "ppo"
    history = client.get_metric_history(run.info.run_id, "update/env_step")
    assert sorted((m.step, m.value) for m in history) == [(2, 256.0), (4, 512.0)]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "info/timing/env_speed")] == [1, 2]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_runs_of_one_project_share_one_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    names = ["ppo-a", "ppo-b"]
    for name in names:  # two runs side by side in one project directory, as runs/<name> are
        _train(tmp_path / name, "[{kind: mlflow}]", "--set", "trainer.max_epochs=1")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mlflow.db", *names]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "tshtrain"]
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(run.info.run_name for run in runs) == names
    for run in runs:  # each run reads back its own records
        assert run.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run.info.run_id, "test/returns/mean")] == [0, 256]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (pip install 'tshtrain[wandb]')")
def test_wandb_run_gets_the_experiment_as_config_and_env_step(tmp_path: Path) -> None:
    from tests.wandb_file import wandb_records

    config = _train(tmp_path, "[{kind: wandb, mode: offline}]")
    deadline = time.monotonic() + 300.0  # hang guard; run.finish() may return before wandb flushed
    while len(wandb_records(tmp_path, "history")) < 2 + 2 + 3 + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    (run,) = wandb_records(tmp_path, "run")  # the config passed to wandb.init is in the run record
    logged = {item.key: json.loads(item.value_json) for item in run.run.config.update}
    for section in ("algorithm", "trainer", "env", "log_intervals"):
        assert logged[section] == config[section]
    rows = [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        for record in wandb_records(tmp_path, "history")
    ]
    updates = [(row["gradient_step"], row["update/env_step"]) for row in rows if "update/env_step" in row]
    assert updates == [(2, 256.0), (4, 512.0)]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (pip install 'tshtrain[wandb]')")
def test_writing_to_line_comes_before_the_wandb_banner(tmp_path: Path) -> None:
    """docs/cli.md: the run prints its "writing to" line first; W&B's banner (printed when the logger
    starts) comes after it, in a fresh run and in a resumed one. The CLI runs in a subprocess with stdout
    and stderr in one pipe, so the order is the order a terminal shows; W&B offline, its files in tmp."""
    import os
    import subprocess

    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "false"}
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        env[name] = str(tmp_path / "wandb-home")
    run_dir = tmp_path / "run"
    fresh = [*TINY_PPO, "--set", "loggers=[{kind: wandb, mode: offline}]", "-o", str(run_dir)]
    for args in (fresh, ["--resume", str(run_dir), "--extend", "1"]):  # the resume reads config.yaml
        done = subprocess.run(
            [sys.executable, "-m", "tshtrain.cli", "train", *args],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout
        lines = done.stdout.splitlines()
        assert any(line.startswith("wandb:") for line in lines), done.stdout  # the banner is there
        assert lines[0].startswith("tshtrain: ppo on CartPole-v1, writing to "), done.stdout


def test_experiment_file_intervals_reach_the_loggers(tmp_path: Path) -> None:
    config = _train(
        tmp_path, "[{kind: csv}]", "--set", "log_intervals.update_interval=3", "--set",
        "log_intervals.training_interval=500",
    )  # fmt: skip
    assert config["log_intervals"]["update_interval"] == 3
    records = read_csv_log(tmp_path / "csv")
    assert [step for step, _ in records[LogScope.UPDATE]] == [2]  # gradient step 4 is < 3 past 2
    assert [step for step, _ in records[LogScope.TRAINING]] == [256]  # 512 is < 500 past 256


# ====================================================================== MLflow failures


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_unreachable_server_fails_fast_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a loopback port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    outcome: list[BaseException] = []

    def build() -> None:
        try:
            MLflowLogger(tracking_uri=uri)
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    worker.join(timeout=120)  # a hang guard, not a speed check: MLflow's own default retries ~4 minutes
    assert not worker.is_alive(), "MLflowLogger kept retrying an unreachable server"
    (error,) = outcome
    assert isinstance(error, ConfigurationError)
    message = str(error)
    assert "\n" not in message and uri in message
    assert "no tracking server answers there" in message


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_environment_is_left_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in ("MLFLOW_ALLOW_FILE_STORE", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    logger = MLflowLogger(tracking_uri=(tmp_path / "mlruns").as_uri(), params={"a.b": 1})
    logger.write(LogScope.TEST, 0, {"returns/mean": 1.0})
    logger.close()
    assert dict(os.environ) == before  # the file-store and retry settings were ours only


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_sqlite_without_sqlalchemy_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # as with mlflow-skinny alone
    with pytest.raises(ConfigurationError, match=r"sqlite database, which needs sqlalchemy \(mlflow-skinny"):
        MLflowLogger(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not (tmp_path / "mlflow.db").exists()
