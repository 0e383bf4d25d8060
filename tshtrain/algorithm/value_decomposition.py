"""Value decomposition for cooperative discrete tasks: VDN (Sunehag et al. 2018) and QMIX (Rashid et al.
2018) on the generic off-policy trainer with a :class:`~tshtrain.data.MultiAgentCollector`.

Each agent ``a`` has a Q-network (its own, or one shared by every agent); the team's value of a joint
action is a mix of the agents' chosen values, ``Q_tot = mixer(Q_1(o_1, u_1), ..., Q_A(o_A, u_A); s)``
(:mod:`tshtrain.algorithm.blocks.mixers`: a sum for VDN, a monotonic state-conditioned network for
QMIX). One TD loss on the team reward trains every network together:

``y = R_team + D * mixer_targ(Q_targ_1(o'_1, u'_1), ..., Q_targ_A(o'_A, u'_A); s')``,

with ``u'_a = argmax Q_a(o'_a, .)`` (double Q-learning: the online networks choose, the target networks
value) or the target networks' own argmax. ``R_team`` is the mean (or sum) of the agents' n-step
returns, ``D`` the discount (0 when the episode terminated).

A joint transition is the ``A`` columns of one env at one row of the replay buffer (agent-major
columns: agent ``a`` of env ``e`` is column ``a * E + e``). This needs every agent to act in every
vector step and the agents' episodes to end together (parallel cooperative envs such as MPE2 or VMAS);
then every column holds the same number of rows, which :func:`sample_joint` checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, final

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import NO_UPDATE_HOOKS, OffPolicyAlgorithm, TrainingStats, UpdateHooks
from tshtrain.algorithm.blocks.mixers import Mixer, SumMixer
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.q_learning import HardTargetQLearner
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.algorithm.multi_agent import Learner, MultiAgentPolicy
from tshtrain.algorithm.pending_stats import gradient_step_stats
from tshtrain.constraints import PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.batch import ObsArray, ObsTensor, array_to_torch, obs_to_torch
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.data.prioritized import BasePrioritizedBuffer
from tshtrain.env.multi_agent import AgentColumns
from tshtrain.errors import ConfigurationError


class TeamReward(StrEnum):
    """How the team's reward ``R_team`` is made from the agents' n-step returns."""

    MEAN = "mean"
    """their mean (a reward shared by every agent stays itself)"""
    SUM = "sum"
    """their sum"""


@dataclass(frozen=True, kw_only=True)
class ValueDecompositionParams:
    """Hyperparameters of :class:`ValueDecomposition` (VDN, QMIX)."""

    lr: PositiveFloat = 5e-4
    """Adam learning rate (one Adam over the agents' networks and the mixer)"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    target_update_freq: PositiveInt = 200
    """gradient steps between two hard copies of the agents' networks and the mixer into their targets"""
    is_double: bool = True
    """double Q-learning: the online agent networks choose the next actions, the target networks value them"""
    huber_loss: bool = False
    """Huber (smooth L1) instead of the squared TD error of the papers"""
    max_grad_norm: PositiveFloat | None = 10.0
    """clip the gradient norm to this value (None: no clipping)"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""
    team_reward: TeamReward = TeamReward.MEAN
    """the team's reward from the agents' rewards: their ``mean`` (a shared reward stays itself) or
    their ``sum`` (the strings are accepted too)"""
    lr_schedule: Schedule | None = None
    """multiplies the learning rate by schedule.factor(k) in the gradient step after k gradient steps;
    None: constant"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)
        allowed = [reward.value for reward in TeamReward]
        if self.team_reward not in allowed:
            raise ConfigurationError(
                f"ValueDecompositionParams: team_reward must be one of {allowed}, got {self.team_reward!r}."
            )
        object.__setattr__(self, "team_reward", TeamReward(self.team_reward))


@dataclass(frozen=True, kw_only=True)
class ValueDecompositionTrainingStats(TrainingStats):
    """Statistics of VDN / QMIX gradient steps."""

    loss: float = 0.0
    """TD loss of the team's value"""
    q_tot_mean: float = 0.0
    """mean Q_tot of the sampled joint transitions"""
    target_mean: float = 0.0
    """mean TD target"""
    epsilon: float = 0.0
    """the exploration epsilon of the first agent's policy at the time of the step"""
    grad_norm: float = 0.0
    """gradient norm before clipping (0 when max_grad_norm is None: not computed)"""


@dataclass(frozen=True, kw_only=True)
class JointSample:
    """N joint transitions of A agents, agent-major: rows ``a * N .. (a + 1) * N - 1`` are agent ``a``'s."""

    obs: ObsTensor
    """o_t of every agent, A * N rows"""
    act: torch.Tensor
    """u_t of every agent, shape (A * N,)"""
    returns_AN: torch.Tensor
    """each agent's n-step return"""
    discount_N: torch.Tensor
    """gamma^m, 0 if any agent's chain ended in a terminal state"""
    obs_next: ObsTensor
    """o_{t+m} of every agent, A * N rows"""


def joint_indices(
    buffer: BaseReplayBuffer, batch_size: int, num_agents: int, owner: str = "ValueDecomposition"
) -> np.ndarray:
    """Flat indices, shape (A, N), of ``batch_size`` joint transitions drawn uniformly from ``buffer``'s
    (row, env) pairs with its generator; column ``a * E + e`` is agent ``a`` of env ``e``. ``owner``
    names the algorithm in errors."""
    lengths = buffer.column_lengths
    if buffer.num_columns % num_agents:
        raise ConfigurationError(
            f"{owner}: the buffer has {buffer.num_columns} columns, not a multiple of the "
            f"{num_agents} agents; build it with buffer_num=env.num_columns."
        )
    if len(lengths) and not (lengths == lengths[0]).all():
        raise ConfigurationError(
            f"{owner}: the buffer's columns hold different numbers of transitions "
            f"({lengths.tolist()}); joint transitions need every agent to act in every vector step and "
            f"the agents' episodes to end together (a parallel cooperative env), so that one row of the "
            f"A columns of an env is one joint transition."
        )
    num_envs = buffer.num_columns // num_agents
    num_rows = int(lengths[0])
    if num_rows == 0:
        raise ConfigurationError(f"{owner}.update: the buffer is empty; collect data first.")
    draws = buffer.rng.integers(0, num_rows * num_envs, size=batch_size)
    rows, envs = np.divmod(draws, num_envs)
    agent_cols = np.arange(num_agents)[:, None] * num_envs + envs[None, :]
    indices: np.ndarray = rows[None, :] * buffer.num_columns + agent_cols
    return indices


def sample_joint(
    buffer: AnyReplayBuffer,
    batch_size: int,
    num_agents: int,
    *,
    gamma: float,
    n_step: int,
    device: torch.device,
    hooks: UpdateHooks = NO_UPDATE_HOOKS,
    owner: str = "ValueDecomposition",
) -> JointSample:
    """``batch_size`` joint transitions (:func:`joint_indices`) with each agent's n-step returns; the
    agents' transitions pass through ``hooks.on_sampled_batch`` as one batch of A * N rows. ``owner``
    names the algorithm in errors."""
    if not isinstance(buffer, BaseReplayBuffer) or isinstance(buffer, BasePrioritizedBuffer):
        raise ConfigurationError(
            f"{owner}: the replay buffer is a {type(buffer).__name__}; {owner} "
            f"samples joint transitions from a numpy VectorReplayBuffer (prioritized and tensor buffers "
            f"are not supported yet)."
        )
    indices_AN = joint_indices(buffer, batch_size, num_agents, owner)
    flat = indices_AN.reshape(-1)
    batch = hooks.on_sampled_batch(buffer.get(flat))
    if n_step == 1:
        returns = np.asarray(batch.rew, dtype=np.float32)
        terminated = np.asarray(batch.terminated, dtype=bool)
        discounts = np.where(terminated, np.float32(0.0), np.float32(gamma))
        obs_next: ObsArray = batch.obs_next  # type: ignore[assignment]  # a numpy buffer's batch
    else:
        targets = buffer.nstep_targets(flat, n_step=n_step, gamma=gamma)
        returns, discounts, obs_next = targets.returns, targets.discounts, targets.obs_next
    discount_N = np.asarray(discounts, dtype=np.float32).reshape(num_agents, batch_size).min(axis=0)
    return JointSample(
        obs=obs_to_torch(batch.obs, device),  # type: ignore[arg-type]  # a numpy buffer's batch
        act=array_to_torch(np.asarray(batch.act), device),
        returns_AN=array_to_torch(
            np.asarray(returns, dtype=np.float32).reshape(num_agents, batch_size), device
        ),
        discount_N=array_to_torch(discount_N, device),
        obs_next=obs_to_torch(obs_next, device),
    )


def agent_rows(obs: ObsTensor, first: int, stop: int) -> ObsTensor:
    if isinstance(obs, Mapping):
        return {key: value[first:stop] for key, value in obs.items()}
    return obs[first:stop]


@final
class _AgentNets(nn.Module):
    """The distinct Q-networks of the learners (a shared network once) and the mixer: what Adam trains
    and what the target copy holds."""

    def __init__(self, q_nets: Sequence[nn.Module], mixer: Mixer):
        super().__init__()
        self.q_nets = nn.ModuleList(q_nets)
        self.mixer = mixer


def distinct_modules(modules: Sequence[nn.Module]) -> tuple[list[nn.Module], list[int]]:
    """The distinct modules (by identity) and, for each given one, its index among them."""
    found: list[nn.Module] = []
    where: list[int] = []
    for module in modules:
        index = next((k for k, seen in enumerate(found) if seen is module), None)
        if index is None:
            index = len(found)
            found.append(module)
        where.append(index)
    return found, where


@final
class ValueDecomposition(OffPolicyAlgorithm[MultiAgentPolicy, ValueDecompositionTrainingStats]):
    """VDN (``mixer=SumMixer()``, the default) or QMIX (``mixer=QMixer(...)``) over per-agent
    :class:`QValuePolicy` s (see the module docstring). Epsilon-greedy exploration through the
    collector's ``exploration_noise=True``, each agent's policy with its own schedule."""

    def __init__(
        self,
        agents: Sequence[str] | AgentColumns,
        q_policies: QValuePolicy | Mapping[str, QValuePolicy],
        *,
        mixer: Mixer | None = None,
        params: ValueDecompositionParams | None = None,
    ):
        """Args:
        agents: the env's agents, in column order (``env.columns``).
        q_policies: one policy shared by every agent (parameter sharing: give the network the agent id),
            or one per agent by name (the same object for several agents shares it among them).
        mixer: how the agents' values make the team's (default :class:`SumMixer`: VDN).
        params: the hyperparameters.
        """
        names = agents.agents if isinstance(agents, AgentColumns) else tuple(agents)
        if isinstance(q_policies, QValuePolicy):
            learners = [Learner("shared", slice(0, len(names)), policy=q_policies)]
        else:
            if sorted(q_policies) != sorted(names):
                raise ConfigurationError(
                    f"ValueDecomposition: q_policies names agents {sorted(q_policies)}, the env's agents are "
                    f"{list(names)}; give one QValuePolicy per agent (or one shared policy)."
                )
            learners = [
                Learner(agent, slice(k, k + 1), policy=q_policies[agent]) for k, agent in enumerate(names)
            ]
        for learner in learners:
            if not isinstance(learner.policy, QValuePolicy):
                raise ConfigurationError(
                    f"ValueDecomposition: agent {learner.name!r} has a {type(learner.policy).__name__}; "
                    f"value decomposition needs QValuePolicy (discrete actions)."
                )
        super().__init__(policy=MultiAgentPolicy(learners))
        self.num_agents = len(names)
        self.params = params or ValueDecompositionParams()
        self.mixer = mixer or SumMixer()
        self.q_policies: list[QValuePolicy] = [learner.policy for learner in learners]  # type: ignore[misc]
        self._spans = [(learner.units.start, learner.units.stop) for learner in learners]
        nets, self._net_index = distinct_modules([p.q_net for p in self.q_policies])
        self.nets = _AgentNets(nets, self.mixer)
        """the distinct agent networks and the mixer (the policies hold the same network objects)"""
        self.learner = HardTargetQLearner(self.nets, self.params)
        """the target copy of ``nets``, Adam and the gradient-step counter"""
        self.register_components({**self.learner.components(), "mixer": self.mixer})

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.learner.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.learner.load_extra_state(state)

    def agent_q_values(self, obs: ObsTensor, *, target: bool) -> torch.Tensor:
        """Q_a(o_a, .) of every agent for A * N agent-major rows, shape (A, N, num_actions): the online
        networks, or the target copies."""
        num = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        n = num // self.num_agents
        parts: list[torch.Tensor] = []
        for k, (first, stop) in enumerate(self._spans):
            rows = agent_rows(obs, first * n, stop * n)
            if target:
                net = self.learner.target.net
                assert isinstance(net, _AgentNets)
                q: torch.Tensor = net.q_nets[self._net_index[k]](rows)
            else:
                q = self.q_policies[k].q_values(rows)
            parts.append(q)
        q_all = parts[0] if len(parts) == 1 else torch.cat(parts)
        return q_all.view(self.num_agents, n, -1)

    def _state(self, obs: ObsTensor, n: int) -> torch.Tensor | None:
        """The mixer's state input: the first agent's rows of the state key (None if it reads none)."""
        key = self.mixer.state_key
        if key is None:
            return None
        if not isinstance(obs, Mapping) or key not in obs:
            given = f"keys {sorted(obs)}" if isinstance(obs, Mapping) else "no keys (an array)"
            raise ConfigurationError(
                f"ValueDecomposition: the mixer {type(self.mixer).__name__} reads the {key!r} key of the "
                f"observations, which have {given}; make the env emit the global state (PettingZoo: "
                f"global_state=True)."
            )
        return obs[key][:n]

    @torch.no_grad()
    def team_target(self, sample: JointSample) -> torch.Tensor:
        """``R_team + D * mixer_targ(Q_targ(o', u'); s')``, shape (N,)."""
        p = self.params
        q_next_ANU = self.agent_q_values(sample.obs_next, target=True)
        chooser = self.agent_q_values(sample.obs_next, target=False) if p.is_double else q_next_ANU
        next_act = chooser.argmax(dim=-1, keepdim=True)
        q_next_NA = q_next_ANU.gather(-1, next_act).squeeze(-1).T
        n = q_next_NA.shape[0]
        target_nets = self.learner.target.net
        assert isinstance(target_nets, _AgentNets)
        mixed: torch.Tensor = target_nets.mixer(q_next_NA, self._state(sample.obs_next, n))
        returns = sample.returns_AN.mean(0) if p.team_reward is TeamReward.MEAN else sample.returns_AN.sum(0)
        return returns + sample.discount_N * mixed

    def td_loss(self, sample: JointSample) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, Q_tot_N, target_N) of a joint sample."""
        q_ANU = self.agent_q_values(sample.obs, target=False)
        act_AN1 = sample.act.long().view(self.num_agents, -1, 1)
        q_NA = q_ANU.gather(-1, act_AN1).squeeze(-1).T
        q_tot: torch.Tensor = self.mixer(q_NA, self._state(sample.obs, q_NA.shape[0]))
        target = self.team_target(sample)
        loss = F.smooth_l1_loss(q_tot, target) if self.params.huber_loss else F.mse_loss(q_tot, target)
        return loss, q_tot, target

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> ValueDecompositionTrainingStats:
        p = self.params
        self.learner.begin_gradient_step()
        sample = sample_joint(
            buffer,
            batch_size,
            self.num_agents,
            gamma=p.gamma,
            n_step=p.n_step,
            device=self.policy.device,
            hooks=hooks,
        )
        loss, q_tot, target = self.td_loss(sample)
        grad_norm = self.learner.gradient_step({"TD loss": loss}, hooks, max_grad_norm=p.max_grad_norm)
        return gradient_step_stats(
            ValueDecompositionTrainingStats,
            "ValueDecomposition",
            {
                "loss": loss,
                "q_tot_mean": q_tot.detach().mean(),
                "target_mean": target.mean(),
                "grad_norm": grad_norm,
            },
            losses={"loss": "TD loss"},
            deferred=self.defers_stats,
            epsilon=self.q_policies[0].eps,
        )


__all__ = [
    "JointSample",
    "TeamReward",
    "ValueDecomposition",
    "ValueDecompositionParams",
    "ValueDecompositionTrainingStats",
    "joint_indices",
    "sample_joint",
]
