"""The concrete trainers: on-policy, off-policy and offline (see ``tshtrain.trainer.base`` for the loop
and ``tshtrain.trainer.steps`` for what each family does in a training step)."""

from __future__ import annotations

from typing import Any, TypeVar, final

from typing_extensions import override

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm
from tshtrain.trainer.base import TAlgorithm, Trainer
from tshtrain.trainer.options import TrainerOptions
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
)
from tshtrain.trainer.stepping import EnvStepDriver, EnvStepResult, TrainingStepResult
from tshtrain.trainer.steps import OfflineStep, OffPolicyStep, OnPolicyStep, StepStrategy

TOnlineParams = TypeVar("TOnlineParams", bound=OnlineTrainerParams)


class OnlineTrainer(Trainer[TAlgorithm, TOnlineParams]):
    """A trainer whose training steps collect data with ``params.training_collector`` and then update;
    it can also be driven one env step at a time (:mod:`tshtrain.trainer.stepping`)."""

    def __init__(self, algorithm: TAlgorithm, params: TOnlineParams, options: TrainerOptions | None = None):
        super().__init__(algorithm, params, options)
        self._driver = EnvStepDriver(
            params,
            begin=self._begin_training_step,
            complete=self._run_training_step,
            owner=type(self).__name__,
        )

    @override
    def reset(self, reset_collectors: bool = True, reset_collector_buffers: bool = False) -> None:
        self._driver.clear()
        super().reset(reset_collectors, reset_collector_buffers)

    @override
    def execute_training_step(self) -> TrainingStepResult:
        if self._driver.pending is not None:
            raise RuntimeError(
                f"A training step is being driven env step by env step ({self._driver.pending} vector steps "
                f"so far); finish it with execute_env_step() before execute_training_step()."
            )
        return super().execute_training_step()

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

    @override
    def _make_strategy(self) -> StepStrategy:
        return OnPolicyStep(self.algorithm, self.params)


@final
class OffPolicyTrainer(OnlineTrainer[OffPolicyAlgorithm[Any], OffPolicyTrainerParams]):
    """After each collection step of n transitions, round(u * n) gradient steps on buffer samples."""

    @override
    def _make_strategy(self) -> StepStrategy:
        return OffPolicyStep(self.algorithm, self.params)


@final
class OfflineTrainer(Trainer[OfflineAlgorithm[Any], OfflineTrainerParams]):
    """Each training step is one gradient step on a sample of ``params.buffer``.

    ``env_step`` advances by ``batch_size`` per training step (the transitions sampled), as in Tianshou.
    """

    @override
    def _make_strategy(self) -> StepStrategy:
        return OfflineStep(self.algorithm, self.params)
