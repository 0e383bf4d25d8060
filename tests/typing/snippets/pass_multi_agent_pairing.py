"""Multi-agent algorithms with their own family's trainer and params type-check."""

from tshtrain.algorithm import MultiAgentOffPolicy, MultiAgentOnPolicy
from tshtrain.trainer import (
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    run_training,
)


def right(
    on_agents: MultiAgentOnPolicy,
    off_agents: MultiAgentOffPolicy,
    on: OnPolicyTrainerParams,
    off: OffPolicyTrainerParams,
) -> None:
    OnPolicyTrainer(on_agents, on)
    OffPolicyTrainer(off_agents, off)
    run_training(on_agents, on)
    run_training(off_agents, off)
