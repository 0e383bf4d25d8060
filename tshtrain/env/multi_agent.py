"""Several agents in one environment: the column model and the protocol of multi-agent vector envs.

tshtrain lays the agents of ``E`` environments out as **columns**, agent-major: agent ``a`` of env
``e`` is column ``a * E + e`` (:class:`AgentColumns`). Every column is, to the buffer and the
algorithms, one single-agent stream of transitions, so

* a replay buffer with ``A * E`` sub-buffers stores every agent's transitions (one column each), and
  the transitions of agent ``a`` are the contiguous columns ``a * E .. (a + 1) * E - 1``;
* a learner that owns a contiguous range of agents owns a contiguous range of columns (independent
  learners: one agent each; parameter sharing: all of them; skrl's agent scopes over a single-agent
  vector env are the same slices with ``A = 1``).

A column's transition runs from the agent's observation when it acts to its observation when it acts
next (or its episode ends); its reward is everything the agent received in between. In a parallel env
(every live agent acts in every step) that is one env step; in a turn-based (AEC) game it spans the
other players' moves. An agent can leave before the others (its last transition is terminal, and its
column rests until the env's episode ends); the env's episode ends when every agent's has ended, and
the env then resets in the same step (same-step autoreset).

:class:`MultiAgentVectorEnv` is the numpy protocol; :class:`tshtrain.data.MultiAgentCollector` runs it.
PettingZoo's parallel and AEC envs are adapted in :mod:`tshtrain.env.pettingzoo`. (VMAS scenarios,
where every agent acts every step and all end together, are plain
:class:`~tshtrain.env.TensorVectorEnv` s of ``A * E`` columns: :mod:`tshtrain.env.vmas`.)

Observations of one column (the env's ``single_observation_space``): the agent's observation, or a
flat Dict with the keys of :data:`OBS_KEY`, :data:`ACTION_MASK_KEY`, :data:`STATE_KEY` and
:data:`AGENT_ID_KEY` when the env has action masks, a global state or appends agent ids. All agents
share one observation space and one action space.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

import gymnasium as gym
import numpy as np

from tshtrain.env.groups import AgentGroup, GroupView
from tshtrain.env.keys import ACTION_MASK_KEY, AGENT_ID_KEY, OBS_KEY, STATE_KEY
from tshtrain.env.spaces import sample_actions, sample_legal_actions

ObsArray: TypeAlias = np.ndarray | Mapping[str, np.ndarray]
"""A batch of observations: one array, or one per key of a Dict space (as
:data:`tshtrain.data.batch.ObsArray`)."""


@dataclass(frozen=True)
class AgentColumns:
    """The column layout of ``num_agents`` agents in ``num_envs`` envs (see the module docstring)."""

    agents: tuple[str, ...]
    """the agents' names, in column-block order"""
    num_envs: int
    """E"""

    @property
    def num_agents(self) -> int:
        """A"""
        return len(self.agents)

    @property
    def num_columns(self) -> int:
        """A * E"""
        return len(self.agents) * self.num_envs

    def column(self, agent: int, env: int) -> int:
        """The column of agent ``agent`` (its index) in env ``env``."""
        return agent * self.num_envs + env

    def agent_slice(self, first: int, stop: int | None = None) -> slice:
        """The columns of agents ``first .. stop - 1`` (``stop`` None: agent ``first`` alone)."""
        stop = first + 1 if stop is None else stop
        return slice(first * self.num_envs, stop * self.num_envs)

    def agent_index(self, name: str) -> int:
        """The index of the agent called ``name`` (KeyError naming the agents if there is none)."""
        try:
            return self.agents.index(name)
        except ValueError:
            raise KeyError(f"no agent {name!r}; the env's agents are {list(self.agents)}") from None


class AgentStep(NamedTuple):
    """What :meth:`MultiAgentVectorEnv.step` returns; arrays over the ``C = A * E`` columns."""

    rew_C: np.ndarray
    """float32: the reward each agent received in this step (0 for agents that received none)"""
    terminated_C: np.ndarray
    """bool: the agent's episode ended in this step at a terminal state"""
    truncated_C: np.ndarray
    """bool: the agent's episode was cut in this step (time limit, or the env ended without it)"""
    final_obs: ObsArray
    """C rows: the last observation of the columns whose episode ended in this step (rows of other
    columns are unspecified)"""
    env_done_E: np.ndarray
    """bool, shape (E,): the env's episode ended in this step; it was reset (its columns' observations
    are the first of the next episode)"""


class MultiAgentVectorEnv(ABC):
    """``num_envs`` copies of a multi-agent environment stepped together, with columns as in
    :class:`AgentColumns` (see the module docstring). Numpy in, numpy out."""

    columns: AgentColumns
    """the column layout"""
    single_observation_space: gym.Space[Any]
    """the observation space of one column (every agent's)"""
    single_action_space: gym.Space[Any]
    """the action space of one column (every agent's)"""
    turn_based: bool
    """at most one agent per env acts in a step (AEC games)"""
    groups: dict[str, AgentGroup] | None = None
    """the agent groups of an env whose agents differ in their spaces (:mod:`tshtrain.env.groups`), by
    name, in column order; None: one observation and one action space for all"""
    group_views: Mapping[str, GroupView] = {}
    """what each group's learners see of the stored rows (:class:`~tshtrain.env.groups.GroupView`)"""

    @property
    def num_envs(self) -> int:
        """E"""
        return self.columns.num_envs

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents' names."""
        return self.columns.agents

    @property
    def num_columns(self) -> int:
        """A * E"""
        return self.columns.num_columns

    @abstractmethod
    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        """Start new episodes in the envs ``env_ids`` (None: all; env ``i`` is seeded with ``seed + i``
        when ``seed`` is given); :attr:`obs` and :attr:`acting_C` then describe their first step."""

    @property
    @abstractmethod
    def obs(self) -> ObsArray:
        """The current observation of every column (C rows; rows of columns that do not act are
        unspecified). Read it before :meth:`step`: the array may be reused."""

    @property
    @abstractmethod
    def acting_C(self) -> np.ndarray:
        """bool over the columns: the agents that act in the next step."""

    @abstractmethod
    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        """Step every env with the actions ``act`` (row ``i`` is the action of column ``columns[i]``;
        ``columns`` are exactly the acting ones, ascending). Envs whose episode ends reset in the same
        call."""

    def sample_actions(self, columns: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
        """Uniformly random (legal) stored actions of the ``columns`` (ascending; None: all)."""
        num = self.num_columns if columns is None else len(columns)
        obs = self.obs
        mask = obs.get(ACTION_MASK_KEY) if isinstance(obs, Mapping) else None
        if mask is not None:
            rows = np.asarray(mask) if columns is None else np.asarray(mask)[columns]
            return sample_legal_actions(rows, rng)
        if self.groups is None:
            return sample_actions(self.single_action_space, num, rng)
        act = np.zeros((num, *(self.single_action_space.shape or ())), self.single_action_space.dtype)
        cols = np.arange(self.num_columns) if columns is None else np.asarray(columns)
        agent_of_row = cols // self.num_envs
        for name, group in self.groups.items():
            rows = np.flatnonzero((agent_of_row >= group.first) & (agent_of_row < group.units.stop))
            if len(rows):
                act[rows] = self.group_views[name].pad(sample_actions(group.action_space, len(rows), rng))
        return act

    def action_masks(self) -> np.ndarray | None:
        """The legal actions of every column (C, num_actions) for the current step, or None when the
        env has no masks (the same arrays as ``obs[ACTION_MASK_KEY]``)."""
        obs = self.obs
        if isinstance(obs, Mapping) and ACTION_MASK_KEY in obs:
            return np.asarray(obs[ACTION_MASK_KEY])
        return None

    def state_snapshot(self) -> bytes | None:
        """The envs' state as pickle bytes (restored only from trusted checkpoints), or None."""
        return None

    def restore_snapshot(self, data: bytes) -> bool:
        """Put the envs back from :meth:`state_snapshot`; returns False if it cannot."""
        del data
        return False

    @abstractmethod
    def close(self) -> None:
        """Close the envs."""


__all__ = [
    "ACTION_MASK_KEY",
    "AGENT_ID_KEY",
    "OBS_KEY",
    "STATE_KEY",
    "AgentColumns",
    "AgentStep",
    "MultiAgentVectorEnv",
    "ObsArray",
]
