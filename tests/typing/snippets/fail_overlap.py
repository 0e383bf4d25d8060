"""Overlapped collection is an off-policy option: the on-policy and offline params have no such field."""

from tshtrain.data import Collector, ReplayBuffer
from tshtrain.trainer import OfflineTrainerParams, OffPolicyTrainerParams, OnPolicyTrainerParams


def wrong(collector: Collector, dataset: ReplayBuffer) -> None:
    OnPolicyTrainerParams(training_collector=collector, overlap_collection=True)  # expect-error
    OnPolicyTrainerParams(training_collector=collector, max_policy_lag=2)  # expect-error
    OfflineTrainerParams(buffer=dataset, overlap_collection=True)  # expect-error
    OffPolicyTrainerParams(training_collector=collector, overlap_collection=1.0)  # expect-error
