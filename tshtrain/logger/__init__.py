"""The Logger protocol and its writers: TensorBoard, CSV, W&B, MLflow, several at once.

W&B and MLflow are optional extras (``pip install 'tshtrain[wandb]'`` / ``'tshtrain[mlflow]'``); their
packages are imported only when such a logger is built. See ``docs/logging.md``.
"""

from tshtrain.errors import LoggerError
from tshtrain.logger.base import (
    OFF_POLICY_LOG_INTERVAL,
    Logger,
    LogIntervals,
    LogResumePoint,
    LogScope,
    MemoryLogger,
    NoOpLogger,
    RewindableLogger,
    family_log_intervals,
)
from tshtrain.logger.composite import CompositeLogger
from tshtrain.logger.csv import CsvLogger, read_csv_log
from tshtrain.logger.hparams import HPARAM_METRICS, flatten_hparams
from tshtrain.logger.mlflow import MLflowLogger, project_store_uri
from tshtrain.logger.tensorboard import TensorboardLogger, read_tensorboard_hparams, read_tensorboard_log
from tshtrain.logger.wandb import WandbLogger

__all__ = [
    "HPARAM_METRICS",
    "OFF_POLICY_LOG_INTERVAL",
    "CompositeLogger",
    "CsvLogger",
    "LogIntervals",
    "LogResumePoint",
    "LogScope",
    "Logger",
    "LoggerError",
    "MLflowLogger",
    "MemoryLogger",
    "NoOpLogger",
    "RewindableLogger",
    "TensorboardLogger",
    "WandbLogger",
    "family_log_intervals",
    "flatten_hparams",
    "project_store_uri",
    "read_csv_log",
    "read_tensorboard_hparams",
    "read_tensorboard_log",
]
