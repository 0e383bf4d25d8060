"""Agent groups: agents with different observation and action spaces in one multi-agent env.

A **group** is a set of agents that share one observation space and one action space (BenchMARL's
groups: the adversaries and the good agents of MPE ``simple_tag``, the speaker and the listener of
``simple_speaker_listener``). A grouped env keeps the column model of :mod:`tshtrain.env.multi_agent`
(one buffer, agent-major columns, groups as contiguous blocks of agents) and stores what differs per
group side by side:

* **observations**: a flat Dict with one key per group, :func:`group_obs_key` (``obs@speaker``), beside
  the shared ``state`` and ``agent_id`` keys. A column fills its own group's key; the other groups' keys
  of its row stay zero (the price of one buffer: a row holds every group's observation width);
* **actions**: the groups' Discrete actions as integers (each group its own number of actions), or
  their Box actions zero-padded to the widest group's.

A learner never sees that storage. Its :class:`GroupView` hands it its group's observations in the form
a homogeneous env of that group would have (the ``obs`` key, ``state``, and ``agent_id`` counted within
the group; a plain array when there is nothing besides ``obs``) and its own action width; the joint
policy pads its actions back. The views act where data reaches a learner: the joint policy's rows, an
on-policy learner's rollout and an off-policy learner's samples (the buffer's
:meth:`~tshtrain.data.BaseReplayBuffer.column_scope`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, final

import gymnasium as gym
import numpy as np
import torch

from tshtrain.env.keys import AGENT_ID_KEY, OBS_KEY, STATE_KEY
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

GROUP_KEY_SEPARATOR = "@"
"""between ``obs`` and the group's name in a grouped env's observation keys"""

T = TypeVar("T")


def group_obs_key(group: str) -> str:
    """The observation key of ``group``'s agents in a grouped env (``obs@speaker``)."""
    return f"{OBS_KEY}{GROUP_KEY_SEPARATOR}{group}"


def group_of(agent: str) -> str:
    """The default group of an agent: its name without a trailing ``_<number>`` (``adversary_0`` ->
    ``adversary``), as PettingZoo and VMAS name their agents."""
    stem, sep, tail = agent.rpartition("_")
    return stem if sep and tail.isdigit() and stem else agent


@dataclass(frozen=True)
class AgentGroup:
    """One group of a grouped env: its agents and what its learners see."""

    name: str
    """the group's name"""
    agents: tuple[str, ...]
    """its agents, in column order"""
    first: int
    """the index of its first agent among the env's agents (its agents are ``first .. first + len - 1``)"""
    observation_space: gym.Space[Any]
    """one column's observation as the group's learners see it (:class:`GroupView`)"""
    action_space: gym.Space[Any]
    """the group's own action space"""

    @property
    def units(self) -> slice:
        """The group's agents as a slice of the env's agent indices (a learner's ``units``)."""
        return slice(self.first, self.first + len(self.agents))


def storage_action_space(groups: Mapping[str, gym.Space[Any]], owner: str) -> gym.Space[Any]:
    """The action space the buffer stores for groups with these action spaces: Discrete of the largest
    group's actions, or a Box as wide as the widest group's (zero-padded). Mixed kinds are refused."""
    spaces = list(groups.values())
    if all(isinstance(s, gym.spaces.Discrete) for s in spaces):
        if any(int(s.start) != 0 for s in spaces if isinstance(s, gym.spaces.Discrete)):
            raise UnsupportedSpaceError(
                f"{owner}: grouped Discrete action spaces must start at 0, got {groups}."
            )
        return gym.spaces.Discrete(max(int(s.n) for s in spaces if isinstance(s, gym.spaces.Discrete)))
    if all(isinstance(s, gym.spaces.Box) and len(s.shape) == 1 for s in spaces):
        boxes = [s for s in spaces if isinstance(s, gym.spaces.Box)]
        width = max(int(s.shape[0]) for s in boxes)
        low = np.full(width, np.inf, np.float32)
        high = np.full(width, -np.inf, np.float32)
        for box in boxes:
            d = int(box.shape[0])
            low[:d] = np.minimum(low[:d], box.low)
            high[:d] = np.maximum(high[:d], box.high)
        padded = slice(min(int(s.shape[0]) for s in boxes), width)  # some group pads these with zeros
        low[padded] = np.minimum(low[padded], 0.0)
        high[padded] = np.maximum(high[padded], 0.0)
        return gym.spaces.Box(low, high, (width,), np.float32)
    listed = "; ".join(f"{name}: {space}" for name, space in groups.items())
    raise UnsupportedSpaceError(
        f"{owner}: the groups' action spaces ({listed}) must all be Discrete or all be flat Boxes; "
        f"mixed kinds cannot share one buffer."
    )


@final
class GroupView:
    """Maps a grouped env's stored rows to what one group's learners see (see the module docstring).

    ``obs``, ``act`` and ``pad`` work on numpy arrays and torch tensors alike; :meth:`batch` maps the
    ``obs``, ``obs_next`` and ``act`` fields of a batch (rollouts, samples) and leaves the rest.
    """

    def __init__(self, group: AgentGroup, *, stored_action_width: int | None):
        """Args:
        group: the group.
        stored_action_width: the stored Box actions' width; None for Discrete actions.
        """
        self.group = group
        self.key = group_obs_key(group.name)
        space = group.observation_space
        self._keys = tuple(space.spaces) if isinstance(space, gym.spaces.Dict) else (OBS_KEY,)
        self._ids = slice(group.first, group.first + len(group.agents))
        self._width: int | None = None
        self._pad = 0
        if stored_action_width is not None:
            assert isinstance(group.action_space, gym.spaces.Box)
            self._width = int(group.action_space.shape[0])
            self._pad = stored_action_width - self._width

    def obs(self, stored: Any) -> Any:
        """The group's observations (array or Dict) from stored rows (a Dict of every group's keys)."""
        if not isinstance(stored, Mapping):
            raise ConfigurationError(
                f"GroupView({self.group.name!r}): expected the Dict observations of a grouped env, got "
                f"{type(stored).__name__}."
            )
        if self._keys == (OBS_KEY,):
            return stored[self.key]
        out: dict[str, Any] = {}
        for key in self._keys:
            if key == OBS_KEY:
                out[key] = stored[self.key]
            elif key == AGENT_ID_KEY:
                out[key] = stored[AGENT_ID_KEY][..., self._ids]
            else:
                out[key] = stored[key]
        return out

    def act(self, stored: T) -> T:
        """The group's actions from stored ones (Box: the group's leading dimensions)."""
        if self._width is None or self._pad == 0:
            return stored
        return stored[..., : self._width]  # type: ignore[index,no-any-return]

    def pad(self, act: T) -> T:
        """Stored actions from the group's (Box: zero-padded to the stored width)."""
        if self._width is None or self._pad == 0:
            return act
        if isinstance(act, torch.Tensor):
            return torch.nn.functional.pad(act, (0, self._pad))  # type: ignore[return-value]
        assert isinstance(act, np.ndarray)
        widths = [(0, 0)] * (act.ndim - 1) + [(0, self._pad)]
        return np.pad(act, widths)  # type: ignore[return-value]

    def batch(self, batch: T) -> T:
        """A copy of a dataclass batch with its ``obs``, ``obs_next`` and ``act`` seen by the group."""
        assert dataclasses.is_dataclass(batch) and not isinstance(batch, type)
        changes: dict[str, Any] = {}
        for name in ("obs", "obs_next"):
            if hasattr(batch, name):
                changes[name] = self.obs(getattr(batch, name))
        if hasattr(batch, "act"):
            changes["act"] = self.act(batch.act)
        return dataclasses.replace(batch, **changes)

    def __repr__(self) -> str:
        return f"GroupView({self.group.name!r}, agents {list(self.group.agents)})"


def group_observation_space(
    own: gym.Space[Any], *, state: gym.Space[Any] | None, num_group_agents: int, agent_id: bool
) -> gym.Space[Any]:
    """What a group's learners see: its agents' own observation, or a Dict of it with the shared state
    and the agent id within the group (as a homogeneous env of those agents would give)."""
    keys: dict[str, gym.Space[Any]] = {OBS_KEY: own}
    if state is not None:
        keys[STATE_KEY] = state
    if agent_id:
        keys[AGENT_ID_KEY] = gym.spaces.Box(0.0, 1.0, (num_group_agents,), np.float32)
    return gym.spaces.Dict(dict(sorted(keys.items()))) if len(keys) > 1 else own


def resolve_groups(
    agents: Sequence[str], groups: Mapping[str, Sequence[str]] | str | None, owner: str
) -> dict[str, tuple[str, ...]] | None:
    """``groups`` as {group: agents}: None stays None, ``"auto"`` groups by :func:`group_of` in order of
    first appearance, a mapping must cover every agent exactly once."""
    if groups is None:
        return None
    if isinstance(groups, str):
        if groups != "auto":
            raise ConfigurationError(
                f"{owner}: groups={groups!r}; give 'auto' (by name: adversary_0 -> adversary), a mapping "
                f"{{group: [agents]}}, or None."
            )
        found: dict[str, list[str]] = {}
        for agent in agents:
            found.setdefault(group_of(agent), []).append(agent)
        _check_group_names(list(found), owner)
        return {name: tuple(members) for name, members in found.items()}
    bad_members = {
        name: members for name, members in groups.items() if isinstance(members, str) or not members
    }
    if bad_members:
        raise ConfigurationError(
            f"{owner}: every group needs a list of one or more agents, got {bad_members}."
        )
    listed = [agent for members in groups.values() for agent in members]
    missing = [agent for agent in agents if agent not in listed]
    unknown = sorted({agent for agent in listed if agent not in agents})
    repeated = sorted({agent for agent in listed if listed.count(agent) > 1})
    if missing or unknown or repeated or not groups:
        raise ConfigurationError(
            f"{owner}: groups must list every agent of {list(agents)} exactly once; missing {missing}, "
            f"unknown {unknown}, repeated {repeated}."
        )
    _check_group_names([str(name) for name in groups], owner)
    return {str(name): tuple(members) for name, members in groups.items()}


def _check_group_names(names: Sequence[str], owner: str) -> None:
    """Group names become observation keys (``obs@NAME``, stored as ``obs/obs@NAME``)."""
    bad = [name for name in names if not name or GROUP_KEY_SEPARATOR in name or "/" in name]
    if bad:
        raise ConfigurationError(
            f"{owner}: group names must be non-empty without '{GROUP_KEY_SEPARATOR}' or '/', got {bad}; "
            f"name the groups yourself ({{group: [agents]}})."
        )


__all__ = [
    "GROUP_KEY_SEPARATOR",
    "AgentGroup",
    "GroupView",
    "group_obs_key",
    "group_observation_space",
    "group_of",
    "resolve_groups",
    "storage_action_space",
]
