"""The envs, buffers and collectors of an experiment's ``env`` section, for both data paths.

``env.type: gymnasium`` builds a Gymnasium vector env (numpy data, :class:`~tshtrain.data.Collector`,
:class:`~tshtrain.data.VectorReplayBuffer`), ``envpool`` an EnvPool pool on the same numpy path;
``vmas`` and ``torch_cartpole`` build a torch-native :class:`~tshtrain.env.TensorVectorEnv` on
``env.device`` (default: the experiment's device) with a :class:`~tshtrain.data.TensorCollector` and a
:class:`~tshtrain.data.TensorReplayBuffer` on that device. ``pettingzoo`` builds a numpy
:class:`~tshtrain.env.MultiAgentVectorEnv` (one column per agent and env) run by a
:class:`~tshtrain.data.MultiAgentCollector`; its buffer has one column per agent and env.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from tshtrain.config.models import EnvConfig, Experiment, RayEnvConfig
from tshtrain.data import Collector, MultiAgentCollector, TensorCollector, TensorReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer, BaseCollector
from tshtrain.devices import resolve_device
from tshtrain.env import EnvFactory, MultiAgentVectorEnv, TensorVectorEnv, TorchCartPole
from tshtrain.errors import ConfigurationError, ExperimentError

AnyVectorEnv = gym.vector.VectorEnv[Any, Any, Any] | TensorVectorEnv | MultiAgentVectorEnv
"""what :func:`tshtrain.config.make_any_envs` builds: a Gymnasium vector env, a torch-native one or a
multi-agent one"""


def is_tensor_env(env: EnvConfig) -> bool:
    """True for the torch-native env types (``vmas``, ``torch_cartpole``)."""
    return env.type in ("vmas", "torch_cartpole")


def make_pettingzoo_env(env: EnvConfig, num_envs: int) -> MultiAgentVectorEnv:
    """The PettingZoo env module ``env.id`` (type ``pettingzoo``) in ``num_envs`` copies, as
    :func:`tshtrain.env.pettingzoo.make_pettingzoo_vector_env` builds it (its collector seeds it)."""
    try:
        from tshtrain.env.pettingzoo import make_pettingzoo_vector_env

        return make_pettingzoo_vector_env(
            env.id,
            num_envs,
            kwargs=env.kwargs,
            kind=env.pettingzoo_api,
            agent_id=env.agent_id,
            global_state=env.global_state,
        )
    except (ConfigurationError, ImportError, TypeError, ValueError) as error:
        raise ExperimentError(f"env (pettingzoo {env.id!r}, kwargs {env.kwargs}): {error}") from None


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


def make_envpool_env(env: EnvConfig, num_envs: int, *, seed: int) -> gym.vector.VectorEnv[Any, Any, Any]:
    """The EnvPool env of ``env`` (type ``envpool``): :class:`~tshtrain.env.envpool.EnvPoolVectorEnv`
    of the task ``env.id`` with ``num_envs`` sub-envs seeded ``seed``, ``seed + 1``, ..."""
    from tshtrain.env.envpool import EnvPoolVectorEnv

    try:
        return EnvPoolVectorEnv(env.id, num_envs, seed=seed, **env.kwargs)
    except ConfigurationError as error:
        raise ExperimentError(f"env (envpool {env.id!r}, kwargs {env.kwargs}): {error}") from None


def make_ray_env(env: EnvConfig, factories: list[EnvFactory]) -> gym.vector.VectorEnv[Any, Any, Any]:
    """The sub-envs of ``factories`` in Ray actors (``env.vector: ray``) with the options of ``env.ray``:
    :class:`tshtrain.env.ray_env.RayVectorEnv` (imported here: Ray is an optional extra)."""
    from tshtrain.env.ray_env import RayVectorEnv

    options = env.ray if env.ray is not None else RayEnvConfig()
    try:
        return RayVectorEnv(
            factories,
            num_workers=None if options.num_workers is None else min(options.num_workers, len(factories)),
            address=options.address,
            num_cpus=options.num_cpus,
            num_cpus_per_worker=options.num_cpus_per_worker,
            on_worker_failure=options.on_worker_failure,
            timeout_s=options.timeout_s,
        )
    except ConfigurationError as error:
        raise ExperimentError(f"env.ray ({env.id!r}): {error}") from None


def make_tensor_env(
    env: EnvConfig, num_envs: int, *, seed: int, device: str, test: bool = False
) -> TensorVectorEnv:
    """The torch-native env of ``env`` (type ``vmas`` or ``torch_cartpole``) with ``num_envs`` envs on
    ``env.device`` (or ``device``, the experiment's, when the section names none). ``test``: the envs of
    test steps, whose VMAS episode clocks all start at 0 (training envs start them spread out, see
    :class:`~tshtrain.env.vmas.VmasEnv`), unless ``env.kwargs`` says otherwise."""
    where = resolve_device(env.device or device)
    kwargs = dict(env.kwargs)
    if test and env.type == "vmas":
        kwargs.setdefault("desync_episode_clocks", False)
    try:
        if env.type == "torch_cartpole":
            return TorchCartPole(num_envs, device=where, seed=seed, **kwargs)
        from tshtrain.env.vmas import VmasEnv

        layout: dict[str, Any] = {}
        if env.agent_layout == "columns":  # the joint view takes none of these
            layout = {"agent_layout": "columns", "agent_id": env.agent_id, "global_state": env.global_state}
        return VmasEnv(env.id, num_envs=num_envs, device=where, seed=seed, **layout, **kwargs)
    except (ConfigurationError, TypeError, ValueError) as error:
        raise ExperimentError(f"env ({env.type} {env.id!r}, kwargs {kwargs}): {error}") from None


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
