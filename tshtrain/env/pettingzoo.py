"""PettingZoo environments as :class:`~tshtrain.env.multi_agent.MultiAgentVectorEnv` s (numpy).

* :class:`PettingZooParallelVectorEnv` steps ``E`` ``pettingzoo.ParallelEnv`` s: every live agent acts
  in every step (MPE particle worlds such as ``mpe2.simple_spread_v3``).
* :class:`PettingZooAECVectorEnv` steps ``E`` turn-based ``pettingzoo.AECEnv`` s: in each env exactly
  one agent acts per step (``agent_selection``), e.g. ``pettingzoo.classic.tictactoe_v3``.

Both lay agent ``a`` of env ``e`` out as column ``a * E + e``
(:class:`~tshtrain.env.multi_agent.AgentColumns`). A column's observation is the agent's observation
array, or, when the env has action masks (a Dict observation of ``observation`` and ``action_mask``),
appends agent ids (``agent_id=True``) or a global state (``global_state=True``: ``env.state()``), a
flat Dict with the keys ``obs``, ``action_mask`` (int8), ``state`` and ``agent_id`` (float32 one-hot).
All agents share one observation space and one action space, or, with ``groups``, the agents of each
group do (:mod:`tshtrain.env.groups`: one observation key per group, actions padded to the widest).
Observations are written in place into arrays of ``C = A * E`` rows.

Episodes: an agent whose episode ends (terminated, truncated, or gone from ``env.agents`` without a
flag, which counts as truncated) gets its terminal flag and its final observation in the step where it
ended, and its column rests (does not act, reward 0) until its env's episode ends: when ``env.agents``
is empty or every remaining agent has ended. The env then resets in the same call (``env_done_E``).
Only the first / an explicit :meth:`reset` seeds (env ``i`` with ``seed + i``); autoresets pass
``seed=None`` so that each env continues its own random stream.

:func:`make_pettingzoo_vector_env` builds either adapter from an allow-listed module name such as
``"pettingzoo.classic.tictactoe_v3"`` or ``"mpe2.simple_spread_v3"`` (:func:`pettingzoo_env_fns`):
only modules inside the packages of :data:`ALLOWED_PACKAGES` are imported.
"""

from __future__ import annotations

import importlib
import io
import pickle
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, final

import gymnasium as gym
import numpy as np
from gymnasium.utils import EzPickle
from typing_extensions import override

from tshtrain.env.groups import (
    AgentGroup,
    GroupView,
    group_obs_key,
    group_observation_space,
    resolve_groups,
    storage_action_space,
)
from tshtrain.env.multi_agent import (
    ACTION_MASK_KEY,
    AGENT_ID_KEY,
    OBS_KEY,
    STATE_KEY,
    AgentColumns,
    AgentStep,
    MultiAgentVectorEnv,
    ObsArray,
)
from tshtrain.env.spaces import array_spec
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError, require_positive, short_repr

ALLOWED_PACKAGES: tuple[str, ...] = ("pettingzoo", "mpe2")
"""the packages whose modules :func:`pettingzoo_env_fns` may import (an env id names a module inside
one of them; nothing else is ever imported)"""

_ENV_ID = re.compile(r"^(?:pettingzoo|mpe2)(?:\.[A-Za-z][A-Za-z0-9_]*)+$")
"""an env id: a dotted module path inside an allowed package (no private or dunder modules)"""
_PZ_OBS, _PZ_MASK = "observation", "action_mask"


@final
class _Rows:
    """A batch of ``C`` column observations: the agent observations (one array, or one per group) and
    the optional extra keys."""

    __slots__ = ("agent_id", "agents", "mask", "obs", "state", "view")

    def __init__(
        self,
        obs: dict[str, np.ndarray],
        mask: np.ndarray | None,
        state: np.ndarray | None,
        agent_id: np.ndarray | None,
        agents: tuple[str, ...],
    ):
        self.obs, self.mask, self.state, self.agent_id = obs, mask, state, agent_id
        self.agents = agents
        """the column agents, in order (what a snapshot's rows must match)"""
        keyed = {**obs, ACTION_MASK_KEY: mask, STATE_KEY: state, AGENT_ID_KEY: agent_id}
        arrays = {key: array for key, array in sorted(keyed.items()) if array is not None}
        self.view: ObsArray = arrays if len(arrays) > 1 or OBS_KEY not in arrays else arrays[OBS_KEY]

    def __setstate__(self, state: Any) -> None:
        """Unpickle; rows pickled before agent groups (one ``obs`` array, no ``agents``) are read as
        ``{"obs": array}`` with unknown agents."""
        slots = state[1] if isinstance(state, tuple) else state
        for key, value in slots.items():
            object.__setattr__(self, key, value)
        if isinstance(self.obs, np.ndarray):
            self.obs = {OBS_KEY: self.obs}
        if not hasattr(self, "agents"):
            self.agents = None  # type: ignore[assignment]


@final
class _ColumnLayout:
    """How the agents' observations of ``E`` envs become the rows of the column observations."""

    def __init__(
        self,
        envs: Sequence[Any],
        *,
        agent_id: bool,
        global_state: bool,
        groups: Mapping[str, Sequence[str]] | str | None = None,
    ):
        first = envs[0]
        agents = tuple(first.possible_agents)
        if not agents:
            raise ConfigurationError(
                f"env {first} has no possible_agents; a multi-agent env needs at least one."
            )
        for i, env in enumerate(envs[1:], start=1):
            if tuple(env.possible_agents) != agents:
                raise ConfigurationError(
                    f"env {i} has the agents {list(env.possible_agents)}, env 0 has {list(agents)}; "
                    "all envs of a vector env must have the same possible_agents."
                )
        grouping = resolve_groups(agents, groups, f"groups of {first}")
        if grouping is not None:
            agents = tuple(agent for members in grouping.values() for agent in members)  # group-major
        self.columns = AgentColumns(agents=agents, num_envs=len(envs))
        self.agent_index = {name: i for i, name in enumerate(agents)}
        self.state_space = _state_space(first) if global_state else None
        num_columns, num_agents = self.columns.num_columns, len(agents)
        self._agent_id_C: np.ndarray | None = None
        if agent_id:
            self._agent_id_C = np.repeat(np.eye(num_agents, dtype=np.float32), len(envs), axis=0)
            # shared by every batch of rows (read-only by convention: a non-writable array makes torch warn)
        self.groups: dict[str, AgentGroup] | None = None
        self.views: dict[str, GroupView] = {}
        if grouping is None:
            obs_space, self.action_space = _shared_spaces(first, agents)
            self.masked = isinstance(obs_space, gym.spaces.Dict)
            inner = obs_space[_PZ_OBS] if isinstance(obs_space, gym.spaces.Dict) else obs_space
            obs_spaces = {OBS_KEY: inner}
            self._key_of_agent = [OBS_KEY] * num_agents
            self._width_of_agent: list[int] | None = None
        else:
            obs_spaces, self.action_space = self._group_spaces(first, grouping, agent_id)
            self.masked = False
        self._obs_specs = {
            key: array_spec(space, role=f"observation space of the agents of {first}")
            for key, space in obs_spaces.items()
        }
        keys: dict[str, gym.Space[Any]] = dict(obs_spaces)
        if self.masked:
            assert isinstance(obs_space, gym.spaces.Dict)
            keys[ACTION_MASK_KEY] = _mask_space(obs_space, self.action_space)
        if self.state_space is not None:
            keys[STATE_KEY] = self.state_space
        if agent_id:
            keys[AGENT_ID_KEY] = gym.spaces.Box(0.0, 1.0, (num_agents,), np.float32)
        self.space: gym.Space[Any] = (
            gym.spaces.Dict(keys) if len(keys) > 1 or OBS_KEY not in keys else keys[OBS_KEY]
        )
        self.discrete_actions = isinstance(self.action_space, gym.spaces.Discrete)
        self._num_columns = num_columns

    def _group_spaces(
        self, env: Any, grouping: Mapping[str, tuple[str, ...]], agent_id: bool
    ) -> tuple[dict[str, gym.Space[Any]], gym.Space[Any]]:
        """The stored observation keys and action space of a grouped env; fills :attr:`groups`,
        :attr:`views` and the per-agent keys and action widths."""
        obs_spaces: dict[str, gym.Space[Any]] = {}
        actions: dict[str, gym.Space[Any]] = {}
        groups: dict[str, AgentGroup] = {}
        for name, members in grouping.items():
            own, action = _shared_spaces(env, members, group=name)
            if isinstance(own, gym.spaces.Dict):
                raise UnsupportedSpaceError(
                    f"group {name!r} of {env}: action masks (Dict observations) are not supported with "
                    f"groups; its agents observe {own}."
                )
            obs_spaces[group_obs_key(name)] = own
            actions[name] = action
            view_space = group_observation_space(
                own, state=self.state_space, num_group_agents=len(members), agent_id=agent_id
            )
            groups[name] = AgentGroup(name, members, self.agent_index[members[0]], view_space, action)
        stored = storage_action_space(actions, f"groups of {env}")
        width = int(stored.shape[0]) if isinstance(stored, gym.spaces.Box) else None
        self.groups = groups
        self.views = {name: GroupView(group, stored_action_width=width) for name, group in groups.items()}
        group_of_agent = {agent: name for name, members in grouping.items() for agent in members}
        self._key_of_agent = [group_obs_key(group_of_agent[agent]) for agent in self.columns.agents]
        self._width_of_agent = (
            None
            if width is None
            else [int(actions[group_of_agent[agent]].shape[0]) for agent in self.columns.agents]  # type: ignore[index]
        )
        return obs_spaces, stored

    def allocate(self) -> _Rows:
        """Zeroed rows for all ``C`` columns."""
        c = self._num_columns
        mask = np.zeros((c, self.mask_size), np.int8) if self.masked else None
        state = None
        if self.state_space is not None:
            assert self.state_space.shape is not None
            state = np.zeros((c, *self.state_space.shape), self.state_space.dtype)
        obs = {key: np.zeros((c, *spec.shape), spec.dtype) for key, spec in self._obs_specs.items()}
        return _Rows(obs, mask, state, self._agent_id_C, self.columns.agents)

    @property
    def mask_size(self) -> int:
        assert isinstance(self.action_space, gym.spaces.Discrete)
        return int(self.action_space.n)

    def write(self, rows: _Rows, col: int, agent_obs: Any) -> None:
        """Write one agent observation (as the PettingZoo env returns it) into row ``col``."""
        target = rows.obs[self._key_of_agent[col // self.columns.num_envs]]
        if self.masked:
            mask = rows.mask
            assert mask is not None
            target[col] = agent_obs[_PZ_OBS]
            mask[col] = agent_obs[_PZ_MASK]
        else:
            target[col] = agent_obs

    def copy_row(self, target: _Rows, source: _Rows, col: int) -> None:
        """Copy row ``col`` of every key from ``source`` into ``target``."""
        key = self._key_of_agent[col // self.columns.num_envs]
        target.obs[key][col] = source.obs[key][col]
        for dst, src in ((target.mask, source.mask), (target.state, source.state)):
            if dst is not None and src is not None:
                dst[col] = src[col]

    def actions(self, act: np.ndarray, cols: Sequence[int]) -> Sequence[Any]:
        """Actions as the envs take them: Python ints for Discrete spaces, array rows otherwise (a
        grouped env's Box rows cut to each agent's group width)."""
        if self.discrete_actions:
            values: list[Any] = np.asarray(act).reshape(-1).tolist()
            return values
        rows = list(np.asarray(act))
        widths = self._width_of_agent
        if widths is None:
            return rows
        num_envs = self.columns.num_envs
        return [row[: widths[col // num_envs]] for row, col in zip(rows, cols, strict=True)]


def _shared_spaces(
    env: Any, agents: tuple[str, ...], *, group: str | None = None
) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """The observation and action space every agent shares (UnsupportedSpaceError naming them if not)."""
    result: list[gym.Space[Any]] = []
    for kind in ("observation", "action"):
        spaces = {agent: getattr(env, f"{kind}_space")(agent) for agent in agents}
        first = spaces[agents[0]]
        if any(space != first for space in spaces.values()):
            listed = "; ".join(f"{agent}: {space}" for agent, space in spaces.items())
            if group is not None:
                raise UnsupportedSpaceError(
                    f"the agents of group {group!r} of {env} have different {kind} spaces ({listed}); the "
                    f"agents of a group share one {kind} space: put them in different groups."
                )
            raise UnsupportedSpaceError(
                f"the agents of {env} have different {kind} spaces ({listed}); put agents with different "
                f"spaces in different groups (groups='auto' or {{group: [agents]}}) or pad them to one."
            )
        result.append(first)
    obs_space = result[0]
    if isinstance(obs_space, gym.spaces.Dict) and set(obs_space.spaces) != {_PZ_OBS, _PZ_MASK}:
        raise UnsupportedSpaceError(
            f"the agents of {env} observe a Dict with the keys {sorted(obs_space.spaces)}; supported are "
            f"array observations and PettingZoo's Dict of {_PZ_OBS!r} and {_PZ_MASK!r}."
        )
    return result[0], result[1]


def _mask_space(obs_space: gym.spaces.Dict, action_space: gym.Space[Any]) -> gym.spaces.Box:
    mask = obs_space[_PZ_MASK]
    if not isinstance(action_space, gym.spaces.Discrete) or mask.shape != (int(action_space.n),):
        raise UnsupportedSpaceError(
            f"action masks of shape {mask.shape} need a Discrete action space of as many actions; "
            f"the action space is {action_space}."
        )
    return gym.spaces.Box(0, 1, (int(action_space.n),), np.int8)


def _state_space(env: Any) -> gym.spaces.Box:
    space = getattr(env, "state_space", None)
    if not isinstance(space, gym.spaces.Box):
        raise ConfigurationError(
            f"global_state=True needs an env with state() and a Box state_space; {env} has state_space "
            f"{short_repr(space)}. Pass global_state=False."
        )
    return space


def _build_envs(env_fns: Sequence[Callable[[], Any]], owner: str) -> list[Any]:
    require_positive(owner, "len(env_fns)", len(env_fns))
    return [env_fn() for env_fn in env_fns]


def _env_ids(env_ids: np.ndarray | None, num_envs: int) -> list[int]:
    if env_ids is None:
        return list(range(num_envs))
    ids = [int(i) for i in np.asarray(env_ids).reshape(-1)]
    if any(not 0 <= i < num_envs for i in ids):
        raise ConfigurationError(f"reset(env_ids={short_repr(ids)}): env ids must be in [0, {num_envs}).")
    return ids


def _check_columns(columns: np.ndarray, acting_C: np.ndarray, num_rows: int) -> list[int]:
    """The acting columns as a list; ConfigurationError unless ``columns`` are exactly those."""
    expected = np.flatnonzero(acting_C)
    if columns.shape != expected.shape or num_rows != len(expected) or not (columns == expected).all():
        raise ConfigurationError(
            f"step(act, columns): columns must be the acting ones {short_repr(expected.tolist())} with one "
            f"action row each; got columns {short_repr(np.asarray(columns).tolist())} and {num_rows} actions."
        )
    cols: list[int] = expected.tolist()
    return cols


@final
class _Dropped:
    """Stands in for a pickled pygame object (render surfaces, fonts: not picklable)."""


_DROPPED = _Dropped()


def _dropped() -> _Dropped:
    return _DROPPED


def _rebuild(cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Unpickling an EzPickle object: a fresh one from its constructor arguments ..."""
    return cls(*args, **kwargs)


def _restore_state(obj: Any, state: dict[str, Any]) -> None:
    """... with the pickled attributes put back, except the dropped pygame objects (the fresh object's
    own stay)."""
    obj.__dict__.update({key: value for key, value in state.items() if value is not _DROPPED})


class _StatePickler(pickle.Pickler):
    """Pickles EzPickle objects (PettingZoo / MPE envs; plain pickling keeps only their constructor
    arguments) as constructor arguments *and* attributes, so that an episode in progress survives;
    pygame objects (render surfaces, fonts) are dropped, the rebuilt env makes its own."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type):
            return NotImplemented
        if isinstance(obj, EzPickle) and hasattr(obj, "__dict__"):
            args = (type(obj), tuple(obj._ezpickle_args), dict(obj._ezpickle_kwargs))
            return (_rebuild, args, dict(obj.__dict__), None, None, _restore_state)
        if type(obj).__module__.startswith("pygame"):
            return (_dropped, ())
        return NotImplemented


def _dumps(value: Any) -> bytes | None:
    buffer = io.BytesIO()
    try:
        _StatePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except (pickle.PicklingError, TypeError, AttributeError):  # e.g. a render window
        return None
    return buffer.getvalue()


class _Episodes:
    """Per-column bookkeeping shared by both adapters: acting / ended flags and the step's outputs."""

    def __init__(self, layout: _ColumnLayout):
        c = layout.columns.num_columns
        self.acting_C = np.zeros(c, bool)
        self.ended_C = np.zeros(c, bool)
        self.rew_C = np.zeros(c, np.float32)
        self.terminated_C = np.zeros(c, bool)
        self.truncated_C = np.zeros(c, bool)
        self.env_done_E = np.zeros(layout.columns.num_envs, bool)
        self._layout = layout
        self._idle_final = layout.allocate()
        self.final: _Rows | None = None

    def begin(self) -> None:
        c = len(self.acting_C)
        self.rew_C = np.zeros(c, np.float32)
        self.terminated_C = np.zeros(c, bool)
        self.truncated_C = np.zeros(c, bool)
        self.env_done_E = np.zeros(len(self.env_done_E), bool)
        self.final = None

    def end(self, col: int, terminated: bool, truncated: bool) -> _Rows:
        """Mark column ``col`` ended in this step; returns the final-observation rows to write it to."""
        self.ended_C[col] = True
        self.acting_C[col] = False
        self.terminated_C[col] = terminated
        self.truncated_C[col] = truncated or not terminated
        if self.final is None:
            self.final = self._layout.allocate()
        return self.final

    def result(self) -> AgentStep:
        final = self._idle_final if self.final is None else self.final
        return AgentStep(self.rew_C, self.terminated_C, self.truncated_C, final.view, self.env_done_E)


class _PettingZooVectorEnv(MultiAgentVectorEnv):
    """What both adapters share: the envs, the column layout, the rows and the episode flags."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        *,
        owner: str,
        agent_id: bool,
        global_state: bool,
        groups: Mapping[str, Sequence[str]] | str | None,
    ):
        self._owner = owner
        self._envs = _build_envs(env_fns, owner)
        self._layout = _ColumnLayout(self._envs, agent_id=agent_id, global_state=global_state, groups=groups)
        self.columns = self._layout.columns
        self.groups = self._layout.groups
        self.group_views = self._layout.views
        self.single_observation_space = self._layout.space
        self.single_action_space = self._layout.action_space
        self._rows = self._layout.allocate()
        self._ep = _Episodes(self._layout)
        self._was_reset = False

    @property
    @override
    def obs(self) -> ObsArray:
        return self._rows.view

    @property
    @override
    def acting_C(self) -> np.ndarray:
        return self._ep.acting_C.copy()

    def _acting_columns(self, act: np.ndarray, columns: np.ndarray) -> list[int]:
        """The checked columns of a ``step`` call (after a reset, only columns that act)."""
        if not self._was_reset:
            raise RuntimeError(f"{self._owner}.step before reset(): call reset() first.")
        return _check_columns(np.asarray(columns), self._ep.acting_C, len(act))

    def _fits(self, rows: Any, acting_C: np.ndarray) -> bool:
        """A snapshot's rows and flags have this env's layout (the same observation keys and shapes: a
        snapshot of another grouping, or of an older layout, is not restored)."""
        if acting_C.shape != self._ep.acting_C.shape or not isinstance(rows, _Rows):
            return False
        if rows.agents is not None and rows.agents != self.agents:  # None: pickled before agent groups
            return False
        mine = self._rows.obs
        theirs = getattr(rows, "obs", None)
        return (
            isinstance(theirs, dict)
            and theirs.keys() == mine.keys()
            and all(getattr(theirs[key], "shape", None) == mine[key].shape for key in mine)
        )

    @override
    def close(self) -> None:
        for env in self._envs:
            env.close()


@final
class PettingZooParallelVectorEnv(_PettingZooVectorEnv):
    """``E`` PettingZoo ``ParallelEnv`` s as one multi-agent vector env (see the module docstring).

    Args:
        env_fns: one function per env that builds a ``pettingzoo.ParallelEnv``; all envs must have the
            same ``possible_agents`` (those of the first env are the columns' agents).
        agent_id: add each column's one-hot agent id (key ``agent_id``).
        global_state: add ``env.state()`` (key ``state``; ConfigurationError if the env has none).
        groups: agents with different spaces in groups (:mod:`tshtrain.env.groups`): ``"auto"`` (by
            name, ``adversary_0`` -> ``adversary``), ``{group: [agents]}``, or None (one space for all).

    Raises:
        UnsupportedSpaceError: if the agents (of a group) do not share one observation space and one
            action space.
    """

    turn_based = False

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        *,
        agent_id: bool = False,
        global_state: bool = False,
        groups: Mapping[str, Sequence[str]] | str | None = None,
    ):
        super().__init__(
            env_fns,
            owner="PettingZooParallelVectorEnv",
            agent_id=agent_id,
            global_state=global_state,
            groups=groups,
        )

    @override
    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        for e in _env_ids(env_ids, self.num_envs):
            obs, _ = self._envs[e].reset(seed=None if seed is None else seed + e)
            self._start_episode(e, obs)
        self._was_reset = True

    def _start_episode(self, e: int, obs: Mapping[str, Any]) -> None:
        env, num_envs, ep = self._envs[e], self.num_envs, self._ep
        ep.acting_C[e::num_envs] = False
        ep.ended_C[e::num_envs] = False
        for name in env.agents:
            col = self._layout.agent_index[name] * num_envs + e
            self._layout.write(self._rows, col, obs[name])
            ep.acting_C[col] = True
        if self._rows.state is not None:
            self._rows.state[e::num_envs] = env.state()

    @override
    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        cols = self._acting_columns(act, columns)
        num_envs, agents, ep = self.num_envs, self.agents, self._ep
        actions_E: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        for col, action in zip(cols, self._layout.actions(act, cols), strict=True):
            actions_E[col % num_envs][agents[col // num_envs]] = action
        ep.begin()
        for e, actions in enumerate(actions_E):
            if actions:
                self._step_env(e, actions)
        return ep.result()

    def _step_env(self, e: int, actions: dict[str, Any]) -> None:
        env, num_envs, ep, layout, rows = self._envs[e], self.num_envs, self._ep, self._layout, self._rows
        obs, rew, terminated, truncated, _ = env.step(actions)
        live = set(env.agents)
        state = None if rows.state is None else env.state()
        survivors = 0
        for name in actions:
            col = layout.agent_index[name] * num_envs + e
            ep.rew_C[col] = rew.get(name, 0.0)
            term, trunc = bool(terminated.get(name, False)), bool(truncated.get(name, False))
            if term or trunc or name not in live:
                final = ep.end(col, term, trunc)
                if name in obs:
                    layout.write(final, col, obs[name])
                else:  # gone without an observation: its last one
                    layout.copy_row(final, rows, col)
                if final.state is not None:
                    final.state[col] = state
            else:
                layout.write(rows, col, obs[name])
                survivors += 1
        if len(live) > survivors:  # agents that did not act: they joined, or ended but stay listed
            survivors += self._admit(e, live.difference(actions), obs)
        if state is not None:
            assert rows.state is not None
            rows.state[e::num_envs] = state
        if survivors == 0:
            ep.env_done_E[e] = True
            obs, _ = env.reset(seed=None)
            self._start_episode(e, obs)

    def _admit(self, e: int, names: set[str], obs: Mapping[str, Any]) -> int:
        """Columns of agents that appeared in ``env.agents`` without acting start acting; returns how many."""
        admitted = 0
        for name in names:
            col = self._layout.agent_index[name] * self.num_envs + e
            if self._ep.ended_C[col]:
                continue  # the env still lists an agent whose episode ended: it rests
            self._layout.write(self._rows, col, obs[name])
            self._ep.acting_C[col] = True
            admitted += 1
        return admitted

    @override
    def state_snapshot(self) -> bytes | None:
        return _dumps((self._envs, self._rows, self._ep.acting_C, self._ep.ended_C, self._was_reset))

    @override
    def restore_snapshot(self, data: bytes) -> bool:
        envs, rows, acting_C, ended_C, was_reset = pickle.loads(data)
        if len(envs) != self.num_envs or not self._fits(rows, acting_C):
            return False
        self._envs, self._rows, self._was_reset = envs, rows, was_reset
        self._ep.acting_C[:], self._ep.ended_C[:] = acting_C, ended_C
        return True


@final
class PettingZooAECVectorEnv(_PettingZooVectorEnv):
    """``E`` turn-based PettingZoo ``AECEnv`` s as one multi-agent vector env (see the module docstring).

    In each env exactly the column of ``agent_selection`` acts. Steps of agents that have ended
    (PettingZoo's "dead steps", ``env.step(None)``) are taken by the adapter. The rewards of all agents
    after each ``env.step`` (``env.rewards``: the latest step's) are summed into ``rew_C``; every agent
    whose episode ends in a call, not only the acting one, gets its terminal flag and its final
    observation (``env.observe(agent)`` at that moment) in that call. So when one player wins at
    tic-tac-toe, both players' columns end in the same vector step, with +1 and -1.

    Args:
        env_fns: one function per env that builds a ``pettingzoo.AECEnv``; all envs must have the same
            ``possible_agents``.
        agent_id: add each column's one-hot agent id (key ``agent_id``).
        global_state: add ``env.state()`` (key ``state``; ConfigurationError if the env has none).
        groups: agents with different spaces in groups (:mod:`tshtrain.env.groups`): ``"auto"`` (by
            name, ``adversary_0`` -> ``adversary``), ``{group: [agents]}``, or None (one space for all).

    Raises:
        UnsupportedSpaceError: if the agents (of a group) do not share one observation space and one
            action space.
    """

    turn_based = True

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        *,
        agent_id: bool = False,
        global_state: bool = False,
        groups: Mapping[str, Sequence[str]] | str | None = None,
    ):
        super().__init__(
            env_fns,
            owner="PettingZooAECVectorEnv",
            agent_id=agent_id,
            global_state=global_state,
            groups=groups,
        )
        self._src_E = [_attribute_source(env) for env in self._envs]
        self._live_E: list[list[str]] = [[] for _ in range(self.num_envs)]
        """per env: the agents whose episode has not ended (in column order)"""
        self._col_of_E = [
            {name: self.columns.column(a, e) for a, name in enumerate(self.agents)}
            for e in range(self.num_envs)
        ]
        """per env: agent name -> column"""
        self._write = self._layout.write

    @override
    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        self._ep.begin()  # dead steps at the start of an episode write into throw-away outputs
        for e in _env_ids(env_ids, self.num_envs):
            self._envs[e].reset(seed=None if seed is None else seed + e)
            self._start_episode(e)
        self._was_reset = True

    def _start_episode(self, e: int) -> None:
        env, num_envs, ep = self._envs[e], self.num_envs, self._ep
        ep.acting_C[e::num_envs] = False
        ep.ended_C[e::num_envs] = False
        index = self._layout.agent_index
        self._live_E[e] = sorted(env.agents, key=index.__getitem__)
        self._settle(e)

    @override
    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        cols = self._acting_columns(act, columns)
        num_envs, ep = self.num_envs, self._ep
        ep.begin()
        envs, acting_C = self._envs, ep.acting_C
        for col, action in zip(cols, self._layout.actions(act, cols), strict=True):
            e = col % num_envs
            acting_C[col] = False
            envs[e].step(action)
            self._account(e)
            self._settle(e)
        return ep.result()

    def _settle(self, e: int) -> None:
        """Take the env's dead steps, reset it when its episode is over, and let its next agent act."""
        env, src = self._envs[e], self._src_E[e]
        while True:
            if src.agents:
                name = src.agent_selection
                if src.terminations[name] or src.truncations[name]:
                    env.step(None)
                    self._account(e)
                    continue
                if self._live_E[e]:
                    break
            self._ep.env_done_E[e] = True
            env.reset(seed=None)
            self._start_episode(e)  # recursion depth 1: a fresh episode has live agents
            return
        col = self._col_of_E[e][name]
        if name not in self._live_E[e]:
            if self._ep.ended_C[col]:
                raise RuntimeError(f"{env}: agent {name!r} acts again after its episode ended.")
            self._live_E[e].append(name)  # joined during the episode
        self._write(self._rows, col, env.observe(name))
        if self._rows.state is not None:
            self._rows.state[col] = env.state()
        self._ep.acting_C[col] = True

    def _account(self, e: int) -> None:
        """After one ``env.step``: add its rewards, and end the columns of agents whose episode ended."""
        src, col_of, ep = self._src_E[e], self._col_of_E[e], self._ep
        for name, reward in src.rewards.items():
            if reward and not ep.ended_C[col_of[name]]:  # (an agent that ended rests)
                ep.rew_C[col_of[name]] += reward
        terminations, truncations, present = src.terminations, src.truncations, src.agents
        live = self._live_E[e]
        for name in [n for n in live if terminations.get(n) or truncations.get(n) or n not in present]:
            live.remove(name)
            col = col_of[name]
            final = ep.end(col, bool(terminations.get(name, False)), bool(truncations.get(name, False)))
            if name in present:  # (src: PettingZoo's own wrappers do not change observations)
                self._write(final, col, src.observe(name))
            else:  # gone without a flag: the observation of its last turn
                self._layout.copy_row(final, self._rows, col)
            if final.state is not None:
                final.state[col] = self._envs[e].state()

    @override
    def state_snapshot(self) -> bytes | None:
        return _dumps(
            (self._envs, self._rows, self._ep.acting_C, self._ep.ended_C, self._live_E, self._was_reset)
        )

    @override
    def restore_snapshot(self, data: bytes) -> bool:
        envs, rows, acting_C, ended_C, live_E, was_reset = pickle.loads(data)
        if len(envs) != self.num_envs or not self._fits(rows, acting_C):
            return False
        self._envs, self._rows, self._live_E, self._was_reset = envs, rows, live_E, was_reset
        self._src_E = [_attribute_source(env) for env in envs]
        self._ep.acting_C[:], self._ep.ended_C[:] = acting_C, ended_C
        return True


_FORWARDED = frozenset({"agents", "agent_selection", "rewards", "terminations", "truncations"})


def _attribute_source(env: Any) -> Any:
    """The object whose ``agents``, ``agent_selection``, ``rewards``, ``terminations`` and
    ``truncations`` an AEC env's reads of them return: the env, or the env inside PettingZoo's own
    wrappers (OrderEnforcing, TerminateIllegal, AssertOutOfBounds, ...), which forward those reads
    through ``__getattr__`` (about 1 us per read and wrapper layer, a third of a tic-tac-toe move) and
    never keep copies or change observations. Other wrappers are not looked through. ``step`` and the
    acting agent's ``observe`` go through all wrappers (TerminateIllegal checks a move against the mask
    it observed); final observations are read from the source (half the cost of a wrapped observe)."""
    source = env
    while (
        type(source).__module__.startswith("pettingzoo.utils.wrappers.")
        and "env" in vars(source)
        and not _FORWARDED & set(vars(source))
        and not any(_FORWARDED & set(vars(cls)) for cls in type(source).__mro__)
    ):
        source = source.env
    return source


def _default_parallel(env_id: str) -> bool:
    """AEC for the turn-based games of ``pettingzoo.classic``, parallel otherwise."""
    return not env_id.startswith("pettingzoo.classic.")


def pettingzoo_env_fns(
    env_id: str, num_envs: int, kwargs: Mapping[str, Any] | None = None, *, parallel: bool | None = None
) -> list[Callable[[], Any]]:
    """``num_envs`` functions that build the PettingZoo env ``env_id`` with ``kwargs``.

    Args:
        env_id: the module of the env, inside one of :data:`ALLOWED_PACKAGES`, e.g.
            ``"pettingzoo.classic.tictactoe_v3"`` or ``"mpe2.simple_spread_v3"``. Only that module is
            imported, and only its ``parallel_env`` or ``env`` function is called.
        num_envs: how many functions.
        kwargs: keyword arguments of the env function (e.g. ``{"max_cycles": 50}``).
        parallel: True: the module's ``parallel_env`` (a ``ParallelEnv``); False: its ``env`` (an
            ``AECEnv``); None: ``env`` for ``pettingzoo.classic.*`` (turn-based games), else
            ``parallel_env``.

    Raises:
        ConfigurationError: for an id outside the allowed packages, a module that cannot be imported
            or one without the env function.
    """
    require_positive("pettingzoo_env_fns", "num_envs", num_envs)
    if not isinstance(env_id, str) or not _ENV_ID.match(env_id):
        raise ConfigurationError(
            f"env id {short_repr(env_id)} is not allowed: give a module inside the packages "
            f"{list(ALLOWED_PACKAGES)}, such as 'pettingzoo.classic.tictactoe_v3' or 'mpe2.simple_spread_v3'."
        )
    if parallel is None:
        parallel = _default_parallel(env_id)
    function_name = "parallel_env" if parallel else "env"
    try:
        with warnings.catch_warnings():
            # PettingZoo >= 1.26 warns on importing an env module ("old environment creation API"); the
            # module is what the id names, so the warning would only tell the user to change the id
            warnings.filterwarnings("ignore", "The old environment creation API", DeprecationWarning)
            module = importlib.import_module(env_id)
    except ImportError as error:
        raise ConfigurationError(
            f"cannot import the env module {env_id!r} ({error}); is it spelt right, and are the optional "
            "dependencies installed (pip install 'tshtrain[pettingzoo]')?"
        ) from error
    make = getattr(module, function_name, None)
    if not callable(make):
        raise ConfigurationError(
            f"env module {env_id!r} has no function {function_name}() (parallel={parallel})."
        )
    env_kwargs = dict(kwargs or {})
    return [lambda: make(**env_kwargs) for _ in range(num_envs)]


def make_pettingzoo_vector_env(
    env_id: str,
    num_envs: int,
    *,
    kwargs: Mapping[str, Any] | None = None,
    kind: Literal["parallel", "aec"] | None = None,
    agent_id: bool = False,
    global_state: bool = False,
    groups: Mapping[str, Sequence[str]] | str | None = None,
) -> PettingZooParallelVectorEnv | PettingZooAECVectorEnv:
    """``num_envs`` copies of the PettingZoo env ``env_id`` as a multi-agent vector env.

    Args:
        env_id: the env's module (:func:`pettingzoo_env_fns`).
        num_envs: E.
        kwargs: keyword arguments of the env function.
        kind: ``"parallel"``: :class:`PettingZooParallelVectorEnv` of the module's ``parallel_env()``;
            ``"aec"``: :class:`PettingZooAECVectorEnv` of its ``env()``; None: ``"aec"`` for
            ``pettingzoo.classic.*``, else ``"parallel"``.
        agent_id: add the one-hot agent ids to the observations.
        global_state: add ``env.state()`` to the observations.
        groups: agents with different observation or action spaces in groups (:mod:`tshtrain.env.groups`):
            ``"auto"`` groups them by name (``adversary_0`` -> ``adversary``), or ``{group: [agents]}``.
    """
    if kind not in ("parallel", "aec", None):
        raise ConfigurationError(f"kind must be 'parallel', 'aec' or None, got {short_repr(kind)}.")
    parallel = _default_parallel(env_id) if kind is None else kind == "parallel"
    env_fns = pettingzoo_env_fns(env_id, num_envs, kwargs, parallel=parallel)
    if parallel:
        return PettingZooParallelVectorEnv(
            env_fns, agent_id=agent_id, global_state=global_state, groups=groups
        )
    return PettingZooAECVectorEnv(env_fns, agent_id=agent_id, global_state=global_state, groups=groups)
