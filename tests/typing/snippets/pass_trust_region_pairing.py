"""NPG and TRPO are on-policy algorithms: mypy accepts them with the on-policy trainer."""

from tshtrain.algorithm import NPG, TRPO
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams, run_training


def right(npg: NPG, trpo: TRPO, on: OnPolicyTrainerParams) -> None:
    OnPolicyTrainer(npg, on)
    OnPolicyTrainer(trpo, on)
    run_training(npg, on)
    run_training(trpo, on)
