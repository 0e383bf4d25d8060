"""The rollout preparation of the actor-critic update with a :class:`PerWorldCritic`.

:func:`prepare_world_rollout` is :func:`~tshtrain.algorithm.blocks.onpolicy.prepare_rollout` for a
critic that runs once per world step: the values of a (T, A * E) agent-major rollout come from T * E
critic rows (agent 0's columns; the ``state`` key is the same for every agent of a world), GAE runs per
column as usual (rewards may differ per agent), and the result is laid out world-major so that
:func:`~tshtrain.algorithm.blocks.world_critic.world_minibatches` can cut it into whole world steps.
"""

from __future__ import annotations

import torch

from tshtrain.algorithm.blocks.onpolicy import (
    ActorCritic,
    RolloutTensors,
    TimeoutBootstrap,
    bootstrap_ends,
    float_obs,
    in_chunks,
    map_obs_tensor,
    old_log_probs,
    rollout_to_torch,
    timeout_next_values,
)
from tshtrain.algorithm.blocks.world_critic import PerWorldCritic
from tshtrain.data.batch import AnyRolloutBatch, ObsTensor, TensorRolloutBatch
from tshtrain.errors import ConfigurationError
from tshtrain.functional.returns import gae_advantages_torch


def _world_major(x_TC: torch.Tensor, num_agents: int) -> torch.Tensor:
    """(T, A * E, ...) agent-major columns -> (T * E * A, ...) rows, world step by world step."""
    num_t, num_c = x_TC.shape[:2]
    x_TAE = x_TC.reshape(num_t, num_agents, num_c // num_agents, *x_TC.shape[2:])
    return x_TAE.transpose(1, 2).reshape(num_t * num_c, *x_TC.shape[2:])


def _agent_major(x_TEA: torch.Tensor) -> torch.Tensor:
    """(T, E, A) per-world values -> (T, A * E) agent-major columns."""
    num_t, num_e, num_a = x_TEA.shape
    return x_TEA.transpose(1, 2).reshape(num_t, num_a * num_e)


def _check_layout(owner: str, data: TensorRolloutBatch, num_agents: int) -> torch.Tensor:
    """The valid world steps, shape (T, E); ConfigurationError unless the columns are whole worlds
    whose agents are valid at the same steps."""
    num_t, num_c = data.shape
    if num_c % num_agents:
        raise ConfigurationError(
            f"{owner}: the rollout has {num_c} columns, not a multiple of the PerWorldCritic's "
            f"num_agents={num_agents}; a per-world critic needs a learner over all agents of each world "
            "(columns agent-major, A * E of them), e.g. shared_learner over every agent."
        )
    valid_TAE = data.valid.reshape(num_t, num_agents, num_c // num_agents)
    if data.num_valid != num_t * num_c and not bool((valid_TAE == valid_TAE[:, :1]).all()):
        raise ConfigurationError(
            f"{owner}: with a PerWorldCritic all agents of a world must have collected the same steps; "
            "this rollout has steps valid for some agents of a world and not for others."
        )
    return valid_TAE[:, 0]


def _world_values(
    critic: PerWorldCritic, obs_TC: ObsTensor, num_e: int, where_TE: torch.Tensor | None
) -> torch.Tensor:
    """The critic's values, shape (T, E, A), from agent 0's columns of ``obs_TC`` (only at
    ``where_TE``, zeros elsewhere, when given)."""
    num_t = len(where_TE) if where_TE is not None else _leading(obs_TC)
    first = map_obs_tensor(float_obs(obs_TC), lambda x: x[:, :num_e])
    if where_TE is None:
        rows = map_obs_tensor(first, lambda x: x.reshape(num_t * num_e, *x.shape[2:]))
        value_WA = in_chunks(lambda s: critic(map_obs_tensor(rows, lambda x: x[s])), num_t * num_e)
        return value_WA.reshape(num_t, num_e, critic.num_agents)
    value_TEA = torch.zeros(num_t, num_e, critic.num_agents, device=where_TE.device)
    value_TEA[where_TE] = critic(map_obs_tensor(first, lambda x: x[where_TE]))
    return value_TEA


def _leading(obs: ObsTensor) -> int:
    return len(obs) if isinstance(obs, torch.Tensor) else len(next(iter(obs.values())))


@torch.no_grad()
def prepare_world_rollout(
    ac: ActorCritic,
    critic: PerWorldCritic,
    rollout: AnyRolloutBatch,
    *,
    gamma: float,
    gae_lambda: float,
    timeout_bootstrap: TimeoutBootstrap = TimeoutBootstrap.FINAL_OBS,
) -> RolloutTensors:
    """Values (once per world step), GAE advantages (per column, bootstrapped as in
    :func:`~tshtrain.algorithm.blocks.onpolicy.prepare_rollout`), returns and old log-probabilities,
    as :class:`RolloutTensors` whose rows are world-major: world step ``w`` (the ``w``-th valid
    (t, e), t-major) holds rows ``w * A .. w * A + A - 1``, agents 0 .. A - 1.

    Raises:
        ConfigurationError: the columns are not a multiple of ``critic.num_agents``, or the agents of
            a world were not collected at the same steps.
    """
    num_a = critic.num_agents
    data = rollout_to_torch(rollout, ac.policy.device)
    world_valid_TE = _check_layout(ac.owner, data, num_a)
    num_t, num_c = data.shape
    num_e = num_c // num_a
    value_TC = _agent_major(_world_values(critic, data.obs, num_e, None))
    next_value_TC = torch.zeros_like(value_TC)
    next_value_TC[:-1] = value_TC[1:]
    ends_TC = bootstrap_ends(data, timeout_bootstrap)
    if bool(ends_TC.any()):  # V(obs_next) where a column's episode was cut or its rollout ends
        ends_TE = ends_TC.reshape(num_t, num_a, num_e).any(dim=1)
        bootstrap_TC = _agent_major(_world_values(critic, data.obs_next, num_e, ends_TE))
        next_value_TC = torch.where(ends_TC, bootstrap_TC, next_value_TC)
    next_value_TC = timeout_next_values(next_value_TC, value_TC, data, timeout_bootstrap)
    adv_TC = gae_advantages_torch(
        data.rew, value_TC, next_value_TC, data.terminated, data.boundary, gamma=gamma, gae_lambda=gae_lambda
    ).to(value_TC.device)

    all_valid = data.num_valid == num_t * num_c
    keep_N = world_valid_TE.reshape(-1).repeat_interleave(num_a)

    def rows(x_TC: torch.Tensor) -> torch.Tensor:
        x_N = _world_major(x_TC, num_a)
        return x_N if all_valid else x_N[keep_N]

    obs_N = map_obs_tensor(float_obs(data.obs), rows)
    act_N, value_N, adv_N = rows(data.act), rows(value_TC), rows(adv_TC)
    logp_N = old_log_probs(ac.policy, obs_N, act_N, None if data.logp is None else rows(data.logp))
    return RolloutTensors(
        obs=obs_N, act=act_N, logp_old=logp_N, value_old=value_N, advantages=adv_N, returns=adv_N + value_N
    )
