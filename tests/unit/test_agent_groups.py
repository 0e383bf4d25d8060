"""Agent groups (issue 33 part 2): agents with different observation and action spaces in one env
(:mod:`tshtrain.env.groups`), each group trained by its own learners through the ordinary trainers."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tests.multi_agent_envs import TwoTeams
from tshtrain.algorithm import (
    DQN,
    PPO,
    CategoricalPolicy,
    DQNParams,
    EpsilonSchedule,
    GaussianPolicy,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    Policy,
    PPOParams,
    QValuePolicy,
    RandomPolicy,
    grouped_learners,
    mlp,
)
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.data.batch import RolloutBatch
from tshtrain.env import AGENT_ID_KEY, OBS_KEY, STATE_KEY, AgentColumns
from tshtrain.env.groups import (
    AgentGroup,
    GroupView,
    group_obs_key,
    group_observation_space,
    group_of,
    resolve_groups,
    storage_action_space,
)
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams, OnPolicyTrainer, OnPolicyTrainerParams

BOX = gym.spaces.Box


# ---------------------------------------------------------------------- the pieces
def test_groups_by_name_by_mapping_and_refused_mappings() -> None:
    assert group_of("adversary_0") == "adversary" and group_of("agent_12") == "agent"
    assert group_of("speaker") == "speaker" and group_of("_3") == "_3" and group_of("a_b") == "a_b"
    agents = ("adversary_0", "agent_0", "adversary_1")
    assert resolve_groups(agents, "auto", "t") == {
        "adversary": ("adversary_0", "adversary_1"),
        "agent": ("agent_0",),
    }
    assert resolve_groups(agents, None, "t") is None
    assert resolve_groups(agents, {"x": ["agent_0"], "y": agents[::2]}, "t") == {
        "x": ("agent_0",),
        "y": ("adversary_0", "adversary_1"),
    }
    with pytest.raises(ConfigurationError, match=r"missing \['agent_0'\]"):
        resolve_groups(agents, {"x": ["adversary_0", "adversary_1"]}, "t")
    with pytest.raises(ConfigurationError, match=r"repeated \['agent_0'\]"):
        resolve_groups(agents, {"x": ["agent_0"], "y": ["agent_0", *agents[::2]]}, "t")
    with pytest.raises(ConfigurationError, match=r"unknown \['z'\]"):
        resolve_groups(agents, {"x": [*agents, "z"]}, "t")
    with pytest.raises(ConfigurationError, match="without '@'"):
        resolve_groups(agents, {"x@y": agents}, "t")
    with pytest.raises(ConfigurationError, match="'auto'"):
        resolve_groups(agents, "by_name", "t")
    with pytest.raises(ConfigurationError, match=r"a list of one or more agents, got \{'x': \[\]\}"):
        resolve_groups(agents, {"x": [], "y": agents}, "t")
    with pytest.raises(ConfigurationError, match="a list of one or more agents"):
        resolve_groups(("agent_0",), {"x": "agent_0"}, "t")
    with pytest.raises(ConfigurationError, match=r"without '@' or '/', got \['team/a'\]"):
        resolve_groups(("team/a_0",), "auto", "t")


def test_the_stored_action_space_holds_every_groups_actions() -> None:
    assert storage_action_space({"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(5)}, "t") == (
        gym.spaces.Discrete(5)
    )
    stored = storage_action_space({"a": BOX(-2.0, 1.0, (1,)), "b": BOX(0.5, 3.0, (3,))}, "t")
    assert isinstance(stored, BOX) and stored.shape == (3,)
    np.testing.assert_array_equal(stored.low, [-2.0, 0.0, 0.0])  # the zero padding of a's rows lies inside
    np.testing.assert_array_equal(stored.high, [3.0, 3.0, 3.0])
    with pytest.raises(UnsupportedSpaceError, match="all be Discrete or all be flat Boxes"):
        storage_action_space({"a": gym.spaces.Discrete(3), "b": BOX(0.0, 1.0, (2,))}, "t")
    with pytest.raises(UnsupportedSpaceError, match="start at 0"):
        storage_action_space({"a": gym.spaces.Discrete(3, start=1)}, "t")


def _view(obs_dim: int = 2, first: int = 1, agents: int = 2, **space: Any) -> GroupView:
    seen = group_observation_space(BOX(-1.0, 1.0, (obs_dim,)), num_group_agents=agents, **space)
    group = AgentGroup("g", tuple(f"g_{i}" for i in range(agents)), first, seen, BOX(-1.0, 1.0, (2,)))
    return GroupView(group, stored_action_width=5)


@pytest.mark.parametrize("tensor", [False, True])
def test_a_view_gives_the_groups_keys_ids_within_the_group_and_action_width(tensor: bool) -> None:
    rows = 4
    stored: dict[str, Any] = {
        group_obs_key("g"): np.arange(rows * 2, dtype=np.float32).reshape(rows, 2),
        group_obs_key("other"): np.ones((rows, 7), np.float32),
        STATE_KEY: np.full((rows, 3), 5.0, np.float32),
        AGENT_ID_KEY: np.repeat(np.eye(4, dtype=np.float32)[1:3], 2, axis=0),  # agents 1, 2 of 4
    }
    act = np.arange(rows * 5, dtype=np.float32).reshape(rows, 5)
    if tensor:
        stored = {key: torch.as_tensor(value) for key, value in stored.items()}
    wrap = torch.as_tensor if tensor else np.asarray

    view = _view(state=BOX(-np.inf, np.inf, (3,)), agent_id=True)
    seen = view.obs(stored)
    assert set(seen) == {OBS_KEY, STATE_KEY, AGENT_ID_KEY}
    np.testing.assert_array_equal(np.asarray(seen[OBS_KEY]), np.asarray(stored[group_obs_key("g")]))
    np.testing.assert_array_equal(np.asarray(seen[AGENT_ID_KEY]), [[1, 0], [1, 0], [0, 1], [0, 1]])
    mine = view.act(wrap(act))
    np.testing.assert_array_equal(np.asarray(mine), act[:, :2])
    padded = view.pad(mine)
    assert padded.shape == (rows, 5)
    np.testing.assert_array_equal(np.asarray(padded)[:, 2:], 0.0)
    bare = _view(state=None, agent_id=False)
    np.testing.assert_array_equal(np.asarray(bare.obs(stored)), np.asarray(stored[group_obs_key("g")]))
    with pytest.raises(ConfigurationError, match="Dict observations of a grouped env"):
        bare.obs(np.zeros((2, 2)))


def test_a_view_maps_a_rollouts_observations_and_actions_only() -> None:
    view = _view(state=None, agent_id=False)
    rows = {group_obs_key("g"): np.ones((3, 2, 2), np.float32), group_obs_key("h"): np.zeros((3, 2, 9))}
    flags = np.zeros((3, 2), bool)
    batch = RolloutBatch(
        obs=rows,
        act=np.ones((3, 2, 5), np.float32),
        rew=np.ones((3, 2), np.float32),
        terminated=flags,
        truncated=flags,
        obs_next=rows,
        boundary=flags,
        valid=~flags,
    )
    seen = view.batch(batch)
    assert isinstance(seen.obs, np.ndarray) and seen.obs.shape == (3, 2, 2)
    assert isinstance(seen.obs_next, np.ndarray) and seen.act.shape == (3, 2, 2)
    assert seen.rew is batch.rew and seen.valid is batch.valid


# ---------------------------------------------------------------------- the env, the policy and the learners
@pytest.mark.parametrize("continuous", [False, True])
def test_random_actions_lie_in_each_groups_space(continuous: bool) -> None:
    env = TwoTeams(5, continuous=continuous)
    act = env.sample_actions(None, np.random.default_rng(0))
    scout, runners = act[:5], act[5:]
    if continuous:
        assert act.shape == (15, 2) and (scout[:, 1] == 0).all() and (np.abs(act) <= 1).all()
        assert (runners[:, 1] != 0).all()
    else:
        assert set(scout.tolist()) == {0, 1, 2} and set(runners.tolist()) == {0, 1}
    some = env.sample_actions(np.array([1, 7, 12]), np.random.default_rng(0))
    assert len(some) == 3
    env.step(act, np.arange(15))  # the env checks that no padding reaches it


class _Spy(Policy):
    """Acts with a fixed action of its group's width and records the observations it is given."""

    def __init__(self, space: gym.Space[Any], value: float):
        super().__init__(action_space=space, action_scaling=False)
        self.value = value
        self.seen: list[Any] = []

    def compute_actions(self, obs: Any, *, deterministic: bool) -> np.ndarray:
        self.seen.append(obs)
        shape = (len(obs), *(self.action_space.shape or ()))
        return np.full(shape, self.value, np.float32)

    def actions(self, obs: Any, *, deterministic: bool) -> torch.Tensor:
        return torch.as_tensor(self.compute_actions(obs, deterministic=deterministic))


def test_the_joint_policy_hands_each_learner_its_view_and_pads_its_actions() -> None:
    env = TwoTeams(3, continuous=True)
    scout = _Spy(env.groups["scout"].action_space, 0.5)
    runner = _Spy(env.groups["runner"].action_space, -0.25)
    ppo = PPO(policy=scout, critic=mlp(3, 1, (4,)), params=PPOParams())  # a learner needs one trained member
    learners = grouped_learners(env, {"scout": ppo, "runner": {"runner_0": runner, "runner_1": runner}})
    assert [(lr.name, lr.units) for lr in learners] == [
        ("scout", slice(0, 1)),
        ("runner_0", slice(1, 2)),
        ("runner_1", slice(2, 3)),
    ]
    algorithm = MultiAgentOnPolicy(learners, num_units=3)
    env.reset(seed=0)
    act = algorithm.policy.compute_actions(env.obs, deterministic=True)
    np.testing.assert_array_equal(act[:3], [[0.5, 0.0]] * 3)  # the scout's one dimension, padded
    np.testing.assert_array_equal(act[3:], -0.25)
    assert [obs.shape for obs in scout.seen] == [(3, 3)]  # its own key, the rows of its columns
    assert [obs.shape for obs in runner.seen] == [(3, 2), (3, 2)]
    env.step(algorithm.policy.map_action(act), np.arange(9))


def test_grouped_learners_are_checked() -> None:
    env = TwoTeams(2)
    dqn = DQN(policy=QValuePolicy(mlp(3, 3, (4,)), env.groups["scout"].action_space))
    fixed = RandomPolicy(env.groups["runner"].action_space, seed=0)
    with pytest.raises(ConfigurationError, match=r"missing members for \['runner'\]"):
        grouped_learners(env, {"scout": dqn})
    with pytest.raises(ConfigurationError, match=r"unknown groups \['hider'\]"):
        grouped_learners(env, {"scout": dqn, "runner": fixed, "hider": fixed})
    with pytest.raises(ConfigurationError, match=r"missing members for \['runner_1'\]"):
        grouped_learners(env, {"scout": dqn, "runner": {"runner_0": fixed}})

    class NoGroups(TwoTeams):
        groups = None

    plain = NoGroups.__new__(NoGroups)
    plain.columns = AgentColumns(("a",), 1)
    with pytest.raises(ConfigurationError, match="has no agent groups"):
        grouped_learners(plain, {})
    ppo = PPO(policy=CategoricalPolicy(mlp(3, 3, (4,)), env.groups["scout"].action_space), critic=mlp(3, 1))
    learners = grouped_learners(env, {"scout": ppo, "runner": fixed})
    with pytest.raises(ConfigurationError, match="parallel' does not support agent groups"):
        MultiAgentOnPolicy(learners, update_mode="parallel")


# ---------------------------------------------------------------------- training through the trainers
def _score(trainer: Any) -> float:
    collector = trainer.params.test_collector
    collector.reset()
    stats = collector.collect(n_episode=20)
    return float(stats.per_agent_returns.mean())


def _ppo_group(group: AgentGroup, seed: int) -> PPO:
    obs_dim = int(group.observation_space.shape[0])
    space = group.action_space
    torch.manual_seed(seed)
    policy: Policy
    if isinstance(space, gym.spaces.Discrete):
        policy = CategoricalPolicy(mlp(obs_dim, int(space.n), (32,)), space, seed=seed)
    else:
        policy = GaussianPolicy(mlp(obs_dim, int(space.shape[0]), (32,)), space, init_log_std=-0.5, seed=seed)
    return PPO(policy=policy, critic=mlp(obs_dim, 1, (32,)), params=PPOParams(lr=3e-3), seed=seed)


@pytest.mark.parametrize("continuous", [False, True])
def test_groups_learn_with_an_on_policy_trainer(continuous: bool) -> None:
    """The groups' own PPOs (scout alone, runners shared) learn both kinds. Discrete: random play earns
    a per-agent mean of about 1.8 of 4. Continuous (4 steps of -|a - v| over the agent's 1 or 2
    dimensions, v uniform in [0, 1]): random actions about -5.6, always acting 0 about -3.3, 0 optimal;
    the seed learns to about -1.2 in this budget."""
    env, test_env = TwoTeams(8, continuous=continuous), TwoTeams(4, continuous=continuous, seed=1)
    algorithm = MultiAgentOnPolicy(
        grouped_learners(env, {name: _ppo_group(g, 0) for name, g in env.groups.items()}), num_units=3
    )
    params = OnPolicyTrainerParams(
        training_collector=MultiAgentCollector(
            algorithm.policy, env, VectorReplayBuffer(24 * 32, buffer_num=env.num_columns), seed=0
        ),
        test_collector=MultiAgentCollector(algorithm.policy, test_env, seed=1),
        max_epochs=6,
        epoch_num_steps=8 * 32 * 4,
        collection_step_num_env_steps=8 * 32,
        batch_size=128,
        update_step_num_repetitions=4,
        test_step_num_episodes=8,
        verbose=False,
        show_progress=False,
    )
    trainer = OnPolicyTrainer(algorithm, params)
    trainer.run()
    score = _score(trainer)
    assert score > (-2.0 if continuous else 3.8), score


def test_groups_learn_with_an_off_policy_trainer_and_round_trip() -> None:
    """DQN for the scout, independent DQNs for the two runners; each samples its own columns through
    its group's view (greedy per-agent mean near the optimum 4; random play about 1.8)."""
    env, test_env = TwoTeams(4), TwoTeams(4, seed=1)

    def dqn(group: AgentGroup, seed: int) -> DQN:
        torch.manual_seed(seed)
        obs_dim, n = int(group.observation_space.shape[0]), int(group.action_space.n)  # type: ignore[attr-defined]
        policy = QValuePolicy(
            nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, n)),
            group.action_space,
            eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=400),
            seed=seed,
        )
        return DQN(policy=policy, params=DQNParams(lr=3e-3, gamma=0.5, target_update_freq=20))

    scout, runner = env.groups["scout"], env.groups["runner"]
    algorithm = MultiAgentOffPolicy(
        grouped_learners(
            env, {"scout": dqn(scout, 0), "runner": {"runner_0": dqn(runner, 1), "runner_1": dqn(runner, 2)}}
        ),
        num_units=3,
    )
    params = OffPolicyTrainerParams(
        training_collector=MultiAgentCollector(
            algorithm.policy,
            env,
            VectorReplayBuffer(4000, buffer_num=env.num_columns, seed=0),
            exploration_noise=True,
            seed=0,
        ),
        test_collector=MultiAgentCollector(algorithm.policy, test_env, seed=1),
        max_epochs=4,
        epoch_num_steps=400,
        collection_step_num_env_steps=8,
        batch_size=32,
        test_step_num_episodes=8,
        verbose=False,
        show_progress=False,
    )
    trainer = OffPolicyTrainer(algorithm, params)
    trainer.run()
    assert _score(trainer) > 3.8
    state = algorithm.state_dict()
    assert set(state) == {"scout", "runner_0", "runner_1"}
    before = [p.detach().clone() for p in algorithm.policy.parameters()]
    buffer = params.training_collector.buffer
    assert buffer is not None
    algorithm.update(buffer, 32)
    algorithm.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(before, algorithm.policy.parameters(), strict=True))
