"""Correct pairings of algorithm families, params and trainers: mypy must accept all of it."""

from tshtrain.algorithm import DQN, BehaviorCloning, Reinforce
from tshtrain.trainer import (
    InfoStats,
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    run_training,
)


def on_policy(algo: Reinforce, params: OnPolicyTrainerParams) -> InfoStats:
    OnPolicyTrainer(algo, params).run()
    return run_training(algo, params)


def off_policy(algo: DQN, params: OffPolicyTrainerParams) -> InfoStats:
    OffPolicyTrainer(algo, params).run()
    return run_training(algo, params)


def offline(algo: BehaviorCloning, params: OfflineTrainerParams) -> InfoStats:
    OfflineTrainer(algo, params).run()
    return run_training(algo, params)


def callbacks() -> None:
    def stop(score: float) -> bool:
        return score > 1

    def training_fn(epoch: int, env_step: int) -> None:
        del epoch, env_step

    def checkpoint(epoch: int, env_step: int, gradient_step: int) -> str:
        return f"{epoch}-{env_step}-{gradient_step}"

    del stop, training_fn, checkpoint
