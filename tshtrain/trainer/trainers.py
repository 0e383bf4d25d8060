"""The concrete trainers of the three families (the loop is ``base.py``, their parts ``steps.py``)."""

from __future__ import annotations

from typing import Any, TypeVar, final

from typing_extensions import override

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm
from tshtrain.data.overlap import OverlappedCollection
from tshtrain.trainer.base import TAlgorithm, Trainer
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
)
from tshtrain.trainer.steps import OfflineStep, OffPolicyStep, OnPolicyStep, StepStrategy

TOnlineParams = TypeVar("TOnlineParams", bound=OnlineTrainerParams)


class OnlineTrainer(Trainer[TAlgorithm, TOnlineParams]):
    """A trainer whose training steps collect data with ``params.training_collector`` and then update
    (to drive one env step at a time, as skrl's step-wise trainer does: :mod:`tshtrain.adapters.skrl`)."""


@final
class OnPolicyTrainer(OnlineTrainer[OnPolicyAlgorithm[Any], OnPolicyTrainerParams]):
    """Hands each collection step's rollout to the algorithm (``update_step_num_repetitions`` passes in
    mini-batches of ``batch_size``; None: the whole rollout), then clears the buffer, keeping the
    collector's per-env episode statistics (returns of episodes spanning collection steps stay right)."""

    algorithm_family = OnPolicyAlgorithm
    family_description = "an on-policy algorithm (it updates from the latest rollout only)"

    @override
    def _make_strategy(self) -> StepStrategy:
        return OnPolicyStep(self.algorithm, self.params)


@final
class OffPolicyTrainer(OnlineTrainer[OffPolicyAlgorithm[Any], OffPolicyTrainerParams]):
    """After each collection step of n transitions, round(u * n) gradient steps on buffer samples; with
    ``params.overlap_collection`` the next collection step is collected in a background thread during
    them (docs/overlap.md; :attr:`overlap` shows its policy lag)."""

    algorithm_family = OffPolicyAlgorithm
    family_description = "an off-policy algorithm (it updates from a replay buffer that a collector fills)"

    @override
    def _make_strategy(self) -> StepStrategy:
        self._off_policy_step = OffPolicyStep(self.algorithm, self.params)
        return self._off_policy_step

    @property
    def overlap(self) -> OverlappedCollection | None:
        """The background collection and its record of policy lags (None: ``overlap_collection`` off)."""
        return self._off_policy_step.overlap


@final
class OfflineTrainer(Trainer[OfflineAlgorithm[Any], OfflineTrainerParams]):
    """Each training step is one gradient step on a sample of ``params.buffer``; ``env_step`` advances by
    ``batch_size`` (the transitions sampled), as in Tianshou."""

    algorithm_family = OfflineAlgorithm
    family_description = (
        "an offline algorithm (it updates from a fixed dataset and never collects; to imitate from a "
        "buffer a collector fills, use OffPolicyImitation with OffPolicyTrainer)"
    )

    @override
    def _make_strategy(self) -> StepStrategy:
        return OfflineStep(self.algorithm, self.params)
