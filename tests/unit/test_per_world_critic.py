"""The per-world critic (blocks/world_critic.py, blocks/onpolicy_world.py): MAPPO's centralised critic
evaluated once per world step, its values gathered to the world's A agent columns, mini-batches of
whole world steps.

The reference for the values, bootstraps, GAE advantages and returns is the ordinary per-column path
(:func:`prepare_rollout`) with a per-column critic built on the same network: V(column of agent a) =
net(state)[a], picked with the one-hot ``agent_id``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import PPO, PPOParams
from tshtrain.algorithm.blocks.agent_nets import PerWorldCritic, mappo_actor_critic
from tshtrain.algorithm.blocks.onpolicy import ActorCritic, prepare_rollout
from tshtrain.algorithm.blocks.onpolicy_world import prepare_world_rollout
from tshtrain.algorithm.blocks.world_critic import world_minibatches
from tshtrain.data.batch import TensorRolloutBatch
from tshtrain.errors import ConfigurationError

A, E, T, S, OBS = 3, 4, 6, 5, 2
"""agents, worlds, steps, state width, own-observation width"""


def _space(num_agents: int = A, agent_id: bool = True) -> gym.spaces.Dict:
    keys: dict[str, gym.Space[Any]] = {
        "obs": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
        "state": gym.spaces.Box(-np.inf, np.inf, (S,), np.float32),
    }
    if agent_id:
        keys["agent_id"] = gym.spaces.Box(0.0, 1.0, (num_agents,), np.float32)
    return gym.spaces.Dict(keys)


ACT_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _columns(x_TE: torch.Tensor) -> torch.Tensor:
    """A world-level (T, E, ...) tensor repeated to the (T, A * E, ...) agent-major columns."""
    return x_TE.repeat(1, A, *([1] * (x_TE.dim() - 2)))


def _rollout(seed: int = 0, *, pad_world: int | None = None) -> TensorRolloutBatch:
    """Episodes end per world (terminations and truncations at random steps); rewards differ per
    agent; the last step of every column is a boundary. ``pad_world``: that world's last two steps
    are padding (for all of its agents)."""
    g = torch.Generator().manual_seed(seed)
    state_TES = torch.randn(T + 1, E, S, generator=g)
    final_TES = torch.randn(T, E, S, generator=g)  # obs_next at episode ends (the true final state)
    ends = torch.rand(T, E, generator=g)
    terminated_TE, truncated_TE = ends < 0.15, (ends >= 0.15) & (ends < 0.3)
    boundary_TE = terminated_TE | truncated_TE
    boundary_TE[-1] = True
    valid_TE = torch.ones(T, E, dtype=torch.bool)
    if pad_world is not None:
        valid_TE[-2:, pad_world] = False
        boundary_TE[-3:, pad_world] = True
        terminated_TE[-2:, pad_world] = truncated_TE[-2:, pad_world] = False
    next_state_TES = torch.where(boundary_TE.unsqueeze(-1), final_TES, state_TES[1:])
    agent_id_CA = torch.eye(A).repeat_interleave(E, dim=0)
    obs = {
        "obs": torch.randn(T, A * E, OBS, generator=g),
        "state": _columns(state_TES[:-1]),
        "agent_id": agent_id_CA.expand(T, A * E, A).clone(),
    }
    obs_next = {
        "obs": torch.randn(T, A * E, OBS, generator=g),
        "state": _columns(next_state_TES),
        "agent_id": obs["agent_id"].clone(),
    }
    valid_TC = _columns(valid_TE)
    return TensorRolloutBatch(
        obs=obs,
        act=torch.rand(T, A * E, 2, generator=g) * 2 - 1,
        rew=torch.randn(T, A * E, generator=g) * valid_TC,
        terminated=_columns(terminated_TE),
        truncated=_columns(truncated_TE),
        obs_next=obs_next,
        boundary=_columns(boundary_TE),
        valid=valid_TC,
        num_valid=int(valid_TC.sum()),
    )


class _PerColumn(nn.Module):
    """The reference critic: the per-world net evaluated on every column, the column's agent's output."""

    def __init__(self, critic: PerWorldCritic):
        super().__init__()
        self.critic = critic

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return (self.critic(obs) * obs["agent_id"]).sum(dim=1)


class _Recording(nn.Module):
    """Records the number of rows of every call of ``net``."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net
        self.rows: list[int] = []

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        self.rows.append(len(obs["state"]))
        out: torch.Tensor = self.net(obs)
        return out


def _pair(seed: int = 0) -> tuple[Any, PerWorldCritic]:
    policy, critic = mappo_actor_critic(
        _space(), ACT_SPACE, hidden_sizes=(8,), critic_per_world=True, seed=seed
    )
    assert isinstance(critic, PerWorldCritic)
    return policy, critic


def _ac(policy: Any, critic: nn.Module) -> ActorCritic:
    return ActorCritic(
        owner="test", policy=policy, critic=critic, lr=1e-3, lr_schedule=None, obs_normalizer=None, seed=0
    )


def _world_major(x_N: torch.Tensor, num_t: int) -> torch.Tensor:
    """Agent-major rows (t, a, e) of a full rollout -> world-major rows (t, e, a)."""
    return x_N.reshape(num_t, A, E, *x_N.shape[1:]).transpose(1, 2).reshape(x_N.shape)


def test_builder_makes_a_state_only_critic_with_one_output_per_agent() -> None:
    _, critic = _pair()
    assert critic.num_agents == A
    linears = [m for m in critic.modules() if isinstance(m, nn.Linear)]
    assert linears[0].in_features == S  # state only: no agent id, no own observation
    assert linears[-1].out_features == A
    obs = {k: torch.randn(7, *(_space()[k].shape or ())) for k in ("obs", "state", "agent_id")}
    assert critic(obs).shape == (7, A)


@pytest.mark.parametrize("pad_world", [None, 2], ids=["full", "padded"])
def test_world_values_equal_the_per_column_reference(pad_world: int | None) -> None:
    policy, critic = _pair()
    rollout = _rollout(pad_world=pad_world)
    got = prepare_world_rollout(_ac(policy, critic), critic, rollout, gamma=0.9, gae_lambda=0.8)
    ref = prepare_rollout(_ac(policy, _PerColumn(critic)), rollout, gamma=0.9, gae_lambda=0.8)
    # the reference is agent-major over the valid rows; put it world-major the same way
    keep = rollout.valid.reshape(-1)
    order = _world_major(torch.arange(T * A * E), T)
    order = order[keep[order]]
    position = torch.full((T * A * E,), -1, dtype=torch.long)
    position[keep] = torch.arange(int(keep.sum()))
    rows = position[order]
    assert len(got) == len(ref) == rollout.num_valid
    for name in ("value_old", "advantages", "returns", "logp_old"):
        torch.testing.assert_close(getattr(got, name), getattr(ref, name)[rows], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.act, ref.act[rows])
    for key in ("obs", "state", "agent_id"):
        assert isinstance(got.obs, dict) and isinstance(ref.obs, dict)
        torch.testing.assert_close(got.obs[key], ref.obs[key][rows])
    # one hand-checked entry: world 1's agent 2 at t = 0 is row (0 * E + 1) * A + 2
    value = critic({"state": rollout.obs["state"][0, 1:2]})[0, 2]  # type: ignore[index]  # Dict obs
    torch.testing.assert_close(got.value_old[(0 * E + 1) * A + 2], value)


def test_the_critic_runs_on_one_row_per_world_step() -> None:
    policy, critic = _pair()
    recording = _Recording(critic.net)
    critic.net = recording
    rollout = _rollout()
    prepare_world_rollout(_ac(policy, critic), critic, rollout, gamma=0.9, gae_lambda=0.8)
    ends = int((rollout.boundary & rollout.valid & ~rollout.terminated)[:, :E].sum())
    assert recording.rows == [T * E, ends]  # all world steps, then the bootstraps: never A * E columns
    recording.rows.clear()
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(), seed=0)
    ppo.update(rollout, batch_size=A * 6, num_repetitions=2)
    update_calls = recording.rows[2:]  # after the rollout pass
    assert update_calls == [6, 6, 6, 6, 6, 6, 6, 6]  # 24 world steps, 6 per mini-batch, 2 passes


def test_minibatches_hold_whole_world_steps() -> None:
    policy, critic = _pair()
    data = prepare_world_rollout(_ac(policy, critic), critic, _rollout(), gamma=0.9, gae_lambda=0.8)
    assert isinstance(data.obs, dict)
    batches = list(world_minibatches(len(data) // A, A, 5 * A, 2, torch.Generator().manual_seed(1)))
    assert [len(b) for b in batches] == [15, 15, 15, 15, 12] * 2  # 24 world steps: 5 + 5 + 5 + 5 + 4
    for k in (0, 5):
        seen = torch.cat(batches[k : k + 5])
        assert sorted(seen.tolist()) == list(range(len(data)))  # each pass covers every row once
    for idx in batches:
        part = data.select(idx)
        assert isinstance(part.obs, dict)
        groups = len(idx) // A
        # each group of A rows: agents 0 .. A - 1 of one world step (the same state)
        torch.testing.assert_close(
            part.obs["agent_id"].reshape(groups, A, A), torch.eye(A).expand(groups, A, A)
        )
        state_GAS = part.obs["state"].reshape(groups, A, S)
        torch.testing.assert_close(state_GAS, state_GAS[:, :1].expand(groups, A, S))


def test_ppo_update_is_reproducible_and_trains_the_critic() -> None:
    def run(num_repetitions: int) -> tuple[float, torch.Tensor]:
        torch.manual_seed(0)  # network initialisation
        policy, critic = _pair(seed=3)
        ppo = PPO(policy=policy, critic=critic, params=PPOParams(vf_coef=1.0), seed=5)
        loss = 0.0
        if num_repetitions:
            loss = ppo.update(_rollout(1), batch_size=A * 8, num_repetitions=num_repetitions).value_loss
        return loss, torch.cat([p.detach().flatten() for p in critic.parameters()])

    (loss_a, params_a), (loss_b, params_b) = run(3), run(3)
    assert loss_a == loss_b and torch.equal(params_a, params_b)
    assert not torch.equal(params_a, run(0)[1])  # the value loss reached the critic


def test_errors_name_the_problem() -> None:
    policy, critic = _pair()
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(), seed=0)
    with pytest.raises(ConfigurationError, match=r"batch_size=10 .* multiple of .*num_agents=3"):
        ppo.update(_rollout(), batch_size=10, num_repetitions=1)
    rollout = _rollout()
    cut = TensorRolloutBatch(
        obs={k: v[:, :-1] for k, v in rollout.obs.items()},  # type: ignore[union-attr]  # Dict obs
        act=rollout.act[:, :-1],
        rew=rollout.rew[:, :-1],
        terminated=rollout.terminated[:, :-1],
        truncated=rollout.truncated[:, :-1],
        obs_next={k: v[:, :-1] for k, v in rollout.obs_next.items()},  # type: ignore[union-attr]
        boundary=rollout.boundary[:, :-1],
        valid=rollout.valid[:, :-1],
        num_valid=T * (A * E - 1),
    )
    with pytest.raises(ConfigurationError, match=r"11 columns, not a multiple of .*num_agents=3"):
        ppo.update(cut, batch_size=None, num_repetitions=1)
    valid = rollout.valid.clone()
    valid[-1, 0] = False  # agent 0 of world 0 without its last step, its world's other agents with it
    uneven = TensorRolloutBatch(**{**rollout.__dict__, "valid": valid, "num_valid": int(valid.sum())})
    with pytest.raises(ConfigurationError, match="same steps"):
        ppo.update(uneven, batch_size=None, num_repetitions=1)


def test_builder_checks() -> None:
    with pytest.raises(ConfigurationError, match="needs centralised_critic=True"):
        mappo_actor_critic(_space(), ACT_SPACE, centralised_critic=False, critic_per_world=True)
    with pytest.raises(ConfigurationError, match="needs the number of agents"):
        mappo_actor_critic(_space(agent_id=False), ACT_SPACE, critic_per_world=True)
    with pytest.raises(ConfigurationError, match="num_agents=4, but the 'agent_id' key is one-hot over 3"):
        mappo_actor_critic(_space(), ACT_SPACE, critic_per_world=True, num_agents=4)
    with pytest.raises(ConfigurationError, match="only used with critic_per_world=True"):
        mappo_actor_critic(_space(), ACT_SPACE, num_agents=3)
    _, critic = mappo_actor_critic(_space(agent_id=False), ACT_SPACE, critic_per_world=True, num_agents=2)
    assert isinstance(critic, PerWorldCritic) and critic.num_agents == 2
    with pytest.raises(ConfigurationError, match="last Linear has 1 outputs; it must have num_agents=3"):
        PerWorldCritic(nn.Linear(S, 1), 3)
    with pytest.raises(ConfigurationError, match="num_agents must be an int >= 1, got 0"):
        PerWorldCritic(nn.Linear(S, 1), 0)
