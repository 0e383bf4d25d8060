"""Several agents trained by one trainer: a multi-agent algorithm composed of per-agent algorithms.

The data of ``A`` agents in ``E`` envs lies in ``A * E`` **columns** (agent-major; see
:mod:`tshtrain.env.multi_agent`). A :class:`Learner` acts for a contiguous range of **units** with its
policy and, unless its policy is fixed, trains it with its own single-agent algorithm. A unit is an
agent (its ``E`` columns, whatever ``E`` the training or test env has) or, for agent scopes over a
single-agent vector env, one sub-env:

================================  ===========================================================
layout                            learners
================================  ===========================================================
independent learners              one per agent (:func:`independent_learners`); families may
                                  differ within the trainer's family (DQN and SAC are both
                                  off-policy), and any agent may have a fixed policy
parameter sharing                 one learner over every column (:func:`shared_learner`); the
                                  env appends the one-hot agent id to the observations
centralised critic (MAPPO)        a PPO learner whose critic reads the ``state`` key and whose
                                  actor reads ``obs`` (``tshtrain.algorithm.blocks.agent_nets``);
                                  IPPO is the same without the ``state`` key
agent scopes (skrl)               learners over slices of a single-agent vector env's sub-envs
                                  (:func:`scoped_learners`, ``agents_scope=[4, 4]``)
agent groups (BenchMARL)          agents with different spaces in groups; one learner per group
                                  (shared within it) or per agent (:func:`grouped_learners`),
                                  each seeing its group's rows through a ``GroupView``
================================  ===========================================================

:class:`MultiAgentOnPolicy` and :class:`MultiAgentOffPolicy` are ordinary on-/off-policy algorithms
to the trainers. An on-policy update gives each learner its columns of the rollout
(:meth:`~tshtrain.data.RolloutBatch.select_columns`, views); an off-policy update lets each learner
sample its own columns of the shared replay buffer (:meth:`~tshtrain.data.VectorReplayBuffer.column_scope`).
Learners update one after another in their order (``update_mode="sequential"``, skrl's Sequential
trainer); ``"parallel"`` runs each learner's update in its own process
(:mod:`tshtrain.algorithm.multi_agent_parallel`); ``"stacked"`` computes the updates of independent
learners of one algorithm (PPO; DQN or SAC) in one pass over their stacked networks (the
``stacked_update`` of seed batches, :mod:`tshtrain.seeds`): the same learning as sequential updates
to float rounding, one batched matrix product per layer for all learners.

Checkpoints hold every learner's state under its name.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Self, TypeAlias, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.algos.dqn import DQN
from tshtrain.algorithm.algos.ppo import PPO
from tshtrain.algorithm.algos.sac import SAC
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    Algorithm,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    Policy,
    Stateful,
    TrainingStats,
    UpdateHooks,
    generator_states,
    load_generator_states,
)
from tshtrain.algorithm.blocks.stacked_update import StackCache
from tshtrain.algorithm.multi_agent_parallel import ParallelParams, ParallelUpdater
from tshtrain.data.batch import AnyRolloutBatch, ObsArray, ObsTensor, TensorRolloutBatch
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.devices import resolve_device
from tshtrain.env.groups import AgentGroup, GroupView
from tshtrain.env.multi_agent import ACTION_MASK_KEY, AgentColumns, MultiAgentVectorEnv
from tshtrain.env.spaces import sample_actions, sample_legal_actions
from tshtrain.env.tensor_env import TensorVectorEnv
from tshtrain.env.tensor_spaces import sample_actions_torch, sample_legal_actions_torch
from tshtrain.errors import ConfigurationError

UpdateMode: TypeAlias = Literal["sequential", "parallel", "stacked"]
"""how the learners of a multi-agent algorithm take their updates (see the module docstring)"""


# ---------------------------------------------------------------------- fixed policies
@final
class RandomPolicy(Policy):
    """Uniformly random actions (among the legal ones when observations carry an ``action_mask``):
    a fixed opponent, or a baseline. Stored actions are in the policy's action space (Box actions in
    ``[-1, 1]``, mapped onto the bounds like any policy's)."""

    def __init__(self, action_space: gym.Space[Any], *, seed: int | None = None):
        super().__init__(action_space=action_space, deterministic_eval=False, seed=seed)
        self.rng = np.random.default_rng(seed)
        """the generator of the numpy path's draws"""

    @override
    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        del deterministic
        if not isinstance(obs, np.ndarray) and ACTION_MASK_KEY in obs:
            return sample_legal_actions(np.asarray(obs[ACTION_MASK_KEY]), self.rng)
        num = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        return self.map_action_inverse(sample_actions(self.action_space, num, self.rng))

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        del deterministic
        if isinstance(obs, Mapping):
            if ACTION_MASK_KEY in obs:
                return sample_legal_actions_torch(obs[ACTION_MASK_KEY], self.generator)
            first = next(iter(obs.values()))
        else:
            first = obs
        act = sample_actions_torch(self.action_space, len(first), self.generator, first.device)
        return self.map_action_inverse_torch(act)


@final
class ScriptedPolicy(Policy):
    """Actions from a Python function of the numpy observations (a scripted or rule-based agent)."""

    def __init__(self, action_space: gym.Space[Any], fn: Callable[[ObsArray], np.ndarray]):
        """Args:
        action_space: the agent's action space.
        fn: observations (a batch) -> stored actions (one row per observation).
        """
        super().__init__(action_space=action_space, deterministic_eval=True)
        self.fn = fn

    @override
    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        del deterministic
        return np.asarray(self.fn(obs))

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        del deterministic
        device = obs.device if isinstance(obs, torch.Tensor) else next(iter(obs.values())).device
        host: ObsArray = (
            obs.cpu().numpy()
            if isinstance(obs, torch.Tensor)
            else {k: v.cpu().numpy() for k, v in obs.items()}
        )
        return torch.as_tensor(self.fn(host), device=device)


# ---------------------------------------------------------------------- learners
@final
class Learner:
    """A policy acting for the contiguous ``units`` (agents, or scope sub-envs; see the module
    docstring) and, unless fixed, the algorithm training it."""

    def __init__(
        self,
        name: str,
        units: slice,
        *,
        algorithm: Algorithm[Any, Any] | None = None,
        policy: Policy | None = None,
        view: GroupView | None = None,
    ):
        """Args:
        name: the learner's name (its key in checkpoints and its logger scope).
        units: the contiguous units it acts for (``slice(first, stop)``): agents ``first .. stop - 1``,
            or the sub-envs of a scope.
        algorithm: trains the learner's policy (``algorithm.policy``).
        policy: a fixed policy (random, scripted, a frozen one loaded from a checkpoint); give exactly
            one of ``algorithm`` and ``policy``.
        view: in an env with agent groups, what the learner's group sees of the stored rows (see
            :func:`grouped_learners`); its units must lie within the group.
        """
        if (algorithm is None) == (policy is None):
            raise ConfigurationError(
                f"Learner {name!r}: give exactly one of algorithm (a trained learner) and policy (a fixed "
                f"one), got algorithm={type(algorithm).__name__}, policy={type(policy).__name__}."
            )
        if units.step not in (None, 1) or units.start is None or units.stop is None:
            raise ConfigurationError(
                f"Learner {name!r}: units must be a contiguous slice(first, stop), got {units!r}."
            )
        if not 0 <= units.start < units.stop:
            raise ConfigurationError(
                f"Learner {name!r}: units {units!r} are empty or negative; first < stop is needed."
            )
        if view is not None and not view.group.first <= units.start < units.stop <= view.group.units.stop:
            raise ConfigurationError(
                f"Learner {name!r}: units {units!r} are not within its group {view.group.name!r} (agents "
                f"{view.group.first}..{view.group.units.stop - 1})."
            )
        self.name = name
        self.units = slice(int(units.start), int(units.stop))
        self.view = view
        """what the learner sees of a grouped env's rows (None: the rows as stored)"""
        self.algorithm = algorithm
        self.policy: Policy = algorithm.policy if algorithm is not None else policy  # type: ignore[assignment]

    @property
    def trainable(self) -> bool:
        """False for a fixed policy."""
        return self.algorithm is not None

    def columns(self, scale: int) -> slice:
        """The learner's columns when each unit has ``scale`` columns (E for agents)."""
        return slice(self.units.start * scale, self.units.stop * scale)

    def state_dict(self) -> dict[str, Any]:
        """The algorithm's state, or a fixed policy's weights and generators."""
        if self.algorithm is not None:
            return self.algorithm.state_dict()
        return {"policy": self.policy.state_dict(), "_generators": generator_states(self.policy)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        if self.algorithm is not None:
            self.algorithm.load_state_dict(state)
            return
        self.policy.load_state_dict(state["policy"])
        load_generator_states(self.policy, state.get("_generators", {}))

    def __repr__(self) -> str:
        kind = (
            type(self.algorithm).__name__
            if self.algorithm is not None
            else f"fixed {type(self.policy).__name__}"
        )
        return f"Learner({self.name!r}, units {self.units.start}..{self.units.stop - 1}, {kind})"


def _agent_names(agents: Sequence[str] | AgentColumns) -> tuple[str, ...]:
    return agents.agents if isinstance(agents, AgentColumns) else tuple(agents)


def _learner(
    name: str, units: slice, member: Algorithm[Any, Any] | Policy, view: GroupView | None = None
) -> Learner:
    """A learner trained by ``member`` (an algorithm) or acting with it (a fixed policy)."""
    if isinstance(member, Algorithm):
        return Learner(name, units, algorithm=member, view=view)
    return Learner(name, units, policy=member, view=view)


def independent_learners(
    agents: Sequence[str] | AgentColumns, members: Mapping[str, Algorithm[Any, Any] | Policy]
) -> list[Learner]:
    """One learner per agent (in the env's agent order), named after it: ``members[agent]`` is its
    algorithm, or a fixed policy. Every agent needs a member."""
    names = _agent_names(agents)
    missing = [agent for agent in names if agent not in members]
    unknown = [name for name in members if name not in names]
    if missing or unknown:
        raise ConfigurationError(
            f"independent_learners: the env's agents are {list(names)}; missing members for "
            f"{missing}, members for unknown agents {unknown}."
        )
    return [_learner(agent, slice(index, index + 1), members[agent]) for index, agent in enumerate(names)]


def shared_learner(
    agents: Sequence[str] | AgentColumns, algorithm: Algorithm[Any, Any], *, name: str = "shared"
) -> list[Learner]:
    """One learner for every agent (parameter sharing)."""
    return [Learner(name, slice(0, len(_agent_names(agents))), algorithm=algorithm)]


def grouped_learners(
    env: MultiAgentVectorEnv | TensorVectorEnv,
    members: Mapping[str, Algorithm[Any, Any] | Policy | Mapping[str, Algorithm[Any, Any] | Policy]],
) -> list[Learner]:
    """Learners for an env with agent groups (``env.groups``, :mod:`tshtrain.env.groups`), BenchMARL's
    layout: ``members[group]`` is one algorithm (or fixed policy) for all the group's agents (parameters
    shared within the group; the learner is named after the group), or a mapping {agent: algorithm or
    policy} of one learner per agent of the group. Build each group's networks on
    ``env.groups[group].observation_space`` and ``.action_space``: what its learners see."""
    groups: Mapping[str, AgentGroup] | None = getattr(env, "groups", None)
    if not groups:
        raise ConfigurationError(
            f"grouped_learners: {type(env).__name__} has no agent groups; build it with groups='auto' or "
            f"{{group: [agents]}} (or use independent_learners / shared_learner)."
        )
    missing = [name for name in groups if name not in members]
    unknown = [name for name in members if name not in groups]
    if missing or unknown:
        raise ConfigurationError(
            f"grouped_learners: the env's groups are {list(groups)}; missing members for {missing}, members "
            f"for unknown groups {unknown}."
        )
    views: Mapping[str, GroupView] = env.group_views  # type: ignore[union-attr]
    learners: list[Learner] = []
    for name, group in groups.items():
        member = members[name]
        if isinstance(member, Mapping):
            for learner in independent_learners(group.agents, member):
                first = group.first + learner.units.start
                fixed = learner.algorithm if learner.algorithm is not None else learner.policy
                learners.append(_learner(learner.name, slice(first, first + 1), fixed, views[name]))
        else:
            learners.append(_learner(name, group.units, member, views[name]))
    return learners


def scoped_learners(
    agents_scope: Sequence[int],
    members: Sequence[Algorithm[Any, Any] | Policy],
    *,
    names: Sequence[str] | None = None,
    num_envs: int | None = None,
) -> list[Learner]:
    """skrl's agent scopes: learner ``k`` acts for the next ``agents_scope[k]`` sub-envs of one
    single-agent vector env (``agents_scope=[4, 4]``: envs 0-3 and 4-7).

    With ``num_envs`` (the vector env's size) skrl's rules apply: one member takes every env whatever
    the scope; an empty scope splits the envs as equally as possible (the last learner takes the rest);
    a scope must cover exactly ``num_envs``. A scope of 0 envs is refused (skrl would give that agent no
    data).
    """
    if num_envs is not None:
        agents_scope = _skrl_scope(agents_scope, len(members), num_envs)
    if len(agents_scope) != len(members):
        raise ConfigurationError(
            f"scoped_learners: agents_scope {list(agents_scope)} has {len(agents_scope)} entries but "
            f"{len(members)} members were given; give one scope per agent."
        )
    if any(int(n) < 1 for n in agents_scope):
        raise ConfigurationError(
            f"scoped_learners: every scope needs at least one env, got {list(agents_scope)}."
        )
    names = list(names) if names is not None else [f"agent_{k}" for k in range(len(members))]
    learners, first = [], 0
    for name, size, member in zip(names, agents_scope, members, strict=True):
        learners.append(_learner(name, slice(first, first + int(size)), member))
        first += int(size)
    return learners


def _skrl_scope(agents_scope: Sequence[int], num_members: int, num_envs: int) -> list[int]:
    """The scope skrl would use for ``num_members`` agents on ``num_envs`` envs (see scoped_learners)."""
    if num_members == 1:
        return [num_envs]
    if not agents_scope:
        if num_members > num_envs:
            raise ConfigurationError(
                f"scoped_learners: {num_members} members cannot share {num_envs} envs; give at most "
                f"{num_envs} members or more envs."
            )
        scope = [num_envs // num_members] * num_members
        scope[-1] += num_envs - sum(scope)
        return scope
    if len(agents_scope) == num_members and sum(int(n) for n in agents_scope) != num_envs:
        raise ConfigurationError(
            f"scoped_learners: agents_scope {list(agents_scope)} covers {sum(agents_scope)} envs but the "
            f"vector env has {num_envs}; the scopes must cover every env."
        )
    return [int(n) for n in agents_scope]


def _check_tiling(learners: Sequence[Learner], num_units: int | None, owner: str) -> int:
    if not learners:
        raise ConfigurationError(f"{owner}: give at least one learner.")
    names = [learner.name for learner in learners]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{owner}: learner names must be unique, got {names}.")
    expected = 0
    for learner in learners:
        if learner.units.start != expected:
            raise ConfigurationError(
                f"{owner}: the learners' units must tile 0..n-1 in order; {learner!r} starts at "
                f"{learner.units.start}, expected {expected}. Learners: {list(learners)}."
            )
        expected = learner.units.stop
    if num_units is not None and expected != num_units:
        raise ConfigurationError(
            f"{owner}: the learners cover {expected} units (agents or scope sub-envs) but the env has "
            f"{num_units}; learners: {list(learners)}."
        )
    if not any(learner.trainable for learner in learners):
        raise ConfigurationError(
            f"{owner}: every learner has a fixed policy; nothing would be trained. To evaluate fixed players "
            f"against each other, collect with MultiAgentPolicy(learners) (tshtrain eval FILE for a file)."
        )
    return expected


# ---------------------------------------------------------------------- the joint policy
@final
class MultiAgentPolicy(Policy):
    """What the collector runs: each learner's policy on its rows (columns) of a batch.

    A batch of all ``C`` columns is split by the learners' units, each unit being ``C / num_units``
    columns (so the same policy serves training and test envs with different numbers of envs). The
    multi-agent collector of turn-based games asks for some columns only
    (:meth:`compute_actions_for`). The split of the latest call is reused by
    :meth:`add_exploration_noise` and :meth:`map_action`.
    """

    def __init__(self, learners: Sequence[Learner]):
        policies = [learner.policy for learner in learners]
        super().__init__(action_space=policies[0].action_space, action_scaling=False)
        self.members = nn.ModuleList(policies)
        self.unit_bounds = np.array([learner.units.start for learner in learners] + [learners[-1].units.stop])
        """each learner's first unit, and the end"""
        self.num_units = int(self.unit_bounds[-1])
        """agents (or scope sub-envs) in all"""
        self._all_rows: dict[int, list[tuple[int, int, int]]] = {}
        self._routing: list[tuple[int, int, int]] = []
        self._views = [learner.view for learner in learners]

    def _policies(self) -> list[Policy]:
        return [member for member in self.members if isinstance(member, Policy)]

    def scale(self, num_columns: int) -> int:
        """Columns per unit in an env of ``num_columns`` columns (a ConfigurationError unless it
        divides)."""
        if num_columns % self.num_units:
            raise ConfigurationError(
                f"MultiAgentPolicy: an env of {num_columns} columns for learners over {self.num_units} "
                f"units (agents, or scope sub-envs); the columns must be a multiple of the units."
            )
        return num_columns // self.num_units

    def routing(
        self, columns: np.ndarray | None, num_rows: int, num_columns: int | None = None
    ) -> list[tuple[int, int, int]]:
        """(learner index, first row, stop row) of each learner that has rows in a batch of the
        ``columns`` (ascending; None: all ``num_rows`` columns in order) of an env with
        ``num_columns`` columns (None: ``num_rows``)."""
        if columns is None:
            found = self._all_rows.get(num_rows)
            if found is None:
                bounds = self.unit_bounds * self.scale(num_rows)
                found = self._all_rows[num_rows] = [
                    (k, int(bounds[k]), int(bounds[k + 1])) for k in range(len(self.members))
                ]
            return found
        bounds = self.unit_bounds * self.scale(num_rows if num_columns is None else num_columns)
        cuts = np.searchsorted(columns, bounds)
        return [
            (k, int(cuts[k]), int(cuts[k + 1])) for k in range(len(self.members)) if cuts[k] < cuts[k + 1]
        ]

    def route(self, columns: np.ndarray | None, num_rows: int, num_columns: int | None = None) -> None:
        """Split the next :meth:`map_action` / :meth:`add_exploration_noise` batches by the learners of
        ``columns`` (what :meth:`compute_actions_for` does before it computes)."""
        self._routing = self.routing(columns, num_rows, num_columns)

    def _rows(self, k: int, obs: Any, first: int, stop: int) -> Any:
        """Learner ``k``'s observations: rows ``first:stop``, seen through its group's view."""
        if isinstance(obs, Mapping):
            rows = {key: value[first:stop] for key, value in obs.items()}
            view = self._views[k]
            return rows if view is None else view.obs(rows)
        return obs[first:stop]

    def _stored(self, k: int, act: Any) -> Any:
        """Learner ``k``'s actions as stored (padded for its group)."""
        view = self._views[k]
        return act if view is None else view.pad(act)

    def compute_actions_for(
        self,
        obs: ObsArray,
        columns: np.ndarray | None,
        *,
        deterministic: bool,
        num_columns: int | None = None,
    ) -> np.ndarray:
        """Actions for the observations of ``columns`` (ascending; None: every column in order) of an
        env with ``num_columns`` columns (None: as many as rows)."""
        num_rows = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        self._routing = self.routing(columns, num_rows, num_columns)
        policies = self._policies()
        parts = [
            self._stored(
                k, policies[k].compute_actions(self._rows(k, obs, first, stop), deterministic=deterministic)
            )
            for k, first, stop in self._routing
        ]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    @override
    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        return self.compute_actions_for(obs, None, deterministic=deterministic)

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        num_rows = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        self._routing = self.routing(None, num_rows)
        policies = self._policies()
        parts = [
            self._stored(k, policies[k].actions(self._rows(k, obs, first, stop), deterministic=deterministic))
            for k, first, stop in self._routing
        ]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    @override
    def compute_actions_torch(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        num_rows = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        self._routing = self.routing(None, num_rows)
        policies = self._policies()
        parts = [
            self._stored(
                k,
                policies[k].compute_actions_torch(
                    self._rows(k, obs, first, stop), deterministic=deterministic
                ),
            )
            for k, first, stop in self._routing
        ]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    @override
    def compute_actions_log_prob_torch(
        self, obs: ObsTensor, *, deterministic: bool
    ) -> tuple[torch.Tensor, None]:
        """The members' actions; no log-probabilities (each learner's update recomputes its own)."""
        return self.compute_actions_torch(obs, deterministic=deterministic), None

    def _per_member(self, act: Any, fn: Callable[[Policy, Any], Any]) -> Any:
        policies = self._policies()
        views = self._views
        parts = [
            fn(policies[k], act[first:stop])
            if views[k] is None
            else views[k].pad(fn(policies[k], views[k].act(act[first:stop])))  # type: ignore[union-attr]
            for k, first, stop in self._routing
        ]
        if len(parts) == 1:
            return parts[0]
        return torch.cat(parts) if isinstance(act, torch.Tensor) else np.concatenate(parts)

    @override
    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        result: np.ndarray = self._per_member(act, lambda p, a: p.add_exploration_noise(a, rng))
        return result

    @override
    def map_action(self, act: np.ndarray) -> np.ndarray:
        result: np.ndarray = self._per_member(act, lambda p, a: p.map_action(a))
        return result

    @override
    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        result: np.ndarray = self._per_member(act, lambda p, a: p.map_action_inverse(a))
        return result

    @override
    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        result: torch.Tensor = self._per_member(act, lambda p, a: p.add_exploration_noise_torch(a, generator))
        return result

    @override
    def map_action_torch(self, act: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self._per_member(act, lambda p, a: p.map_action_torch(a))
        return result

    @override
    def map_action_inverse_torch(self, act: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self._per_member(act, lambda p, a: p.map_action_inverse_torch(a))
        return result


# ---------------------------------------------------------------------- stats
@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiAgentTrainingStats(TrainingStats):
    """The stats of every trained learner's update, by learner name (logged as ``NAME/field``)."""

    per_learner: Mapping[str, TrainingStats] = dataclasses.field(default_factory=dict)

    @override
    def as_scalars(self) -> dict[str, float]:
        return {
            f"{name}/{key}": value
            for name, stats in self.per_learner.items()
            for key, value in stats.as_scalars().items()
        }

    @classmethod
    @override
    def aggregate(cls, stats: Sequence[Self]) -> Self:
        if not stats:
            raise ValueError(f"{cls.__name__}.aggregate needs at least one record.")
        names = {name for record in stats for name in record.per_learner}
        per_learner: dict[str, TrainingStats] = {}
        for name in sorted(
            names, key=lambda n: list(stats[-1].per_learner).index(n) if n in stats[-1].per_learner else 0
        ):
            records = [record.per_learner[name] for record in stats if name in record.per_learner]
            per_learner[name] = type(records[0]).aggregate(records)
        return cls(
            num_gradient_steps=sum(record.num_gradient_steps for record in stats), per_learner=per_learner
        )


# ---------------------------------------------------------------------- the algorithms
class _Members:
    """What both multi-agent families share: the learners, their state and their devices."""

    def __init__(
        self, learners: Sequence[Learner], num_units: int | None, owner: str, update_mode: UpdateMode
    ):
        self.num_units = _check_tiling(learners, num_units, owner)
        self.owner = owner
        if update_mode not in ("sequential", "parallel", "stacked"):
            raise ConfigurationError(
                f"{owner}: update_mode must be 'sequential', 'parallel' or 'stacked', got {update_mode!r}."
            )
        self.learners = list(learners)
        self.update_mode: UpdateMode = update_mode

    def check_stacked(self, kinds: tuple[type[PPO] | type[DQN] | type[SAC], ...]) -> None:
        """With ``update_mode="stacked"``: the trained learners are of one algorithm among ``kinds``, act
        for equal numbers of units and can be stacked (their ``check_stackable``); else a one-line
        error."""
        if self.update_mode != "stacked":
            return
        trained = self.trained()
        names = sorted({type(learner.algorithm).__name__ for learner in trained})
        allowed = " or ".join(kind.__name__ for kind in kinds)
        if len(names) > 1 or not all(isinstance(learner.algorithm, kinds) for learner in trained):
            raise ConfigurationError(
                f"{self.owner}: update_mode='stacked' takes learners of one algorithm ({allowed}); the "
                f"learners train with {names}. Use update_mode='sequential'."
            )
        sizes = sorted({learner.units.stop - learner.units.start for learner in trained})
        if len(sizes) > 1:
            raise ConfigurationError(
                f"{self.owner}: update_mode='stacked' takes learners of equal numbers of units (agents); "
                f"they have {sizes}. Use update_mode='sequential'."
            )
        algorithms: list[Any] = [learner.algorithm for learner in trained]
        if algorithms:
            type(algorithms[0]).check_stackable(algorithms)

    @staticmethod
    def refuse_hooks(owner: str, hooks: UpdateHooks) -> None:
        if hooks is not NO_UPDATE_HOOKS:
            raise ConfigurationError(
                f"{owner}: update_mode='stacked' computes every learner's gradient steps at once and calls "
                f"no update hooks (on_loss, on_optimizer_step, on_sampled_batch); use "
                f"update_mode='sequential' with such callbacks."
            )

    def scale(self, num_columns: int) -> int:
        """Columns per unit in a buffer / rollout of ``num_columns`` columns."""
        if num_columns % self.num_units:
            raise ConfigurationError(
                f"{self.owner}.update: the buffer has {num_columns} columns, not a multiple of the "
                f"learners' {self.num_units} units (agents, or scope sub-envs); build the training buffer "
                f"with exactly one column per agent and env (buffer_num=env.num_columns)."
            )
        return num_columns // self.num_units

    def trained(self) -> list[Learner]:
        return [learner for learner in self.learners if learner.trainable]

    def components(self) -> dict[str, Stateful]:
        found: dict[str, Stateful] = {}
        for learner in self.learners:
            if learner.algorithm is not None:
                found.update(
                    {f"{learner.name}/{key}": c for key, c in learner.algorithm.components().items()}
                )
            else:
                found[f"{learner.name}/policy"] = learner.policy
        return found

    def state_dict(self) -> dict[str, Any]:
        return {learner.name: learner.state_dict() for learner in self.learners}

    def load_state_dict(self, state: Mapping[str, Any], owner: str) -> None:
        names = [learner.name for learner in self.learners]
        if sorted(state) != sorted(names):
            raise ConfigurationError(
                f"{owner}.load_state_dict: the state holds learners {sorted(state)}, this algorithm has "
                f"{sorted(names)}; was it saved from another multi-agent setup?"
            )
        for learner in self.learners:
            learner.load_state_dict(state[learner.name])

    def to(self, device: str | torch.device) -> None:
        target = resolve_device(device)
        for learner in self.learners:
            if learner.algorithm is not None:
                learner.algorithm.to(target)
            else:
                learner.policy.to(target)


class MultiAgentOnPolicy(OnPolicyAlgorithm[MultiAgentPolicy, MultiAgentTrainingStats]):
    """On-policy learners (PPO, A2C, ...; IPPO, MAPPO) and fixed policies under one on-policy trainer."""

    def __init__(
        self,
        learners: Sequence[Learner],
        *,
        num_units: int | None = None,
        update_mode: UpdateMode = "sequential",
        parallel: ParallelParams | None = None,
    ):
        """Args:
        learners: tile the units ``0 .. num_units - 1`` in order (see :func:`independent_learners`,
            :func:`shared_learner`, :func:`scoped_learners`); their algorithms are on-policy.
        num_units: the env's agents (or, with scopes, sub-envs); checked when given.
        update_mode: ``sequential`` or ``parallel`` (see the module docstring).
        parallel: how the worker processes of ``update_mode="parallel"`` run (default
            ``ParallelParams()``); call :meth:`close` when done with a parallel algorithm.
        """
        for learner in learners:
            if learner.algorithm is not None and not isinstance(learner.algorithm, OnPolicyAlgorithm):
                raise ConfigurationError(
                    f"MultiAgentOnPolicy: learner {learner.name!r} trains with "
                    f"{type(learner.algorithm).__name__}, not an on-policy algorithm; an on-policy trainer "
                    f"updates every learner from the latest rollout. Use MultiAgentOffPolicy for "
                    f"off-policy learners."
                )
        if update_mode == "parallel" and any(learner.view is not None for learner in learners):
            raise ConfigurationError(
                "MultiAgentOnPolicy: update_mode='parallel' does not support agent groups (learners with a "
                "GroupView); use update_mode='sequential'."
            )
        self.members = _Members(learners, num_units, "MultiAgentOnPolicy", update_mode)
        self.members.check_stacked((PPO,))
        super().__init__(policy=MultiAgentPolicy(learners))
        self.parallel_params = parallel or ParallelParams()
        """how the workers of ``update_mode="parallel"`` run"""
        self._parallel: ParallelUpdater | None = None  # the workers, started by the first update

    @property
    def learners(self) -> list[Learner]:
        """The learners, in column order."""
        return self.members.learners

    @override
    def components(self) -> dict[str, Stateful]:
        return self.members.components()

    @override
    def state_dict(self) -> dict[str, Any]:
        state = self.members.state_dict()
        if self._parallel is not None:  # the workers hold what is current (raises if they failed)
            state.update(self._parallel.state_dicts())
        return state

    @override
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self._parallel is not None and not self._parallel.running:  # stopped by a worker failure
            self._parallel = None  # the next update starts fresh workers from the loaded state
        self.members.load_state_dict(state, "MultiAgentOnPolicy")
        if self._parallel is not None:
            self._parallel.load_state_dicts({lr.name: state[lr.name] for lr in self._parallel.learners})

    @override
    def to(self, device: str | torch.device) -> Self:
        self.close()  # the workers hold CPU copies; they restart (on the CPU only) at the next update
        self.members.to(device)
        return self

    @override
    def close(self) -> None:
        """Stop the worker processes of ``update_mode="parallel"`` after loading their states into this
        process's algorithms; the next update starts them again. A no-op in sequential mode. After a
        worker failure (:class:`~tshtrain.errors.ParallelWorkerError`) the workers are stopped already and
        their optimizer states are lost: load a checkpoint instead to go on training."""
        if self._parallel is not None:
            self._parallel.close()
            self._parallel = None

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> MultiAgentTrainingStats:
        per_learner: dict[str, TrainingStats] = {}
        scale = self.members.scale(rollout.shape[1])
        if self.members.update_mode == "parallel":
            if self._parallel is None:
                self._parallel = ParallelUpdater(
                    self.members.trained(), self.parallel_params, "MultiAgentOnPolicy"
                )
            per_learner = self._parallel.update(
                rollout, scale, batch_size=batch_size, num_repetitions=num_repetitions, hooks=hooks
            )
            return MultiAgentTrainingStats(
                num_gradient_steps=sum(s.num_gradient_steps for s in per_learner.values()),
                per_learner=per_learner,
            )
        trained = list(self.members.trained())
        if len(trained) > 1 and isinstance(rollout, TensorRolloutBatch) and rollout.value is not None:
            rollout = dataclasses.replace(
                rollout, value=None
            )  # one critic's values: each learner computes its own
        if self.members.update_mode == "stacked" and len(trained) > 1:
            return self._stacked_update(
                trained, rollout, scale, batch_size=batch_size, num_repetitions=num_repetitions, hooks=hooks
            )
        for learner in trained:
            algorithm = learner.algorithm
            assert isinstance(algorithm, OnPolicyAlgorithm)
            part = rollout.select_columns(learner.columns(scale))
            if part.num_steps == 0:
                continue
            if learner.view is not None:
                part = learner.view.batch(part)
            per_learner[learner.name] = algorithm.update(
                part, batch_size=batch_size, num_repetitions=num_repetitions, hooks=hooks
            )
        return MultiAgentTrainingStats(
            num_gradient_steps=sum(s.num_gradient_steps for s in per_learner.values()),
            per_learner=per_learner,
        )

    def _stacked_update(
        self,
        trained: Sequence[Learner],
        rollout: AnyRolloutBatch,
        scale: int,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks,
    ) -> MultiAgentTrainingStats:
        """``update_mode="stacked"``: every PPO learner's update on its columns, at once."""
        _Members.refuse_hooks("MultiAgentOnPolicy", hooks)
        parts = []
        for learner in trained:
            part = rollout.select_columns(learner.columns(scale))
            parts.append(learner.view.batch(part) if learner.view is not None else part)
        if parts[0].num_steps == 0:
            return MultiAgentTrainingStats(num_gradient_steps=0, per_learner={})
        algorithms = [learner.algorithm for learner in trained]
        assert all(isinstance(a, PPO) for a in algorithms)  # checked when built
        stats = PPO.stacked_update(
            algorithms,  # type: ignore[arg-type]
            parts,
            batch_size=batch_size,
            num_repetitions=num_repetitions,
        )
        per_learner: dict[str, TrainingStats] = {
            learner.name: stat for learner, stat in zip(trained, stats, strict=True)
        }
        return MultiAgentTrainingStats(
            num_gradient_steps=sum(s.num_gradient_steps for s in per_learner.values()),
            per_learner=per_learner,
        )


class MultiAgentOffPolicy(OffPolicyAlgorithm[MultiAgentPolicy, MultiAgentTrainingStats]):
    """Off-policy learners (DQN, SAC, TD3, ...) and fixed policies under one off-policy trainer; each
    learner samples its own columns of the shared buffer."""

    def __init__(
        self,
        learners: Sequence[Learner],
        *,
        num_units: int | None = None,
        update_mode: UpdateMode = "sequential",
    ):
        """See :class:`MultiAgentOnPolicy`; the learners' algorithms are off-policy."""
        for learner in learners:
            if learner.algorithm is not None and not isinstance(learner.algorithm, OffPolicyAlgorithm):
                raise ConfigurationError(
                    f"MultiAgentOffPolicy: learner {learner.name!r} trains with "
                    f"{type(learner.algorithm).__name__}, not an off-policy algorithm. Use "
                    f"MultiAgentOnPolicy for on-policy learners."
                )
        if update_mode == "parallel":
            raise ConfigurationError(
                "MultiAgentOffPolicy: update_mode='parallel' is not supported. An off-policy update is one "
                "gradient step on a sample that each learner draws from the shared replay buffer inside its "
                "update; a worker process would need the buffer shipped (or each batch sampled and sent) at "
                "every gradient step, costing more than the step itself. Use update_mode='sequential', or "
                "MultiAgentOnPolicy for parallel on-policy learners."
            )
        self.members = _Members(learners, num_units, "MultiAgentOffPolicy", update_mode)
        self.members.check_stacked((DQN, SAC))
        super().__init__(policy=MultiAgentPolicy(learners))
        self._parallel: Any = None
        self._stack_cache = StackCache()
        """``update_mode="stacked"``: the learners' stack, reused from one gradient step to the next"""

    @property
    def learners(self) -> list[Learner]:
        """The learners, in column order."""
        return self.members.learners

    @override
    def components(self) -> dict[str, Stateful]:
        return self.members.components()

    @override
    def state_dict(self) -> dict[str, Any]:
        return self.members.state_dict()

    @override
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.members.load_state_dict(state, "MultiAgentOffPolicy")

    @override
    def to(self, device: str | torch.device) -> Self:
        self.members.to(device)
        return self

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> MultiAgentTrainingStats:
        per_learner: dict[str, TrainingStats] = {}
        scale = self.members.scale(buffer.num_columns)
        trained = self.members.trained()
        if self.members.update_mode == "stacked" and len(trained) > 1:
            _Members.refuse_hooks("MultiAgentOffPolicy", hooks)
            if all(self._scoped_len(buffer, learner, scale) for learner in trained):
                return self._stacked_update(trained, buffer, scale, batch_size)
        for learner in trained:
            algorithm = learner.algorithm
            assert isinstance(algorithm, OffPolicyAlgorithm)
            with buffer.column_scope(learner.columns(scale), view=learner.view):
                if buffer.scoped_len == 0:
                    continue
                per_learner[learner.name] = algorithm.update(buffer, batch_size, hooks=hooks)
        return MultiAgentTrainingStats(
            num_gradient_steps=sum(s.num_gradient_steps for s in per_learner.values()),
            per_learner=per_learner,
        )

    @staticmethod
    def _scoped_len(buffer: AnyReplayBuffer, learner: Learner, scale: int) -> int:
        with buffer.column_scope(learner.columns(scale), view=learner.view):
            return buffer.scoped_len

    def _stacked_update(
        self, trained: Sequence[Learner], buffer: AnyReplayBuffer, scale: int, batch_size: int
    ) -> MultiAgentTrainingStats:
        """``update_mode="stacked"``: one gradient step of every DQN (SAC) learner at once, each sampling
        its own columns of the shared buffer in learner order (as the sequential updates sample); the
        stack is kept from one step to the next while nothing else changes the learners
        (:class:`~tshtrain.algorithm.blocks.stacked_update.StackCache`)."""
        scopes = [
            functools.partial(buffer.column_scope, learner.columns(scale), view=learner.view)
            for learner in trained
        ]
        algorithms: list[Any] = [learner.algorithm for learner in trained]
        buffers = [buffer] * len(trained)
        stats: Sequence[Sequence[TrainingStats]] = (
            DQN.stacked_update(algorithms, buffers, batch_size, 1, scopes=scopes, cache=self._stack_cache)
            if isinstance(algorithms[0], DQN)
            else SAC.stacked_update(
                algorithms, buffers, batch_size, 1, scopes=scopes, cache=self._stack_cache
            )
        )
        per_learner: dict[str, TrainingStats] = {
            learner.name: stat[0] for learner, stat in zip(trained, stats, strict=True)
        }
        return MultiAgentTrainingStats(
            num_gradient_steps=sum(s.num_gradient_steps for s in per_learner.values()),
            per_learner=per_learner,
        )
