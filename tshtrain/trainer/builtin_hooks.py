"""The observation-normalisation hook (the other built-ins are callbacks: :mod:`builtin_callbacks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import numpy as np
import torch

from tshtrain.algorithm.base import TrainingStats
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.builtin_callbacks import dataset_field, new_field
from tshtrain.trainer.hooks import CollectedBatch, HookContext, HookStage, SetupInfo

if TYPE_CHECKING:
    from tshtrain.trainer.base import Trainer


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
            self.normalizer.update(torch.as_tensor(dataset_field(ctx.data.buffer, "obs")))

    def batch_process(self, ctx: HookContext[CollectedBatch]) -> CollectedBatch | None:
        self._pending.append(new_field(ctx.data, "obs"))
        return None

    def post_update(self, ctx: HookContext[TrainingStats]) -> None:
        for obs in self._pending:
            self.normalizer.update(torch.as_tensor(obs))
        self._pending = []
