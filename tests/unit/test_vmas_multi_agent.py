"""VMAS agent columns: VmasEnv(agent_layout="columns") is the joint view rearranged (agent-major rows,
state / agent_id keys); TensorCollector reports per-agent returns and counts env episodes; the MAPPO /
IPPO networks of blocks/agent_nets see the keys they should."""

from __future__ import annotations

import io
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tests.extras import need

pytestmark = pytest.mark.integration
need("vmas", "vmas")

from tshtrain.algorithm import (
    PPO,
    MultiAgentOnPolicy,
    PPOParams,
    grouped_learners,
    independent_learners,
    obs_encoder,
)
from tshtrain.algorithm.blocks.agent_nets import SelectKeys, mappo_actor_critic
from tshtrain.algorithm.blocks.encoders import accepts_dict_obs
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.data.batch import ObsTensor
from tshtrain.env import OBS_KEY, STATE_KEY, group_obs_key
from tshtrain.env.tensor_env import TensorVectorEnv
from tshtrain.env.vmas import VmasEnv
from tshtrain.errors import ConfigurationError, PolicyOutputError, UnsupportedSpaceError

E = 6  # worlds
A = 3  # agents
D = 2  # action dims of one agent


def make(layout: str = "columns", **kwargs: Any) -> VmasEnv:
    options: dict[str, Any] = {"n_agents": A, "shared_rew": False, "max_episode_steps": 5, "seed": 7}
    return VmasEnv("navigation", num_envs=E, agent_layout=layout, **(options | kwargs))  # type: ignore[arg-type]


def joint_to_rows(x_E: torch.Tensor) -> torch.Tensor:
    """(E, A * k) in the joint view's agent blocks -> (A * E, k), agent-major."""
    return x_E.view(E, A, -1).transpose(0, 1).reshape(A * E, -1)


def test_columns_are_the_joint_view_rearranged() -> None:
    joint, columns = make("joint"), make()
    assert isinstance(columns, TensorVectorEnv)
    assert (columns.num_envs, columns.num_worlds, columns.num_agents) == (A * E, E, A)
    assert columns.agents == ("agent_0", "agent_1", "agent_2") == joint.agent_names
    assert (joint.num_envs, joint.num_agents, joint.agents) == (E, 1, ("joint",))
    assert columns.columns.column(agent=2, env=1) == 2 * E + 1
    obs_j, _ = joint.reset(seed=3)
    obs_c, _ = columns.reset(seed=3)
    assert isinstance(obs_c, torch.Tensor) and obs_c.shape == (A * E, *columns.single_observation_space.shape)
    assert torch.equal(obs_c, joint_to_rows(obs_j))
    assert columns.single_action_space == gym.spaces.Box(-1.0, 1.0, (D,), np.float32)
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(12):  # two time limits: autoresets included
        act_j = torch.rand(E, A * D, generator=gen) * 2 - 1
        sj, sc = joint.step(act_j), columns.step(joint_to_rows(act_j))
        assert isinstance(sc.obs, torch.Tensor) and isinstance(sc.final_obs, torch.Tensor)
        assert torch.equal(sc.obs, joint_to_rows(sj.obs))
        assert torch.equal(sc.final_obs, joint_to_rows(sj.final_obs))
        assert sc.rew.dtype == torch.float32 and sc.rew.shape == (A * E,)
        assert torch.equal(sc.rew.view(A, E).mean(0), sj.rew)  # the joint reward is the agents' mean
        assert not torch.equal(sc.rew[:E], sc.rew[E : 2 * E])  # own rewards (shared_rew=False)
        assert torch.equal(sc.terminated, sj.terminated.repeat(A))
        assert torch.equal(sc.truncated, sj.truncated.repeat(A))
        assert sc.info and all(f"agent_0/{key}" in sj.info for key in sc.info)
        for key, value in sc.info.items():
            assert value.shape == (A * E,)
            assert torch.equal(value[E : 2 * E], sj.info[f"agent_1/{key}"])
        ended += int(sj.truncated.sum())
    assert ended > 0
    with pytest.raises(PolicyOutputError, match=rf"expected \({A * E}, {D}\)"):
        columns.step(torch.zeros(E, A * D))


def test_state_and_agent_id_keys() -> None:
    joint = make("joint")
    env = make(agent_id=True, global_state=True)
    space = env.single_observation_space
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"obs", "state", "agent_id"}
    obs_dim = int(space["obs"].shape[0])
    assert space["state"].shape == (A * obs_dim,) and space["agent_id"].shape == (A,)
    obs_j, _ = joint.reset(seed=1)
    obs, _ = env.reset(seed=1)
    assert isinstance(obs, dict)
    assert torch.equal(obs["obs"], joint_to_rows(obs_j))
    assert torch.equal(obs["state"], obs_j.repeat(A, 1))  # every agent of env e sees env e's state
    expected_id = torch.eye(A).repeat_interleave(E, dim=0)
    assert obs["agent_id"].dtype == torch.float32 and torch.equal(obs["agent_id"], expected_id)
    for _ in range(6):
        act = torch.zeros(A * E, D)
        step, step_j = env.step(act), joint.step(torch.zeros(E, A * D))
        assert isinstance(step.obs, dict) and isinstance(step.final_obs, dict)
        assert torch.equal(step.obs["state"], step_j.obs.repeat(A, 1))
        assert torch.equal(step.final_obs["state"], step_j.final_obs.repeat(A, 1))
        assert torch.equal(step.obs["agent_id"], expected_id)
    only_id = make(agent_id=True)
    assert set(only_id.single_observation_space.spaces) == {"obs", "agent_id"}  # type: ignore[attr-defined]


def test_discrete_columns_and_bad_arguments() -> None:
    env = make(continuous_actions=False)
    assert env.single_action_space == gym.spaces.Discrete(9)
    joint = make("joint", continuous_actions=False)
    joint.reset(seed=0)
    env.reset(seed=0)
    act_j = torch.randint(0, 9, (E, A), generator=torch.Generator().manual_seed(0))
    assert torch.equal(env.step(act_j.T.reshape(-1)).obs, joint_to_rows(joint.step(act_j).obs))
    with pytest.raises(ConfigurationError, match="agent_layout"):
        make("rows")
    with pytest.raises(ConfigurationError, match="agent_layout='columns'"):
        make("joint", agent_id=True)


def test_agents_with_different_spaces_are_named() -> None:
    with pytest.raises(UnsupportedSpaceError, match=r"adversary_0: Box.*agent_0: Box") as error:
        VmasEnv(
            "simple_tag",
            num_envs=2,
            agent_layout="columns",
            num_good_agents=1,
            num_adversaries=1,
            num_landmarks=1,
        )
    assert "observation spaces differ" in str(error.value)
    VmasEnv("simple_tag", num_envs=2, num_good_agents=1, num_adversaries=1, num_landmarks=1)  # joint: fine


class ObsPolicy:
    """Deterministic actions from the observations, the same in both layouts: each agent acts with
    tanh of the first D entries of its own observation."""

    def __init__(self, columns: bool):
        self.columns = columns

    def compute_actions_torch(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)
        if self.columns:
            return torch.tanh(obs[:, :D])
        return torch.tanh(obs.view(len(obs), A, -1)[:, :, :D]).reshape(len(obs), A * D)

    def map_action_torch(self, act: torch.Tensor) -> torch.Tensor:
        return act

    def map_action_inverse_torch(self, act: torch.Tensor) -> torch.Tensor:
        return act

    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return act


def collectors(
    capacity: int = 64, **kwargs: Any
) -> tuple[TensorCollector, TensorCollector, TensorReplayBuffer, TensorReplayBuffer]:
    joint, columns = make("joint", joint_reward="sum", **kwargs), make(**kwargs)
    buf_j = TensorReplayBuffer(capacity * E, E, device="cpu")
    buf_c = TensorReplayBuffer(capacity * A * E, A * E, device="cpu")
    return (
        TensorCollector(ObsPolicy(False), joint, buf_j, seed=2),
        TensorCollector(ObsPolicy(True), columns, buf_c, seed=2),
        buf_j,
        buf_c,
    )


def test_per_agent_returns_in_n_step_collection() -> None:
    col_j, col_c, _, buf_c = collectors()
    assert (col_c.num_envs, col_c.num_agents, col_c.num_rows) == (E, A, A * E)
    stats_j = col_j.collect(n_step=E * 13)
    stats_c = col_c.collect(n_step=E * 13)  # env steps count envs, as in the joint view
    assert stats_c.n_collected_steps == stats_j.n_collected_steps == E * 13
    assert stats_c.stored_transitions == len(buf_c) == A * E * 13  # one transition per agent
    assert stats_j.n_stored_transitions is None and stats_c.agents == col_c.env.agents
    assert stats_c.n_collected_episodes == stats_j.n_collected_episodes > 0  # env episodes
    assert stats_c.returns.shape == (stats_j.n_collected_episodes, A)
    np.testing.assert_array_equal(stats_c.lens, stats_j.lens)
    np.testing.assert_allclose(stats_c.returns.sum(1), stats_j.returns, rtol=1e-5, atol=1e-6)
    assert not np.allclose(stats_c.returns[:, 0], stats_c.returns[:, 1])  # own returns, in agent order
    assert stats_c.returns_stat.mean == pytest.approx(float(stats_c.returns.mean()))


def test_per_agent_returns_match_the_stored_rewards() -> None:
    _, col_c, _, buf_c = collectors(desync_episode_clocks=False)
    stats = col_c.collect(n_step=E * 5)  # exactly one episode per env (time limit 5)
    assert stats.n_collected_episodes == E and stats.lens.tolist() == [5] * E
    rollout = buf_c.rollout()
    rew = rollout.rew
    assert rew.shape == (5, A * E)
    np.testing.assert_allclose(stats.returns, rew.sum(0).double().view(A, E).T.numpy(), rtol=1e-6)


@pytest.mark.parametrize("n_episode", [1, 4, 9])
def test_n_episode_counts_env_episodes(n_episode: int) -> None:
    col_j, col_c, buf_j, buf_c = collectors()
    stats_j = col_j.collect(n_episode=n_episode)
    stats_c = col_c.collect(n_episode=n_episode)
    assert stats_c.n_collected_episodes == stats_j.n_collected_episodes == n_episode
    assert stats_c.returns.shape == (n_episode, A)
    np.testing.assert_array_equal(stats_c.lens, stats_j.lens)
    np.testing.assert_allclose(stats_c.returns.sum(1), stats_j.returns, rtol=1e-5, atol=1e-6)
    assert stats_c.n_collected_steps == stats_j.n_collected_steps == len(buf_j)
    assert stats_c.stored_transitions == len(buf_c) == A * len(buf_j)
    # all A rows of a collecting env are stored, as many as the env's transitions in the joint view
    lengths_AE = buf_c.column_lengths.reshape(A, E)
    assert (lengths_AE == buf_j.column_lengths[None, :]).all()
    assert (lengths_AE[:, min(n_episode, E) :] == 0).all()


def test_random_actions_and_empty_returns() -> None:
    _, col_c, _, _ = collectors()
    stats = col_c.collect(n_step=E, random=True)
    assert (
        stats.n_collected_steps == E and stats.stored_transitions == A * E and stats.returns.shape[1:] == (A,)
    )
    stats = col_c.collect(n_episode=2, random=True)
    assert stats.returns.shape == (2, A)


def test_collector_checkpoint_round_trip_continues_identically() -> None:
    def fresh() -> TensorCollector:
        return collectors()[1]

    def save(collector: TensorCollector) -> dict[str, Any]:
        out = io.BytesIO()
        torch.save(collector.state_dict(), out)
        loaded: dict[str, Any] = torch.load(io.BytesIO(out.getvalue()), weights_only=True)
        return loaded

    first = fresh()
    first.collect(n_step=E * 3)  # episodes of 5 steps are under way
    state = save(first)
    assert state["ep_return"].shape == (A * E,)
    again = first.collect(n_step=E * 4)

    second = fresh()
    second.collect(n_step=E * 3)
    second.load_state_dict(state)
    resumed = second.collect(n_step=E * 4)
    np.testing.assert_array_equal(resumed.returns, again.returns)
    np.testing.assert_array_equal(resumed.lens, again.lens)
    assert resumed.returns.shape[1:] == (A,) and len(resumed.lens) > 0
    for key, value in save(second).items():
        expected = save(first)[key]
        assert torch.equal(value, expected) if isinstance(value, torch.Tensor) else value == expected

    third = fresh()  # without the accumulators the returns differ: the test can fail
    third.collect(n_step=E * 3)
    third.load_state_dict({**state, "ep_return": torch.zeros_like(state["ep_return"])})
    assert not np.array_equal(third.collect(n_step=E * 4).returns, again.returns)


# ---------------------------------------------------------------------------- networks
def dict_space(*, state: bool = True, agent_id: bool = True, mask: bool = False) -> gym.spaces.Dict:
    keys: dict[str, gym.Space[Any]] = {"obs": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)}
    if state:
        keys["state"] = gym.spaces.Box(-np.inf, np.inf, (12,), np.float32)
    if agent_id:
        keys["agent_id"] = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
    if mask:
        keys["action_mask"] = gym.spaces.Box(0, 1, (5,), np.int8)
    return gym.spaces.Dict(keys)


def batch(n: int = 7, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, 4, generator=gen),
        "state": torch.randn(n, 12, generator=gen),
        "agent_id": torch.eye(3)[torch.arange(n) % 3],
        "action_mask": torch.ones(n, 5, dtype=torch.int8),
    }


def changes_with(net: Any, key: str) -> bool:
    base = batch()
    other = dict(base)
    other[key] = batch(seed=1)[key] if key != "agent_id" else base["agent_id"].roll(1, dims=1)
    with torch.no_grad():
        return not torch.equal(net(base), net(other))


@pytest.mark.parametrize("centralised", [True, False])
def test_mappo_and_ippo_networks_see_their_keys(centralised: bool) -> None:
    space = dict_space(mask=True)
    policy, critic = mappo_actor_critic(
        space, gym.spaces.Discrete(5), hidden_sizes=(16,), centralised_critic=centralised, seed=0
    )
    actor = policy.actor  # type: ignore[union-attr]
    assert accepts_dict_obs(actor) and accepts_dict_obs(critic)
    assert changes_with(actor, "obs") and changes_with(actor, "agent_id")
    assert not changes_with(actor, "state") and not changes_with(actor, "action_mask")
    assert changes_with(critic, "state") is centralised
    assert changes_with(critic, "obs") is not centralised
    assert changes_with(critic, "agent_id") and not changes_with(critic, "action_mask")
    assert critic(batch()).shape == (7, 1)
    act = policy.actions(batch(), deterministic=False)
    assert act.shape == (7,)


def test_mappo_on_box_actions_trains_one_ppo_over_all_columns() -> None:
    env = make(agent_id=True, global_state=True)
    policy, critic = mappo_actor_critic(
        env.single_observation_space, env.single_action_space, hidden_sizes=(16,), seed=0
    )
    algorithm = PPO(policy=policy, critic=critic, params=PPOParams(), seed=0)
    buffer = TensorReplayBuffer(8 * A * E, A * E, device="cpu")
    collector = TensorCollector(policy, env, buffer, seed=0)
    collector.collect(n_step=8 * E)  # 8 steps of every env: 8 * A * E transitions
    before = [p.detach().clone() for p in policy.parameters()]
    stats = algorithm.update(buffer.rollout(), batch_size=32, num_repetitions=1)
    assert stats.num_gradient_steps > 0
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters(), strict=True))


def test_ippo_on_array_observations_and_errors() -> None:
    box = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    policy, critic = mappo_actor_critic(box, gym.spaces.Discrete(3), centralised_critic=False)
    assert critic(torch.zeros(2, 4)).shape == (2, 1)
    assert policy.actions(torch.zeros(2, 4), deterministic=True).shape == (2,)
    with pytest.raises(UnsupportedSpaceError, match="state"):
        mappo_actor_critic(box, gym.spaces.Discrete(3))
    with pytest.raises(UnsupportedSpaceError, match="state"):
        mappo_actor_critic(dict_space(state=False), gym.spaces.Discrete(3))
    policy, critic = mappo_actor_critic(dict_space(agent_id=False), gym.spaces.Discrete(3))
    assert not changes_with(critic, "agent_id") and changes_with(critic, "state")
    policy, _ = mappo_actor_critic(dict_space(), gym.spaces.Discrete(3), use_agent_id=False)
    assert not changes_with(policy.actor, "agent_id")  # type: ignore[union-attr]
    with pytest.raises(UnsupportedSpaceError, match="action space"):
        mappo_actor_critic(dict_space(), gym.spaces.Box(-1, 1, (2, 2)))


def test_select_keys() -> None:
    single = SelectKeys(nn.Linear(4, 2), ["obs"])
    assert single.accepts_dict_obs and single.output_dim == 2
    assert single(batch()).shape == (7, 2)
    sub = gym.spaces.Dict({"obs": dict_space()["obs"], "state": dict_space()["state"]})
    several = SelectKeys(obs_encoder(sub), ["obs", "state"])
    assert several.output_dim == 16 and several(batch()).shape == (7, 16)
    assert set(several.zero_obs(torch.device("cpu"))) == {"obs", "state"}
    with pytest.raises(ConfigurationError, match="takes arrays"):
        SelectKeys(nn.Linear(16, 2), ["obs", "state"])
    with pytest.raises(ConfigurationError, match="distinct"):
        SelectKeys(nn.Linear(4, 2), ["obs", "obs"])
    with pytest.raises(UnsupportedSpaceError, match="missing"):
        single({"state": torch.zeros(1, 12)})
    with pytest.raises(UnsupportedSpaceError, match="array observation"):
        single(torch.zeros(1, 4))


# ---------------------------------------------------------------------- agent groups
def _tag(layout: str, **kwargs: Any) -> VmasEnv:
    return VmasEnv("simple_tag", num_envs=E, agent_layout=layout, seed=3, max_episode_steps=4, **kwargs)  # type: ignore[arg-type]


def test_groups_are_the_joint_view_rearranged_by_group() -> None:
    """simple_tag: 3 adversaries (obs 16) and 1 good agent (obs 14); listing the good agent's group
    first moves it to the first rows. Observations, state and summed rewards equal the joint view's
    across a time limit."""
    joint = _tag("joint", joint_reward="sum")
    grouped = _tag(
        "columns",
        groups={"good": ["agent_0"], "bad": ["adversary_0", "adversary_1", "adversary_2"]},
        global_state=True,
    )
    assert grouped.agents == ("agent_0", "adversary_0", "adversary_1", "adversary_2")
    assert grouped.groups is not None and grouped.groups["bad"].units == slice(1, 4)
    assert grouped.groups["good"].observation_space[OBS_KEY].shape == (14,)  # type: ignore[index]
    obs_j, _ = joint.reset(seed=5)
    obs_g, _ = grouped.reset(seed=5)
    gen = torch.Generator().manual_seed(0)
    for _ in range(6):
        assert isinstance(obs_g, dict) and isinstance(obs_j, torch.Tensor)
        adversaries = obs_j[:, :48].reshape(E, 3, 16).transpose(0, 1).reshape(3 * E, 16)
        assert torch.equal(obs_g[group_obs_key("good")][:E], obs_j[:, 48:])
        assert torch.equal(obs_g[group_obs_key("bad")][E:], adversaries)
        assert not obs_g[group_obs_key("good")][E:].any() and not obs_g[group_obs_key("bad")][:E].any()
        column_order = torch.cat([obs_j[:, 48:], obs_j[:, :48]], dim=1)
        assert torch.equal(obs_g[STATE_KEY][:E], column_order) and torch.equal(
            obs_g[STATE_KEY][E : 2 * E], column_order
        )
        act_g = grouped.sample_group_actions(gen)
        per_agent = act_g.view(4, E, 2)
        act_j = torch.cat([per_agent[1], per_agent[2], per_agent[3], per_agent[0]], dim=1)  # VMAS's order
        step_j, step_g = joint.step(act_j), grouped.step(act_g)
        rew_g = step_g.rew.view(4, E)
        torch.testing.assert_close(rew_g.sum(0), step_j.rew)
        obs_j, obs_g = step_j.obs, step_g.obs


def test_grouped_speaker_listener_cuts_each_groups_actions_and_trains_per_group() -> None:
    """Box actions of width 5 (speaker) and 2 (listener), stored as 5; random and policy actions reach
    VMAS cut to each agent's width (VMAS refuses other shapes), and one PPO per group updates."""
    env = VmasEnv(
        "simple_speaker_listener",
        num_envs=E,
        agent_layout="columns",
        groups="auto",
        global_state=True,
        agent_id=True,
        seed=0,
        max_episode_steps=5,
    )
    assert env.groups is not None and env.single_action_space.shape == (5,)
    members = {}
    for name, group in env.groups.items():
        policy, critic = mappo_actor_critic(
            group.observation_space, group.action_space, hidden_sizes=(8,), seed=0
        )
        members[name] = PPO(policy=policy, critic=critic, params=PPOParams(), seed=0)
    algorithm = MultiAgentOnPolicy(grouped_learners(env, members))
    buffer = TensorReplayBuffer(8 * 2 * E, 2 * E, device="cpu")
    collector = TensorCollector(algorithm.policy, env, buffer, seed=0)
    collector.collect(n_step=2 * E, random=True)
    stored = buffer.rollout().act
    assert stored.shape[-1] == 5 and not stored[:, E:, 2:].any()  # the listener's padding is zero
    buffer.reset()
    collector.collect(n_step=8 * E)
    before = {name: [p.detach().clone() for p in ppo.policy.parameters()] for name, ppo in members.items()}
    stats = algorithm.update(buffer.rollout(), batch_size=16, num_repetitions=1)
    assert set(stats.per_learner) == {"speaker", "listener"}
    for name, ppo in members.items():
        assert any(not torch.equal(b, p) for b, p in zip(before[name], ppo.policy.parameters(), strict=True))
    with pytest.raises(ConfigurationError, match="groups=.* needs agent_layout='columns'"):
        VmasEnv("simple_speaker_listener", num_envs=2, groups="auto")


def test_random_actions_of_a_joint_policy_without_groups() -> None:
    """Buffer prefill (random actions) through a multi-agent joint policy on VMAS columns: the policy's
    rows are routed before its map_action_inverse (a fresh policy has no routing of its own)."""
    env = make(agent_id=True, global_state=True)
    members = {}
    for k, name in enumerate(env.agents):
        policy, critic = mappo_actor_critic(
            env.single_observation_space, env.single_action_space, hidden_sizes=(8,), seed=k
        )
        members[name] = PPO(policy=policy, critic=critic, params=PPOParams(), seed=k)
    algorithm = MultiAgentOnPolicy(independent_learners(env.columns, members))
    buffer = TensorReplayBuffer(4 * A * E, A * E, device="cpu")
    TensorCollector(algorithm.policy, env, buffer, seed=0).collect(n_step=2 * E, random=True)
    assert len(buffer) == 2 * A * E
