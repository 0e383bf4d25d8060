"""NPG and TRPO with the off-policy or offline trainer: every line marked 'expect-error' is rejected."""

from tshtrain.algorithm import NPG, TRPO
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    run_training,
)


def wrong(npg: NPG, trpo: TRPO, off: OffPolicyTrainerParams, offline: OfflineTrainerParams) -> None:
    OffPolicyTrainer(npg, off)  # expect-error
    OffPolicyTrainer(trpo, off)  # expect-error
    OfflineTrainer(npg, offline)  # expect-error
    run_training(trpo, off)  # expect-error
