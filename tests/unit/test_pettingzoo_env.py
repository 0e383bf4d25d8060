"""PettingZoo envs as multi-agent vector envs: tic-tac-toe (AEC), MPE2 simple_spread (parallel), and
small hand-written envs in which agents leave early."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest

from tests.extras import need

pytestmark = pytest.mark.integration
need("pettingzoo", "pettingzoo")
need("mpe2", "pettingzoo")

from mpe2 import simple_spread_v3
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.classic import tictactoe_v3
from pettingzoo.utils import AgentSelector, BaseWrapper

from tshtrain.env import (
    ACTION_MASK_KEY,
    AGENT_ID_KEY,
    OBS_KEY,
    STATE_KEY,
    PettingZooAECVectorEnv,
    PettingZooParallelVectorEnv,
    group_obs_key,
    make_pettingzoo_vector_env,
    pettingzoo_env_fns,
)
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


def _acting(env: Any) -> np.ndarray:
    return np.flatnonzero(env.acting_C)


# ----------------------------------------------------------------------------------- tic-tac-toe (AEC)
def test_tictactoe_spaces_alternating_columns_and_masks() -> None:
    env = make_pettingzoo_vector_env("pettingzoo.classic.tictactoe_v3", 3)
    assert isinstance(env, PettingZooAECVectorEnv) and env.turn_based
    assert env.agents == ("player_1", "player_2") and env.num_columns == 6
    assert env.single_action_space == gym.spaces.Discrete(9)
    space = env.single_observation_space
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {OBS_KEY, ACTION_MASK_KEY}
    assert space[ACTION_MASK_KEY] == gym.spaces.Box(0, 1, (9,), np.int8)
    env.reset(seed=0)
    np.testing.assert_array_equal(_acting(env), [0, 1, 2])  # player_1 of every env moves first
    masks = env.action_masks()
    assert masks is not None and masks.dtype == np.int8 and masks.shape == (6, 9)
    np.testing.assert_array_equal(masks[:3], 1)
    step = env.step(np.array([4, 0, 8]), np.array([0, 1, 2]))
    assert not step.env_done_E.any() and not step.terminated_C.any() and not step.rew_C.any()
    np.testing.assert_array_equal(_acting(env), [3, 4, 5])  # now player_2
    masks = env.action_masks()
    assert masks is not None
    for row, played in zip((3, 4, 5), (4, 0, 8), strict=True):
        expected = np.ones(9, np.int8)
        expected[played] = 0
        np.testing.assert_array_equal(masks[row], expected)
    obs = env.obs
    assert isinstance(obs, dict)
    assert (
        obs[OBS_KEY][3, 1, 1, 1] == 1 and obs[OBS_KEY][3, 1, 1, 0] == 0
    )  # the opponent's mark in the centre
    env.step(np.array([0, 4, 0]), np.array([3, 4, 5]))
    np.testing.assert_array_equal(_acting(env), [0, 1, 2])


def test_tictactoe_win_gives_both_players_their_reward_and_terminal_flag_in_one_step() -> None:
    env = PettingZooAECVectorEnv([tictactoe_v3.env, tictactoe_v3.env])
    env.reset(seed=1)
    # env 0: player_1 takes the top row (0, 1, 2) while player_2 plays 3, 4; env 1 plays elsewhere
    script = [([0, 6], [0, 1]), ([3, 7], [2, 3]), ([1, 8], [0, 1]), ([4, 0], [2, 3])]
    for act, cols in script:
        step = env.step(np.array(act), np.array(cols))
        assert not step.env_done_E.any() and not step.rew_C.any()
    step = env.step(np.array([2, 1]), np.array([0, 1]))  # player_1 wins env 0
    np.testing.assert_array_equal(step.rew_C, [1.0, 0.0, -1.0, 0.0])
    np.testing.assert_array_equal(step.terminated_C, [True, False, True, False])
    assert not step.truncated_C.any()
    np.testing.assert_array_equal(step.env_done_E, [True, False])
    final = step.final_obs
    assert isinstance(final, dict)
    np.testing.assert_array_equal(final[OBS_KEY][0, 0, :, 0], [1, 1, 1])  # player_1 sees its row
    np.testing.assert_array_equal(final[OBS_KEY][2, 0, :, 1], [1, 1, 1])  # player_2 sees it as the opponent's
    np.testing.assert_array_equal(final[OBS_KEY][2, 1, :2, 0], [1, 1])  # and its own marks on 3, 4
    # env 0 was reset in the same call: its player_1 moves on an empty board; env 1's player_2 moves
    np.testing.assert_array_equal(_acting(env), [0, 3])
    obs = env.obs
    assert isinstance(obs, dict)
    np.testing.assert_array_equal(obs[OBS_KEY][0], 0)
    np.testing.assert_array_equal(obs[ACTION_MASK_KEY][0], 1)
    step = env.step(np.array([5, 2]), np.array([0, 3]))
    assert not step.rew_C.any() and not step.env_done_E.any()


def test_tictactoe_illegal_move_ends_the_game_for_both_players() -> None:
    env = PettingZooAECVectorEnv([tictactoe_v3.env])
    env.reset(seed=0)
    env.step(np.array([4]), np.array([0]))
    step = env.step(np.array([4]), np.array([1]))  # player_2 plays the occupied centre
    np.testing.assert_array_equal(step.rew_C, [0.0, -1.0])
    assert step.terminated_C.all() and step.env_done_E[0]
    np.testing.assert_array_equal(_acting(env), [0])


def test_tictactoe_with_the_collector_stores_terminal_transitions_for_both_players() -> None:
    from tshtrain.algorithm import MultiAgentPolicy, RandomPolicy, independent_learners
    from tshtrain.data import MultiAgentCollector, VectorReplayBuffer

    env = make_pettingzoo_vector_env("pettingzoo.classic.tictactoe_v3", 4)
    members = {name: RandomPolicy(env.single_action_space, seed=i) for i, name in enumerate(env.agents)}
    policy = MultiAgentPolicy(independent_learners(env.columns, members))
    buffer = VectorReplayBuffer(800, buffer_num=env.num_columns)
    stats = MultiAgentCollector(policy, env, buffer, seed=0).collect(n_episode=12)
    assert stats.returns.shape == (12, 2)
    np.testing.assert_array_equal(stats.returns.sum(axis=1), 0.0)  # zero-sum: +1/-1 or a draw
    assert set(np.unique(stats.returns)) <= {-1.0, 0.0, 1.0}
    batch = buffer.get(np.arange(len(buffer)))
    assert np.all(np.isin(batch.rew, [-1.0, 0.0, 1.0]))
    # every decided game stores one nonzero terminal transition per player
    assert int(np.sum(batch.terminated & (batch.rew != 0))) >= 2 * int(np.sum(stats.returns[:, 0] != 0)) - 8
    assert not np.any(batch.rew[~batch.terminated])  # rewards arrive only when a game ends


# ----------------------------------------------------------------------------- simple_spread (parallel)
def _spread(num_envs: int, **kwargs: Any) -> PettingZooParallelVectorEnv:
    fns = [functools.partial(simple_spread_v3.parallel_env, max_cycles=5) for _ in range(num_envs)]
    return PettingZooParallelVectorEnv(fns, **kwargs)


def test_simple_spread_shapes_state_agent_id_truncation_and_autoreset() -> None:
    env = _spread(2, agent_id=True, global_state=True)
    assert not env.turn_based and env.agents == ("agent_0", "agent_1", "agent_2")
    space = env.single_observation_space
    assert isinstance(space, gym.spaces.Dict)
    assert set(space.spaces) == {OBS_KEY, STATE_KEY, AGENT_ID_KEY}
    assert space[OBS_KEY].shape == (18,) and space[STATE_KEY].shape == (54,)
    env.reset(seed=0)
    obs = env.obs
    assert isinstance(obs, dict)
    assert obs[OBS_KEY].shape == (6, 18) and obs[STATE_KEY].shape == (6, 54)
    np.testing.assert_array_equal(obs[AGENT_ID_KEY], np.repeat(np.eye(3, dtype=np.float32), 2, axis=0))
    np.testing.assert_array_equal(obs[STATE_KEY][0], obs[STATE_KEY][2])  # env 0's agents share its state
    np.testing.assert_array_equal(obs[STATE_KEY][0], np.concatenate(obs[OBS_KEY][[0, 2, 4]]))
    assert not np.array_equal(obs[STATE_KEY][0], obs[STATE_KEY][1])
    assert env.acting_C.all() and env.action_masks() is None
    for t in range(5):
        before = obs[OBS_KEY].copy()
        step = env.step(np.full(6, 1), np.arange(6))
        assert step.rew_C.dtype == np.float32 and np.all(step.rew_C < 0)
        if t < 4:
            assert not step.truncated_C.any() and not step.env_done_E.any()
    assert step.truncated_C.all() and not step.terminated_C.any() and step.env_done_E.all()
    final = step.final_obs
    assert isinstance(final, dict) and final[OBS_KEY].shape == (6, 18)
    np.testing.assert_array_equal(final[STATE_KEY][1], np.concatenate(final[OBS_KEY][[1, 3, 5]]))
    assert not np.array_equal(final[OBS_KEY], env.obs[OBS_KEY])  # the new episode's first observation
    assert not np.array_equal(before, final[OBS_KEY])
    assert env.acting_C.all()
    env.close()


def test_simple_spread_matches_the_raw_envs_step_for_step() -> None:
    env = _spread(2)
    raw = [simple_spread_v3.parallel_env(max_cycles=5) for _ in range(2)]
    env.reset(seed=7)
    raw_obs = [r.reset(seed=7 + i)[0] for i, r in enumerate(raw)]
    rng = np.random.default_rng(0)
    for _ in range(12):  # across two autoresets
        obs = env.obs
        assert isinstance(obs, np.ndarray)
        for e in range(2):
            for a, name in enumerate(env.agents):
                np.testing.assert_array_equal(obs[a * 2 + e], raw_obs[e][name])
        act = rng.integers(0, 5, 6)
        step = env.step(act, np.arange(6))
        for e, r in enumerate(raw):
            raw_obs[e], rew, _, trunc, _ = r.step(
                {name: int(act[a * 2 + e]) for a, name in enumerate(env.agents)}
            )
            for a, name in enumerate(env.agents):
                assert step.rew_C[a * 2 + e] == np.float32(rew[name])
                assert step.truncated_C[a * 2 + e] == trunc[name]
            if not r.agents:
                raw_obs[e] = r.reset()[0]


def test_seeded_resets_are_reproducible_and_env_i_gets_seed_plus_i() -> None:
    def rollout(seed: int) -> list[np.ndarray]:
        env = _spread(2)
        env.reset(seed=seed)
        out = []
        for t in range(8):
            obs = env.obs
            assert isinstance(obs, np.ndarray)
            out.append(obs.copy())
            env.step(np.arange(6) % 5 if t % 2 else np.full(6, 3), np.arange(6))
        return out

    first, again, other = rollout(3), rollout(3), rollout(4)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])
    np.testing.assert_array_equal(first[0][1::2], other[0][0::2])  # env 1 with seed 3 is env 0 with seed 4


# ------------------------------------------------------------------------- hand-written parallel env
class LeavingParallel(ParallelEnv):  # type: ignore[type-arg]  # pettingzoo's generics are unused here
    """Three agents; ``b`` terminates after its first step, ``c`` vanishes from ``agents`` after its
    second without a flag, ``a`` is truncated after its third. Every step rewards each acting agent
    with its action + 1; the env (wrongly) keeps rewarding agents that left with 100. Observation:
    (step count, agent index)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "leaving_parallel"}

    def __init__(self) -> None:
        self.possible_agents = ["a", "b", "c"]
        self.agents: list[str] = []
        self.t = 0

    def observation_space(self, agent: str) -> gym.spaces.Box:
        return gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> gym.spaces.Discrete:
        return gym.spaces.Discrete(3)

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.t, self.possible_agents.index(agent)], np.float32)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[Any, ...]:
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        rew = {a: float(actions[a]) + 1.0 for a in actions}
        rew.update({a: 100.0 for a in self.possible_agents if a not in actions})
        term = {a: a == "b" and self.t == 1 for a in actions}
        trunc = {a: a == "a" and self.t == 3 for a in actions}
        obs = {a: self._obs(a) for a in actions if a != "c" or self.t < 2}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a]) and not (a == "c" and self.t == 2)]
        return obs, rew, term, trunc, {a: {} for a in actions}


def test_parallel_agent_that_leaves_rests_with_reward_zero_until_the_episode_ends() -> None:
    env = PettingZooParallelVectorEnv([LeavingParallel, LeavingParallel])
    env.reset()
    # columns: a = 0, 1; b = 2, 3; c = 4, 5
    step = env.step(np.full(6, 1), np.arange(6))
    np.testing.assert_array_equal(step.rew_C, 2.0)
    np.testing.assert_array_equal(step.terminated_C, [False, False, True, True, False, False])
    assert not step.truncated_C.any() and not step.env_done_E.any()
    assert isinstance(step.final_obs, np.ndarray)
    np.testing.assert_array_equal(step.final_obs[2], [1, 1])
    np.testing.assert_array_equal(env.acting_C, [True, True, False, False, True, True])
    step = env.step(np.array([0, 0, 2, 2]), np.array([0, 1, 4, 5]))
    np.testing.assert_array_equal(step.rew_C, [1, 1, 0, 0, 3, 3])  # b rests: not the env's 100
    np.testing.assert_array_equal(step.truncated_C, [False, False, False, False, True, True])  # c vanished
    assert not step.terminated_C.any()
    assert isinstance(step.final_obs, np.ndarray)
    np.testing.assert_array_equal(step.final_obs[4], [1, 2])  # c's last observation
    np.testing.assert_array_equal(_acting(env), [0, 1])
    step = env.step(np.array([2, 2]), np.array([0, 1]))
    np.testing.assert_array_equal(step.rew_C, [3, 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(step.truncated_C, [True, True, False, False, False, False])
    assert step.env_done_E.all() and env.acting_C.all()  # reset in the same call
    obs = env.obs
    assert isinstance(obs, np.ndarray)
    np.testing.assert_array_equal(obs[:, 0], 0)


def test_step_rejects_columns_that_do_not_act() -> None:
    env = PettingZooParallelVectorEnv([LeavingParallel])
    env.reset()
    env.step(np.zeros(3, np.int64), np.arange(3))
    with pytest.raises(ConfigurationError, match="acting ones"):
        env.step(np.zeros(3, np.int64), np.arange(3))  # b has left


# ------------------------------------------------------------------------------ hand-written AEC env
class LeavingTurns(AECEnv):  # type: ignore[type-arg]  # pettingzoo's generics are unused here
    """Three players take turns a, b, c, a, c, a, c. ``b`` terminates in its first move (reward 5 to
    b, and -1 to c); afterwards every move of c gives a +1; the game ends (all terminated) with a's
    third move, which gives c a reward of 7. Observation: (move count, agent index)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "leaving_turns"}

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["a", "b", "c"]

    def observation_space(self, agent: str) -> gym.spaces.Box:
        return gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> gym.spaces.Discrete:
        return gym.spaces.Discrete(2)

    def observe(self, agent: str) -> np.ndarray:
        return np.array([self.moves, self.possible_agents.index(agent)], np.float32)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.moves = 0
        self.a_moves = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.next()

    def step(self, action: Any) -> None:
        if self.terminations[self.agent_selection] or self.truncations[self.agent_selection]:
            self._was_dead_step(action)
            return
        agent = self.agent_selection
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self.moves += 1
        if agent == "b":
            self.rewards["b"], self.rewards["c"] = 5.0, -1.0
            self.terminations["b"] = True
        elif agent == "c":
            self.rewards["c"] = 1.0
        else:
            self.a_moves += 1
            if self.a_moves == 3:
                self.rewards["c"] = 7.0
                self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        self.agent_selection = self._selector.next()
        while self.agent_selection not in self.agents:
            self.agent_selection = self._selector.next()
        self._deads_step_first()


def test_aec_agent_that_leaves_early_is_terminal_at_once_and_rests() -> None:
    env = PettingZooAECVectorEnv([LeavingTurns])
    env.reset(seed=0)
    # columns (E = 1): a = 0, b = 1, c = 2
    np.testing.assert_array_equal(_acting(env), [0])
    step = env.step(np.array([0]), np.array([0]))  # a
    assert not step.rew_C.any()
    np.testing.assert_array_equal(_acting(env), [1])
    step = env.step(np.array([1]), np.array([1]))  # b leaves; the adapter takes its dead step
    np.testing.assert_array_equal(step.rew_C, [0.0, 5.0, -1.0])
    np.testing.assert_array_equal(step.terminated_C, [False, True, False])
    assert isinstance(step.final_obs, np.ndarray)
    np.testing.assert_array_equal(step.final_obs[1], [2, 1])
    np.testing.assert_array_equal(_acting(env), [2])
    moves = [(2, [0, 0, 1]), (0, [0, 0, 0]), (2, [0, 0, 1])]
    for col, rew in moves:
        step = env.step(np.array([0]), np.array([col]))
        np.testing.assert_array_equal(step.rew_C, rew)
        assert not step.env_done_E.any() and not step.terminated_C.any()
    step = env.step(np.array([0]), np.array([0]))  # a's third move ends the game
    np.testing.assert_array_equal(step.rew_C, [0.0, 0.0, 7.0])  # b rests
    np.testing.assert_array_equal(step.terminated_C, [True, False, True])
    assert step.env_done_E[0]
    assert isinstance(step.final_obs, np.ndarray)
    np.testing.assert_array_equal(step.final_obs[[0, 2], 0], [6, 6])
    np.testing.assert_array_equal(_acting(env), [0])  # a new game
    obs = env.obs
    assert isinstance(obs, np.ndarray)
    np.testing.assert_array_equal(obs[0], [0, 0])


class DoubledRewards(BaseWrapper):  # type: ignore[type-arg]  # pettingzoo's generics are unused here
    """A user's wrapper that changes what ``rewards`` reads: the adapter must not read past it."""

    @property
    def rewards(self) -> dict[str, float]:
        return {agent: 2.0 * reward for agent, reward in self.env.rewards.items()}


def test_aec_reads_rewards_through_wrappers_other_than_pettingzoos_own() -> None:
    env = PettingZooAECVectorEnv([lambda: DoubledRewards(tictactoe_v3.env())])
    env.reset(seed=0)
    for col, square in [(0, 0), (1, 3), (0, 1), (1, 4)]:
        env.step(np.array([square]), np.array([col]))
    step = env.step(np.array([2]), np.array([0]))
    np.testing.assert_array_equal(step.rew_C, [2.0, -2.0])
    assert step.terminated_C.all() and step.env_done_E[0]


# ------------------------------------------------------------------------------------------- errors
def test_env_ids_outside_the_allowed_packages_are_refused() -> None:
    refused = (
        "os.path",
        "pettingzoox.classic",
        "pettingzoo..x",
        "mpe2",
        " mpe2.simple_v3",
        "pettingzoo.__main__",
    )
    for env_id in refused:
        with pytest.raises(ConfigurationError, match=r"\['pettingzoo', 'mpe2'\]"):
            pettingzoo_env_fns(env_id, 1)
    with pytest.raises(ConfigurationError, match="cannot import"):
        pettingzoo_env_fns("pettingzoo.classic.no_such_game_v0", 1)
    with pytest.raises(ConfigurationError, match="kind"):
        make_pettingzoo_vector_env("mpe2.simple_spread_v3", 1, kind="turns")  # type: ignore[arg-type]


def test_default_kind_and_kwargs() -> None:
    assert isinstance(make_pettingzoo_vector_env("mpe2.simple_spread_v3", 1), PettingZooParallelVectorEnv)
    env = make_pettingzoo_vector_env("mpe2.simple_spread_v3", 2, kind="aec", kwargs={"N": 2})
    assert isinstance(env, PettingZooAECVectorEnv) and env.agents == ("agent_0", "agent_1")
    env.reset(seed=0)
    np.testing.assert_array_equal(_acting(env), [0, 1])


class Mixed(LeavingParallel):
    def observation_space(self, agent: str) -> gym.spaces.Box:
        return gym.spaces.Box(-np.inf, np.inf, (2 if agent != "c" else 3,), np.float32)


def test_agents_with_different_spaces_are_refused_naming_them() -> None:
    with pytest.raises(
        UnsupportedSpaceError, match=r"different observation spaces.*c: Box\(-inf, inf, \(3,\)"
    ):
        PettingZooParallelVectorEnv([Mixed])


# ------------------------------------------------------------------------------------- agent groups
def test_speaker_listener_groups_have_their_own_spaces_and_match_the_raw_env() -> None:
    """MPE2 simple_speaker_listener: the speaker (obs (3,), 3 words) and the listener (obs (11,), 5
    moves) in their own groups; each column's observation is its group's key, and the raw envs given
    the same actions (cut to each group's width) give the same observations and rewards."""
    kwargs = {"max_cycles": 4, "continuous_actions": True}
    env = make_pettingzoo_vector_env(
        "mpe2.simple_speaker_listener_v4", 2, kwargs=kwargs, groups="auto", global_state=True
    )
    assert env.agents == ("speaker_0", "listener_0") and env.groups is not None
    speaker, listener = env.groups["speaker"], env.groups["listener"]
    assert speaker.units == slice(0, 1) and listener.units == slice(1, 2)
    assert speaker.action_space.shape == (3,) and listener.action_space.shape == (5,)
    assert env.single_action_space.shape == (5,)  # padded to the widest group
    seen = listener.observation_space
    assert isinstance(seen, gym.spaces.Dict) and seen[OBS_KEY].shape == (11,)
    assert set(seen.spaces) == {OBS_KEY, STATE_KEY}
    stored = env.single_observation_space
    assert isinstance(stored, gym.spaces.Dict)
    assert set(stored.spaces) == {group_obs_key("speaker"), group_obs_key("listener"), STATE_KEY}
    from mpe2 import simple_speaker_listener_v4

    raw = [simple_speaker_listener_v4.parallel_env(**kwargs) for _ in range(2)]
    env.reset(seed=3)
    raw_obs = [r.reset(seed=3 + i)[0] for i, r in enumerate(raw)]
    rng = np.random.default_rng(0)
    for _ in range(9):  # across two autoresets
        obs = env.obs
        assert isinstance(obs, dict)
        for e in range(2):
            np.testing.assert_array_equal(obs[group_obs_key("speaker")][e], raw_obs[e]["speaker_0"])
            np.testing.assert_array_equal(obs[group_obs_key("listener")][2 + e], raw_obs[e]["listener_0"])
            np.testing.assert_array_equal(obs[group_obs_key("listener")][e], 0.0)  # not the speaker's key
        act = env.sample_actions(None, rng)
        assert (act[:2, 3:] == 0).all()
        step = env.step(act, np.arange(4))
        for e, r in enumerate(raw):
            raw_obs[e], rew, *_ = r.step({"speaker_0": act[e, :3], "listener_0": act[2 + e]})
            assert step.rew_C[e] == np.float32(rew["speaker_0"])
            assert step.rew_C[2 + e] == np.float32(rew["listener_0"])
            if not r.agents:
                raw_obs[e] = r.reset()[0]


def test_simple_tag_groups_by_name_and_ids_count_within_the_group() -> None:
    env = make_pettingzoo_vector_env(
        "mpe2.simple_tag_v3", 2, kwargs={"max_cycles": 3}, groups="auto", agent_id=True
    )
    assert env.groups is not None and list(env.groups) == ["adversary", "agent"]
    adversaries = env.groups["adversary"]
    assert adversaries.agents == ("adversary_0", "adversary_1", "adversary_2")
    assert adversaries.observation_space[AGENT_ID_KEY].shape == (3,)  # type: ignore[index]
    env.reset(seed=0)
    view = env.group_views["adversary"].obs(
        {key: value[:6] for key, value in env.obs.items()}  # type: ignore[union-attr]
    )
    np.testing.assert_array_equal(view[AGENT_ID_KEY], np.repeat(np.eye(3, dtype=np.float32), 2, axis=0))
    assert view[OBS_KEY].shape == (6, 16) and env.groups["agent"].observation_space[OBS_KEY].shape == (14,)  # type: ignore[index]


class Wide(Mixed):
    def _obs(self, agent: str) -> np.ndarray:
        obs = super()._obs(agent)
        return np.append(obs, 0.0).astype(np.float32) if agent == "c" else obs


def test_groups_reorder_agents_group_major_and_refuse_what_cannot_be_grouped() -> None:
    env = PettingZooParallelVectorEnv([Wide], groups={"wide": ["c"], "narrow": ["a", "b"]})
    assert env.agents == ("c", "a", "b")  # group-major: each group's columns are contiguous
    env.reset(seed=0)
    obs = env.obs
    assert isinstance(obs, dict)
    np.testing.assert_array_equal(obs[group_obs_key("wide")][0], [0, 2, 0])  # c's (t, index, 0)
    np.testing.assert_array_equal(obs[group_obs_key("narrow")][1:], [[0, 0], [0, 1]])
    with pytest.raises(UnsupportedSpaceError, match=r"agents of group 'mixed' .* different observation"):
        PettingZooParallelVectorEnv([Mixed], groups={"mixed": ["a", "b", "c"]})
    with pytest.raises(UnsupportedSpaceError, match="not supported with groups"):
        PettingZooAECVectorEnv([tictactoe_v3.env], groups="auto")
    snapshot = env.state_snapshot()
    assert snapshot is not None
    regrouped = PettingZooParallelVectorEnv([Wide], groups={"narrow": ["a", "b"], "wide": ["c"]})
    assert not regrouped.restore_snapshot(snapshot)  # another layout's rows: reset instead
    assert PettingZooParallelVectorEnv([Wide], groups={"wide": ["c"], "narrow": ["a", "b"]}).restore_snapshot(
        snapshot
    )


def test_global_state_needs_a_state() -> None:
    with pytest.raises(ConfigurationError, match="global_state=True"):
        PettingZooAECVectorEnv([tictactoe_v3.env], global_state=True)


def test_envs_with_different_agents_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="possible_agents"):
        PettingZooParallelVectorEnv([LeavingParallel, functools.partial(simple_spread_v3.parallel_env)])


# ---------------------------------------------------------------------------------------- snapshots
@pytest.mark.parametrize("kind", ["aec", "parallel"])
def test_snapshot_restores_games_in_progress(kind: str) -> None:
    env_id = "pettingzoo.classic.tictactoe_v3" if kind == "aec" else "mpe2.simple_spread_v3"
    kwargs = {} if kind == "aec" else {"max_cycles": 4}
    env = make_pettingzoo_vector_env(env_id, 3, kwargs=kwargs)
    env.reset(seed=5)
    rng = np.random.default_rng(1)

    def act(e: Any) -> tuple[np.ndarray, np.ndarray]:
        cols = _acting(e)
        masks = e.action_masks()
        if masks is None:
            return rng.integers(0, 5, len(cols)), cols
        return np.argmax(rng.random((len(cols), 9)) * masks[cols], axis=1), cols

    for _ in range(3):
        env.step(*act(env))
    data = env.state_snapshot()
    assert data is not None
    copy = make_pettingzoo_vector_env(env_id, 3, kwargs=kwargs)
    assert copy.restore_snapshot(data)
    for _ in range(10):  # across episode ends and autoresets (their RNG continues)
        a, cols = act(env)
        np.testing.assert_array_equal(_acting(copy), cols)
        s1, s2 = env.step(a, cols), copy.step(a, cols)
        for x, y in zip((*s1[:3], s1.env_done_E), (*s2[:3], s2.env_done_E), strict=True):
            np.testing.assert_array_equal(x, y)
        o1, o2 = env.obs, copy.obs
        if isinstance(o1, dict):
            assert isinstance(o2, dict)
            np.testing.assert_array_equal(o1[OBS_KEY][cols], o2[OBS_KEY][cols])
        else:
            np.testing.assert_array_equal(o1, o2)


def test_a_snapshot_from_before_agent_groups_still_restores() -> None:
    """Rows pickled before agent groups held one ``obs`` array and no agent names; they are read as
    ``{"obs": array}`` and restored into an ungrouped env of the same shapes (your own older run
    resumes exactly), and refused by a grouped one."""
    import pickle

    from tshtrain.env.pettingzoo import _dumps, _Rows

    env = _spread(2)
    env.reset(seed=0)
    old = _Rows.__new__(_Rows)
    obs = env._rows.obs[OBS_KEY].copy()
    for key, value in {"obs": obs, "mask": None, "state": None, "agent_id": None, "view": obs}.items():
        object.__setattr__(old, key, value)  # the slots of the earlier _Rows
    snapshot = _dumps((env._envs, old, env._ep.acting_C, env._ep.ended_C, True))
    assert snapshot is not None and pickle.loads(snapshot)[1].agents is None
    again = _spread(2)
    assert again.restore_snapshot(snapshot)
    np.testing.assert_array_equal(again.obs, obs)
    again.step(np.ones(6, dtype=np.int64), np.arange(6))
    grouped = PettingZooParallelVectorEnv(
        [functools.partial(simple_spread_v3.parallel_env, max_cycles=5)] * 2, groups="auto"
    )
    assert not grouped.restore_snapshot(snapshot)
