"""The algorithm library's families with the wrong trainer or params: each marked line must fail."""

from tshtrain.algorithm import A2C, PPO, SAC, TD3
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    run_training,
)


def wrong(
    ppo: PPO,
    a2c: A2C,
    sac: SAC,
    td3: TD3,
    on: OnPolicyTrainerParams,
    off: OffPolicyTrainerParams,
    offline: OfflineTrainerParams,
) -> None:
    OffPolicyTrainer(ppo, off)  # expect-error
    OnPolicyTrainer(sac, on)  # expect-error
    OfflineTrainer(td3, offline)  # expect-error
    run_training(a2c, off)  # expect-error
    run_training(sac, on)  # expect-error
