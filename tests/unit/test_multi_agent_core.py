"""The multi-agent core on small hand-written envs: the collector's per-column transitions (turn-based
and parallel, agents leaving early), the joint policy's routing, column-scoped sampling, learner
updates, masks and checkpoint state."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tests.multi_agent_envs import LeavingParallel, TurnGame
from tshtrain.algorithm import (
    DQN,
    MASKED_VALUE,
    ActionMasked,
    DQNParams,
    Learner,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    MultiAgentPolicy,
    MultiAgentTrainingStats,
    QValuePolicy,
    RandomPolicy,
    ScriptedPolicy,
    independent_learners,
    scoped_learners,
    shared_learner,
)
from tshtrain.data import MultiAgentCollector, TensorReplayBuffer, VectorReplayBuffer
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.env import ACTION_MASK_KEY, OBS_KEY, AgentColumns
from tshtrain.errors import ConfigurationError


def _q_policy(seed: int = 0, masked: bool = True) -> QValuePolicy:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 4))
    q_net: nn.Module = ActionMasked(net, single_key=OBS_KEY) if masked else net
    return QValuePolicy(q_net, gym.spaces.Discrete(4), seed=seed)


def test_turn_based_transitions_span_the_opponents_move_and_both_players_end_together() -> None:
    env = TurnGame(num_envs=2, length=4)
    scripted = ScriptedPolicy(env.single_action_space, lambda obs: np.full(len(obs[OBS_KEY]), 2))
    fixed = ScriptedPolicy(env.single_action_space, lambda obs: np.full(len(obs[OBS_KEY]), 1))
    policy = MultiAgentPolicy(independent_learners(env.columns, {"p0": fixed, "p1": scripted}))
    buffer = VectorReplayBuffer(64, buffer_num=env.num_columns)
    collector = MultiAgentCollector(policy, env, buffer, seed=0)
    stats = collector.collect(n_step=8)  # 4 vector steps = one game per env
    assert stats.n_collected_steps == 8 and stats.n_collected_episodes == 2
    assert stats.returns.shape == (2, 2) and stats.agents == ("p0", "p1")
    # p0 moves 1+1, loses (p1 moves last): 2 - 10; p1 moves 2+2 and wins: 4 + 10
    np.testing.assert_allclose(stats.returns, [[-8.0, 14.0], [-8.0, 14.0]])
    np.testing.assert_array_equal(buffer.column_lengths, [2, 2, 2, 2])
    p0 = buffer.get(np.array([0 * 4 + 0, 1 * 4 + 0]))  # column 0 (p0 of env 0), rows 0 and 1
    np.testing.assert_allclose(p0.rew, [1.0, 1.0 - 10.0])  # the loss arrives in p1's last move
    np.testing.assert_array_equal(p0.terminated, [False, True])
    # p0's first transition: from move 0 to its next turn at move 2 (p1's move in between)
    np.testing.assert_allclose(p0.obs[OBS_KEY][:, 0], [0, 2])
    np.testing.assert_allclose(p0.obs_next[OBS_KEY][0, 0], 2)
    np.testing.assert_allclose(p0.obs_next[OBS_KEY][1, 0], 4)  # the final observation, before the reset
    p1 = buffer.get(np.array([0 * 4 + 2, 1 * 4 + 2]))
    np.testing.assert_allclose(p1.rew, [2.0, 12.0])
    np.testing.assert_array_equal(p1.terminated, [False, True])


def test_parallel_agents_leaving_early_rest_until_the_episode_ends() -> None:
    env = LeavingParallel(num_envs=3)
    policy = MultiAgentPolicy(
        independent_learners(
            env.columns,
            {
                "a": ScriptedPolicy(env.single_action_space, lambda o: np.full(len(o), 2)),
                "b": ScriptedPolicy(env.single_action_space, lambda o: np.full(len(o), 1)),
            },
        )
    )
    buffer = VectorReplayBuffer(60, buffer_num=6)
    collector = MultiAgentCollector(policy, env, buffer)
    stats = collector.collect(n_episode=3)
    np.testing.assert_allclose(stats.returns, [[6.0, 1.0]] * 3)
    np.testing.assert_array_equal(stats.lens, [3, 3, 3])
    np.testing.assert_array_equal(buffer.column_lengths, [3, 3, 3, 1, 1, 1])
    b = buffer.get(np.array([3]))
    assert bool(b.terminated[0]) and not bool(b.truncated[0])
    last_a = buffer.get(np.array([2 * 6 + 0]))
    assert bool(last_a.truncated[0]) and not bool(last_a.terminated[0])


def test_random_actions_respect_masks_and_route_through_fixed_policies() -> None:
    env = TurnGame(num_envs=4, length=6)
    policy = MultiAgentPolicy(
        independent_learners(
            env.columns,
            {"p0": RandomPolicy(env.single_action_space, seed=1), "p1": _q_policy()},
        )
    )
    collector = MultiAgentCollector(policy, env, VectorReplayBuffer(400, buffer_num=8), seed=3)
    collector.collect(n_step=200, random=True)
    collector.collect(n_step=200)
    actions = {a for _, _, a in env.log}
    assert actions <= {0, 1, 2} and len(actions) == 3


def test_q_policy_explores_among_legal_actions_only() -> None:
    policy = _q_policy()
    policy.eps_schedule = type(policy.eps_schedule)(start=1.0, end=1.0)
    obs = {OBS_KEY: np.zeros((500, 3), np.float32), ACTION_MASK_KEY: np.zeros((500, 4), np.int8)}
    obs[ACTION_MASK_KEY][:, [1, 3]] = 1
    act = policy.add_exploration_noise(
        policy.compute_actions(obs, deterministic=False), np.random.default_rng(0)
    )
    assert set(np.unique(act)) == {1, 3}
    q = policy.q_values({k: torch.from_numpy(v) for k, v in obs.items()})
    assert torch.all(q[:, [0, 2]] == MASKED_VALUE)


def test_column_scope_samples_only_its_columns_numpy_and_tensor() -> None:
    for buffer in (
        VectorReplayBuffer(40, buffer_num=4, seed=0),
        TensorReplayBuffer(40, buffer_num=4, seed=0, device="cpu"),
    ):
        obs = np.arange(4, dtype=np.float32).reshape(4, 1)
        for _ in range(5):
            if isinstance(buffer, TensorReplayBuffer):
                t = torch.from_numpy
                buffer.add(
                    obs=t(obs),
                    act=torch.zeros(4, dtype=torch.int64),
                    rew=torch.zeros(4),
                    terminated=torch.zeros(4, dtype=torch.bool),
                    truncated=torch.zeros(4, dtype=torch.bool),
                    obs_next=t(obs),
                )
            else:
                buffer.add(
                    obs=obs,
                    act=np.zeros(4, np.int64),
                    rew=np.zeros(4),
                    terminated=np.zeros(4, bool),
                    truncated=np.zeros(4, bool),
                    obs_next=obs,
                )
        with buffer.column_scope(slice(2, 4)):
            assert buffer.scoped_len == 10
            cols = np.asarray(buffer.sample(200).obs).reshape(-1)
        assert set(cols.tolist()) == {2.0, 3.0}
        assert buffer.scoped_len == 20  # the scope ends with the block
        with pytest.raises(ValueError, match="contiguous"), buffer.column_scope(slice(0, 4, 2)):
            pass


def test_off_policy_learners_update_from_their_own_columns_and_round_trip() -> None:
    env = TurnGame(num_envs=2, length=4)
    dqn = DQN(policy=_q_policy(1), params=DQNParams(lr=1e-2, target_update_freq=2))
    algorithm = MultiAgentOffPolicy(
        independent_learners(env.columns, {"p0": RandomPolicy(env.single_action_space, seed=0), "p1": dqn}),
        num_units=2,
    )
    buffer = VectorReplayBuffer(100, buffer_num=4, seed=0)
    collector = MultiAgentCollector(algorithm.policy, env, buffer, exploration_noise=True, seed=0)
    collector.collect(n_step=16)
    seen: list[np.ndarray] = []
    original = buffer._draw_indices  # what every sampling path draws its indices with

    def spy(batch_size: int) -> np.ndarray:
        idx = original(batch_size)
        seen.append(idx % buffer.num_columns)
        return idx

    buffer._draw_indices = spy  # type: ignore[method-assign]
    stats = algorithm.update(buffer, 32)
    assert isinstance(stats, MultiAgentTrainingStats) and set(stats.per_learner) == {"p1"}
    assert set(np.concatenate(seen).tolist()) <= {2, 3}
    assert "p1/loss" in stats.as_scalars()
    merged = MultiAgentTrainingStats.aggregate([stats, stats])
    assert merged.num_gradient_steps == 2
    state = copy.deepcopy(algorithm.state_dict())
    assert set(state) == {"p0", "p1"}
    before = [p.clone() for p in dqn.policy.parameters()]
    algorithm.update(buffer, 32)
    algorithm.load_state_dict(state)
    for old, new in zip(before, dqn.policy.parameters(), strict=True):
        assert torch.equal(old, new)
    with pytest.raises(ConfigurationError, match="learners"):
        algorithm.load_state_dict({"p1": state["p1"]})


def test_learner_layouts_are_checked() -> None:
    columns = AgentColumns(("x", "y"), 3)
    dqn = DQN(policy=_q_policy(masked=False))
    with pytest.raises(ConfigurationError, match="missing members"):
        independent_learners(columns, {"x": dqn})
    with pytest.raises(ConfigurationError, match="not an on-policy"):
        MultiAgentOnPolicy(shared_learner(columns, dqn))
    with pytest.raises(ConfigurationError, match="cover 2 units"):
        MultiAgentOffPolicy(shared_learner(columns, dqn), num_units=3)
    with pytest.raises(ConfigurationError, match="tile"):
        MultiAgentOffPolicy([Learner("a", slice(1, 3), algorithm=dqn)])
    with pytest.raises(ConfigurationError, match="multiple of the units"):
        MultiAgentPolicy(shared_learner(("x", "y", "z"), dqn)).compute_actions(
            np.zeros((4, 3), np.float32), deterministic=True
        )
    with pytest.raises(ConfigurationError, match="fixed"):
        MultiAgentOffPolicy([Learner("a", slice(0, 3), policy=RandomPolicy(gym.spaces.Discrete(2)))])
    with pytest.raises(ConfigurationError, match="one scope per agent"):
        scoped_learners([4, 4], [dqn])
    learners = scoped_learners([2, 3], [dqn, RandomPolicy(gym.spaces.Discrete(4))])
    assert [(lr.units.start, lr.units.stop) for lr in learners] == [(0, 2), (2, 5)]


def test_policy_routes_rows_by_columns() -> None:
    space = gym.spaces.Discrete(5)
    learners = scoped_learners(
        [2, 3],
        [
            ScriptedPolicy(space, lambda o: np.full(len(o), 1)),
            ScriptedPolicy(space, lambda o: np.full(len(o), 4)),
        ],
    )
    policy = MultiAgentPolicy(learners)
    obs = np.zeros((5, 1), np.float32)
    np.testing.assert_array_equal(policy.compute_actions(obs, deterministic=True), [1, 1, 4, 4, 4])
    np.testing.assert_array_equal(
        policy.compute_actions_for(obs[:3], np.array([1, 3, 4]), deterministic=True, num_columns=5), [1, 4, 4]
    )
    with pytest.raises(ConfigurationError, match="multiple of the units"):
        policy.compute_actions(np.zeros((4, 1), np.float32), deterministic=True)
    # a batch of twice the columns: each unit is two columns
    np.testing.assert_array_equal(
        policy.compute_actions(np.zeros((10, 1), np.float32), deterministic=True), [1] * 4 + [4] * 6
    )


def test_collect_stats_log_per_agent_returns_after_reduction() -> None:
    stats = CollectStats(n_collected_episodes=2, returns=np.array([[1.0, 3.0], [2.0, 5.0]]), lens=np.ones(2))
    named = stats.with_agents(("x", "y")).with_return_reduction(lambda r: r.max(axis=1))
    scalars = named.as_scalars()
    assert scalars["returns/mean"] == 4.0
    assert scalars["returns/x/mean"] == 1.5 and scalars["returns/y/mean"] == 4.0
    merged = merge_collect_stats([named, named])
    assert merged.agent_returns is not None and merged.agent_returns.shape == (4, 2)
    assert merged.agents == ("x", "y")
