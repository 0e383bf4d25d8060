"""The keys of Dict column observations in multi-agent envs (see :mod:`tshtrain.env.multi_agent`)."""

OBS_KEY = "obs"
"""the agent's own observation in a Dict column observation"""
ACTION_MASK_KEY = "action_mask"
"""the legal actions (int8 / bool, shape (num_actions,), 1 = legal): policies never choose others"""
STATE_KEY = "state"
"""the env's global state (the same for every agent of an env): what a centralised critic sees"""
AGENT_ID_KEY = "agent_id"
"""the one-hot id of the agent (float32, shape (num_agents,)): what a shared network needs"""

__all__ = ["ACTION_MASK_KEY", "AGENT_ID_KEY", "OBS_KEY", "STATE_KEY"]
