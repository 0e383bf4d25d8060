"""The typed trainer hierarchy: params, trainers, statistics, the callback protocol and run options.

Glossary (the words of code and logs):

* **env step** -- one transition of one environment; N vector envs take N env steps per ``step()``.
  Offline, the env_step counter counts the transitions sampled from the dataset (as in Tianshou).
* **collection step** -- one ``Collector.collect`` call (n env steps or n episodes).
* **update step** -- the algorithm's update after a collection step. On-policy: passes of mini-batches
  over the rollout; off-policy: round(u * n_collected) gradient steps; offline: one gradient step.
* **gradient step** -- one optimizer step (counted separately from update steps).
* **training step** -- collection step + (optional test-in-training) + update step; offline: one update.
* **test step** -- ``test_step_num_episodes`` episodes on the test collector, scored by ``compute_score_fn``.
* **epoch** -- training steps until ``epoch_num_steps`` env steps were collected (online;
  ceil(s / c) training steps when c env steps are collected per step), or ``epoch_num_steps`` training
  steps (offline); then one test step.

``tshtrain.trainer.base`` has the loop, ``tshtrain.trainer.callbacks`` the loop points and ``docs/hooks.md``
the one way to do each thing. Ready-made callbacks are in :mod:`tshtrain.callbacks`; TorchRL's hook
stages and EmbodiChain's events, translated onto callbacks, in :mod:`tshtrain.adapters`.
"""

from __future__ import annotations

from typing import Any, overload

from tshtrain.algorithm.base import OfflineAlgorithm, OffPolicyAlgorithm, OnPolicyAlgorithm
from tshtrain.counters import Counters
from tshtrain.data.listeners import EnvsReset, EpisodesEnded
from tshtrain.trainer.base import Trainer
from tshtrain.trainer.callbacks import (
    Adapter,
    Callback,
    CollectedBatch,
    OptimizerStep,
    RunContext,
    SetupInfo,
    StepSummary,
    StopTraining,
    TestResult,
)
from tshtrain.trainer.options import TrainerOptions
from tshtrain.trainer.params import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
    TrainerParams,
)
from tshtrain.trainer.run_state import BestResult, RunState
from tshtrain.trainer.stats import EpochStats, InfoStats, StopReason, TimingStats, TrainingStepResult
from tshtrain.trainer.trainers import OfflineTrainer, OffPolicyTrainer, OnlineTrainer, OnPolicyTrainer


@overload
def run_training(algorithm: OnPolicyAlgorithm[Any], params: OnPolicyTrainerParams) -> InfoStats: ...
@overload
def run_training(algorithm: OffPolicyAlgorithm[Any], params: OffPolicyTrainerParams) -> InfoStats: ...
@overload
def run_training(algorithm: OfflineAlgorithm[Any], params: OfflineTrainerParams) -> InfoStats: ...
def run_training(
    algorithm: OnPolicyAlgorithm[Any] | OffPolicyAlgorithm[Any] | OfflineAlgorithm[Any],
    params: OnPolicyTrainerParams | OffPolicyTrainerParams | OfflineTrainerParams,
) -> InfoStats:
    """Build the trainer that matches the algorithm's family and run it: mypy checks the pairing (an
    on-policy algorithm needs ``OnPolicyTrainerParams``, ...), at run time a mismatch is a ``TypeError``."""
    if isinstance(algorithm, OnPolicyAlgorithm) and isinstance(params, OnPolicyTrainerParams):
        return OnPolicyTrainer(algorithm, params).run()
    if isinstance(algorithm, OffPolicyAlgorithm) and isinstance(params, OffPolicyTrainerParams):
        return OffPolicyTrainer(algorithm, params).run()
    if isinstance(algorithm, OfflineAlgorithm) and isinstance(params, OfflineTrainerParams):
        return OfflineTrainer(algorithm, params).run()
    raise TypeError(
        f"run_training: {type(algorithm).__name__} cannot be trained with {type(params).__name__}; "
        f"on-policy algorithms take OnPolicyTrainerParams, off-policy ones OffPolicyTrainerParams, "
        f"offline ones OfflineTrainerParams."
    )


__all__ = [
    "Adapter",
    "BestResult",
    "Callback",
    "CollectedBatch",
    "Counters",
    "EnvsReset",
    "EpisodesEnded",
    "EpochStats",
    "InfoStats",
    "OffPolicyTrainer",
    "OffPolicyTrainerParams",
    "OfflineTrainer",
    "OfflineTrainerParams",
    "OnPolicyTrainer",
    "OnPolicyTrainerParams",
    "OnlineTrainer",
    "OnlineTrainerParams",
    "OptimizerStep",
    "RunContext",
    "RunState",
    "SetupInfo",
    "StepSummary",
    "StopReason",
    "StopTraining",
    "TestResult",
    "TimingStats",
    "Trainer",
    "TrainerOptions",
    "TrainerParams",
    "TrainingStepResult",
    "run_training",
]
