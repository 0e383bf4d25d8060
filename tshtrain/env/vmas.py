"""VMAS (Vectorized Multi-Agent Simulator) as a :class:`~tshtrain.env.tensor_env.TensorVectorEnv`.

VMAS steps thousands of 2-D physics worlds at once in torch, but resets one world per
``Environment.reset_at(i)`` call; each call costs O(num_envs) tensor work plus a save / restore of
torch's, numpy's and Python's global RNG states. An autoreset built on that loop (TorchRL's ``VmasEnv``
resets ended envs this way; VMAS's own Gymnasium wrappers reset either all envs or their single one)
makes a 4096-env step 10-30x slower than VMAS's ``step``.

:class:`VmasEnv` resets all ended envs in **one** batched call instead: it snapshots every batched
tensor of the scenario and its world (every tensor reachable from the scenario whose first dimension is
``num_envs``: entity positions, velocities, rotations, actions, dynamics and sensor state, the
scenario's own tensors such as shaping terms), lets VMAS reset *all* envs (``Environment.reset()``,
one vectorised call), reads the new observations, then writes the snapshot back into the envs that had
not ended, in place. Unfinished envs are therefore bit-identical to envs that were never reset (their
tensors, step counters and observations), and reset envs are exactly what VMAS's own vectorised reset
produces. This is only sound for scenarios that keep all per-env state in batched tensors and whose
vectorised reset draws per-env randomness; :data:`VERIFIED_BATCHED_RESET_SCENARIOS` lists those checked
(code read + ``tests/unit/test_vmas.py``). Other scenarios fall back to the per-env ``reset_at`` loop
unless ``batched_reset=True`` is passed. Not verified, and why:

* ``give_way``, ``passage``, ``ball_passage``, ``joint_passage_size`` and ``wind_flocking`` draw
  some start values once per vectorised reset (spawn noise, passage positions), so envs reset in the
  same step would share them (the loop draws them per env);
* ``ball_passage`` also keeps Python numbers that a reset changes; ``simple_adversary``,
  ``simple_reference`` and ``simple_speaker_listener`` replace state objects on reset (the batched
  reset raises); ``sampling`` keeps state in ``torch.distributions`` objects that are not restored;
  ``football`` and ``road_traffic`` failed the bit-identity test;
* the remaining ones (``buzz_wire``, ``joint_passage``, ``ball_trajectory``, ``simple_crypto``,
  ``simple_push``, ``simple_world_comm``) passed the tests but their code was not read.

Randomness: VMAS draws from torch's, numpy's and Python's *global* generators, but swaps in a state
kept on the class ``Environment.vmas_random_state`` around each call, so all VMAS envs of a process
share one stream. :class:`VmasEnv` gives every instance its own copy of that state (swapped in around
its VMAS calls), seeded from ``seed``; the global RNGs of the caller are never consumed. Hence the same
``seed`` (or ``reset(seed=s)``) and the same actions give the same trajectories on CPU, independently
of other envs in the process. Not reproducible: on CUDA devices VMAS draws from torch's global CUDA
generator, which its state swap does not cover (``reset(seed=s)`` re-seeds it through VMAS's
``seed``, which calls ``torch.manual_seed``), so other CUDA draws in between change the trajectories;
and a batched reset draws fresh episodes for *all* envs before keeping only the ended ones, so the
stream (and the episodes) differ from a run with the ``reset_at`` loop.
"""

from __future__ import annotations

import contextlib
import importlib
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple, final

import gymnasium as gym
import numpy as np
import torch

from tshtrain.devices import component_device
from tshtrain.env.groups import (
    AgentGroup,
    GroupView,
    group_obs_key,
    group_observation_space,
    resolve_groups,
    storage_action_space,
)
from tshtrain.env.multi_agent import AGENT_ID_KEY, OBS_KEY, STATE_KEY, AgentColumns
from tshtrain.env.tensor_env import TensorObs, TensorStep
from tshtrain.env.tensor_spaces import sample_actions_torch
from tshtrain.errors import ConfigurationError, PolicyOutputError, UnsupportedSpaceError, require_positive

VERIFIED_BATCHED_RESET_SCENARIOS: frozenset[str] = frozenset(
    {
        "balance",
        "discovery",
        "dispersion",
        "dropout",
        "flocking",
        "multi_give_way",
        "navigation",
        "reverse_transport",
        "simple",
        "simple_spread",
        "simple_tag",
        "transport",
        "wheel",
    }
)
"""Scenarios whose batched reset was checked (code read, and the tests of ``tests/unit/test_vmas.py``:
unfinished envs stay bit-identical, reset envs equal VMAS's own vectorised reset)."""

_PLAIN_TYPES = (bool, int, float, complex, str, bytes, type(None), np.ndarray, np.generic)

Path = tuple[Any, ...]
"""An attribute path as nested pairs ``(parent path, name or index)``: cheap to build and to compare."""


def vmas_state(scenario: Any) -> dict[str, Any]:
    """Every tensor and plain value reachable from a VMAS scenario, keyed by its attribute path.

    Walks the scenario's attributes, its world, entities, states, actions, dynamics, sensors and
    joints (objects of classes defined in ``vmas`` modules), lists, tuples and dicts; functions and
    foreign objects are skipped. Values are the live objects, not copies. Used by tests that compare
    whole world states (the batched reset walks the same way, for tensors only).

    Args:
        scenario: a VMAS ``BaseScenario`` (``Environment.scenario``).

    Returns:
        path (such as ``"._world._agents[0]._state._pos"``) -> tensor, number, string, None or array.
    """
    found: dict[Path, _Slot] = {}
    _collect(scenario, (), found, {id(scenario)}, plain=True)
    return {_path_text(path): slot.value for path, slot in found.items()}


class _Slot(NamedTuple):
    """Where a value lives: ``container[key]``, a list, tuple or dict, or an object's ``vars()``."""

    container: Any
    key: Any
    value: Any


_IS_VMAS_CLASS: dict[type, bool] = {}


def _collect(obj: Any, path: Path, found: dict[Path, _Slot], seen: set[int], *, plain: bool) -> None:
    """Add the tensors (and with ``plain`` the plain values) under ``obj`` to ``found``."""
    container: Any
    items: list[tuple[int | str, Any, Any]]  # (label in the path, key in the container, value)
    if isinstance(obj, list | tuple):
        container, items = obj, [(i, i, v) for i, v in enumerate(obj)]
    elif isinstance(obj, dict):
        container, items = obj, [(_key_label(k), k, v) for k, v in obj.items()]
    else:
        container = vars(obj)
        items = [(name, name, v) for name, v in container.items()]
    for label, key, value in items:
        cls = type(value)
        if isinstance(value, torch.Tensor) or (plain and isinstance(value, _PLAIN_TYPES)):
            found[(path, label)] = _Slot(container, key, value)
            continue
        is_vmas = _IS_VMAS_CLASS.get(cls)
        if is_vmas is None:
            is_vmas = _IS_VMAS_CLASS[cls] = cls.__module__.startswith("vmas.") and hasattr(value, "__dict__")
        if (is_vmas or cls in (list, tuple, dict)) and id(value) not in seen:
            seen.add(id(value))
            _collect(value, (path, label), found, seen, plain=plain)


def _path_text(path: Path) -> str:
    parent, label = path
    text = _path_text(parent) if parent else ""
    return f"{text}[{label}]" if isinstance(label, int) or label.startswith("'") else f"{text}.{label}"


def _key_label(key: Any) -> str:
    """A dict key in a path: entities (keys of the world's force dicts) by name, so that paths are the
    same in two envs built alike."""
    name = getattr(key, "name", None)
    return repr(name) if isinstance(name, str) else repr(key)


def _batched_slots(scenario: Any, num_envs: int) -> dict[Path, _Slot]:
    found: dict[Path, _Slot] = {}
    _collect(scenario, (), found, {id(scenario)}, plain=False)
    return {
        path: slot for path, slot in found.items() if slot.value.dim() > 0 and slot.value.shape[0] == num_envs
    }


def _restore_kept(
    scenario_name: str,
    before: Mapping[Path, torch.Tensor],
    after: Mapping[Path, _Slot],
    keep_N: torch.Tensor,
) -> None:
    """Write ``before`` back into the tensors of ``after`` where ``keep_N`` is True: in place, so that
    every alias of a tensor sees it, or, for tensors that cannot be written in place (expanded ones),
    by storing the merged tensor in every slot that holds it."""
    if before.keys() != after.keys():
        changed = [_path_text(path) for path in list(before.keys() ^ after.keys())[:3]]
        raise RuntimeError(
            f"VmasEnv: resetting all envs of scenario {scenario_name!r} changed the structure of its state "
            f"(e.g. {changed}); its batched reset is unsafe, build the env with batched_reset=False."
        )
    holders: dict[int, list[tuple[Path, _Slot]]] = {}
    for path, slot in after.items():
        holders.setdefault(id(slot.value), []).append((path, slot))
    for group in holders.values():
        path, slot = group[0]
        now, old = slot.value, before[path]
        if old.shape != now.shape or old.dtype != now.dtype:
            raise RuntimeError(
                f"VmasEnv: resetting all envs of scenario {scenario_name!r} changed {_path_text(path)} from "
                f"{tuple(old.shape)} {old.dtype} to {tuple(now.shape)} {now.dtype}; build the env with "
                "batched_reset=False."
            )
        merged = torch.where(keep_N.view(-1, *([1] * (now.dim() - 1))), old, now)
        if 0 not in now.stride():
            now.copy_(merged)
            continue
        for path, slot in group:  # an expanded tensor: one memory location for many elements
            if isinstance(slot.container, tuple):
                raise RuntimeError(
                    f"VmasEnv: cannot restore {_path_text(path)} (expanded, inside a tuple); "
                    "use batched_reset=False."
                )
            slot.container[slot.key] = merged


def _check_seed(seed: int | None) -> None:
    if seed is not None and not (isinstance(seed, int) and 0 <= seed < 2**32):
        raise ConfigurationError(f"VmasEnv: seed must be an int in [0, 2**32) (numpy's range), got {seed!r}.")


def _import_vmas() -> Any:
    try:
        return importlib.import_module("vmas")
    except ImportError as error:
        raise ImportError(
            "VmasEnv needs the optional dependency VMAS: pip install vmas (tested with 1.5.2)."
        ) from error


def _fresh_rng_state(seed: int) -> list[Any]:
    """The (torch, numpy, random) global-RNG states VMAS's ``seed(seed)`` would set, made without
    touching the global generators."""
    import random

    return [
        torch.Generator(device="cpu").manual_seed(seed).get_state(),  # torch's global CPU generator
        np.random.RandomState(seed).get_state(),
        random.Random(seed).getstate(),
    ]


@final
class VmasEnv:
    """A VMAS scenario as a :class:`~tshtrain.env.tensor_env.TensorVectorEnv` with one batched
    autoreset per step (see the module docstring), in one of two layouts of its agents.

    **Joint view** (``agent_layout="joint"``, the default): the agents form one joint learner. The
    observation is the concatenation of the agents' observation vectors in VMAS's agent order (a flat
    ``Box``, so every tshtrain policy network takes it; a Dict keyed by agent would make each policy
    re-assemble the same vector), the action is the concatenation of the agents' actions (``Box`` of the
    summed sizes; with ``continuous_actions=False`` a ``Discrete`` for one agent, a ``MultiDiscrete`` with
    one entry per agent otherwise), and the reward is the mean of the agents' rewards
    (``joint_reward="sum"``: their sum). A single-agent scenario maps 1:1. ``terminated`` is VMAS's
    ``done`` (shared by all agents), ``truncated`` the time limit ``max_episode_steps``. ``info`` holds
    the agents' scalar infos as ``"<agent name>/<key>"`` tensors of shape (N,).

    **Columns** (``agent_layout="columns"``): every agent of every world is one row, agent-major as in
    :class:`~tshtrain.env.multi_agent.AgentColumns` (agent ``a`` of world ``e`` is row ``a * E + e``), so
    the env is a ``TensorVectorEnv`` of ``num_envs = A * E`` rows and one single-agent algorithm over all
    rows trains one policy shared by the agents. A row's observation is its agent's observation vector,
    or, with ``agent_id`` and / or ``global_state``, a flat Dict of ``"obs"`` (the agent's observation),
    ``"state"`` (the concatenation of all agents' observations of the world, the same in each of its
    rows: the input of MAPPO's centralised critic) and ``"agent_id"`` (float32 one-hot of the agent).
    The action of a row is its agent's (``Box``, or ``Discrete`` with ``continuous_actions=False``), its
    reward the agent's own (float32); ``terminated`` / ``truncated`` are the world's, repeated over its
    agents, so a world's rows end (and reset) together. ``info`` holds, per key that every agent reports,
    a tensor of shape (A * E,). All agents must share one observation space and one action space.

    Args:
        scenario: a VMAS scenario name, such as ``"navigation"``.
        num_envs: number of worlds stepped together (E), > 0; with ``agent_layout="columns"`` the env's
            :attr:`num_envs` is ``A * E``.
        device: the torch device of every tensor.
        continuous_actions: Box actions if True, else discrete ones.
        seed: in ``[0, 2**32)``; seeds world building, the first episodes and the clock offsets; None
            draws a seed from the OS. ``reset(seed=...)`` re-seeds.
        max_episode_steps: episodes are truncated after this many steps (VMAS's ``max_steps``);
            None: no time limit.
        desync_episode_clocks: with a time limit, start each env's step counter at a random value in
            ``[0, max_episode_steps)`` at every ``reset()`` (as rsl_rl does), so that the envs do not
            all time out on the same step; no effect without a time limit.
        agent_layout: ``"joint"`` (one learner acting for all agents) or ``"columns"`` (one row per
            agent and world), see above.
        agent_id: columns only: add the ``"agent_id"`` key (the observation becomes a Dict).
        global_state: columns only: add the ``"state"`` key (the observation becomes a Dict).
        joint_reward: joint view only: ``"mean"`` or ``"sum"`` of the agents' rewards.
        batched_reset: reset ended envs in one batched call (True) or one ``reset_at`` each (False);
            None: batched for :data:`VERIFIED_BATCHED_RESET_SCENARIOS`, the loop otherwise.
        clamp_actions: clamp continuous actions into the action space (VMAS's ``clamp_actions``);
            False makes VMAS raise on out-of-range actions.
        groups: columns only: agents with different spaces in groups (:mod:`tshtrain.env.groups`):
            ``"auto"`` (by name: ``adversary_0`` -> ``adversary``) or ``{group: [agents]}``; the agents
            are laid out group-major, each group's observations under its own key (``obs@GROUP``), the
            ``state`` is every agent's observation concatenated in that order, and actions are stored
            as the widest group's (Box) or as integers (Discrete); see :attr:`groups`.
        **scenario_kwargs: passed to the scenario's ``make_world`` (e.g. ``n_agents=2``).
    """

    def __init__(
        self,
        scenario: str,
        *,
        num_envs: int,
        device: str | torch.device = "cpu",
        continuous_actions: bool = True,
        seed: int | None = None,
        max_episode_steps: int | None = None,
        desync_episode_clocks: bool = True,
        agent_layout: Literal["joint", "columns"] = "joint",
        agent_id: bool = False,
        global_state: bool = False,
        joint_reward: Literal["mean", "sum"] = "mean",
        batched_reset: bool | None = None,
        clamp_actions: bool = True,
        groups: Mapping[str, Sequence[str]] | str | None = None,
        **scenario_kwargs: Any,
    ) -> None:
        require_positive("VmasEnv", "num_envs", num_envs)
        if max_episode_steps is not None:
            require_positive("VmasEnv", "max_episode_steps", max_episode_steps)
        if agent_layout not in ("joint", "columns"):
            raise ConfigurationError(
                f"VmasEnv.agent_layout must be 'joint' or 'columns', got {agent_layout!r}."
            )
        if agent_layout == "joint" and groups is not None:
            raise ConfigurationError(
                f"VmasEnv: groups={groups!r} needs agent_layout='columns' (the joint view is one agent)."
            )
        if agent_layout == "joint" and (agent_id or global_state):
            raise ConfigurationError(
                f"VmasEnv: agent_id={agent_id!r} and global_state={global_state!r} need "
                "agent_layout='columns' (the joint view already holds every agent's observation)."
            )
        if joint_reward not in ("mean", "sum"):
            raise ConfigurationError(f"VmasEnv.joint_reward must be 'mean' or 'sum', got {joint_reward!r}.")
        _check_seed(seed)
        component_device(device, owner="VmasEnv")  # before VMAS asserts on a device it cannot use
        vmas = _import_vmas()
        self._rng_slots: list[Any] = vmas.simulator.environment.Environment.vmas_random_state
        seed = secrets.randbits(32) if seed is None else seed
        self._rng_state = _fresh_rng_state(seed)
        self._clock_rng = torch.Generator(device="cpu").manual_seed(seed)  # host: drawn once per reset
        self._scenario_name = scenario
        self._max_episode_steps = max_episode_steps
        self._desync = desync_episode_clocks and max_episode_steps is not None
        self._sum_rewards = joint_reward == "sum"
        self._batched = (
            scenario in VERIFIED_BATCHED_RESET_SCENARIOS if batched_reset is None else batched_reset
        )
        with self._own_rng():
            self._env: Any = vmas.make_env(
                scenario,
                num_envs=num_envs,
                device=device,
                continuous_actions=continuous_actions,
                max_steps=max_episode_steps,
                clamp_actions=clamp_actions,
                terminated_truncated=True,
                **scenario_kwargs,
            )
        self._num_envs = num_envs
        self._device = torch.device(self._env.device)
        self._agent_names: tuple[str, ...] = tuple(agent.name for agent in self._env.agents)
        self._columns = agent_layout == "columns"
        self._keys = agent_id or global_state
        self._agent_id = agent_id
        self._global_state = global_state
        self._obs_space: gym.Space[Any]
        self._act_space: gym.Space[Any]
        self.groups: dict[str, AgentGroup] | None = None
        """the agent groups (columns with ``groups``; :mod:`tshtrain.env.groups`), else None"""
        self.group_views: dict[str, GroupView] = {}
        """what each group's learners see of the rows"""
        self._order: list[int] | None = None  # VMAS's agent index of each column agent (groups)
        if self._columns and groups is not None:
            self._build_groups(groups)
        elif self._columns:
            self._build_columns()
        else:
            self._layout = AgentColumns(("joint",), num_envs)
            self._obs_space, self._obs_sizes = _joint_observation_space(scenario, self._env.observation_space)
            self._act_space, self._act_sizes = _joint_action_space(self._env.action_space)
        self._start_clocks()

    def _build_columns(self) -> None:
        """The spaces and the agent-id rows of the columns layout."""
        self._layout = AgentColumns(self._agent_names, self._num_envs)
        self._obs_space, self._act_space = _column_spaces(
            self._scenario_name, self._agent_names, self._env.observation_space, self._env.action_space
        )
        num_agents = len(self._agent_names)
        if self._keys:
            agent_space = self._obs_space
            assert isinstance(agent_space, gym.spaces.Box)
            keys: dict[str, gym.Space[Any]] = {OBS_KEY: agent_space}
            if self._global_state:
                size = num_agents * int(agent_space.shape[0])
                keys[STATE_KEY] = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
            if self._agent_id:
                keys[AGENT_ID_KEY] = gym.spaces.Box(0.0, 1.0, (num_agents,), np.float32)
            self._obs_space = gym.spaces.Dict(keys)
        self._agent_id_CA = (
            torch.eye(num_agents, dtype=torch.float32, device=self._device)
            .repeat_interleave(self._num_envs, dim=0)
            .contiguous()
        )

    def _build_groups(self, groups: Mapping[str, Sequence[str]] | str) -> None:
        """The columns layout of agents in groups: group-major agents, one observation key per group,
        actions stored as the widest group's (see :mod:`tshtrain.env.groups`)."""
        names = self._agent_names
        grouping = resolve_groups(names, groups, f"VmasEnv({self._scenario_name!r}).groups")
        assert grouping is not None
        agents = tuple(agent for members in grouping.values() for agent in members)
        self._order = [names.index(agent) for agent in agents]
        self._layout = AgentColumns(agents, self._num_envs)
        obs_all = list(self._env.observation_space.spaces)
        act_all = list(self._env.action_space.spaces)
        obs_keys: dict[str, gym.Space[Any]] = {}
        actions: dict[str, gym.Space[Any]] = {}
        found: dict[str, tuple[gym.Space[Any], tuple[str, ...]]] = {}
        for name, members in grouping.items():
            index = [names.index(agent) for agent in members]
            own, act = _column_spaces(
                f"{self._scenario_name}: group {name}",
                members,
                _Spaces([obs_all[i] for i in index]),
                _Spaces([act_all[i] for i in index]),
            )
            obs_keys[group_obs_key(name)] = own
            actions[name] = act
            found[name] = (own, members)
        state_size = sum(int(np.prod(own.shape or ())) * len(members) for own, members in found.values())
        state = gym.spaces.Box(-np.inf, np.inf, (state_size,), np.float32) if self._global_state else None
        keys = dict(obs_keys)
        if state is not None:
            keys[STATE_KEY] = state
        if self._agent_id:
            keys[AGENT_ID_KEY] = gym.spaces.Box(0.0, 1.0, (len(agents),), np.float32)
        self._obs_space = gym.spaces.Dict(keys)
        self._act_space = storage_action_space(actions, f"VmasEnv({self._scenario_name!r}).groups")
        width = int(self._act_space.shape[0]) if isinstance(self._act_space, gym.spaces.Box) else None
        self.groups = {
            name: AgentGroup(
                name,
                members,
                agents.index(members[0]),
                group_observation_space(
                    own, state=state, num_group_agents=len(members), agent_id=self._agent_id
                ),
                actions[name],
            )
            for name, (own, members) in found.items()
        }
        self.group_views = {name: GroupView(g, stored_action_width=width) for name, g in self.groups.items()}
        self._group_rows = [
            (group_obs_key(name), g.first * self._num_envs, g.units.stop * self._num_envs)
            for name, g in self.groups.items()
        ]
        self._widths = [
            int(actions[name].shape[0]) if width is not None else None  # type: ignore[index]
            for name, g in self.groups.items()
            for _ in g.agents
        ]
        self._agent_id_CA = (
            torch.eye(len(agents), dtype=torch.float32, device=self._device)
            .repeat_interleave(self._num_envs, dim=0)
            .contiguous()
        )

    def sample_group_actions(self, generator: torch.Generator) -> torch.Tensor:
        """Uniformly random stored actions of every row of a grouped env (each group's own space, Box
        actions zero-padded); what a collector's random actions are for such an env."""
        assert self.groups is not None
        parts = [
            self.group_views[name].pad(
                sample_actions_torch(g.action_space, len(g.agents) * self._num_envs, generator, self._device)
            )
            for name, g in self.groups.items()
        ]
        return torch.cat(parts)

    @property
    def num_envs(self) -> int:
        """Rows of every batch: the number of worlds E (joint view), or ``A * E`` (columns)."""
        return self._layout.num_columns

    @property
    def num_worlds(self) -> int:
        """Number of VMAS worlds stepped together (E, the ``num_envs`` argument)."""
        return self._num_envs

    @property
    def agent_layout(self) -> Literal["joint", "columns"]:
        """``"joint"`` or ``"columns"`` (see the class docstring)."""
        return "columns" if self._columns else "joint"

    @property
    def columns(self) -> AgentColumns:
        """The rows as :class:`~tshtrain.env.multi_agent.AgentColumns`: VMAS's agents over the worlds
        (columns), or one agent ``"joint"`` (joint view)."""
        return self._layout

    @property
    def num_agents(self) -> int:
        """Agents per world as the rows see them: A (columns), 1 (joint view: one joint learner).
        Collectors report per-agent returns when it is above 1."""
        return self._layout.num_agents

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents of the row blocks: VMAS's agent names (columns), ``("joint",)`` (joint view;
        :attr:`agent_names` has VMAS's names in both layouts)."""
        return self._layout.agents

    @property
    def device(self) -> torch.device:
        """Where every tensor of ``reset`` and ``step`` lives."""
        return self._device

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """Joint view: Box of the concatenated observations of all agents. Columns: the agents' Box, or
        a Dict with ``obs`` / ``state`` / ``agent_id``."""
        return self._obs_space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """Joint view: Box (continuous), Discrete (one agent) or MultiDiscrete (one entry per agent).
        Columns: the agents' Box or Discrete."""
        return self._act_space

    @property
    def agent_names(self) -> tuple[str, ...]:
        """The agents' names in VMAS's order (the order of the concatenations)."""
        return self._agent_names

    @property
    def batched_reset(self) -> bool:
        """True if ended envs reset in one batched call, False if one ``reset_at`` call each."""
        return self._batched

    @property
    def vmas_env(self) -> Any:
        """The wrapped ``vmas.simulator.environment.Environment`` (for inspection; stepping or resetting
        it directly bypasses the RNG and clock handling)."""
        return self._env

    def reset(self, *, seed: int | None = None) -> tuple[TensorObs, Mapping[str, Any]]:
        """Reset every env; ``seed`` re-seeds this env's VMAS RNG stream and clock offsets first."""
        _check_seed(seed)
        with self._own_rng():
            if seed is not None:
                self._env.seed(seed)
            obs_list = self._env.reset()
        if seed is not None:
            self._clock_rng.manual_seed(seed)
        self._start_clocks()
        return self._view(obs_list), {}

    def step(self, actions: torch.Tensor) -> TensorStep:
        """Step all envs; ended envs are reset in the same call (one batched reset, or the loop)."""
        with self._own_rng():
            obs_list, rew_list, terminated_E, truncated_E, infos = self._env.step(self._split(actions))
        terminated_E = terminated_E.to(torch.bool)
        truncated_E = truncated_E.to(torch.bool)
        if self._columns:
            return self._column_step(obs_list, rew_list, terminated_E, truncated_E, infos)
        ended_E = terminated_E | truncated_E
        final_obs = torch.cat(obs_list, dim=1)
        rew_AN = torch.stack(rew_list)
        rew_N = (rew_AN.sum(0) if self._sum_rewards else rew_AN.mean(0)).to(torch.float32)
        obs = final_obs
        if bool(ended_E.any()):
            obs = torch.where(ended_E.unsqueeze(1), torch.cat(self._reset_worlds(ended_E), dim=1), final_obs)
        info = self._scalar_infos(infos)
        return TensorStep(obs, rew_N, terminated_E, truncated_E, final_obs, info)

    def _column_step(
        self,
        obs_list: Sequence[torch.Tensor],
        rew_list: Sequence[torch.Tensor],
        terminated_E: torch.Tensor,
        truncated_E: torch.Tensor,
        infos: Sequence[Mapping[str, Any]],
    ) -> TensorStep:
        num_agents = len(self._agent_names)
        ended_E = terminated_E | truncated_E
        final_obs = self._view(obs_list)
        obs = final_obs
        if bool(ended_E.any()):
            new_list = self._reset_worlds(ended_E)
            kept = [
                torch.where(ended_E.unsqueeze(1), new, old)
                for new, old in zip(new_list, obs_list, strict=True)
            ]
            obs = self._view(kept)
        if self._order is not None:  # groups: VMAS's agent order -> the columns'
            rew_list = [rew_list[i] for i in self._order]
            infos = [infos[i] for i in self._order]
        rew_C = torch.cat(list(rew_list)).to(torch.float32)
        info = self._column_infos(infos)
        return TensorStep(
            obs, rew_C, terminated_E.repeat(num_agents), truncated_E.repeat(num_agents), final_obs, info
        )

    def reset_envs(self, mask_N: torch.Tensor) -> TensorObs:
        """Start new episodes in the worlds where ``mask_N`` (bool, shape (E,): one entry per world in
        both layouts) is True; the others keep their state bit for bit. Returns the new observations of
        the reset worlds in the env's layout (joint: (E, ...), columns: (A * E, ...) or a Dict of them);
        the rows of the other worlds are unspecified (``step`` keeps their own observations)."""
        return self._view(self._reset_worlds(mask_N))

    def _reset_worlds(self, mask_E: torch.Tensor) -> list[torch.Tensor]:
        if self._batched:
            return self._reset_batched(mask_E)
        return self._reset_loop(mask_E)

    def _view(self, obs_list: Sequence[torch.Tensor]) -> TensorObs:
        """VMAS's per-agent observations (A tensors (E, obs_dim)) in the env's layout."""
        if not self._columns:
            return torch.cat(list(obs_list), dim=1)
        if self._order is not None:
            return self._group_view([obs_list[i] for i in self._order])
        obs_C = torch.cat(list(obs_list), dim=0)
        if not self._keys:
            return obs_C
        out: dict[str, torch.Tensor] = {OBS_KEY: obs_C}
        if self._global_state:
            out[STATE_KEY] = torch.cat(list(obs_list), dim=1).repeat(len(obs_list), 1)
        if self._agent_id:
            out[AGENT_ID_KEY] = self._agent_id_CA
        return out

    def _group_view(self, obs_list: Sequence[torch.Tensor]) -> TensorObs:
        """Grouped columns: one key per group (the other groups' rows zero), the state, the ids."""
        out: dict[str, torch.Tensor] = {}
        for key, first, stop in self._group_rows:
            agents = obs_list[first // self._num_envs : stop // self._num_envs]
            rows = torch.zeros(
                (self.num_envs, agents[0].shape[1]), dtype=agents[0].dtype, device=self._device
            )
            rows[first:stop] = torch.cat(list(agents), dim=0)
            out[key] = rows
        if self._global_state:
            out[STATE_KEY] = torch.cat(list(obs_list), dim=1).repeat(len(obs_list), 1)
        if self._agent_id:
            out[AGENT_ID_KEY] = self._agent_id_CA
        return out

    def close(self) -> None:
        """Drop the simulator (VMAS holds no external resources)."""
        self._env = None

    def _reset_batched(self, mask_N: torch.Tensor) -> list[torch.Tensor]:
        scenario = self._env.scenario
        before = {path: slot.value.clone() for path, slot in _batched_slots(scenario, self._num_envs).items()}
        steps_N = self._env.steps
        with self._own_rng():
            obs_list = self._env.reset()
        _restore_kept(self._scenario_name, before, _batched_slots(scenario, self._num_envs), ~mask_N)
        self._env.steps = torch.where(mask_N, torch.zeros_like(steps_N), steps_N)
        return list(obs_list)

    def _reset_loop(self, mask_N: torch.Tensor) -> list[torch.Tensor]:
        with self._own_rng():
            for index in mask_N.nonzero().flatten().tolist():
                self._env.reset_at(index, return_observations=False)
            obs_list = self._env.get_from_scenario(
                get_observations=True, get_rewards=False, get_infos=False, get_dones=False
            )[0]
        return list(obs_list)

    def _start_clocks(self) -> None:
        if self._desync:
            assert self._max_episode_steps is not None
            start_N = torch.randint(
                0, self._max_episode_steps, (self._num_envs,), generator=self._clock_rng, device="cpu"
            )
            self._env.steps = start_N.to(device=self._device, dtype=self._env.steps.dtype)

    @contextlib.contextmanager
    def _own_rng(self) -> Iterator[None]:
        """Swap this instance's RNG state into VMAS's shared slots for the duration of a VMAS call."""
        shared = list(self._rng_slots)
        self._rng_slots[:] = self._rng_state
        try:
            yield
        finally:
            self._rng_state = list(self._rng_slots)
            self._rng_slots[:] = shared

    def _split(self, actions: torch.Tensor) -> list[torch.Tensor]:
        rows = self.num_envs
        shape = (rows, *self._act_space.shape) if self._act_space.shape else (rows,)
        if tuple(actions.shape) != shape:
            raise PolicyOutputError(
                f"VmasEnv({self._scenario_name!r}).step: actions of shape {tuple(actions.shape)}, "
                f"expected {shape}."
            )
        if self._columns and self._order is not None:  # groups: cut to each agent's width, VMAS's order
            per_agent = actions.reshape(len(self._agent_names), self._num_envs, -1).unbind(0)
            ordered: list[torch.Tensor] = [per_agent[0]] * len(per_agent)
            for column_agent, (vmas_agent, width) in enumerate(zip(self._order, self._widths, strict=True)):
                own = per_agent[column_agent]
                ordered[vmas_agent] = own if width is None else own[:, :width]
            return ordered
        if self._columns:  # agent-major rows: agent a's actions are rows a * E .. (a + 1) * E - 1
            return list(actions.reshape(len(self._agent_names), self._num_envs, -1).unbind(0))
        if actions.dim() == 1:  # one agent, Discrete
            return [actions.view(-1, 1)]
        return list(torch.split(actions, self._act_sizes, dim=1))

    def _scalar_infos(self, infos: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for name, agent_info in zip(self._agent_names, infos, strict=True):
            for key, value in agent_info.items():
                if isinstance(value, torch.Tensor) and value.numel() == self._num_envs:
                    out[f"{name}/{key}"] = value.reshape(self._num_envs)
        return out

    def _column_infos(self, infos: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """The scalar infos that every agent reports, one entry per row (A * E,)."""
        per_agent = [
            {
                key: value.reshape(self._num_envs)
                for key, value in agent_info.items()
                if isinstance(value, torch.Tensor) and value.numel() == self._num_envs
            }
            for agent_info in infos
        ]
        if not per_agent:
            return {}
        shared = [key for key in per_agent[0] if all(key in values for values in per_agent[1:])]
        return {key: torch.cat([values[key] for values in per_agent]) for key in shared}


class _Spaces(NamedTuple):
    """A group's VMAS spaces, shaped like VMAS's Tuple space (``.spaces``)."""

    spaces: list[Any]


def _column_spaces(
    scenario: str, names: Sequence[str], obs_spaces: Any, act_spaces: Any
) -> tuple[gym.spaces.Box, gym.Space[Any]]:
    """The observation and action space every agent has (columns); UnsupportedSpaceError naming the
    agents when they differ."""
    obs = [_gymnasium_space(space) for space in obs_spaces.spaces]
    act = [_gymnasium_space(space) for space in act_spaces.spaces]
    for what, spaces, vmas_spaces in (("observation", obs, obs_spaces), ("action", act, act_spaces)):
        if any(space is None for space in spaces):
            raise UnsupportedSpaceError(
                f"VmasEnv({scenario!r}, agent_layout='columns'): an agent's {what} space is "
                f"{next(v for s, v in zip(spaces, vmas_spaces.spaces, strict=True) if s is None)}; the "
                "columns layout takes Box and Discrete spaces."
            )
        if any(space != spaces[0] for space in spaces[1:]):
            listed = ", ".join(f"{name}: {space}" for name, space in zip(names, spaces, strict=True))
            raise UnsupportedSpaceError(
                f"VmasEnv({scenario!r}, agent_layout='columns'): the agents' {what} spaces differ "
                f"({listed}); the columns layout needs one space shared by all agents: put agents with "
                "different spaces in groups (groups='auto' or {group: [agents]}), or use the joint view."
            )
    obs_space, act_space = obs[0], act[0]
    assert obs_space is not None and act_space is not None
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise UnsupportedSpaceError(
            f"VmasEnv({scenario!r}): the agents' observation space is {obs_space}; the columns layout takes "
            "flat Box observations only."
        )
    return obs_space, act_space


def _gymnasium_space(space: Any) -> gym.Space[Any] | None:
    """One agent's VMAS space (old ``gym`` classes) as a Gymnasium space: Box (float32) or Discrete."""
    kind = type(space).__name__
    if kind == "Box":
        low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
        return gym.spaces.Box(low, high, dtype=np.float32)
    if kind == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    return None


def _joint_observation_space(scenario: str, tuple_space: Any) -> tuple[gym.spaces.Box, list[int]]:
    sizes: list[int] = []
    for agent_space in tuple_space.spaces:
        if type(agent_space).__name__ != "Box" or len(agent_space.shape) != 1:
            raise UnsupportedSpaceError(
                f"VmasEnv({scenario!r}): an agent's observation space is {agent_space}; the joint view "
                "concatenates flat Box observations only."
            )
        sizes.append(int(agent_space.shape[0]))
    return gym.spaces.Box(-np.inf, np.inf, (sum(sizes),), np.float32), sizes


def _joint_action_space(tuple_space: Any) -> tuple[gym.Space[Any], list[int]]:
    """VMAS's per-agent action spaces (old ``gym`` classes) as one Gymnasium space, and the per-agent
    action widths."""
    agent_spaces = list(tuple_space.spaces)
    if all(type(space).__name__ == "Box" for space in agent_spaces):
        low = np.concatenate([np.asarray(space.low, np.float32) for space in agent_spaces])
        high = np.concatenate([np.asarray(space.high, np.float32) for space in agent_spaces])
        return gym.spaces.Box(low, high, dtype=np.float32), [int(space.shape[0]) for space in agent_spaces]
    nvec = [int(space.n) for space in agent_spaces]  # Discrete per agent (VMAS's default discrete mode)
    if len(nvec) == 1:
        return gym.spaces.Discrete(nvec[0]), [1]
    return gym.spaces.MultiDiscrete(nvec), [1] * len(nvec)
