"""Policies and algorithms (one module per algorithm) on a common base contract."""

from tshtrain.algorithm.a2c import A2C, A2CParams, A2CTrainingStats
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
from tshtrain.algorithm.continuous import QEnsemble, TanhGaussianPolicy, box_dim, ensemble_mlp
from tshtrain.algorithm.ddpg import DDPG, DDPGParams, DDPGTrainingStats
from tshtrain.algorithm.discrete_sac import (
    DiscreteQEnsemble,
    DiscreteSAC,
    DiscreteSACParams,
    DiscreteSACTrainingStats,
)
from tshtrain.algorithm.dqn import DQN, DQNParams, DQNTrainingStats, DuelingQNet, dueling_mlp
from tshtrain.algorithm.gaussian import GaussianPolicy
from tshtrain.algorithm.nets import flat_dim, mlp, num_actions
from tshtrain.algorithm.normalization import RunningObsNormalizer
from tshtrain.algorithm.offpolicy import ReplaySample, sample_replay
from tshtrain.algorithm.onpolicy import ActorCriticParams
from tshtrain.algorithm.policies import (
    CategoricalPolicy,
    DeterministicActorPolicy,
    EpsilonSchedule,
    QValuePolicy,
)
from tshtrain.algorithm.polyak import TargetNetwork
from tshtrain.algorithm.ppo import PPO, PPOParams, PPOTrainingStats
from tshtrain.algorithm.reinforce import Reinforce, ReinforceParams, ReinforceTrainingStats
from tshtrain.algorithm.sac import SAC, SACParams, SACTrainingStats
from tshtrain.algorithm.schedules import LinearSchedule, Schedule, num_update_steps_for
from tshtrain.algorithm.td3 import TD3, TD3Params, TD3TrainingStats

__all__ = [
    "A2C",
    "DDPG",
    "DQN",
    "PPO",
    "SAC",
    "TD3",
    "A2CParams",
    "A2CTrainingStats",
    "ActorCriticParams",
    "Algorithm",
    "BCParams",
    "BCTrainingStats",
    "BehaviorCloning",
    "CategoricalPolicy",
    "DDPGParams",
    "DDPGTrainingStats",
    "DQNParams",
    "DQNTrainingStats",
    "DeterministicActorPolicy",
    "DiscreteQEnsemble",
    "DiscreteSAC",
    "DiscreteSACParams",
    "DiscreteSACTrainingStats",
    "DuelingQNet",
    "EpsilonSchedule",
    "GaussianPolicy",
    "LinearSchedule",
    "NonFiniteLossError",
    "OffPolicyAlgorithm",
    "OfflineAlgorithm",
    "OnPolicyAlgorithm",
    "PPOParams",
    "PPOTrainingStats",
    "Policy",
    "QEnsemble",
    "QValuePolicy",
    "Reinforce",
    "ReinforceParams",
    "ReinforceTrainingStats",
    "ReplaySample",
    "RunningObsNormalizer",
    "SACParams",
    "SACTrainingStats",
    "Schedule",
    "Stateful",
    "TD3Params",
    "TD3TrainingStats",
    "TanhGaussianPolicy",
    "TargetNetwork",
    "TrainingStats",
    "box_dim",
    "dueling_mlp",
    "ensemble_mlp",
    "flat_dim",
    "mlp",
    "num_actions",
    "num_update_steps_for",
    "sample_replay",
]

from tshtrain.algorithm.cql import CQL, CQLParams, CQLTrainingStats, conservative_penalty
from tshtrain.algorithm.discrete_cql import (
    DiscreteCQL,
    DiscreteCQLParams,
    DiscreteCQLTrainingStats,
    discrete_conservative_penalty,
)
from tshtrain.algorithm.td3_bc import TD3BC, TD3BCParams, TD3BCTrainingStats

__all__ += [
    "CQL",
    "TD3BC",
    "CQLParams",
    "CQLTrainingStats",
    "DiscreteCQL",
    "DiscreteCQLParams",
    "DiscreteCQLTrainingStats",
    "TD3BCParams",
    "TD3BCTrainingStats",
    "conservative_penalty",
    "discrete_conservative_penalty",
]
