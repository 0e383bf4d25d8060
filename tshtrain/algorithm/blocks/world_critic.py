"""A critic evaluated once per world (env) for a learner shared by all agents of the world.

The rollout of a learner shared over agent columns (:mod:`tshtrain.env.multi_agent`) has ``A * E``
columns, agent-major: agent ``a`` of world ``e`` is column ``a * E + e``. A centralised critic that reads
the world's global ``state`` sees the same input in all ``A`` columns of a world, so evaluating it per
column repeats the work ``A`` times. :class:`PerWorldCritic` reads one row per world step and returns
the ``A`` agents' values at once (output ``a`` is agent ``a``'s value: rewards may differ per agent).

The actor-critic update (:func:`tshtrain.algorithm.blocks.onpolicy_update.actor_critic_update`) takes
its grouped path when the critic is a :class:`PerWorldCritic`: the rollout's rows are laid out
world-major (world step ``w`` holds rows ``w * A .. w * A + A - 1``, agents in order), values are
computed once per world step, and mini-batches (:func:`world_minibatches`) hold whole world steps. In
that layout :meth:`PerWorldCritic.grouped_values` gives every row its value from the first row of its
group.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.data.batch import ObsTensor
from tshtrain.errors import ConfigurationError


@final
class PerWorldCritic(nn.Module):
    """``net`` maps one observation row per world step to the values of the world's ``num_agents``
    agents, shape (W, num_agents).

    Give it the observation of any one agent of the world (they share the ``state`` key; the update
    passes agent 0's): ``net`` should read only world-level keys, e.g. ``SelectKeys(net, ["state"])``
    (:func:`~tshtrain.algorithm.blocks.agent_nets.mappo_actor_critic` with ``critic_per_world=True``
    builds it). Use it as the critic of a learner whose rollout columns are all agents of each world,
    agent-major (a :func:`~tshtrain.algorithm.multi_agent.shared_learner`, or one PPO over a
    ``VmasEnv(agent_layout="columns")``); the update then validates that the number of columns is a
    multiple of ``num_agents`` and that the mini-batch size is one too.
    """

    def __init__(self, net: nn.Module, num_agents: int):
        """Args:
        net: world observations (W rows) -> values (W, num_agents).
        num_agents: A, the agents of a world (the learner's columns per world).

        Raises:
            ConfigurationError: ``num_agents`` is not a positive int, or ``net``'s last ``nn.Linear``
                has a width other than ``num_agents``.
        """
        super().__init__()
        if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
            raise ConfigurationError(f"PerWorldCritic.num_agents must be an int >= 1, got {num_agents!r}.")
        linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
        if linears and linears[-1].out_features != num_agents:
            raise ConfigurationError(
                f"PerWorldCritic: the net's last Linear has {linears[-1].out_features} outputs; it must "
                f"have num_agents={num_agents} (one value per agent of the world)."
            )
        self.net = net
        self.num_agents = num_agents
        """A: values per world step"""

    @override
    def forward(self, obs_W: ObsTensor) -> torch.Tensor:
        """The values of the agents of W world steps, shape (W, num_agents)."""
        out: torch.Tensor = self.net(obs_W)
        if out.dim() != 2 or out.shape[1] != self.num_agents:
            raise ConfigurationError(
                f"PerWorldCritic: the net returned shape {tuple(out.shape)}; it must return "
                f"(world steps, num_agents={self.num_agents})."
            )
        return out

    def grouped_values(self, obs_N: ObsTensor) -> torch.Tensor:
        """The values of N = W * num_agents rows laid out world-major (rows ``w * A .. w * A + A - 1``
        are agents ``0 .. A - 1`` of world step ``w``), shape (N,): the net runs on the W first rows
        of the groups only."""
        num_rows = _num_rows(obs_N)
        if num_rows % self.num_agents:
            raise ConfigurationError(
                f"PerWorldCritic: {num_rows} rows are not whole world steps of num_agents="
                f"{self.num_agents} rows; this critic is evaluated on world-major groups of rows."
            )
        value_WA: torch.Tensor = self(_every(obs_N, self.num_agents))
        return value_WA.reshape(num_rows)


def _num_rows(obs: ObsTensor) -> int:
    return len(obs) if isinstance(obs, torch.Tensor) else len(next(iter(obs.values())))


def _every(obs: ObsTensor, step: int) -> ObsTensor:
    """Rows 0, step, 2 * step, ... of every tensor of ``obs``."""
    if isinstance(obs, Mapping):
        return {key: value[::step] for key, value in obs.items()}
    return obs[::step]


def check_world_batch_size(batch_size: int | None, num_agents: int) -> None:
    """ConfigurationError unless ``batch_size`` (agent transitions per mini-batch; None: all) is a
    multiple of ``num_agents``."""
    if batch_size is not None and batch_size % num_agents:
        fit = max(1, batch_size // num_agents) * num_agents
        raise ConfigurationError(
            f"batch_size={batch_size} (agent transitions per mini-batch) must be a multiple of the "
            f"PerWorldCritic's num_agents={num_agents}: mini-batches hold whole world steps "
            f"(batch_size / num_agents of them); e.g. batch_size={fit}."
        )


def world_minibatches(
    num_worlds: int,
    num_agents: int,
    batch_size: int | None,
    num_repetitions: int,
    generator: torch.Generator,
) -> Iterator[torch.Tensor]:
    """Row indices of mini-batches of whole world steps over a world-major rollout of
    ``num_worlds * num_agents`` rows: ``num_repetitions`` passes, each over a shuffled permutation of
    the world steps (drawn with ``generator``) cut into ``batch_size // num_agents`` world steps (None:
    all in one; the last may be smaller), each world step giving its ``num_agents`` rows in order.

    ``batch_size`` counts rows (agent transitions), as for the ordinary mini-batches, and must be a
    multiple of ``num_agents`` (ConfigurationError otherwise).
    """
    check_world_batch_size(batch_size, num_agents)
    size = num_worlds if batch_size is None else max(1, min(batch_size // num_agents, num_worlds))
    agents_A = torch.arange(num_agents, device=generator.device)
    for _ in range(num_repetitions):
        perm = torch.randperm(num_worlds, generator=generator, device=generator.device)
        for start in range(0, num_worlds, size):
            worlds_B = perm[start : start + size]
            yield (worlds_B.unsqueeze(1) * num_agents + agents_A).reshape(-1)
