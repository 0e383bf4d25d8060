"""Overlapped collection on the off-policy trainer type-checks, and its lag records are typed."""

from tshtrain.algorithm import DQN
from tshtrain.data import Collector
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams


def right(dqn: DQN, collector: Collector) -> int:
    params = OffPolicyTrainerParams(training_collector=collector, overlap_collection=True, max_policy_lag=2)
    trainer = OffPolicyTrainer(dqn, params)
    overlap = trainer.overlap
    if overlap is None:
        return 0
    lag: int = max(record.lag for record in overlap.lags)
    return lag
