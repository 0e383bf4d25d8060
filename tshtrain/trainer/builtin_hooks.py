"""Built-in hooks that act on data: reward and observation normalisation, sub-sampling, frame counting.

Hooks that need several stages have ``register(trainer, name=...)``; single-stage hooks are plain
callables for ``trainer.register_hook`` (and have ``register`` too, for uniformity). Control hooks
(learning-rate schedules, target networks, early stopping, gradient norms, CUDA cache) are in
:mod:`tshtrain.trainer.control_hooks`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, final

import numpy as np
import torch

from tshtrain.algorithm.base import TrainingStats
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.data.batch import TransitionBatch
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.stats import CollectStats
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.hooks import CollectedBatch, HookContext, HookScalars, HookStage, SetupInfo

if TYPE_CHECKING:
    from tshtrain.trainer.base import Trainer


def _require_int(owner: str, name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{owner}.{name} must be an int >= {minimum}, got {value!r}.")


def _dataset_field(buffer: BaseReplayBuffer, name: str) -> np.ndarray:
    """Every stored value of a field, oldest first (O(dataset); used once at setup)."""
    return buffer.field_at(name, buffer.chronological_indices())


def _new_field(batch: CollectedBatch, name: str) -> np.ndarray:
    """A field of the transitions of a collection step (the rollout's valid ones on-policy)."""
    if batch.rollout is not None:
        values = getattr(batch.rollout, name)
        if not isinstance(values, np.ndarray):
            raise TypeError(f"{name} of a Dict observation space cannot be normalised; flatten it first.")
        return np.asarray(values[batch.rollout.valid])
    return batch.buffer.field_at(name, batch.new_indices())


@final
class RewardNormalizer:
    """Divides the rewards the updates see by their running standard deviation (and, with ``center``,
    subtracts their running mean). The statistics are those of every reward seen (Chan et al.'s
    parallel merge, float64).

    Stages: ``setup`` (offline: statistics of the whole dataset, once), ``batch_process`` (online:
    merge the collection step's rewards; on-policy: hand the update a rollout with normalised rewards),
    ``process_optim_batch`` (off-policy / offline: normalise every sampled batch; algorithms with n-step
    returns read further rewards from the buffer itself, so use ``n_step=1`` with this hook).
    Centering shifts the value of every step and so changes what is optimal in episodic tasks with
    varying lengths (e.g. CartPole's +1 per step): it is off by default.
    """

    def __init__(self, *, center: bool = False, eps: float = 1e-8):
        self.center = center
        self.eps = eps
        self.count = 0.0
        self.mean = 0.0
        self.var = 1.0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "reward_normalizer") -> None:
        """Register at setup, batch_process and process_optim_batch."""
        trainer.register_hook(HookStage.SETUP, self.setup, name=name)
        trainer.register_hook(HookStage.BATCH_PROCESS, self.batch_process, name=name)
        trainer.register_hook(HookStage.PROCESS_OPTIM_BATCH, self.process_optim_batch, name=name)

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

    def setup(self, ctx: HookContext[SetupInfo]) -> None:
        if ctx.data.offline and ctx.data.buffer is not None and self.count == 0:
            self.update(_dataset_field(ctx.data.buffer, "rew"))

    def batch_process(self, ctx: HookContext[CollectedBatch]) -> CollectedBatch | None:
        batch = ctx.data
        self.update(_new_field(batch, "rew"))
        if batch.rollout is None:
            return None
        rew = np.where(batch.rollout.valid, self.normalize(batch.rollout.rew), np.float32(0.0))
        return dataclasses.replace(batch, rollout=dataclasses.replace(batch.rollout, rew=rew))

    def process_optim_batch(self, ctx: HookContext[TransitionBatch]) -> TransitionBatch | None:
        return dataclasses.replace(ctx.data, rew=self.normalize(ctx.data.rew))

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean, "var": self.var}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count, self.mean, self.var = float(state["count"]), float(state["mean"]), float(state["var"])


@final
class ObservationNormalizer:
    """Keeps a :class:`~tshtrain.algorithm.RunningObsNormalizer` layer up to date from the collected
    observations, for algorithms that do not update one themselves.

    Put the normaliser first in the policy's network (and in every network that reads observations,
    the *same* instance): since it is a layer, collection, test steps and updates all see the same
    normalisation, and its statistics are saved with the networks. The statistics change after each
    update step (from that collection step's observations), so an update sees the observations as the
    acting policy saw them. Offline, the statistics of the whole dataset are merged once at setup.

    Stages: ``setup`` (checks; offline statistics), ``batch_process`` (takes the new observations),
    ``post_update`` (merges them).
    """

    def __init__(self, normalizer: RunningObsNormalizer):
        self.normalizer = normalizer
        self._pending: list[np.ndarray] = []

    def register(self, trainer: Trainer[Any, Any], *, name: str = "observation_normalizer") -> None:
        """Register at setup, batch_process and post_update."""
        trainer.register_hook(HookStage.SETUP, self.setup, name=name)
        trainer.register_hook(HookStage.BATCH_PROCESS, self.batch_process, name=name)
        trainer.register_hook(HookStage.POST_UPDATE, self.post_update, name=name)

    def setup(self, ctx: HookContext[SetupInfo]) -> None:
        algorithm = ctx.data.algorithm
        if not any(module is self.normalizer for module in algorithm.policy.modules()):
            raise ConfigurationError(
                "ObservationNormalizer: its RunningObsNormalizer is not a layer of the policy, so nothing "
                "would be normalised; put it first in the policy's network, e.g. "
                "nn.Sequential(normalizer, mlp(...))."
            )
        if any(component is self.normalizer for component in algorithm.components().values()):
            raise ConfigurationError(
                f"ObservationNormalizer: {type(algorithm).__name__} already updates this normaliser "
                f"(obs_normalizer=...); drop the hook or the algorithm's obs_normalizer."
            )
        self._pending = []
        if ctx.data.offline and ctx.data.buffer is not None and int(self.normalizer.count) == 0:
            self.normalizer.update(torch.as_tensor(_dataset_field(ctx.data.buffer, "obs")))

    def batch_process(self, ctx: HookContext[CollectedBatch]) -> CollectedBatch | None:
        self._pending.append(_new_field(ctx.data, "obs"))
        return None

    def post_update(self, ctx: HookContext[TrainingStats]) -> None:
        for obs in self._pending:
            self.normalizer.update(torch.as_tensor(obs))
        self._pending = []


@final
class BatchSubSampler:
    """Trains on a random part of the data (TorchRL's BatchSubSampler).

    On-policy (``batch_process``): the update receives the rollout with only ``batch_size`` of its
    transitions marked valid, in random windows of ``sub_traj_len`` consecutive steps of one env
    (returns and advantages are still computed over the whole rollout, so they stay right).
    Off-policy / offline (``process_optim_batch``): each sampled batch is cut to ``batch_size`` random
    transitions. Data no larger than ``batch_size`` is left as it is.
    """

    def __init__(self, batch_size: int, *, sub_traj_len: int = 1, seed: int | None = None):
        _require_int("BatchSubSampler", "batch_size", batch_size)
        _require_int("BatchSubSampler", "sub_traj_len", sub_traj_len)
        self.batch_size = batch_size
        self.sub_traj_len = sub_traj_len
        self.generator = torch.Generator()
        self.generator.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))

    def register(self, trainer: Trainer[Any, Any], *, name: str = "batch_sub_sampler") -> None:
        """Register at batch_process and process_optim_batch."""
        trainer.register_hook(HookStage.BATCH_PROCESS, self.batch_process, name=name)
        trainer.register_hook(HookStage.PROCESS_OPTIM_BATCH, self.process_optim_batch, name=name)

    def batch_process(self, ctx: HookContext[CollectedBatch]) -> CollectedBatch | None:
        rollout = ctx.data.rollout
        if rollout is None or rollout.num_steps <= self.batch_size:
            return None
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
        return dataclasses.replace(ctx.data, rollout=dataclasses.replace(rollout, valid=keep_TE & valid_TE))

    def process_optim_batch(self, ctx: HookContext[TransitionBatch]) -> TransitionBatch | None:
        batch = ctx.data
        if len(batch) <= self.batch_size:
            return None
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


@final
class CountFramesLog:
    """Counts the frames collected (env steps times ``frame_skip``) and logs them as ``frames`` in
    each training record, shown in the progress bar (TorchRL's CountFramesLog). Stage:
    ``pre_steps_log``."""

    def __init__(self, *, frame_skip: int = 1, progress_bar: bool = True):
        _require_int("CountFramesLog", "frame_skip", frame_skip)
        self.frame_skip = frame_skip
        self.progress_bar = progress_bar
        self.frames = 0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "count_frames") -> None:
        """Register at pre_steps_log."""
        trainer.register_hook(HookStage.PRE_STEPS_LOG, self, name=name)

    def __call__(self, ctx: HookContext[CollectStats | None]) -> HookScalars:
        if ctx.data is not None:
            self.frames += ctx.data.n_collected_steps * self.frame_skip
        return HookScalars(
            {"frames": float(self.frames)}, progress_bar=("frames",) if self.progress_bar else ()
        )

    def state_dict(self) -> dict[str, Any]:
        return {"frames": self.frames}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.frames = int(state["frames"])
