"""Building and seeding vector environments; helpers for Gymnasium spaces."""

from tshtrain.env.groups import AgentGroup, GroupView, group_obs_key
from tshtrain.env.multi_agent import (
    ACTION_MASK_KEY,
    AGENT_ID_KEY,
    OBS_KEY,
    STATE_KEY,
    AgentColumns,
    AgentStep,
    MultiAgentVectorEnv,
)
from tshtrain.env.pettingzoo import (
    PettingZooAECVectorEnv,
    PettingZooParallelVectorEnv,
    make_pettingzoo_vector_env,
    pettingzoo_env_fns,
)
from tshtrain.env.spaces import (
    ArraySpec,
    action_spec,
    array_spec,
    check_actions,
    observation_specs,
    sample_actions,
)
from tshtrain.env.tensor_env import TensorObs, TensorStep, TensorVectorEnv
from tshtrain.env.tensor_spaces import sample_actions_torch
from tshtrain.env.torch_cartpole import TorchCartPole
from tshtrain.env.vector import (
    EnvFactory,
    VectorMode,
    WrapperFactory,
    autoreset_mode,
    make_vector_env,
    require_same_step_autoreset,
)

__all__ = [
    "ACTION_MASK_KEY",
    "AGENT_ID_KEY",
    "OBS_KEY",
    "STATE_KEY",
    "AgentColumns",
    "AgentGroup",
    "AgentStep",
    "ArraySpec",
    "EnvFactory",
    "GroupView",
    "MultiAgentVectorEnv",
    "PettingZooAECVectorEnv",
    "PettingZooParallelVectorEnv",
    "TensorObs",
    "TensorStep",
    "TensorVectorEnv",
    "TorchCartPole",
    "VectorMode",
    "WrapperFactory",
    "action_spec",
    "array_spec",
    "autoreset_mode",
    "check_actions",
    "group_obs_key",
    "make_pettingzoo_vector_env",
    "make_vector_env",
    "observation_specs",
    "pettingzoo_env_fns",
    "require_same_step_autoreset",
    "sample_actions",
    "sample_actions_torch",
]

from tshtrain.env.goal_envs import BIT_FLIPPING_ID, BitFlippingEnv, register_goal_envs

__all__ += ["BIT_FLIPPING_ID", "BitFlippingEnv", "register_goal_envs"]
