"""Built-in hooks that steer training: learning-rate schedulers, target networks, early stopping,
gradient-norm logging, emptying the CUDA cache. Data hooks are in :mod:`tshtrain.trainer.builtin_hooks`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, final

import torch

from tshtrain.algorithm.base import TrainingStats
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.hooks import (
    HookContext,
    HookScalars,
    HookStage,
    OptimizerStep,
    StepSummary,
    StopTraining,
    TestResult,
)

if TYPE_CHECKING:
    from tshtrain.trainer.base import Trainer


def _require_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{owner}.{name} must be an int >= 1, got {value!r}.")


@final
class LRSchedulerStep:
    """Steps a ``torch.optim.lr_scheduler`` once every ``every_num_update_steps`` update steps.
    Stage: ``post_update``. The scheduler's state is saved with checkpoints."""

    def __init__(self, scheduler: torch.optim.lr_scheduler.LRScheduler, *, every_num_update_steps: int = 1):
        _require_int("LRSchedulerStep", "every_num_update_steps", every_num_update_steps)
        self.scheduler = scheduler
        self.every_num_update_steps = every_num_update_steps
        self.num_update_steps = 0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "lr_scheduler") -> None:
        """Register at post_update."""
        trainer.register_hook(HookStage.POST_UPDATE, self, name=name)

    def __call__(self, ctx: HookContext[TrainingStats]) -> None:
        self.num_update_steps += 1
        if self.num_update_steps % self.every_num_update_steps == 0:
            self.scheduler.step()

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(), "num_update_steps": self.num_update_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.scheduler.load_state_dict(dict(state["scheduler"]))
        self.num_update_steps = int(state["num_update_steps"])


@final
class TargetNetworkUpdate:
    """Refreshes a :class:`~tshtrain.algorithm.TargetNetwork` after every ``every_num_gradient_steps``
    steps of an optimizer: a hard copy (``tau=None``) or Polyak averaging by ``tau``.

    Stage: ``post_optim``. With several optimizers (actor and critic), name the one to count with
    ``optimizer`` (its name in ``algorithm.components()``); by default every optimizer step counts.
    """

    def __init__(
        self,
        target: TargetNetwork,
        *,
        tau: float | None = None,
        every_num_gradient_steps: int = 1,
        optimizer: str | None = None,
    ):
        _require_int("TargetNetworkUpdate", "every_num_gradient_steps", every_num_gradient_steps)
        if tau is not None and (isinstance(tau, bool) or not 0.0 < tau <= 1.0):
            raise ConfigurationError(
                f"TargetNetworkUpdate.tau must lie in (0, 1] (None: hard copies), got {tau!r}."
            )
        self.target = target
        self.tau = tau
        self.every_num_gradient_steps = every_num_gradient_steps
        self.optimizer = optimizer
        self.num_steps = 0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "target_network") -> None:
        """Register at post_optim."""
        trainer.register_hook(HookStage.POST_OPTIM, self, name=name)

    def __call__(self, ctx: HookContext[OptimizerStep]) -> None:
        if self.optimizer is not None and ctx.data.name != self.optimizer:
            return
        self.num_steps += 1
        if self.num_steps % self.every_num_gradient_steps == 0:
            if self.tau is None:
                self.target.hard_update()
            else:
                self.target.update(self.tau)

    def state_dict(self) -> dict[str, Any]:
        return {"num_steps": self.num_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.num_steps = int(state["num_steps"])


_METRIC_SCOPES = ("test", "update", "training")


@final
class EarlyStopping:
    """Stops training when a logged metric stops improving, and on a NaN or infinite loss.

    ``metric`` is ``"<scope>/<name>"`` as logged: ``test/...`` (checked after every test step, e.g.
    ``test/score``, ``test/returns/mean``), ``update/...`` (after every update step, e.g.
    ``update/loss``) or ``training/...`` (after every training step, e.g. ``training/returns/mean``;
    checked only when the collection step has it). After ``patience`` checks in a row without an
    improvement of more than ``min_delta`` over the best value, training stops with stop reason
    ``hook`` and a ``stop_detail`` that says so. The initial test step (epoch 0) is a check too.

    With ``stop_on_non_finite_loss``, a loss an algorithm reports at ``post_loss`` that is NaN or
    infinite stops training at once, before its optimizer step (the weights stay finite); for
    algorithms that do not report losses, loss fields of the update's statistics are checked.
    """

    def __init__(
        self,
        metric: str,
        *,
        mode: Literal["max", "min"] = "max",
        patience: int = 5,
        min_delta: float = 0.0,
        stop_on_non_finite_loss: bool = True,
    ):
        scope, _, name = metric.partition("/")
        if scope not in _METRIC_SCOPES or not name:
            raise ConfigurationError(
                f"EarlyStopping.metric must be '<scope>/<name>' with scope test, update or training (e.g. "
                f"'test/score', 'update/loss'), got {metric!r}."
            )
        if mode not in ("max", "min"):
            raise ConfigurationError(f"EarlyStopping.mode must be 'max' or 'min', got {mode!r}.")
        _require_int("EarlyStopping", "patience", patience)
        if isinstance(min_delta, bool) or not min_delta >= 0:
            raise ConfigurationError(f"EarlyStopping.min_delta must be >= 0, got {min_delta!r}.")
        self.metric = metric
        self.scope, self.name = scope, name
        self.mode = mode
        self.patience = patience
        self.min_delta = float(min_delta)
        self.stop_on_non_finite_loss = stop_on_non_finite_loss
        self.best: float | None = None
        self.num_bad_checks = 0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "early_stopping") -> None:
        """Register at the stage of the metric's scope (post_test, post_update or post_steps_log) and,
        with stop_on_non_finite_loss, at post_loss and post_update."""
        if self.scope == "test":
            trainer.register_hook(HookStage.POST_TEST, self.after_test, name=name)
        elif self.scope == "training":
            trainer.register_hook(HookStage.POST_STEPS_LOG, self.after_training_step, name=name)
        if self.scope == "update" or self.stop_on_non_finite_loss:
            trainer.register_hook(HookStage.POST_UPDATE, self.after_update, name=name)
        if self.stop_on_non_finite_loss:
            trainer.register_hook(HookStage.POST_LOSS, self.check_losses, name=name)

    def after_test(self, ctx: HookContext[TestResult]) -> None:
        scalars = {**ctx.data.collect_stat.as_scalars(), "score": ctx.data.score}
        self._check(scalars.get(self.name), ctx)

    def after_training_step(self, ctx: HookContext[StepSummary]) -> None:
        stat = ctx.data.collect_stat
        if stat is not None:
            self._check(stat.as_scalars().get(self.name), ctx)

    def after_update(self, ctx: HookContext[TrainingStats]) -> None:
        scalars = ctx.data.as_scalars()
        if self.stop_on_non_finite_loss:
            for key, value in scalars.items():
                if "loss" in key and not math.isfinite(value):
                    ctx.request_stop(f"the update step reported {key} = {value}")
                    return
        if self.scope == "update":
            self._check(scalars.get(self.name), ctx)

    def check_losses(self, ctx: HookContext[Mapping[str, torch.Tensor]]) -> None:
        losses = {key: loss.detach() for key, loss in ctx.data.items()}
        if not losses or bool(torch.isfinite(torch.cat([v.reshape(-1) for v in losses.values()])).all()):
            return  # one host sync when all is well
        for key, loss in losses.items():
            if not bool(torch.isfinite(loss).all()):
                raise StopTraining(
                    f"the {key} is {loss.cpu().numpy()} after gradient step "
                    f"{ctx.counters.gradient_step} (update step {ctx.counters.update_step + 1}); the "
                    f"optimizer step was not taken"
                )

    def _check(self, value: float | None, ctx: HookContext[Any]) -> None:
        if value is None:
            return
        improved = math.isfinite(value) and (
            self.best is None
            or (
                value > self.best + self.min_delta
                if self.mode == "max"
                else value < self.best - self.min_delta
            )
        )
        if improved:
            self.best, self.num_bad_checks = float(value), 0
            return
        self.num_bad_checks += 1
        if self.num_bad_checks >= self.patience:
            ctx.request_stop(
                f"{self.metric} did not improve on its best value {self.best} for {self.patience} checks "
                f"(last {value})"
            )

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "num_bad_checks": self.num_bad_checks}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        best = state["best"]
        self.best = None if best is None else float(best)
        self.num_bad_checks = int(state["num_bad_checks"])


@final
class GradientNormLog:
    """Logs the norm of the gradients each optimizer applied, as ``grad_norm/<optimizer name>`` in the
    ``update`` records (averaged over the optimizer steps of a record). The gradients are read after
    the step, so these are the clipped gradients where the algorithm clips. Stage: ``post_optim_log``
    (one host sync per optimizer step)."""

    def __init__(self, *, norm_type: float = 2.0, progress_bar: bool = False):
        self.norm_type = norm_type
        self.progress_bar = progress_bar

    def register(self, trainer: Trainer[Any, Any], *, name: str = "gradient_norm") -> None:
        """Register at post_optim_log."""
        trainer.register_hook(HookStage.POST_OPTIM_LOG, self, name=name)

    def __call__(self, ctx: HookContext[OptimizerStep]) -> HookScalars | None:
        grads = [
            p.grad.detach()
            for group in ctx.data.optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        if not grads:
            return None
        norms = torch.stack([torch.linalg.vector_norm(g, self.norm_type) for g in grads])
        key = f"grad_norm/{ctx.data.name}"
        value = float(torch.linalg.vector_norm(norms, self.norm_type))
        return HookScalars({key: value}, progress_bar=(key,) if self.progress_bar else ())


@final
class ClearCudaCache:
    """``torch.cuda.empty_cache()`` every ``every_num_update_steps`` update steps (when CUDA is
    available). Stage: ``post_update``."""

    def __init__(self, *, every_num_update_steps: int = 1):
        _require_int("ClearCudaCache", "every_num_update_steps", every_num_update_steps)
        self.every_num_update_steps = every_num_update_steps
        self.num_update_steps = 0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "clear_cuda_cache") -> None:
        """Register at post_update."""
        trainer.register_hook(HookStage.POST_UPDATE, self, name=name)

    def __call__(self, ctx: HookContext[TrainingStats]) -> None:
        self.num_update_steps += 1
        if self.num_update_steps % self.every_num_update_steps == 0 and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def state_dict(self) -> dict[str, Any]:
        return {"num_update_steps": self.num_update_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.num_update_steps = int(state["num_update_steps"])
