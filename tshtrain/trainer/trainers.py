"""The concrete trainers: on-policy, off-policy and offline (see ``tshtrain.trainer.base`` for the loop
and ``tshtrain.trainer.steps`` for what each family does in a training step)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, final

from typing_extensions import override

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm
from tshtrain.checkpoint.trainer_state import TrainerState
from tshtrain.data.overlap import OverlappedCollection
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.base import TAlgorithm, Trainer
from tshtrain.trainer.options import TrainerOptions
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
)
from tshtrain.trainer.stepping import EnvStepDriver, EnvStepResult
from tshtrain.trainer.steps import OfflineStep, OffPolicyStep, OnPolicyStep, StepStrategy

TOnlineParams = TypeVar("TOnlineParams", bound=OnlineTrainerParams)


class OnlineTrainer(Trainer[TAlgorithm, TOnlineParams]):
    """A trainer whose training steps collect data with ``params.training_collector`` and then update;
    it can also be driven one env step at a time (:mod:`tshtrain.trainer.stepping`)."""

    def __init__(self, algorithm: TAlgorithm, params: TOnlineParams, options: TrainerOptions | None = None):
        super().__init__(algorithm, params, options)
        self._driver = EnvStepDriver(
            params, begin=self._begin_training_step, complete=self._training_step, owner=type(self).__name__
        )

    @override
    def reset(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> None:
        self._driver.clear()
        super().reset(reset_collectors, reset_collector_buffers)

    @override
    def _pending_vector_steps(self) -> int | None:
        return self._driver.pending

    def execute_env_step(self) -> EnvStepResult:
        """Step every training env once; the env step that completes the collection step's quota also
        completes the training step (update, logs, callbacks, maybe the epoch's end).

        Driving a whole run so gives the same run as ``run()`` (see :mod:`tshtrain.trainer.stepping`).

        Raises:
            ConfigurationError: with episode-based collection (``collection_step_num_episodes``).
            RuntimeError: after the run ended (``reset()`` starts again).
        """
        return self._driver.step()


@final
class OnPolicyTrainer(OnlineTrainer[OnPolicyAlgorithm[Any], OnPolicyTrainerParams]):
    """Hands each collection step's rollout to the algorithm, then clears the buffer.

    The algorithm does ``update_step_num_repetitions`` passes over the rollout in mini-batches of
    ``batch_size`` (None: the whole rollout). Clearing the buffer keeps the collector's per-env
    episode statistics, so returns of episodes spanning two collection steps stay correct.
    """

    algorithm_family = OnPolicyAlgorithm

    @override
    def _make_strategy(self) -> StepStrategy:
        return OnPolicyStep(self.algorithm, self.params)


@final
class OffPolicyTrainer(OnlineTrainer[OffPolicyAlgorithm[Any], OffPolicyTrainerParams]):
    """After each collection step of n transitions, round(u * n) gradient steps on buffer samples.

    With ``params.overlap_collection`` the next collection step is collected in a background thread
    during the gradient steps (docs/overlap.md); :attr:`overlap` shows its policy lag.
    """

    algorithm_family = OffPolicyAlgorithm

    @override
    def _make_strategy(self) -> StepStrategy:
        self._off_policy_step = OffPolicyStep(self.algorithm, self.params)
        return self._off_policy_step

    @property
    def overlap(self) -> OverlappedCollection | None:
        """The background collection and its record of policy lags (None: ``overlap_collection`` off)."""
        return self._off_policy_step.overlap

    @override
    def execute_env_step(self) -> EnvStepResult:
        """See :meth:`OnlineTrainer.execute_env_step`; not with ``overlap_collection`` (a collection step
        runs whole, in the background)."""
        if self.params.overlap_collection:
            raise ConfigurationError(
                "OffPolicyTrainer.execute_env_step: OffPolicyTrainerParams.overlap_collection=True collects "
                "whole collection steps in a background thread, so the run cannot be driven env step by env "
                "step; use execute_training_step() / run(), or overlap_collection=False."
            )
        return super().execute_env_step()

    @override
    def load_checkpoint(self, path: str | Path, *, load_buffers: bool = True, trusted: bool = False) -> None:
        super().load_checkpoint(path, load_buffers=load_buffers, trusted=trusted)
        self._discard_staged()

    @override
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self._discard_staged()

    def _discard_staged(self) -> None:
        """A restored checkpoint replaces the collector's state: a collection step staged before is void."""
        if self._off_policy_step.overlap is not None:
            self._off_policy_step.overlap.discard()

    @override
    def _state_view(self) -> TrainerState:
        # a checkpoint is read or written with the collection thread joined and its writes applied
        if self._off_policy_step.overlap is not None:
            self._off_policy_step.overlap.settle()
        return super()._state_view()


@final
class OfflineTrainer(Trainer[OfflineAlgorithm[Any], OfflineTrainerParams]):
    """Each training step is one gradient step on a sample of ``params.buffer``.

    ``env_step`` advances by ``batch_size`` per training step (the transitions sampled), as in Tianshou.
    """

    algorithm_family = OfflineAlgorithm

    @override
    def _make_strategy(self) -> StepStrategy:
        return OfflineStep(self.algorithm, self.params)
