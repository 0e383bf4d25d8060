"""Policies and algorithms (one module per algorithm) on a common base contract."""

from tshtrain.algorithm.base import (
    Algorithm,
    NonFiniteLossError,
    OfflineAlgorithm,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    Policy,
    Stateful,
    TrainingStats,
)
from tshtrain.algorithm.bc import BCParams, BCTrainingStats, BehaviorCloning
from tshtrain.algorithm.dqn import DQN, DQNParams, DQNTrainingStats
from tshtrain.algorithm.nets import flat_dim, mlp, num_actions
from tshtrain.algorithm.policies import (
    CategoricalPolicy,
    DeterministicActorPolicy,
    EpsilonSchedule,
    QValuePolicy,
)
from tshtrain.algorithm.reinforce import Reinforce, ReinforceParams, ReinforceTrainingStats

__all__ = [
    "DQN",
    "Algorithm",
    "BCParams",
    "BCTrainingStats",
    "BehaviorCloning",
    "CategoricalPolicy",
    "DQNParams",
    "DQNTrainingStats",
    "DeterministicActorPolicy",
    "EpsilonSchedule",
    "NonFiniteLossError",
    "OffPolicyAlgorithm",
    "OfflineAlgorithm",
    "OnPolicyAlgorithm",
    "Policy",
    "QValuePolicy",
    "Reinforce",
    "ReinforceParams",
    "ReinforceTrainingStats",
    "Stateful",
    "TrainingStats",
    "flat_dim",
    "mlp",
    "num_actions",
]
