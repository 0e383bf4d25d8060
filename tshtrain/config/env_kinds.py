"""The env kinds an experiment file can name (``env.type``, alias ``env.kind``): one :class:`EnvKind` each.

An entry holds everything the config layer and the command line know of a kind: which vector-env
interface it builds (:class:`EnvInterface`), whether one batched simulator holds every sub-env, which
env-section options only it (and the kinds that list them too) accepts, when its envs have agent
columns, its own check of ``env.id``, and its builder, written just above the entries. The env section
(:class:`tshtrain.config.models.EnvConfig`), the builders of a run (:mod:`tshtrain.config.build`) and
``tshtrain eval`` look a kind up here by name; adding a kind is adding an entry to :data:`ENV_KINDS`.

The entries are typed against :class:`EnvSection`, what they read of the env section, so that the
models can validate against this module without an import cycle.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Literal, Protocol

import gymnasium as gym

from tshtrain.config.defaults import DEFAULT_DEVICE
from tshtrain.config.entry_points import env_id_module, require_allowed, wrapper_module
from tshtrain.config.sections import RayEnvConfig, WrapperConfig
from tshtrain.devices import resolve_device
from tshtrain.env import EnvFactory, MultiAgentVectorEnv, TensorVectorEnv, TorchCartPole, make_vector_env
from tshtrain.env.pettingzoo import ALLOWED_PACKAGES as PETTINGZOO_PACKAGES
from tshtrain.env.vector import env_factories
from tshtrain.errors import ConfigurationError, ExperimentError

AnyVectorEnv = gym.vector.VectorEnv[Any, Any, Any] | TensorVectorEnv | MultiAgentVectorEnv
"""what a kind's builder (and :func:`tshtrain.config.make_any_envs`) builds: a Gymnasium vector env, a
torch-native one or a multi-agent one"""
GymWrapper = Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]
"""a Gymnasium wrapper applied to every sub-env"""

KIND_OPTIONS = ("wrappers", "vector", "device", "pettingzoo_api", "agent_layout")
"""the env-section options that only some kinds accept (:attr:`EnvKind.options`); the others apply to
every kind"""


class EnvSection(Protocol):
    """What a kind's builder and rules read of the env section (:class:`tshtrain.config.models.EnvConfig`)."""

    @property
    def type(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def kwargs(self) -> Mapping[str, Any]: ...
    @property
    def device(self) -> str | None: ...
    @property
    def vector(self) -> Literal["sync", "async", "ray"]: ...
    @property
    def ray(self) -> RayEnvConfig | None: ...
    @property
    def wrappers(self) -> Sequence[WrapperConfig]: ...
    @property
    def agent_id(self) -> bool: ...
    @property
    def global_state(self) -> bool: ...
    @property
    def groups(self) -> str | dict[str, list[str]] | None: ...
    @property
    def pettingzoo_api(self) -> Literal["parallel", "aec"] | None: ...
    @property
    def agent_layout(self) -> Literal["joint", "columns"]: ...


class EnvInterface(StrEnum):
    """The vector env a kind builds, and so the collector and buffer that run it (values: the words
    messages use, as in "is a torch-native env")."""

    GYMNASIUM = "Gymnasium"
    """a ``gym.vector.VectorEnv`` (numpy data, :class:`~tshtrain.data.Collector`); what Gymnasium
    wrappers, videos and agent scopes apply to"""
    TENSOR = "torch-native"
    """a :class:`~tshtrain.env.TensorVectorEnv` on ``env.device`` (:class:`~tshtrain.data.TensorCollector`,
    :class:`~tshtrain.data.TensorReplayBuffer`)"""
    MULTI_AGENT = "multi-agent"
    """a numpy :class:`~tshtrain.env.MultiAgentVectorEnv`, one column per agent and env
    (:class:`~tshtrain.data.MultiAgentCollector`); a run needs an ``agents`` section"""


class MultiAgent(Enum):
    """When a kind's envs have agent columns (``EnvConfig.multi_agent``)."""

    NEVER = "never"
    ALWAYS = "always"
    COLUMNS = "with agent_layout: columns"
    """when ``env.agent_layout`` is ``columns`` (the kind takes the ``agent_layout`` option)"""


@dataclass(frozen=True, kw_only=True)
class EnvRequest:
    """What a builder is asked for besides the env section."""

    num_envs: int
    """sub-envs (multi-agent kinds: envs, each with all its agents)"""
    seed: int = 0
    """the seed of kinds seeded when built (EnvPool, torch-native); the others are seeded by their
    collector"""
    device: str = DEFAULT_DEVICE
    """the experiment's device: where torch-native kinds simulate unless ``env.device`` says"""
    test: bool = False
    """the envs of test steps (VMAS: episode clocks all start at 0)"""
    allowed_modules: Collection[str] = ()
    """modules besides the built-in ones that the section may import (:mod:`tshtrain.config.entry_points`)"""
    render_mode: str | None = None
    """videos (Gymnasium kinds only): the render mode of every sub-env"""
    extra_wrappers: Sequence[GymWrapper] = ()
    """videos (Gymnasium kinds only): wrappers applied after the section's own"""


@dataclass(frozen=True, kw_only=True)
class EnvKind:
    """One env kind: the one entry that adding a kind writes."""

    name: str
    """the experiment-file name (``env.type``)"""
    summary: str
    """what it builds from ``env.id`` and ``env.kwargs``"""
    interface: EnvInterface
    """the vector env it builds"""
    batched: bool
    """one simulator holds every sub-env (up to ``MAX_SUB_ENVS_BATCHED`` of them), rather than one Python
    env (or process) each"""
    options: frozenset[str] = frozenset()
    """the options of :data:`KIND_OPTIONS` this kind accepts; the section refuses the others"""
    multi_agent: MultiAgent = MultiAgent.NEVER
    """when its envs have agent columns"""
    check_id: Callable[[str], None] | None = None
    """its own check of ``env.id`` (raises ValueError with the message); None: checked when built"""
    build: Callable[[EnvSection, EnvRequest], AnyVectorEnv]
    """builds the envs of the section"""

    def is_multi_agent(self, env: EnvSection) -> bool:
        """Agent columns in the envs of ``env``."""
        return self.multi_agent is MultiAgent.ALWAYS or (
            self.multi_agent is MultiAgent.COLUMNS and env.agent_layout == "columns"
        )


# ---------------------------------------------------------------------------- builders
def _build_gymnasium(env: EnvSection, request: EnvRequest) -> AnyVectorEnv:
    """``gymnasium.make(env.id)`` in a vector env (``env.vector``); modules the section names (wrappers, a
    ``module:`` env id) are imported only when allowed. Videos are recorded in this process."""
    module = env_id_module(env.id)
    if module is not None:
        require_allowed(module, where="env.id", name=env.id, allowed_modules=request.allowed_modules)
    kwargs = dict(env.kwargs)
    if request.render_mode is not None:
        kwargs["render_mode"] = request.render_mode
    wrappers = [*(_wrapper(w, request.allowed_modules) for w in env.wrappers), *request.extra_wrappers]
    if env.vector == "ray" and request.render_mode is None and not request.extra_wrappers:
        return _ray_env(env, env_factories(env.id, request.num_envs, env_kwargs=kwargs, wrappers=wrappers))
    mode = "sync" if env.vector == "ray" else env.vector  # videos: recorded in this process
    return make_vector_env(env.id, request.num_envs, mode=mode, env_kwargs=kwargs, wrappers=wrappers)


def _wrapper(config: WrapperConfig, allowed_modules: Collection[str]) -> GymWrapper:
    module_name, attr = wrapper_module(config.name)
    require_allowed(module_name, where="env.wrappers", name=config.name, allowed_modules=allowed_modules)
    try:
        wrapper = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as error:
        raise ExperimentError(
            f"env.wrappers: cannot import {config.name!r} ({error}); give 'package.module.Wrapper' or "
            f"'package.module:Wrapper', "
            f"e.g. 'gymnasium.wrappers.FlattenObservation'."
        ) from None
    return functools.partial(wrapper, **config.kwargs)


def _ray_env(env: EnvSection, factories: list[EnvFactory]) -> AnyVectorEnv:
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


def _build_envpool(env: EnvSection, request: EnvRequest) -> AnyVectorEnv:
    """:class:`~tshtrain.env.envpool.EnvPoolVectorEnv` of the task ``env.id``, sub-envs seeded ``seed``,
    ``seed + 1``, ... (imported here: EnvPool is an optional extra)."""
    if request.render_mode is not None or request.extra_wrappers:
        raise ExperimentError(
            f"env.type: 'envpool' ({env.id!r}) does not render; record videos with the Gymnasium env "
            f"of the same game (env.type: gymnasium)."
        )
    from tshtrain.env.envpool import EnvPoolVectorEnv

    try:
        return EnvPoolVectorEnv(env.id, request.num_envs, seed=request.seed, **env.kwargs)
    except ConfigurationError as error:
        raise ExperimentError(f"env (envpool {env.id!r}, kwargs {env.kwargs}): {error}") from None


def _build_vmas(env: EnvSection, request: EnvRequest) -> AnyVectorEnv:
    """The VMAS scenario ``env.id`` as a batched torch env (:class:`~tshtrain.env.vmas.VmasEnv`); test
    envs start their episode clocks at 0 (training envs spread them) unless ``env.kwargs`` says."""
    where = resolve_device(env.device or request.device)
    kwargs = dict(env.kwargs)
    if request.test:
        kwargs.setdefault("desync_episode_clocks", False)
    try:
        from tshtrain.env.vmas import VmasEnv

        layout: dict[str, Any] = {}
        if env.agent_layout == "columns":  # the joint view takes none of these
            layout = {"agent_layout": "columns", "agent_id": env.agent_id, "global_state": env.global_state}
            if env.groups is not None:
                layout["groups"] = env.groups
        return VmasEnv(env.id, num_envs=request.num_envs, device=where, seed=request.seed, **layout, **kwargs)
    except (ConfigurationError, TypeError, ValueError) as error:
        raise _torch_env_error(env, kwargs, error) from None


def _build_torch_cartpole(env: EnvSection, request: EnvRequest) -> AnyVectorEnv:
    """:class:`~tshtrain.env.TorchCartPole` (``env.id`` is ignored)."""
    where = resolve_device(env.device or request.device)
    kwargs = dict(env.kwargs)
    try:
        return TorchCartPole(request.num_envs, device=where, seed=request.seed, **kwargs)
    except (ConfigurationError, TypeError, ValueError) as error:
        raise _torch_env_error(env, kwargs, error) from None


def _torch_env_error(env: EnvSection, kwargs: Mapping[str, Any], error: Exception) -> ExperimentError:
    return ExperimentError(f"env ({env.type} {env.id!r}, kwargs {kwargs}): {error}")


_PETTINGZOO_ID = re.compile(
    rf"^(?:{'|'.join(map(re.escape, PETTINGZOO_PACKAGES))})(?:\.[A-Za-z][A-Za-z0-9_]*)+$"
)
"""an env id of type pettingzoo: a dotted module path inside an allowed package (as
:mod:`tshtrain.env.pettingzoo` requires)"""


def _check_pettingzoo_id(env_id: str) -> None:
    if not _PETTINGZOO_ID.match(env_id):
        raise ValueError(
            f"env.id: {env_id!r} is not a PettingZoo env module; type pettingzoo takes a module inside "
            f"the packages {list(PETTINGZOO_PACKAGES)}, e.g. 'pettingzoo.classic.tictactoe_v3' or "
            f"'mpe2.simple_spread_v3'"
        )


def _build_pettingzoo(env: EnvSection, request: EnvRequest) -> AnyVectorEnv:
    """The PettingZoo env module ``env.id`` in ``num_envs`` copies, as
    :func:`tshtrain.env.pettingzoo.make_pettingzoo_vector_env` builds it (its collector seeds it)."""
    try:
        from tshtrain.env.pettingzoo import make_pettingzoo_vector_env

        return make_pettingzoo_vector_env(
            env.id,
            request.num_envs,
            kwargs=env.kwargs,
            kind=env.pettingzoo_api,
            agent_id=env.agent_id,
            global_state=env.global_state,
            groups=env.groups,
        )
    except (ConfigurationError, ImportError, TypeError, ValueError) as error:
        raise ExperimentError(f"env (pettingzoo {env.id!r}, kwargs {env.kwargs}): {error}") from None


# ---------------------------------------------------------------------------- the registry
ENV_KINDS: dict[str, EnvKind] = {
    kind.name: kind
    for kind in (
        EnvKind(
            name="gymnasium",
            summary="gymnasium.make(id, **kwargs) in a vector env (env.vector), numpy data",
            interface=EnvInterface.GYMNASIUM,
            batched=False,
            options=frozenset({"wrappers", "vector"}),
            build=_build_gymnasium,
        ),
        EnvKind(
            name="envpool",
            summary="the EnvPool task id in C++ threads, numpy data, same-step autoreset (EnvPoolVectorEnv; "
            "the envpool extra)",
            interface=EnvInterface.GYMNASIUM,
            batched=True,
            build=_build_envpool,
        ),
        EnvKind(
            name="vmas",
            summary="the VMAS scenario id as a batched torch env on env.device (VmasEnv; the vmas extra)",
            interface=EnvInterface.TENSOR,
            batched=True,
            options=frozenset({"device", "agent_layout"}),
            multi_agent=MultiAgent.COLUMNS,
            build=_build_vmas,
        ),
        EnvKind(
            name="torch_cartpole",
            summary="CartPole in torch on env.device (TorchCartPole; id is ignored)",
            interface=EnvInterface.TENSOR,
            batched=True,
            options=frozenset({"device"}),
            build=_build_torch_cartpole,
        ),
        EnvKind(
            name="pettingzoo",
            summary="the PettingZoo env module id (e.g. pettingzoo.classic.tictactoe_v3, "
            "mpe2.simple_spread_v3) as a multi-agent vector env (the pettingzoo extra; needs an agents "
            "section)",
            interface=EnvInterface.MULTI_AGENT,
            batched=False,
            options=frozenset({"pettingzoo_api"}),
            multi_agent=MultiAgent.ALWAYS,
            check_id=_check_pettingzoo_id,
            build=_build_pettingzoo,
        ),
    )
}
"""every env kind by its experiment-file name, in the order ``tshtrain list`` and messages name them"""


def env_kind(name: str) -> EnvKind:
    """The entry of ``name`` (a validated section names one)."""
    try:
        return ENV_KINDS[name]
    except KeyError:
        raise ExperimentError(
            f"env.type: unknown env kind {name!r}; allowed: {', '.join(ENV_KINDS)}."
        ) from None


def kinds_where(condition: Callable[[EnvKind], bool]) -> str:
    """The kinds that meet ``condition``, for messages: ``vmas or torch_cartpole``."""
    return " or ".join(kind.name for kind in ENV_KINDS.values() if condition(kind))


def takes(option: str) -> Callable[[EnvKind], bool]:
    """The condition "accepts ``option`` of :data:`KIND_OPTIONS`" (for :func:`kinds_where`)."""
    return lambda kind: option in kind.options


def multi_agent_kinds(*, each: str = "", layout_key: str = "agent_layout") -> str:
    """The kinds with agent columns, for messages: ``pettingzoo, or vmas with agent_layout: columns``
    (``each`` before every name, ``layout_key`` naming the layout option)."""
    kinds = sorted(
        (kind for kind in ENV_KINDS.values() if kind.multi_agent is not MultiAgent.NEVER),
        key=lambda kind: kind.multi_agent is MultiAgent.COLUMNS,
    )
    return ", or ".join(
        f"{each}{kind.name}"
        + (f" with {layout_key}: columns" if kind.multi_agent is MultiAgent.COLUMNS else "")
        for kind in kinds
    )
