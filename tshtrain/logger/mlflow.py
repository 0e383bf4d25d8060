"""MLflowLogger: MLflow tracking (optional extra: ``pip install 'tshtrain[mlflow]'``, which installs
``mlflow-skinny``).

Each ``write`` is one ``MlflowClient.log_batch`` call: every scalar becomes the metric
``<scope>/<name>`` at the scope's step (MLflow keeps a step per metric, so the step axes do not clash).
The logger uses an ``MlflowClient`` of its own and never touches MLflow's global active run.

* **Tracking store.** ``tracking_uri`` is anything MLflow accepts: a server URL, a local directory
  ``file:///path/mlruns`` (what ``tshtrain train`` uses: ``OUTPUT_DIR/mlruns``), or a database such as
  ``sqlite:///mlflow.db``. With ``mlflow-skinny`` (the extra), the file store and servers work; SQL
  stores need the full ``mlflow`` package (sqlalchemy), and a database URI without it is refused with
  that advice. MLflow 3 refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE=true``; this logger sets it
  for its own calls only (see below), so a file store works out of the box.
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
import os
import time
from collections.abc import Iterator, Mapping
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


def _check_store(uri: str) -> None:
    """Refuse a database URI that the installed MLflow cannot open, with the fix."""
    scheme = urlparse(uri).scheme.split("+", 1)[0]
    if scheme in _DATABASE_SCHEMES and importlib.util.find_spec("sqlalchemy") is None:
        raise ConfigurationError(
            f"MLflowLogger: the tracking URI {uri!r} is a {scheme} database, which needs the full mlflow "
            f"package (sqlalchemy); the [mlflow] extra installs mlflow-skinny only. Install it with "
            f"pip install mlflow, or use a file store (file:///path/mlruns; the default of tshtrain train) "
            f"or a tracking server (http://host:5000)."
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
            MLflow 3, ``sqlite:///mlflow.db``, which needs the full mlflow package).
        experiment_name: the experiment a new run goes to (created if missing).
        run_name: the new run's name; None: MLflow picks one.
        run_id: continue this existing run instead of creating one.
        params: hyperparameters recorded as the run's params (values are converted with ``str``;
            ``flatten_hparams`` turns a nested experiment into dotted keys).
        intervals: how often the trainer writes each scope; None: ``LogIntervals()`` (the trainer's
            defaults for its family).

        Raises:
            ConfigurationError: mlflow is not installed, a database URI without sqlalchemy, or the
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
            with _scoped_environment(self._environment):
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
