"""The collectors and buffers of an experiment's envs, for every data path.

The env kinds and their builders are :mod:`tshtrain.config.env_kinds`. A Gymnasium vector env
(``env.type: gymnasium`` or ``envpool``) runs with numpy data (:class:`~tshtrain.data.Collector`,
:class:`~tshtrain.data.VectorReplayBuffer`); a torch-native :class:`~tshtrain.env.TensorVectorEnv`
(``vmas``, ``torch_cartpole``) on ``env.device`` (default: the experiment's device) with a
:class:`~tshtrain.data.TensorCollector` and a :class:`~tshtrain.data.TensorReplayBuffer` on that device;
a numpy :class:`~tshtrain.env.MultiAgentVectorEnv` (``pettingzoo``: one column per agent and env) with a
:class:`~tshtrain.data.MultiAgentCollector`, its buffer one column per agent and env.
"""

from __future__ import annotations

from typing import Any

from tshtrain.config.env_kinds import AnyVectorEnv
from tshtrain.config.models import Experiment
from tshtrain.data import Collector, MultiAgentCollector, TensorCollector, TensorReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer, BaseCollector
from tshtrain.env import MultiAgentVectorEnv, TensorVectorEnv
from tshtrain.errors import ConfigurationError, ExperimentError


def env_agents(env: AnyVectorEnv) -> tuple[str, ...]:
    """The agents of a multi-agent env (PettingZoo, VMAS columns); ``()`` for a single-agent one."""
    if isinstance(env, MultiAgentVectorEnv):
        return env.agents
    columns = getattr(env, "columns", None)
    agents = getattr(columns, "agents", ())
    return tuple(agents) if getattr(env, "num_agents", 1) > 1 else ()


def num_env_columns(env: AnyVectorEnv) -> int:
    """Buffer columns of ``env``: one per agent and env (multi-agent), else one per sub-env."""
    if isinstance(env, MultiAgentVectorEnv):
        return env.num_columns
    return int(env.num_envs)


def make_collector(
    policy: Any,
    env: AnyVectorEnv,
    buffer: AnyReplayBuffer | None = None,
    *,
    seed: int,
    exploration_noise: bool = False,
    check_finite: bool = True,
) -> BaseCollector:
    """The collector for ``env``: a :class:`TensorCollector` for torch-native envs (``check_finite`` is a
    numpy-path check and does not apply there), a :class:`MultiAgentCollector` for multi-agent envs,
    else a :class:`Collector`."""
    if isinstance(env, MultiAgentVectorEnv):
        if isinstance(buffer, TensorReplayBuffer):
            raise ConfigurationError(
                "a multi-agent numpy env needs a numpy replay buffer, got a TensorReplayBuffer"
            )
        return MultiAgentCollector(policy, env, buffer, exploration_noise=exploration_noise, seed=seed)
    if isinstance(env, TensorVectorEnv):
        if buffer is not None and not isinstance(buffer, TensorReplayBuffer):
            raise ConfigurationError(
                f"a torch-native env needs a TensorReplayBuffer, got {type(buffer).__name__}"
            )
        return TensorCollector(policy, env, buffer, exploration_noise=exploration_noise, seed=seed)
    if isinstance(buffer, TensorReplayBuffer):
        raise ConfigurationError(
            "a Gymnasium vector env needs a numpy replay buffer, got a TensorReplayBuffer"
        )
    return Collector(
        policy, env, buffer, exploration_noise=exploration_noise, seed=seed, check_finite=check_finite
    )


def tensor_buffer(experiment: Experiment, total_size: int, env: TensorVectorEnv) -> TensorReplayBuffer:
    """A :class:`TensorReplayBuffer` of ``total_size`` transitions, one column per env, on the env's
    device."""
    if experiment.buffer.prioritized:
        raise ExperimentError(
            f"buffer.prioritized: prioritized replay is not available for torch-native envs (env.type "
            f"{experiment.env.type!r}); set buffer.prioritized: false."
        )
    return TensorReplayBuffer(total_size, int(env.num_envs), device=env.device, seed=experiment.seed)
