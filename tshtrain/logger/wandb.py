"""WandbLogger: Weights & Biases through ``wandb.log`` (optional extra: ``pip install 'tshtrain[wandb]'``).

Records are logged natively, not synced from TensorBoard files: each ``write`` is one ``run.log`` call
with the scalars as ``<scope>/<name>`` plus the scope's step counter (``env_step``, ``gradient_step``
or ``epoch``), and ``define_metric`` makes that counter the x-axis of the scope's charts. W&B's own
``_step`` just counts the calls.

* **Flush policy.** wandb hands every record to its background process at once; that process writes
  (offline mode) or uploads (online mode) on its own schedule, and ``close`` (``run.finish()``) waits
  for it.
* **Resume.** ``restore_counters`` returns None: the records live in W&B, not in files this logger
  reads back. Resume with a :class:`~tshtrain.logger.CsvLogger` or
  :class:`~tshtrain.logger.TensorboardLogger` next to it in a :class:`~tshtrain.logger.CompositeLogger`,
  and pass ``run_id`` to continue the same W&B run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, final

from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import LogIntervals, LogResumePoint, LogScope

if TYPE_CHECKING:
    from wandb.sdk.wandb_run import Run


@final
class WandbLogger:
    """Logs to a W&B run (see the module docstring)."""

    def __init__(
        self,
        *,
        project: str,
        name: str | None = None,
        run_id: str | None = None,
        group: str | None = None,
        tags: Sequence[str] = (),
        config: Mapping[str, object] | None = None,
        mode: Literal["online", "offline", "disabled"] = "online",
        log_dir: str | os.PathLike[str] | None = None,
        intervals: LogIntervals | None = None,
    ):
        """Args:
        project: the W&B project.
        name: the run's display name; None: W&B picks one.
        run_id: continue the W&B run with this id (resume="allow"); None: a new run.
        group: groups runs in the W&B UI (e.g. the seeds of one configuration).
        tags: the run's tags.
        config: hyperparameters to record with the run.
        mode: "online" uploads as it goes; "offline" writes to ``log_dir`` only (upload later with
            ``wandb sync``); "disabled" logs nothing.
        log_dir: where wandb keeps its files (its ``dir``); None: the current directory.
        intervals: how often the trainer writes each scope; None: ``LogIntervals()`` (the trainer's
            defaults for its family).

        Raises:
            ConfigurationError: wandb is not installed, or ``wandb.init`` failed (no API key in online
                mode, an unwritable ``log_dir``, ...).
        """
        try:
            import wandb
        except ImportError as error:
            raise ConfigurationError(
                "WandbLogger needs the wandb package, which is not installed; install it with "
                "pip install 'tshtrain[wandb]' (or pip install wandb), or use another logger."
            ) from error

        self._intervals = intervals or LogIntervals()
        if log_dir is not None:
            from tshtrain.logger._files import prepare_log_dir

            log_dir = prepare_log_dir(log_dir, "WandbLogger")
        try:
            self.run: Run = wandb.init(
                project=project,
                name=name,
                id=run_id,
                resume="allow" if run_id is not None else None,
                group=group,
                tags=list(tags),
                config=dict(config) if config is not None else None,
                mode=mode,
                dir=None if log_dir is None else str(log_dir),
                reinit="create_new",  # no global run: several loggers may coexist
            )
        except Exception as error:
            raise ConfigurationError(
                f"WandbLogger: wandb.init failed: {type(error).__name__}: {error}"
            ) from error
        for scope in LogScope:
            self.run.define_metric(f"{scope}/*", step_metric=scope.step_axis)
        self._closed = False

    @property
    def intervals(self) -> LogIntervals:
        return self._intervals

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        record: dict[str, float] = {f"{scope}/{name}": float(value) for name, value in data.items()}
        record[scope.step_axis] = step
        self.run.log(record)

    def restore_counters(self) -> LogResumePoint | None:
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.run.finish()
