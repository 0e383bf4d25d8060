"""The ``agents`` section: several learners in one run, built into a multi-agent algorithm.

=============  ==================================================================================
layout         learners (:mod:`tshtrain.algorithm.multi_agent`)
=============  ==================================================================================
independent    one per agent of the multi-agent env, named after it; ``members.NAME`` gives an agent
               its own algorithm section or a fixed policy (``random``, ``frozen``), the others learn
               with the top-level ``algorithm``
shared         one learner (``shared``) for every agent: parameter sharing (``env.agent_id: true``
               lets the network tell the agents apart); MAPPO is PPO with
               ``algorithm.network.centralised_critic: true`` and ``env.global_state: true``
scopes         learners ``agent_0``, ``agent_1``, ... over slices of a single-agent env's sub-envs
               (``agents_scope``, skrl's agent scopes)
groups         an env built with ``env.groups`` (agents with different spaces): one learner per group,
               named after it and built on the group's spaces (``share_within_groups: false``: one
               per agent of each group); ``members.NAME`` by group (or agent) name
=============  ==================================================================================

Every learner's algorithm is built by the algorithm builders on one agent column's spaces. A team
algorithm (``AlgorithmSpec.team``: ``vdn``, ``qmix``) is not composed of learners: with ``layout:
shared`` it is built once over every agent (it needs the env's agent names) and is the run's algorithm. A
``frozen`` member's policy is built as the run that trained it describes it (its ``config.yaml``) and
takes that learner's policy weights from the checkpoint, read with ``torch.load(weights_only=True)``
after every file of the checkpoint was verified; it is never trained.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from tshtrain.algorithm.base import Algorithm, Policy
from tshtrain.algorithm.multi_agent import (
    Learner,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    MultiAgentPolicy,
    RandomPolicy,
    grouped_learners,
    independent_learners,
    scoped_learners,
    shared_learner,
)
from tshtrain.algorithm.value_decomposition import ValueDecomposition
from tshtrain.config.algorithms import build_section, experiment_device, num_update_steps
from tshtrain.config.models import AgentsConfig, AlgorithmConfig, Experiment, MemberConfig, NoExploration
from tshtrain.config.registry import Family, get_spec
from tshtrain.env.groups import AgentGroup
from tshtrain.errors import CheckpointError, ExperimentError

CONFIG_FILE = "config.yaml"
"""the resolved experiment of a run directory"""
SHARED_LEARNER = "shared"
"""the name of the one learner of ``layout: shared``"""

MultiAgentAlgorithm = MultiAgentOnPolicy | MultiAgentOffPolicy | ValueDecomposition
"""what :func:`build_multi_agent_algorithm` builds"""


def learner_names(
    agents: AgentsConfig, env_agents: tuple[str, ...], groups: Mapping[str, AgentGroup] | None = None
) -> list[str]:
    """The learners' names, in unit order: the env's agents (independent; groups without sharing),
    ``shared``, ``agent_K`` (scopes) or the groups' names (groups)."""
    if agents.layout == "scopes":
        assert agents.agents_scope is not None
        return [f"agent_{k}" for k in range(len(agents.agents_scope))]
    if agents.layout == "shared":
        return [SHARED_LEARNER]
    if agents.layout == "groups" and agents.share_within_groups and groups:
        return list(groups)
    return list(env_agents)


def check_agent_names(
    agents: AgentsConfig,
    env_agents: tuple[str, ...],
    env_id: str,
    groups: Mapping[str, AgentGroup] | None = None,
) -> None:
    """Members and ``return_reduction: agent:NAME`` must name agents (or groups) of the env (known
    once it is built; ``env.groups`` and ``layout: groups`` go together, checked when the file is read)."""
    if agents.layout in ("independent", "groups"):
        names = learner_names(agents, env_agents, groups)
        what = "group" if agents.layout == "groups" and agents.share_within_groups else "agent"
        unknown = [name for name in agents.members if name not in names]
        if unknown:
            raise ExperimentError(
                f"agents.members.{unknown[0]}: no {what} {unknown[0]!r} in env {env_id!r}; its {what}s are "
                f"{names}."
            )
    reduction = agents.return_reduction
    if reduction.startswith("agent:") and reduction.removeprefix("agent:") not in env_agents:
        raise ExperimentError(
            f"agents.return_reduction: {reduction!r} names no agent of env {env_id!r}; its agents are "
            f"{list(env_agents)} (allowed: mean, sum, min, max, "
            f"{', '.join('agent:' + a for a in env_agents)})."
        )


def _build_learners(
    experiment: Experiment,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    env_agents: tuple[str, ...],
    env: Any = None,
) -> tuple[list[Learner], int]:
    """The learners of the experiment's ``agents`` section (trained or fixed) and the units they tile;
    ``env``: the env, whose ``groups`` (if any) give each group's learners their spaces."""
    agents = experiment.agents
    assert agents is not None
    groups: Mapping[str, AgentGroup] | None = getattr(env, "groups", None)
    check_agent_names(agents, env_agents, experiment.env.id, groups)
    names = learner_names(agents, env_agents, groups)
    spaces = {name: (observation_space, action_space) for name in names}
    if groups:  # each learner on its group's spaces: by group name (shared) or by agent
        spaces = {
            name: (group.observation_space, group.action_space)
            for group in groups.values()
            for name in ((group.name,) if agents.share_within_groups else group.agents)
        }
    torch.manual_seed(experiment.seed)
    members: dict[str, Algorithm[Any] | Policy] = {}
    for index, name in enumerate(names):
        member = agents.members.get(name)
        seed = experiment.seed + index
        obs_space, act_space = spaces[name]
        if member is None or member.algorithm is not None:
            section = experiment.algorithm if member is None else _section(member)
            members[name] = build_section(
                section,
                obs_space,
                act_space,
                seed=seed,
                num_update_steps=num_update_steps(experiment, section),
                env_id=experiment.env.id,
                where="" if member is None else f"agents.members.{name}.",
            )
        elif member.policy == "random":
            members[name] = RandomPolicy(act_space, seed=seed)
        else:
            members[name] = load_frozen_policy(member, name, obs_space, act_space)
    if agents.layout == "groups":
        assert groups is not None
        by_group: dict[str, Any] = {
            name: members[name]
            if agents.share_within_groups
            else {agent: members[agent] for agent in group.agents}
            for name, group in groups.items()
        }
        return grouped_learners(env, by_group), len(env_agents)
    if agents.layout == "independent":
        return independent_learners(env_agents, members), len(env_agents)
    if agents.layout == "shared":
        algorithm = members[SHARED_LEARNER]
        assert isinstance(algorithm, Algorithm)
        return shared_learner(env_agents, algorithm, name=SHARED_LEARNER), len(env_agents)
    assert agents.agents_scope is not None
    learners = scoped_learners(agents.agents_scope, [members[name] for name in names], names=names)
    return learners, sum(agents.agents_scope)


def build_fixed_players(
    experiment: Experiment,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    env_agents: tuple[str, ...],
    env: Any = None,
) -> MultiAgentPolicy:
    """The joint policy of an ``agents`` section in which every player is fixed (``policy: random`` or a
    frozen checkpoint): nothing to train, something to evaluate (``tshtrain eval FILE``). ExperimentError
    naming a player that would train."""
    agents = experiment.agents
    if agents is None:
        raise ExperimentError(
            "agents: evaluating an experiment file without a trained run needs an agents section whose "
            "members are all fixed (policy: random, or a checkpoint)."
        )
    groups = getattr(env, "groups", None)
    check_agent_names(agents, env_agents, experiment.env.id, groups)
    trained = [
        name
        for name in learner_names(agents, env_agents, groups)
        if (member := agents.members.get(name)) is None or member.algorithm is not None
    ]
    if trained:
        raise ExperimentError(
            f"agents.members: {sorted(trained)} would be trained (no fixed policy); to evaluate a file "
            f"without a trained run give every player 'policy: random' or a checkpoint, or evaluate a run "
            f"of it with tshtrain eval RUN_DIR."
        )
    learners, _ = _build_learners(experiment, observation_space, action_space, env_agents, env)
    return MultiAgentPolicy(learners).to(experiment_device(experiment))


def build_multi_agent_algorithm(
    experiment: Experiment,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    env_agents: tuple[str, ...],
    env: Any = None,
) -> MultiAgentAlgorithm:
    """The learners of the experiment's ``agents`` section on one agent column's spaces (with
    ``layout: groups``, each group's spaces of ``env.groups``), composed into an on- or off-policy
    multi-agent algorithm (the top-level algorithm's family), on the experiment's device.
    ``env_agents``: the env's agents (``()`` for scopes)."""
    agents = experiment.agents
    assert agents is not None
    device = experiment_device(experiment)
    if get_spec(experiment.algorithm.name).team:
        return _build_team(experiment, observation_space, action_space, env_agents).to(device)
    learners, num_units = _build_learners(experiment, observation_space, action_space, env_agents, env)
    family = get_spec(experiment.algorithm.name).family
    cls = MultiAgentOnPolicy if family is Family.ON_POLICY else MultiAgentOffPolicy
    try:
        built = cls(learners, num_units=num_units, update_mode=agents.update_mode)
    except ValueError as error:  # ConfigurationError: every learner fixed, ...
        raise ExperimentError(f"agents: {error}") from None
    return built.to(device)


def _build_team(
    experiment: Experiment,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    env_agents: tuple[str, ...],
) -> ValueDecomposition:
    """A team algorithm (``AlgorithmSpec.team``: VDN, QMIX): one algorithm over every agent, which
    samples joint transitions of the agents' columns from a numpy replay buffer."""
    agents = experiment.agents
    assert agents is not None
    name = experiment.algorithm.name
    if agents.layout != "shared":
        raise ExperimentError(
            f"agents.layout: {name} trains every agent as one team (one network shared by the agents, one "
            f"mixer); use layout shared, got {agents.layout!r}."
        )
    if experiment.env.type == "vmas" or experiment.buffer.prioritized:
        field, value = (
            ("env.type", "vmas") if experiment.env.type == "vmas" else ("buffer.prioritized", "true")
        )
        raise ExperimentError(
            f"{field}: {value!r} is not supported by {name}, which samples joint transitions from a numpy "
            f"VectorReplayBuffer (a PettingZoo parallel env such as mpe2.simple_spread_v3, "
            f"buffer.prioritized: false)."
        )
    check_agent_names(agents, env_agents, experiment.env.id)
    torch.manual_seed(experiment.seed)
    built = build_section(
        experiment.algorithm,
        observation_space,
        action_space,
        seed=experiment.seed,
        num_update_steps=num_update_steps(experiment, experiment.algorithm),
        env_id=experiment.env.id,
        agents=env_agents,
    )
    assert isinstance(built, ValueDecomposition)
    return built


def _section(member: MemberConfig) -> AlgorithmConfig:
    assert member.algorithm is not None
    return AlgorithmConfig.model_validate(member.algorithm)


def uses_exploration_noise(experiment: Experiment) -> bool:
    """Whether some learner's training policy explores by noise (epsilon-greedy, Gaussian)."""
    sections = [experiment.algorithm]
    if experiment.agents is not None:
        sections += [_section(m) for m in experiment.agents.members.values() if m.algorithm is not None]
    return any(get_spec(s.name).exploration_model is not NoExploration for s in sections)


# ---------------------------------------------------------------------- the test score
def return_reduction(agents: AgentsConfig | None, env_agents: tuple[str, ...]) -> Any:
    """The trainer's ``multi_agent_return_reduction`` of ``agents.return_reduction``; None: the mean
    (the trainer's default) or no per-agent returns (scopes)."""
    if agents is None or agents.layout == "scopes" or agents.return_reduction == "mean":
        return None
    reduction = agents.return_reduction
    if reduction.startswith("agent:"):
        return functools.partial(_agent_return, env_agents.index(reduction.removeprefix("agent:")))
    return functools.partial(_reduce_agents, reduction)


def _reduce_agents(how: str, returns: np.ndarray) -> np.ndarray:
    if how == "sum":
        return np.asarray(returns.sum(axis=1))
    if how == "min":
        return np.asarray(returns.min(axis=1))
    return np.asarray(returns.max(axis=1))


def _agent_return(index: int, returns: np.ndarray) -> np.ndarray:
    return np.asarray(returns[:, index])


# ---------------------------------------------------------------------- frozen policies
def locate_checkpoint(path: Path) -> tuple[Path, Path] | str:
    """(run directory, checkpoint directory) of ``path``, a checkpoint directory or a run directory
    (best/, else final/, else the newest periodic checkpoint); or what is wrong."""
    if (path / CONFIG_FILE).is_file():
        checkpoints = path / "checkpoints"
        for name in ("best", "final"):
            if (checkpoints / name / "manifest.json").is_file():
                return path, checkpoints / name
        periodic = sorted(p for p in checkpoints.glob("periodic-*") if (p / "manifest.json").is_file())
        if periodic:
            return path, periodic[-1]
        return f"{path}: a run directory without checkpoints (no {checkpoints}/best, final or periodic-*)."
    if not (path / "manifest.json").is_file():
        return f"{path}: neither a checkpoint (no manifest.json) nor a run directory (no {CONFIG_FILE})."
    for parent in list(path.resolve().parents)[:3]:
        if (parent / CONFIG_FILE).is_file():
            return parent, path
    return (
        f"{path}: no {CONFIG_FILE} in the directories above the checkpoint; the run's experiment is needed."
    )


def load_frozen_policy(
    member: MemberConfig, agent: str, observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> Policy:
    """The policy of ``member`` (``policy: frozen``) for the agent ``agent``: built as its run's
    config.yaml says, with the learner's policy weights of the checkpoint (see the module docstring)."""
    from tshtrain.checkpoint import read_algorithm_state
    from tshtrain.config.resolve import load_experiment

    where = f"agents.members.{agent}"
    assert member.checkpoint is not None
    found = locate_checkpoint(Path(member.checkpoint))
    if isinstance(found, str):
        raise ExperimentError(f"{where}.checkpoint: {found}")
    run_dir, checkpoint = found
    source = load_experiment(str(run_dir / CONFIG_FILE))
    section, learner = _source_section(source, member.learner, agent, where)
    algorithm = build_section(
        section,
        observation_space,
        action_space,
        seed=source.seed,
        env_id=source.env.id,
        where=f"{where} (frozen, built as in {run_dir / CONFIG_FILE}): ",
        explore=False,
    )
    try:
        manifest, state = read_algorithm_state(checkpoint)
    except CheckpointError as error:
        raise ExperimentError(f"{where}.checkpoint: {error}") from None
    if learner is not None:
        if not isinstance(state, dict) or learner not in state:
            held = sorted(state) if isinstance(state, dict) else []
            raise ExperimentError(
                f"{where}.learner: no learner {learner!r} in {manifest.path}; it holds {held}."
            )
        state = state[learner]
    weights = state.get("policy") if isinstance(state, dict) else None
    if not isinstance(weights, dict):
        raise ExperimentError(f"{where}.checkpoint: {manifest.path} holds no policy weights for {agent!r}.")
    policy: Policy = algorithm.policy
    try:
        policy.load_state_dict(weights)
    except (RuntimeError, KeyError, ValueError) as error:
        raise ExperimentError(
            f"{where}: the policy weights of {learner or 'the algorithm'} in {manifest.path} do not fit the "
            f"network built for this env's agents ({observation_space}, {action_space}): {error}"
        ) from None
    policy.requires_grad_(False)
    return policy


def _source_section(
    source: Experiment, learner: str | None, agent: str, where: str
) -> tuple[AlgorithmConfig, str | None]:
    """The algorithm section that built ``learner`` in the run ``source``, and the learner's name in
    its checkpoint (None: a single-agent run's algorithm)."""
    if source.agents is None:
        if learner is not None:
            raise ExperimentError(
                f"{where}.learner: {learner!r}, but that run trained one algorithm (no agents section); "
                f"remove learner."
            )
        return source.algorithm, None
    name = learner or agent
    other = source.agents.members.get(name)
    if other is not None and other.algorithm is None:
        raise ExperimentError(
            f"{where}.learner: {name!r} had a fixed policy ({other.policy}) in that run; name a learner "
            f"that was trained."
        )
    if source.agents.layout == "shared" and name != SHARED_LEARNER:
        raise ExperimentError(
            f"{where}.learner: that run shares one learner among its agents: learner: {SHARED_LEARNER}."
        )
    return (source.algorithm if other is None else _section(other)), name
