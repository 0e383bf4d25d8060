"""Multi-agent algorithms with the wrong trainer or params: each marked line must fail."""

from tshtrain.algorithm import MultiAgentOffPolicy, MultiAgentOnPolicy
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
    on_agents: MultiAgentOnPolicy,
    off_agents: MultiAgentOffPolicy,
    on: OnPolicyTrainerParams,
    off: OffPolicyTrainerParams,
    offline: OfflineTrainerParams,
) -> None:
    OffPolicyTrainer(on_agents, off)  # expect-error
    OnPolicyTrainer(off_agents, on)  # expect-error
    OfflineTrainer(off_agents, offline)  # expect-error
    run_training(on_agents, off)  # expect-error
    run_training(off_agents, on)  # expect-error
