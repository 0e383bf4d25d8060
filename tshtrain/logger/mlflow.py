"""MLflowLogger: MLflow tracking (optional extra: ``pip install 'tshtrain[mlflow]'``, which installs
``mlflow-skinny``).

Each ``write`` is one ``MlflowClient.log_batch`` call: every scalar becomes the metric
``<scope>/<name>`` at the scope's step (MLflow keeps a step per metric, so the step axes do not clash).
The logger uses an ``MlflowClient`` of its own and never touches MLflow's global active run.

* **Tracking store.** ``tracking_uri`` is anything MLflow accepts: a server URL, a SQLite database
  such as ``sqlite:///runs/mlflow.db``, or a local directory ``file:///path/mlruns``. ``tshtrain train``
  writes every run of a project to one SQLite store, :func:`project_store_uri` (``mlflow.db`` next to
  the run directories: ``runs/mlflow.db`` by default), so that one ``mlflow ui`` compares them; MLflow 3
  opens it with no environment variable. The SQLite store needs SQLAlchemy and Alembic, which the extra
  installs next to ``mlflow-skinny``; a database URI without them is refused with that advice. File
  stores still work: MLflow 3 refuses them unless ``MLFLOW_ALLOW_FILE_STORE=true``, which this logger
  sets for its own calls only (see below).
* **Fail fast.** MLflow retries an unreachable server for about four minutes by default. Around its own
  calls this logger sets ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` (:data:`HTTP_MAX_RETRIES`),
  ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR`` and ``MLFLOW_HTTP_REQUEST_TIMEOUT`` (:data:`HTTP_TIMEOUT`
  seconds), unless the environment sets them already, and restores the environment afterwards; an
  unreachable URI fails within seconds with one line naming it.
* **Params.** ``params={...}`` are logged as the run's params (``tshtrain train`` passes the resolved
  experiment, flattened to dotted keys), in batches of MLflow's limit of 100.
* **Flush policy.** ``log_batch`` is synchronous: a record is in the store when ``write`` returns.
* **Resume.** ``restore_counters`` returns None (as for W&B): resume with a CSV or TensorBoard logger
  next to it in a :class:`~tshtrain.logger.CompositeLogger`, and pass ``run_id`` to continue the same
  MLflow run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, final
from urllib.parse import urlparse

from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogIntervals, LogResumePoint, LogScope

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

_MAX_METRICS_PER_BATCH = 1000
"""MLflow's limit on the metrics of one log_batch call"""
_MAX_PARAMS_PER_BATCH = 100
"""MLflow's limit on the params of one log_batch call"""
_MAX_PARAM_CHARS = 6000
"""MLflow's limit on the length of a param value (longer ones are cut, with a marker)"""
HTTP_MAX_RETRIES = 1
"""retries of a failed request to a tracking server (MLflow's default, 7, waits about four minutes)"""
HTTP_TIMEOUT = 10
"""seconds a request to a tracking server may take (MLflow's default: 120)"""
_DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
PROJECT_STORE_FILE = "mlflow.db"
"""the SQLite file of a project's MLflow store, next to its run directories"""


def project_store_uri(output_dir: Path) -> str:
    """The MLflow store that the runs of one project share: ``sqlite:///<parent>/mlflow.db``, where
    ``<parent>`` is the directory that holds the run directory ``output_dir`` (``runs/`` for the default
    ``runs/<algorithm>-<env>-<date>-<time>``). Every run written next to this one lands in the same
    database, which MLflow 3 opens with no environment variable:
    ``mlflow ui --backend-store-uri sqlite:///runs/mlflow.db``.

    Args:
        output_dir: the run's directory (need not exist yet).
    """
    database = Path(output_dir).resolve().parent / PROJECT_STORE_FILE
    return f"sqlite:///{database.as_posix()}"


def _is_file_store(uri: str) -> bool:
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")  # C:\... on Windows


def _client_environment(uri: str) -> dict[str, str]:
    """The environment variables this logger sets around its MLflow calls (those not set already)."""
    wanted = {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(HTTP_MAX_RETRIES),
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(HTTP_TIMEOUT),
    }
    if _is_file_store(uri):
        wanted["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return {name: value for name, value in wanted.items() if name not in os.environ}


@contextlib.contextmanager
def _scoped_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block, then remove them again."""
    os.environ.update(values)
    try:
        yield
    finally:
        for name in values:
            os.environ.pop(name, None)


_SETUP_LOGGERS = ("mlflow.store.db.utils", "alembic")
"""the loggers that announce each step of creating or upgrading a SQL store's tables at INFO level"""


@contextlib.contextmanager
def _quiet_store_setup() -> Iterator[None]:
    """Hold the store setup's INFO lines back for the block (warnings and errors still show)."""
    loggers = [logging.getLogger(name) for name in _SETUP_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _check_store(uri: str) -> None:
    """Refuse a database URI that the installed MLflow cannot open, with the fix."""
    scheme = urlparse(uri).scheme.split("+", 1)[0]
    missing = [name for name in ("sqlalchemy", "alembic") if importlib.util.find_spec(name) is None]
    if scheme in _DATABASE_SCHEMES and missing:
        raise ConfigurationError(
            f"MLflowLogger: the tracking URI {uri!r} is a {scheme} database, which needs "
            f"{' and '.join(missing)} (mlflow-skinny alone has no SQL stores). Install them with "
            f"pip install 'tshtrain[mlflow]' (or pip install mlflow), or use a tracking server "
            f"(http://host:5000) or a file store (file:///path/mlruns)."
        )


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split())
    if "Connection refused" in text or "Max retries exceeded" in text or "timed out" in text.lower():
        return "no tracking server answers there (connection refused or timed out)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@final
class MLflowLogger:
    """Logs to an MLflow run (see the module docstring)."""

    def __init__(
        self,
        *,
        tracking_uri: str | None = None,
        experiment_name: str = "tshtrain",
        run_name: str | None = None,
        run_id: str | None = None,
        params: Mapping[str, object] | None = None,
        intervals: LogIntervals | None = None,
    ):
        """Args:
        tracking_uri: the tracking store; None: MLflow's default (``MLFLOW_TRACKING_URI``, else, in
            MLflow 3, ``sqlite:///mlflow.db`` in the working directory). ``tshtrain train`` passes
            :func:`project_store_uri`.
        experiment_name: the experiment a new run goes to (created if missing).
        run_name: the new run's name; None: MLflow picks one.
        run_id: continue this existing run instead of creating one.
        params: hyperparameters recorded as the run's params (values are converted with ``str``;
            ``flatten_hparams`` turns a nested experiment into dotted keys).
        intervals: how often the trainer writes each scope; None: ``LogIntervals()`` (the trainer's
            defaults for its family).

        Raises:
            ConfigurationError: mlflow is not installed, a database URI without SQLAlchemy, or the
                store cannot be reached / written (one line naming the URI and MLflow's reason; an
                unreachable server fails after at most ``HTTP_MAX_RETRIES`` retries).
        """
        try:
            import mlflow
            from mlflow.tracking import MlflowClient
        except ImportError as error:
            raise ConfigurationError(
                "MLflowLogger needs the mlflow package, which is not installed; install it with "
                "pip install 'tshtrain[mlflow]' (or pip install mlflow), or use another logger."
            ) from error
        self._intervals = intervals or LogIntervals()
        uri = tracking_uri or mlflow.get_tracking_uri()
        _check_store(uri)
        self.tracking_uri: str = uri
        """the tracking store this logger writes to"""
        self._environment = _client_environment(uri)
        try:
            with _scoped_environment(self._environment), _quiet_store_setup():
                self.client: MlflowClient = MlflowClient(tracking_uri=uri)
                self.run_id: str = self._start(experiment_name, run_name, run_id)
                """the MLflow run this logger writes to"""
                self._log_params(params or {})
        except Exception as error:
            raise ConfigurationError(
                f"MLflowLogger: cannot use the MLflow tracking store {uri!r}: {type(error).__name__}: "
                f"{_one_line(error)}"
            ) from error
        self._closed = False

    def _start(self, experiment_name: str, run_name: str | None, run_id: str | None) -> str:
        """The id of the run to write to: ``run_id`` (checked to exist) or a new run."""
        if run_id is not None:
            self.client.get_run(run_id)  # fails now if the run does not exist
            return run_id
        experiment = self.client.get_experiment_by_name(experiment_name)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(experiment_name)
        )
        new_id: str = self.client.create_run(experiment_id, run_name=run_name).info.run_id
        return new_id

    def _log_params(self, params: Mapping[str, object]) -> None:
        from mlflow.entities import Param

        entries = [Param(key, str(value)[:_MAX_PARAM_CHARS]) for key, value in params.items()]
        for start in range(0, len(entries), _MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=entries[start : start + _MAX_PARAMS_PER_BATCH])

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        metrics = [Metric(f"{scope}/{name}", float(value), timestamp, step) for name, value in data.items()]
        with _scoped_environment(self._environment):
            for start in range(0, len(metrics), _MAX_METRICS_PER_BATCH):
                self.client.log_batch(self.run_id, metrics=metrics[start : start + _MAX_METRICS_PER_BATCH])

    def restore_counters(self) -> LogResumePoint | None:
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with _scoped_environment(self._environment):
                self.client.set_terminated(self.run_id, "FINISHED")
