"""What MADDPG and MASAC share: decentralised actors, centralised critics over joint transitions.

``A`` agents act in a parallel cooperative env (every agent acts in every vector step, the agents'
episodes end together). A **joint transition** is the ``A`` columns of one env at one row of the
replay buffer (:func:`~tshtrain.algorithm.value_decomposition.sample_joint`, the sampling of VDN and
QMIX), so each sample holds every agent's observation, action, reward and next observation.

* Each agent's **actor** sees only its own observation (a shared actor: give it the agent id, the
  ``agent_id`` key), so execution stays decentralised.
* Each agent's **critic** ``Q_a(x, u_1, ..., u_A)`` sees the **critic input** ``x`` (the env's global
  state, the ``state`` key, or every agent's own observation side by side) and **every agent's
  action**. A critic shared by several agents also gets the one-hot id of the agent it values, which
  the algorithm appends. The critic's contract is ``critic(x_N, u_NJ) -> (num_critics, N)`` with
  ``u_NJ`` the agents' actions (each in ``[-1, 1]``) concatenated in agent order: a
  :class:`~tshtrain.algorithm.QEnsemble` built by :func:`centralised_critic` fits.

Agent ``a``'s critic regresses on agent ``a``'s own (n-step) reward; its policy-gradient term changes
only agent ``a``'s action in the joint action, the others' stay those of the sample (Lowe et al. 2017).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import Policy
from tshtrain.algorithm.blocks.continuous import QEnsemble, box_dim, critic_values
from tshtrain.algorithm.blocks.nets import flat_dim
from tshtrain.algorithm.blocks.offpolicy_actor_critic import OffPolicyActorCriticParams
from tshtrain.algorithm.multi_agent import Learner, MultiAgentPolicy
from tshtrain.algorithm.value_decomposition import agent_rows, distinct_modules
from tshtrain.constraints import PositiveInt
from tshtrain.data.batch import ObsTensor
from tshtrain.env.multi_agent import OBS_KEY, STATE_KEY, AgentColumns
from tshtrain.errors import ConfigurationError

CRITIC_INPUTS = ("state", "joint_obs")
"""what a centralised critic may see besides the agents' actions"""

TPolicy = TypeVar("TPolicy", bound=Policy)
_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class MultiAgentActorCriticParams(OffPolicyActorCriticParams):
    """Hyperparameters shared by :class:`~tshtrain.algorithm.maddpg.MADDPGParams` and
    :class:`~tshtrain.algorithm.masac.MASACParams` (use those; this base is abstract). ``tau`` is the
    Polyak rate of every target network."""

    critic_input: Literal["state", "joint_obs"] = "state"
    """what the critics see besides every agent's action: ``state``, the env's global state (the
    ``state`` key; PettingZoo ``global_state=True``), or ``joint_obs``, every agent's own observation
    (the ``obs`` key, or the whole array observation) side by side in agent order"""
    n_step: PositiveInt = 1
    """transitions summed in each agent's TD target before bootstrapping (stops early at episode ends)"""

    @override
    @abstractmethod
    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic_input not in CRITIC_INPUTS:
            raise ConfigurationError(
                f"{type(self).__name__}.critic_input must be one of {list(CRITIC_INPUTS)}, got "
                f"{self.critic_input!r}."
            )


def critic_input_dim(obs_space: gym.Space[Any], num_agents: int, critic_input: str, *, shared: bool) -> int:
    """Width of a centralised critic's input ``x`` (without the actions) for agents whose column
    observations live in ``obs_space``; ``shared``: one critic for several agents (the agent id is
    appended)."""
    if critic_input == "state":
        if not isinstance(obs_space, gym.spaces.Dict) or STATE_KEY not in obs_space.spaces:
            raise ConfigurationError(
                f"critic_input='state' reads the {STATE_KEY!r} key of the observations, but the "
                f"observation space is {obs_space}; build the env with global_state=True or use "
                f"critic_input='joint_obs'."
            )
        base = flat_dim(obs_space.spaces[STATE_KEY])
    else:
        own = obs_space.spaces[OBS_KEY] if isinstance(obs_space, gym.spaces.Dict) else obs_space
        base = num_agents * flat_dim(own)
    return base + (num_agents if shared else 0)


def centralised_critic(
    obs_space: gym.Space[Any],
    act_space: gym.Space[Any],
    num_agents: int,
    *,
    critic_input: Literal["state", "joint_obs"] = "state",
    shared: bool = True,
    num_critics: int = 1,
    hidden_sizes: Sequence[int] = (256, 256),
    activation: type[nn.Module] = nn.ReLU,
) -> QEnsemble:
    """A :class:`QEnsemble` ``Q(x, u_1, ..., u_A)`` for MADDPG (``num_critics=1``) or MASAC (2): the
    critic input of :func:`critic_input_dim` and all ``num_agents`` agents' Box actions."""
    return QEnsemble(
        critic_input_dim(obs_space, num_agents, critic_input, shared=shared),
        num_agents * box_dim(act_space),
        hidden_sizes,
        num_critics=num_critics,
        activation=activation,
    )


def joint_action(act_AND: torch.Tensor) -> torch.Tensor:
    """Every agent's action of each joint transition side by side, (A, N, D) -> (N, A * D)."""
    num_agents, n, d = act_AND.shape
    return act_AND.permute(1, 0, 2).reshape(n, num_agents * d)


def own_action_joint(act_AND: torch.Tensor, own_AND: torch.Tensor) -> torch.Tensor:
    """For each agent ``a``, the joint action with agent ``a``'s action replaced by ``own_AND[a]`` and
    the others' from ``act_AND``: shape (A, N, A * D); only ``own_AND[a]`` reaches row ``a``'s gradient."""
    num_agents, n, d = act_AND.shape
    diagonal = torch.eye(num_agents, dtype=torch.bool, device=act_AND.device)[:, :, None, None]
    mixed_AAND = torch.where(diagonal, own_AND[None], act_AND[None])
    return mixed_AAND.permute(0, 2, 1, 3).reshape(num_agents, n, num_agents * d)


@final
class JointActorCritic(Generic[TPolicy]):
    """The agents' policies (one shared, or one per agent) with their distinct actor networks, and the
    distinct centralised critics with the agents each one values. The algorithm trains
    :attr:`actors` and :attr:`critics` (one ``nn.ModuleList`` each, so one Adam each)."""

    def __init__(
        self,
        agents: Sequence[str] | AgentColumns,
        policies: TPolicy | Mapping[str, TPolicy],
        critics: nn.Module | Mapping[str, nn.Module],
        *,
        policy_type: type[TPolicy],
        critic_input: str,
        owner: str,
    ):
        """Args:
        agents: the env's agents, in column order (``env.columns``).
        policies: one policy shared by every agent, or one per agent by name (the same object for
            several agents shares it among them).
        critics: one critic shared by every agent, or one per agent by name (likewise).
        policy_type: the policy class the algorithm needs.
        critic_input: ``state`` or ``joint_obs`` (see :class:`MultiAgentActorCriticParams`).
        owner: the algorithm's name, for error messages.
        """
        names = agents.agents if isinstance(agents, AgentColumns) else tuple(agents)
        self.num_agents = len(names)
        self.critic_input = critic_input
        self.owner = owner
        if isinstance(policies, Policy):
            learners = [Learner("shared", slice(0, len(names)), policy=policies)]
        else:
            _check_names(owner, "policies", policies, names)
            learners = [
                Learner(agent, slice(k, k + 1), policy=policies[agent]) for k, agent in enumerate(names)
            ]
        self.policies: list[TPolicy] = []
        for learner in learners:
            if not isinstance(learner.policy, policy_type):
                raise ConfigurationError(
                    f"{owner}: agent {learner.name!r} has a {type(learner.policy).__name__}; {owner} needs "
                    f"{policy_type.__name__}."
                )
            self.policies.append(learner.policy)
        self.policy = MultiAgentPolicy(learners)
        """the joint policy the collectors run"""
        self.spans = [(learner.units.start, learner.units.stop) for learner in learners]
        """each policy's agents, first and stop"""
        actor_nets, self.actor_index = distinct_modules([_actor_net(p) for p in self.policies])
        self.actors = nn.ModuleList(actor_nets)
        """the distinct actor networks (the policies hold the same objects)"""
        if isinstance(critics, nn.Module):
            per_agent = [critics] * len(names)
        else:
            _check_names(owner, "critics", critics, names)
            per_agent = [critics[agent] for agent in names]
        critic_nets, critic_of_agent = distinct_modules(per_agent)
        self.critics = nn.ModuleList(critic_nets)
        """the distinct critics"""
        self.critic_agents = [
            [a for a, c in enumerate(critic_of_agent) if c == k] for k in range(len(critic_nets))
        ]
        """the agents each distinct critic values (a critic of several agents also reads the agent id)"""

    def per_policy(self, obs: ObsTensor, fn: Callable[[int, ObsTensor], _T]) -> list[_T]:
        """``fn(k, rows)`` for each policy ``k`` on its agents' rows of A * N agent-major rows."""
        num = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        n = num // self.num_agents
        return [fn(k, agent_rows(obs, first * n, stop * n)) for k, (first, stop) in enumerate(self.spans)]

    def critic_base(self, obs: ObsTensor) -> torch.Tensor:
        """The critic input ``x`` of each joint transition, (N, X), from A * N agent-major rows."""
        if self.critic_input == "state":
            if not isinstance(obs, Mapping) or STATE_KEY not in obs:
                given = f"keys {sorted(obs)}" if isinstance(obs, Mapping) else "no keys (an array)"
                raise ConfigurationError(
                    f"{self.owner}: critic_input='state' reads the {STATE_KEY!r} key of the observations, "
                    f"which have {given}; make the env emit the global state (PettingZoo: "
                    f"global_state=True) or use critic_input='joint_obs'."
                )
            state = obs[STATE_KEY]
            return state[: len(state) // self.num_agents].flatten(1)
        own = obs[OBS_KEY] if isinstance(obs, Mapping) else obs
        flat = own.flatten(1)
        n = len(flat) // self.num_agents
        return flat.view(self.num_agents, n, -1).permute(1, 0, 2).reshape(n, -1)

    def q_values(self, critics: nn.ModuleList, obs: ObsTensor, joint_act_ANJ: torch.Tensor) -> torch.Tensor:
        """``Q_i,a(x, u^a)`` of every ensemble member ``i`` and agent ``a``, shape (M, A, N), where
        ``u^a = joint_act_ANJ[a]`` is the joint action agent ``a``'s critic values. ``critics`` is
        :attr:`critics` or its target copy."""
        base_NX = self.critic_base(obs)
        n = base_NX.shape[0]
        agent_id = torch.eye(self.num_agents, device=base_NX.device, dtype=base_NX.dtype)
        parts: list[torch.Tensor] = []
        for critic, agents in zip(critics, self.critic_agents, strict=True):
            k = len(agents)
            x_KNX = base_NX.expand(k, *base_NX.shape)
            if k > 1:
                ids_KNA = agent_id[agents][:, None, :].expand(k, n, self.num_agents)
                x_KNX = torch.cat([x_KNX, ids_KNA], dim=-1)
            act_KNJ = joint_act_ANJ[agents]
            q_MK = critic_values(critic, x_KNX.reshape(k * n, -1), act_KNJ.reshape(k * n, -1))
            parts.append(q_MK.view(q_MK.shape[0], k, n))
        q_MAN = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        order = [a for agents in self.critic_agents for a in agents]
        if order != list(range(self.num_agents)):
            q_MAN = q_MAN[:, np.argsort(order)]
        return q_MAN


def _actor_net(policy: Policy) -> nn.Module:
    net = getattr(policy, "actor", None)
    assert isinstance(net, nn.Module), f"{type(policy).__name__} has no actor network"
    return net


def _check_names(owner: str, what: str, given: Mapping[str, Any], names: Sequence[str]) -> None:
    if sorted(given) != sorted(names):
        raise ConfigurationError(
            f"{owner}: {what} names agents {sorted(given)}, the env's agents are {list(names)}; give one "
            f"per agent (or one shared)."
        )


__all__ = [
    "CRITIC_INPUTS",
    "JointActorCritic",
    "MultiAgentActorCriticParams",
    "centralised_critic",
    "critic_input_dim",
    "joint_action",
    "own_action_joint",
]
