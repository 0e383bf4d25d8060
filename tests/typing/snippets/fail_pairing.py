"""Wrong pairings: every line marked 'expect-error' must be rejected by mypy."""

from collections.abc import Callable

from tshtrain.algorithm import DQN, BehaviorCloning, Reinforce
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    TrainerParams,
    run_training,
)


def wrong(
    ppo: Reinforce,
    dqn: DQN,
    bc: BehaviorCloning,
    on: OnPolicyTrainerParams,
    off: OffPolicyTrainerParams,
    offline: OfflineTrainerParams,
) -> None:
    OnPolicyTrainer(dqn, on)  # expect-error
    OnPolicyTrainer(ppo, off)  # expect-error
    OffPolicyTrainer(ppo, off)  # expect-error
    OffPolicyTrainer(dqn, on)  # expect-error
    OfflineTrainer(dqn, offline)  # expect-error
    OfflineTrainer(bc, on)  # expect-error
    run_training(ppo, off)  # expect-error
    run_training(dqn, offline)  # expect-error
    run_training(bc, on)  # expect-error


def wrong_params() -> None:
    TrainerParams(100)  # expect-error
    TrainerParams(max_epochs="10")  # expect-error
    bad_stop: Callable[[int], str] = lambda x: str(x)
    TrainerParams(stop_fn=bad_stop)  # expect-error


def frozen(params: TrainerParams) -> None:
    params.max_epochs = 3  # expect-error
