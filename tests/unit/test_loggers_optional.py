"""The optional writers: W&B (offline mode, read back from its run file) and MLflow (a local file
store). Each test is skipped when its package is not installed; the "not installed" errors are tested
by hiding the package."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.wandb_file import wandb_records
from tshtrain.errors import ConfigurationError
from tshtrain.logger import CompositeLogger, CsvLogger, LogScope, MLflowLogger, WandbLogger, read_csv_log

HAS_WANDB = importlib.util.find_spec("wandb") is not None
HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None


# ====================================================================== W&B


def _wandb_history(run_dir: Path, num_rows: int) -> list[dict[str, Any]]:
    """The history rows of an offline W&B run, once ``num_rows`` are there: ``run.finish()`` returns
    before wandb's service process has necessarily flushed its file (a few ms later, seen in practice),
    so this polls until they are (a hang guard of 300 s)."""
    deadline = time.monotonic() + 300.0  # a hang guard: the loop ends as soon as the rows are there
    rows = _read_wandb_history(run_dir)
    while len(rows) < num_rows and time.monotonic() < deadline:
        time.sleep(0.02)
        rows = _read_wandb_history(run_dir)
    return rows


def _read_wandb_history(run_dir: Path) -> list[dict[str, Any]]:
    """The history rows in an offline W&B run's ``run-*.wandb`` file."""
    return [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        for record in wandb_records(run_dir, "history")
    ]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (pip install 'tshtrain[wandb]')")
def test_wandb_logs_natively_with_the_scope_step_as_x_axis(tmp_path: Path) -> None:
    logger = WandbLogger(project="tshtrain-test", name="unit", mode="offline", log_dir=tmp_path)
    logger.write(LogScope.TEST, 0, {"returns/mean": 9.5, "score": 9.5})
    logger.write(LogScope.UPDATE, 4, {"loss": 0.25})
    logger.write(LogScope.TEST, 40, {"returns/mean": 20.0, "score": 20.0})
    logger.write(LogScope.INFO, 1, {"env_step": 40.0})
    assert logger.restore_counters() is None  # records live in W&B, not in files we read back
    logger.close()
    logger.close()
    rows = [{k: v for k, v in row.items() if not k.startswith("_")} for row in _wandb_history(tmp_path, 4)]
    assert rows == [
        {"test/returns/mean": 9.5, "test/score": 9.5, "env_step": 0},
        {"update/loss": 0.25, "gradient_step": 4},
        {"test/returns/mean": 20.0, "test/score": 20.0, "env_step": 40},
        {"info/env_step": 40.0, "epoch": 1},
    ]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (pip install 'tshtrain[wandb]')")
def test_wandb_in_a_composite_next_to_csv(tmp_path: Path) -> None:
    wandb_logger = WandbLogger(project="tshtrain-test", mode="offline", log_dir=tmp_path / "wandb")
    composite = CompositeLogger([CsvLogger(tmp_path / "csv"), wandb_logger])
    composite.write(LogScope.INFO, 1, {"env_step": 10.0, "gradient_step": 2.0})
    composite.close()
    assert read_csv_log(tmp_path / "csv")[LogScope.INFO] == [(1, {"env_step": 10.0, "gradient_step": 2.0})]
    assert [row["info/env_step"] for row in _wandb_history(tmp_path / "wandb", 1)] == [10.0]


def test_wandb_not_installed_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    with pytest.raises(ConfigurationError, match=r"needs the wandb package.*pip install 'tshtrain\[wandb\]'"):
        WandbLogger(project="p", mode="offline")


@pytest.mark.integration
@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (pip install 'tshtrain[wandb]')")
def test_wandb_unwritable_directory_fails_at_construction(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigurationError, match="cannot write to the log directory"):
        WandbLogger(project="p", mode="offline", log_dir=tmp_path / "a-file" / "wandb")


# ====================================================================== MLflow


@pytest.fixture
def file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow >= 3.7 refuses file stores otherwise
    return (tmp_path / "mlruns").as_uri()


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_logs_each_scalar_at_its_scope_step(file_store: str) -> None:
    from mlflow.tracking import MlflowClient

    logger = MLflowLogger(tracking_uri=file_store, run_name="unit", params={"lr": 1e-3, "algo": "dqn"})
    logger.write(LogScope.TEST, 0, {"returns/mean": 9.5})
    logger.write(LogScope.TEST, 40, {"returns/mean": 20.0})
    logger.write(LogScope.UPDATE, 4, {"loss": 0.25})
    assert logger.restore_counters() is None
    logger.close()
    logger.close()
    client = MlflowClient(tracking_uri=file_store)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.001", "algo": "dqn"}
    history = client.get_metric_history(logger.run_id, "test/returns/mean")
    assert sorted((m.step, m.value) for m in history) == [(0, 9.5), (40, 20.0)]
    assert [(m.step, m.value) for m in client.get_metric_history(logger.run_id, "update/loss")] == [(4, 0.25)]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_continues_an_existing_run(file_store: str) -> None:
    from mlflow.tracking import MlflowClient

    first = MLflowLogger(tracking_uri=file_store, experiment_name="exp")
    first.write(LogScope.INFO, 1, {"env_step": 10.0})
    first.close()
    second = MLflowLogger(tracking_uri=file_store, run_id=first.run_id)
    second.write(LogScope.INFO, 2, {"env_step": 20.0})
    second.close()
    history = MlflowClient(tracking_uri=file_store).get_metric_history(first.run_id, "info/env_step")
    assert sorted((m.step, m.value) for m in history) == [(1, 10.0), (2, 20.0)]


@pytest.mark.integration
@pytest.mark.skipif(not HAS_MLFLOW, reason="mlflow is not installed (pip install 'tshtrain[mlflow]')")
def test_mlflow_bad_store_or_run_fails_at_construction(file_store: str) -> None:
    with pytest.raises(ConfigurationError, match=r"MLflowLogger: cannot use the MLflow tracking store"):
        MLflowLogger(tracking_uri=file_store, run_id="0123456789abcdef0123456789abcdef")


def test_mlflow_not_installed_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(
        ConfigurationError, match=r"needs the mlflow package.*pip install 'tshtrain\[mlflow\]'"
    ):
        MLflowLogger(tracking_uri="file:///nowhere")
