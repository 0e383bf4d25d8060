"""The built-in callbacks: reward normalisation, sub-sampling, frame counting, early stopping,
gradient-norm logging, emptying the CUDA cache.

Each is a :class:`~tshtrain.trainer.callbacks.Callback` (add it with ``trainer.add_callback(x)``; its
state, if any, is saved with checkpoints under the name it was added with, by default its class name)
and a dataclass whose number fields are checked by :func:`~tshtrain.constraints.validate_fields`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, final

import numpy as np
import torch
from typing_extensions import override

from tshtrain.algorithm.base import TrainingStats
from tshtrain.constraints import NonNegativeFloat, PositiveFloat, PositiveInt, validate_fields
from tshtrain.data.batch import AnyTransitionBatch, TransitionBatch, numpy_batch, numpy_rollout
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError, short_repr
from tshtrain.trainer.callbacks import (
    Callback,
    CollectedBatch,
    OptimizerStep,
    RunContext,
    SetupInfo,
    StepSummary,
    TestResult,
)

__all__ = [
    "BatchSubSampler",
    "ClearCudaCache",
    "CountFramesLog",
    "EarlyStopping",
    "GradientNormLog",
    "RewardNormalizer",
]


def dataset_field(buffer: AnyReplayBuffer, name: str) -> np.ndarray:
    """Every stored value of a field, oldest first (O(dataset); used once at the start of a run)."""
    if not isinstance(buffer, BaseReplayBuffer):
        raise ConfigurationError(f"dataset_field reads numpy buffers, got {type(buffer).__name__}.")
    return buffer.field_at(name, buffer.chronological_indices())


def new_field(batch: CollectedBatch, name: str) -> np.ndarray:
    """A field of the transitions of a collection step (the rollout's valid ones on-policy)."""
    if batch.rollout is not None:
        rollout = numpy_rollout(batch.rollout, "new_field")
        values = getattr(rollout, name)
        if not isinstance(values, np.ndarray):
            raise TypeError(f"{name} of a Dict observation space cannot be normalised; flatten it first.")
        return np.asarray(values[rollout.valid])
    if not isinstance(batch.buffer, BaseReplayBuffer):
        raise ConfigurationError(f"new_field reads numpy buffers, got {type(batch.buffer).__name__}.")
    return batch.buffer.field_at(name, batch.new_indices())


# ============================================================================ data


@final
@dataclass(kw_only=True, eq=False)
class RewardNormalizer(Callback):
    """Divides the rewards the updates see by their running standard deviation (and, with ``center``,
    subtracts their running mean). The statistics are those of every reward seen (Chan et al.'s
    parallel merge, float64).

    Points: ``on_run_start`` (offline: statistics of the whole dataset, once), ``after_collect``
    (online: merge the collection step's rewards; on-policy: hand the update a rollout with normalised
    rewards), ``on_sampled_batch`` (off-policy / offline: normalise every sampled batch; algorithms with
    n-step returns read further rewards from the buffer itself, so use ``n_step=1`` with this callback).
    Centering shifts the value of every step and so changes what is optimal in episodic tasks with
    varying lengths (e.g. CartPole's +1 per step): it is off by default.
    """

    center: bool = False
    """subtract the running mean too"""
    eps: PositiveFloat = 1e-8
    """added to the variance before its square root"""
    count: float = field(default=0.0, init=False)
    """rewards merged so far"""
    mean: float = field(default=0.0, init=False)
    """their mean"""
    var: float = field(default=1.0, init=False)
    """their (population) variance"""

    def __post_init__(self) -> None:
        validate_fields(self)

    def update(self, rew: np.ndarray) -> None:
        """Merge rewards into the statistics."""
        batch = np.asarray(rew, dtype=np.float64).reshape(-1)
        if not len(batch):
            return
        n, mean, var = float(len(batch)), float(batch.mean()), float(batch.var())
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.var = m2 / total
        self.count = total

    def normalize(self, rew: np.ndarray) -> np.ndarray:
        """Normalised rewards (float32); unchanged before any statistics."""
        if self.count == 0:
            return rew
        shift = self.mean if self.center else 0.0
        return np.asarray((rew - shift) / math.sqrt(self.var + self.eps), dtype=np.float32)

    @override
    def on_run_start(self, ctx: RunContext, setup: SetupInfo) -> None:
        if setup.offline and setup.buffer is not None and self.count == 0:
            self.update(dataset_field(setup.buffer, "rew"))

    @override
    def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
        self.update(new_field(batch, "rew"))
        if batch.rollout is None:
            return None
        rollout = numpy_rollout(batch.rollout, "RewardNormalizer")
        rew = np.where(rollout.valid, self.normalize(rollout.rew), np.float32(0.0))
        return dataclasses.replace(batch, rollout=dataclasses.replace(rollout, rew=rew))

    @override
    def on_sampled_batch(self, ctx: RunContext, batch: AnyTransitionBatch) -> AnyTransitionBatch | None:
        batch = numpy_batch(batch, "RewardNormalizer")
        return dataclasses.replace(batch, rew=self.normalize(batch.rew))

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean, "var": self.var}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count, self.mean, self.var = float(state["count"]), float(state["mean"]), float(state["var"])


@final
@dataclass(eq=False)
class BatchSubSampler(Callback):
    """Trains on a random part of the data (TorchRL's BatchSubSampler).

    On-policy (``after_collect``): the update receives the rollout with only ``batch_size`` of its
    transitions marked valid, in random windows of ``sub_traj_len`` consecutive steps of one env
    (returns and advantages are still computed over the whole rollout, so they stay right).
    Off-policy / offline (``on_sampled_batch``): each sampled batch is cut to ``batch_size`` random
    transitions. Data no larger than ``batch_size`` is left as it is.
    """

    batch_size: PositiveInt
    """transitions to keep"""
    _: KW_ONLY
    sub_traj_len: PositiveInt = 1
    """on-policy: length of the windows of consecutive steps that are kept"""
    seed: int | None = None
    """seeds the sub-sampler's generator"""
    generator: torch.Generator = field(init=False, repr=False)
    """draws the kept transitions"""

    def __post_init__(self) -> None:
        validate_fields(self)
        self.generator = torch.Generator()
        self.generator.manual_seed(int(np.random.SeedSequence(self.seed).generate_state(1)[0]))

    @override
    def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
        if batch.rollout is None or batch.rollout.num_steps <= self.batch_size:
            return None
        rollout = numpy_rollout(batch.rollout, "BatchSubSampler")
        valid_TE = rollout.valid
        length = self.sub_traj_len
        # window starts (t, e): the window of `length` steps lies inside column e's valid steps
        starts_E = np.maximum(valid_TE.sum(axis=0) - length + 1, 0)
        total = int(starts_E.sum())
        if total == 0:
            return None
        num_windows = min(-(-self.batch_size // length), total)
        flat = torch.randperm(total, generator=self.generator)[:num_windows].numpy()
        offsets_E = np.cumsum(starts_E) - starts_E
        cols = np.searchsorted(np.cumsum(starts_E), flat, side="right")
        rows = flat - offsets_E[cols]
        keep_TE = np.zeros_like(valid_TE)
        keep_TE[rows[:, None] + np.arange(length), cols[:, None]] = True
        if int(keep_TE.sum()) > self.batch_size:  # the last window may overshoot by less than `length`
            kept_rows, kept_cols = np.nonzero(keep_TE)
            keep_TE[kept_rows[self.batch_size :], kept_cols[self.batch_size :]] = False
        return dataclasses.replace(batch, rollout=dataclasses.replace(rollout, valid=keep_TE & valid_TE))

    @override
    def on_sampled_batch(self, ctx: RunContext, batch: AnyTransitionBatch) -> AnyTransitionBatch | None:
        if len(batch) <= self.batch_size:
            return None
        batch = numpy_batch(batch, "BatchSubSampler")
        idx = torch.randperm(len(batch), generator=self.generator)[: self.batch_size].numpy()
        return _take(batch, np.sort(idx))

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])


def _take(batch: TransitionBatch, idx: np.ndarray) -> TransitionBatch:
    """The rows ``idx`` of a batch."""

    def obs(value: Any) -> Any:
        return value[idx] if isinstance(value, np.ndarray) else {k: v[idx] for k, v in value.items()}

    return TransitionBatch(
        obs=obs(batch.obs),
        act=batch.act[idx],
        rew=batch.rew[idx],
        terminated=batch.terminated[idx],
        truncated=batch.truncated[idx],
        obs_next=obs(batch.obs_next),
        indices=batch.indices[idx],
        weight=None if batch.weight is None else batch.weight[idx],
    )


# ============================================================================ logging


@final
@dataclass(kw_only=True, eq=False)
class CountFramesLog(Callback):
    """Counts the frames collected (env steps times ``frame_skip``) and logs them as ``frames`` in
    each training record, shown in the progress bar (TorchRL's CountFramesLog). Point:
    ``on_training_step_end``."""

    frame_skip: PositiveInt = 1
    """frames per env step (the frame skip of the env's wrapper)"""
    progress_bar: bool = True
    """show ``frames`` in the progress bar"""
    frames: int = field(default=0, init=False)
    """frames counted so far"""

    def __post_init__(self) -> None:
        validate_fields(self)

    @override
    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        if summary.collect_stat is not None:
            self.frames += summary.collect_stat.n_collected_steps * self.frame_skip
        ctx.log({"frames": float(self.frames)}, progress_bar=("frames",) if self.progress_bar else ())

    def state_dict(self) -> dict[str, Any]:
        return {"frames": self.frames}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.frames = int(state["frames"])


@final
@dataclass(kw_only=True, eq=False)
class GradientNormLog(Callback):
    """Logs the norm of the gradients each optimizer applied, as ``grad_norm/<optimizer name>`` in the
    ``update`` records (averaged over the optimizer steps of a record). The gradients are read after
    the step, so these are the clipped gradients where the algorithm clips. Point:
    ``on_optimizer_step`` (one host sync per optimizer step)."""

    norm_type: PositiveFloat = 2.0
    """the p of the p-norm"""
    progress_bar: bool = False
    """show the norms in the progress bar"""

    def __post_init__(self) -> None:
        validate_fields(self)

    @override
    def on_optimizer_step(self, ctx: RunContext, step: OptimizerStep) -> None:
        grads = [
            p.grad.detach()
            for group in step.optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        if not grads:
            return
        norms = torch.stack([torch.linalg.vector_norm(g, self.norm_type) for g in grads])
        key = f"grad_norm/{step.name}"
        value = float(torch.linalg.vector_norm(norms, self.norm_type))
        ctx.log({key: value}, progress_bar=(key,) if self.progress_bar else ())


# ============================================================================ control


@final
@dataclass(kw_only=True, eq=False)
class ClearCudaCache(Callback):
    """``torch.cuda.empty_cache()`` every ``every_num_update_steps`` update steps (when CUDA is
    available). Point: ``after_update``."""

    every_num_update_steps: PositiveInt = 1
    """update steps between two calls"""
    num_update_steps: int = field(default=0, init=False)
    """update steps seen"""

    def __post_init__(self) -> None:
        validate_fields(self)

    @override
    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        self.num_update_steps += 1
        if self.num_update_steps % self.every_num_update_steps == 0 and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def state_dict(self) -> dict[str, Any]:
        return {"num_update_steps": self.num_update_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.num_update_steps = int(state["num_update_steps"])


_SCOPE_POINTS = {"test": "on_test_end", "update": "after_update", "training": "on_training_step_end"}
"""the scope of an EarlyStopping metric -> the point where it is checked"""


@final
@dataclass(eq=False)
class EarlyStopping(Callback):
    """Stops training when a logged metric stops improving.

    ``metric`` is ``"<scope>/<name>"`` as logged: ``test/...`` (checked after every test step, e.g.
    ``test/score``, ``test/returns/mean``), ``update/...`` (after every update step, e.g.
    ``update/loss``) or ``training/...`` (after every training step, e.g. ``training/returns/mean``;
    checked only when the collection step has it). After ``patience`` checks in a row without an
    improvement of more than ``min_delta`` over the best value, training stops with stop reason
    ``hook`` and a ``stop_detail`` that says so. The initial test step (epoch 0) is a check too.
    A NaN or infinite value never counts as an improvement. (NaN or infinite *losses* are not this
    callback's business: the algorithms raise :class:`~tshtrain.algorithm.NonFiniteLossError`.)
    """

    metric: str
    """``"<scope>/<name>"`` with scope test, update or training, e.g. ``"test/score"``, ``"update/loss"``"""
    _: KW_ONLY
    mode: Literal["max", "min"] = "max"
    """``"max"``: larger is better; ``"min"``: smaller is better"""
    patience: PositiveInt = 5
    """checks in a row without improvement before training stops"""
    min_delta: NonNegativeFloat = 0.0
    """an improvement must exceed the best value by more than this"""
    best: float | None = field(default=None, init=False)
    """the best value so far"""
    num_bad_checks: int = field(default=0, init=False)
    """checks in a row without improvement"""
    scope: str = field(init=False)
    """the part of ``metric`` before the first ``/``"""
    name: str = field(init=False)
    """the part of ``metric`` after the first ``/``"""

    def __post_init__(self) -> None:
        validate_fields(self)
        scope, _, name = self.metric.partition("/")
        if scope not in _SCOPE_POINTS or not name:
            raise ConfigurationError(
                f"EarlyStopping.metric must be '<scope>/<name>' with scope test, update or training (e.g. "
                f"'test/score', 'update/loss'), got {short_repr(self.metric)}."
            )
        if self.mode not in ("max", "min"):
            raise ConfigurationError(
                f"EarlyStopping.mode must be 'max' or 'min', got {short_repr(self.mode)}."
            )
        self.scope, self.name = scope, name

    @override
    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        if self.scope == "test":
            scalars = {**result.collect_stat.as_scalars(), "score": result.score}
            self._check(scalars.get(self.name), ctx)

    @override
    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        stat = summary.collect_stat
        if self.scope == "training" and stat is not None:
            self._check(stat.as_scalars().get(self.name), ctx)

    @override
    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        if self.scope == "update":
            self._check(stats.as_scalars().get(self.name), ctx)

    def _check(self, value: float | None, ctx: RunContext) -> None:
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

    def load_state_dict(self, state: dict[str, Any]) -> None:
        best = state["best"]
        self.best = None if best is None else float(best)
        self.num_bad_checks = int(state["num_bad_checks"])
