"""Every algorithm's update returns its own stats type: no isinstance narrowing needed."""

from typing import Any

from tshtrain.algorithm import (
    PPO,
    SAC,
    TD3BC,
    Algorithm,
    OffPolicyAlgorithm,
    PPOTrainingStats,
    SACTrainingStats,
    TD3BCTrainingStats,
    TrainingStats,
)
from tshtrain.data import RolloutBatch
from tshtrain.data.buffer import BaseReplayBuffer


def stats(ppo: PPO, sac: SAC, td3_bc: TD3BC, rollout: RolloutBatch, buffer: BaseReplayBuffer) -> float:
    ppo_stats: PPOTrainingStats = ppo.update(rollout, batch_size=8, num_repetitions=1)
    sac_stats: SACTrainingStats = sac.update(buffer, 64)
    bc_stats: TD3BCTrainingStats = td3_bc.update(buffer, 64)
    return ppo_stats.clip_fraction + sac_stats.alpha + bc_stats.bc_loss


def families(sac: SAC, any_off: OffPolicyAlgorithm[Any], buffer: BaseReplayBuffer) -> TrainingStats:
    general: OffPolicyAlgorithm[Any] = sac  # the stats type defaults to TrainingStats
    base: Algorithm[Any, SACTrainingStats] = sac
    del base
    general.update(buffer, 8)
    return any_off.update(buffer, 8)
