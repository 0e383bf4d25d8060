"""MLflowLogger: MLflow tracking (optional extra: ``pip install 'tshtrain[mlflow]'``).

Each ``write`` is one ``MlflowClient.log_batch`` call: every scalar becomes the metric
``<scope>/<name>`` at the scope's step (MLflow keeps a step per metric, so the step axes do not clash).
The logger uses an ``MlflowClient`` of its own and never touches MLflow's global active run.

* **Tracking store.** ``tracking_uri`` is anything MLflow accepts: a server URL, ``sqlite:///mlflow.db``
  (needs the full ``mlflow`` package), or a local directory ``file:///path/mlruns``. Recent MLflow
  versions refuse the file store unless the environment variable ``MLFLOW_ALLOW_FILE_STORE=true`` is
  set; this logger does not set it for you.
* **Flush policy.** ``log_batch`` is synchronous: a record is in the store when ``write`` returns.
* **Resume.** ``restore_counters`` returns None (as for W&B): resume with a CSV or TensorBoard logger
  next to it in a :class:`~tshtrain.logger.CompositeLogger`, and pass ``run_id`` to continue the same
  MLflow run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, final

from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogIntervals, LogResumePoint, LogScope

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

_MAX_METRICS_PER_BATCH = 1000
"""MLflow's limit on the metrics of one log_batch call"""


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
        tracking_uri: the tracking store; None: MLflow's default (``MLFLOW_TRACKING_URI``).
        experiment_name: the experiment a new run goes to (created if missing).
        run_name: the new run's name; None: MLflow picks one.
        run_id: continue this existing run instead of creating one.
        params: hyperparameters recorded as the run's params (values are converted with ``str``).
        intervals: how often the trainer writes each scope; None: ``LogIntervals()`` (the trainer's
            defaults for its family).

        Raises:
            ConfigurationError: mlflow is not installed, or the store cannot be reached / written
                (the message has MLflow's reason).
        """
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError as error:
            raise ConfigurationError(
                "MLflowLogger needs the mlflow package, which is not installed; install it with "
                "pip install 'tshtrain[mlflow]' (or pip install mlflow), or use another logger."
            ) from error
        self._intervals = intervals or LogIntervals()
        try:
            self.client: MlflowClient = MlflowClient(tracking_uri=tracking_uri)
            if run_id is None:
                experiment = self.client.get_experiment_by_name(experiment_name)
                experiment_id = (
                    experiment.experiment_id
                    if experiment is not None
                    else self.client.create_experiment(experiment_name)
                )
                run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id
            else:
                self.client.get_run(run_id)  # fails now if the run does not exist
            if params:
                self.client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])
        except Exception as error:
            raise ConfigurationError(
                f"MLflowLogger: cannot use the MLflow store {tracking_uri!r}: {type(error).__name__}: {error}"
            ) from error
        self.run_id: str = run_id
        """the MLflow run this logger writes to"""
        self._closed = False

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        metrics = [Metric(f"{scope}/{name}", float(value), timestamp, step) for name, value in data.items()]
        for start in range(0, len(metrics), _MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[start : start + _MAX_METRICS_PER_BATCH])

    def restore_counters(self) -> LogResumePoint | None:
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.set_terminated(self.run_id, "FINISHED")
