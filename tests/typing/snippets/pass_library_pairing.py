"""The algorithm library's families pair with their trainers: mypy must accept all of it."""

from tshtrain.algorithm import A2C, DDPG, PPO, SAC, TD3, DiscreteSAC
from tshtrain.trainer import (
    InfoStats,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    run_training,
)


def on_policy(ppo: PPO, a2c: A2C, params: OnPolicyTrainerParams) -> InfoStats:
    OnPolicyTrainer(ppo, params).run()
    return run_training(a2c, params)


def off_policy(
    sac: SAC, td3: TD3, ddpg: DDPG, dsac: DiscreteSAC, params: OffPolicyTrainerParams
) -> InfoStats:
    OffPolicyTrainer(sac, params).run()
    OffPolicyTrainer(td3, params).run()
    OffPolicyTrainer(dsac, params).run()
    return run_training(ddpg, params)
