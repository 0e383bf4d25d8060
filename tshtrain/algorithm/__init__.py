"""Policies and algorithms on a common base contract: the algorithms in :mod:`tshtrain.algorithm.algos`
(one module each), composed of the building blocks in :mod:`tshtrain.algorithm.blocks`."""

from tshtrain.algorithm.algos.a2c import A2C, A2CParams, A2CTrainingStats
from tshtrain.algorithm.algos.bc import BCParams, BCTrainingStats, BehaviorCloning
from tshtrain.algorithm.algos.ddpg import DDPG, DDPGParams, DDPGTrainingStats
from tshtrain.algorithm.algos.discrete_sac import (
    DiscreteQEnsemble,
    DiscreteSAC,
    DiscreteSACParams,
    DiscreteSACTrainingStats,
)
from tshtrain.algorithm.algos.dqn import DQN, DQNParams, DQNTrainingStats, DuelingQNet, dueling_mlp
from tshtrain.algorithm.algos.imitation import (
    OffPolicyImitation,
    OffPolicyImitationParams,
    OffPolicyImitationTrainingStats,
    imitation_loss,
)
from tshtrain.algorithm.algos.ppo import PPO, PPOParams, PPOTrainingStats
from tshtrain.algorithm.algos.reinforce import Reinforce, ReinforceParams, ReinforceTrainingStats
from tshtrain.algorithm.algos.sac import SAC, SACParams, SACTrainingStats
from tshtrain.algorithm.algos.td3 import TD3, TD3Params, TD3TrainingStats
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    Algorithm,
    NoUpdateHooks,
    OfflineAlgorithm,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    Policy,
    Stateful,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.actor_critic_targets import ActorCriticTargets
from tshtrain.algorithm.blocks.continuous import QEnsemble, TanhGaussianPolicy, box_dim
from tshtrain.algorithm.blocks.encoders import (
    CnnEncoder,
    CnnSpec,
    DictEncoder,
    Encoder,
    FlatEncoder,
    OneHotEncoder,
    cnn_encoder,
    encoder_mlp,
    mlp_encoder,
    obs_encoder,
)
from tshtrain.algorithm.blocks.ensemble import ensemble_mlp
from tshtrain.algorithm.blocks.gaussian import GaussianPolicy
from tshtrain.algorithm.blocks.masking import MASKED_VALUE, ActionMasked, has_action_mask, without_action_mask
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.nets import FastTanh, flat_dim, mlp, num_actions
from tshtrain.algorithm.blocks.normalization import RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import ReplaySample, sample_replay
from tshtrain.algorithm.blocks.onpolicy import ActorCriticParams
from tshtrain.algorithm.blocks.onpolicy_update import LossTerms
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import (
    CategoricalPolicy,
    DeterministicActorPolicy,
    EpsilonSchedule,
    QValuePolicy,
)
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.algorithm.blocks.schedules import LinearSchedule, Schedule, num_update_steps_for
from tshtrain.algorithm.blocks.temperature import EntropyTemperature
from tshtrain.algorithm.multi_agent import (
    Learner,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    MultiAgentPolicy,
    MultiAgentTrainingStats,
    RandomPolicy,
    ScriptedPolicy,
    UpdateMode,
    grouped_learners,
    independent_learners,
    scoped_learners,
    shared_learner,
)
from tshtrain.errors import NonFiniteLossError

__all__ = [
    "A2C",
    "DDPG",
    "DQN",
    "MASKED_VALUE",
    "NO_UPDATE_HOOKS",
    "PPO",
    "SAC",
    "TD3",
    "A2CParams",
    "A2CTrainingStats",
    "ActionMasked",
    "ActorCriticParams",
    "ActorCriticTargets",
    "Algorithm",
    "BCParams",
    "BCTrainingStats",
    "BehaviorCloning",
    "BernoulliPolicy",
    "CategoricalPolicy",
    "CnnEncoder",
    "CnnSpec",
    "DDPGParams",
    "DDPGTrainingStats",
    "DQNParams",
    "DQNTrainingStats",
    "DeterministicActorPolicy",
    "DictEncoder",
    "DiscreteQEnsemble",
    "DiscreteSAC",
    "DiscreteSACParams",
    "DiscreteSACTrainingStats",
    "DuelingQNet",
    "Encoder",
    "EntropyTemperature",
    "EpsilonSchedule",
    "FastTanh",
    "FlatEncoder",
    "GaussianPolicy",
    "Learner",
    "LinearSchedule",
    "LossTerms",
    "MultiAgentOffPolicy",
    "MultiAgentOnPolicy",
    "MultiAgentPolicy",
    "MultiAgentTrainingStats",
    "MultiCategoricalPolicy",
    "NoUpdateHooks",
    "NonFiniteLossError",
    "OffPolicyAlgorithm",
    "OffPolicyImitation",
    "OffPolicyImitationParams",
    "OffPolicyImitationTrainingStats",
    "OfflineAlgorithm",
    "OnPolicyAlgorithm",
    "OneHotEncoder",
    "PPOParams",
    "PPOTrainingStats",
    "Policy",
    "QEnsemble",
    "QValuePolicy",
    "RandomPolicy",
    "Reinforce",
    "ReinforceParams",
    "ReinforceTrainingStats",
    "ReplaySample",
    "RunningObsNormalizer",
    "SACParams",
    "SACTrainingStats",
    "Schedule",
    "ScriptedPolicy",
    "Stateful",
    "TD3Params",
    "TD3TrainingStats",
    "TanhGaussianPolicy",
    "TargetNetwork",
    "TrainingStats",
    "UpdateHooks",
    "UpdateMode",
    "box_dim",
    "cnn_encoder",
    "dueling_mlp",
    "encoder_mlp",
    "ensemble_mlp",
    "flat_dim",
    "grouped_learners",
    "has_action_mask",
    "imitation_loss",
    "independent_learners",
    "mlp",
    "mlp_encoder",
    "num_actions",
    "num_update_steps_for",
    "obs_encoder",
    "optimizer_step",
    "sample_replay",
    "scoped_learners",
    "shared_learner",
    "without_action_mask",
]

from tshtrain.algorithm.algos.c51 import C51, C51Params, C51TrainingStats
from tshtrain.algorithm.algos.cql import CQL, CQLParams, CQLTrainingStats, conservative_penalty
from tshtrain.algorithm.algos.discrete_cql import (
    DiscreteCQL,
    DiscreteCQLParams,
    DiscreteCQLTrainingStats,
    discrete_conservative_penalty,
)
from tshtrain.algorithm.algos.iql import (
    IQL,
    IQLParams,
    IQLTrainingStats,
    advantage_weights,
    expectile_loss,
    tanh_gaussian_log_prob,
)
from tshtrain.algorithm.algos.iqn import IQN, IQNSampling
from tshtrain.algorithm.algos.npg import NPG, NPGParams, NPGTrainingStats
from tshtrain.algorithm.algos.qrdqn import QRDQN, QuantileParams, QuantileTrainingStats
from tshtrain.algorithm.algos.rainbow import Rainbow
from tshtrain.algorithm.algos.redq import REDQ, REDQParams, REDQTarget, REDQTrainingStats
from tshtrain.algorithm.algos.td3_bc import TD3BC, TD3BCParams, TD3BCTrainingStats
from tshtrain.algorithm.algos.trpo import TRPO, TRPOParams, TRPOTrainingStats
from tshtrain.algorithm.blocks.distributional import (
    CategoricalQNet,
    ImplicitQuantileNet,
    QuantileQNet,
    categorical_mlp,
    categorical_projection,
    iqn_mlp,
    quantile_huber_loss,
    quantile_mlp,
)
from tshtrain.algorithm.blocks.noisy import NoisyLinear, NoisyQPolicy, resample_noise
from tshtrain.algorithm.blocks.trust_region import TrustRegionParams

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

__all__ += [
    "C51",
    "IQN",
    "NPG",
    "QRDQN",
    "TRPO",
    "C51Params",
    "C51TrainingStats",
    "CategoricalQNet",
    "IQNSampling",
    "ImplicitQuantileNet",
    "NPGParams",
    "NPGTrainingStats",
    "NoisyLinear",
    "NoisyQPolicy",
    "QuantileParams",
    "QuantileQNet",
    "QuantileTrainingStats",
    "Rainbow",
    "TRPOParams",
    "TRPOTrainingStats",
    "TrustRegionParams",
    "categorical_mlp",
    "categorical_projection",
    "iqn_mlp",
    "quantile_huber_loss",
    "quantile_mlp",
    "resample_noise",
]

# appended after the __all__ blocks above so that merges of parallel branches stay append-only
from tshtrain.algorithm.algos.bcq import (  # noqa: E402
    BCQ,
    BCQParams,
    BCQPolicy,
    BCQTrainingStats,
    Perturbation,
)
from tshtrain.algorithm.blocks.vae import ConditionalVAE  # noqa: E402

__all__ += [
    "BCQ",
    "BCQParams",
    "BCQPolicy",
    "BCQTrainingStats",
    "ConditionalVAE",
    "Perturbation",
]

from tshtrain.algorithm.algos.discrete_crr import (  # noqa: E402
    DiscreteCRR,
    DiscreteCRRParams,
    DiscreteCRRTrainingStats,
    PolicyImprovement,
)

__all__ += [
    "DiscreteCRR",
    "DiscreteCRRParams",
    "DiscreteCRRTrainingStats",
    "PolicyImprovement",
]

__all__ += [
    "REDQ",
    "REDQParams",
    "REDQTarget",
    "REDQTrainingStats",
]

__all__ += [
    "IQL",
    "IQLParams",
    "IQLTrainingStats",
    "advantage_weights",
    "expectile_loss",
    "tanh_gaussian_log_prob",
]

from tshtrain.algorithm.algos.gail import (  # noqa: E402
    GAIL,
    GAILParams,
    GAILTrainingStats,
    discriminator_loss,
    gail_rewards,
)

__all__ += [
    "GAIL",
    "GAILParams",
    "GAILTrainingStats",
    "discriminator_loss",
    "gail_rewards",
]

from tshtrain.algorithm.algos.icm import (  # noqa: E402
    ICMLosses,
    ICMModule,
    ICMOffPolicy,
    ICMOnPolicy,
    ICMOutput,
    ICMParams,
    ICMTrainingStats,
    icm_forward_error,
    icm_intrinsic_reward,
    icm_losses,
)

__all__ += [
    "ICMLosses",
    "ICMModule",
    "ICMOffPolicy",
    "ICMOnPolicy",
    "ICMOutput",
    "ICMParams",
    "ICMTrainingStats",
    "icm_forward_error",
    "icm_intrinsic_reward",
    "icm_losses",
]

from tshtrain.algorithm.algos.td3 import TwinDelayedParams  # noqa: E402
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams  # noqa: E402

__all__ += [
    "OffPolicyActorCriticParams",
    "TwinDelayedParams",
]

from tshtrain.algorithm.blocks.mixers import Mixer, QMixer, SumMixer  # noqa: E402
from tshtrain.algorithm.value_decomposition import (  # noqa: E402
    TeamReward,
    ValueDecomposition,
    ValueDecompositionParams,
    ValueDecompositionTrainingStats,
)

__all__ += [
    "Mixer",
    "QMixer",
    "SumMixer",
    "TeamReward",
    "ValueDecomposition",
    "ValueDecompositionParams",
    "ValueDecompositionTrainingStats",
]

from tshtrain.algorithm.joint_actor_critic import (  # noqa: E402
    MultiAgentActorCriticParams,
    centralised_critic,
)
from tshtrain.algorithm.maddpg import MADDPG, MADDPGParams, MADDPGTrainingStats  # noqa: E402
from tshtrain.algorithm.masac import MASAC, MASACParams, MASACTrainingStats  # noqa: E402

__all__ += [
    "MADDPG",
    "MASAC",
    "MADDPGParams",
    "MADDPGTrainingStats",
    "MASACParams",
    "MASACTrainingStats",
    "MultiAgentActorCriticParams",
    "centralised_critic",
]

from tshtrain.algorithm.blocks.ensemble import (  # noqa: E402
    EnsembleLinear,
    clip_grad_norm_per_member_,
    members_linear,
    stack_mlps,
    unstack_mlp,
)

__all__ += [
    "EnsembleLinear",
    "clip_grad_norm_per_member_",
    "members_linear",
    "stack_mlps",
    "unstack_mlp",
]
