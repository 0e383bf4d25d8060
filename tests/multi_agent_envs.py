"""Small hand-written multi-agent envs (the MultiAgentVectorEnv protocol) for the tests."""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import numpy as np

from tshtrain.env import ACTION_MASK_KEY, OBS_KEY, AgentColumns, AgentStep, MultiAgentVectorEnv
from tshtrain.env.groups import AgentGroup, GroupView, group_obs_key, storage_action_space


class TurnGame(MultiAgentVectorEnv):
    """Two players alternate; a game lasts ``length`` moves. Each move's action is added to the mover's
    reward; the player who moves last gets +10 and the other -10 at the end (both terminal in the last
    vector step). Observation: (move index, player, env index); mask: actions 0..2 legal, 3 illegal."""

    def __init__(self, num_envs: int, length: int = 4):
        self.columns = AgentColumns(("p0", "p1"), num_envs)
        self.single_observation_space = gym.spaces.Dict(
            {
                OBS_KEY: gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
                ACTION_MASK_KEY: gym.spaces.Box(0, 1, (4,), np.int8),
            }
        )
        self.single_action_space = gym.spaces.Discrete(4)
        self.turn_based = True
        self.length = length
        self.move = np.zeros(num_envs, dtype=np.int64)
        self.log: list[tuple[int, int, int]] = []  # (env, player, action)

    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        del seed
        ids = np.arange(self.num_envs) if env_ids is None else env_ids
        self.move[ids] = 0

    def _obs_of(self) -> dict[str, np.ndarray]:
        c = self.num_columns
        obs = np.zeros((c, 3), dtype=np.float32)
        for col in range(c):
            agent, env = divmod(col, self.num_envs)
            obs[col] = (self.move[env], agent, env)
        mask = np.tile(np.array([1, 1, 1, 0], dtype=np.int8), (c, 1))
        return {OBS_KEY: obs, ACTION_MASK_KEY: mask}

    @property
    def obs(self) -> dict[str, np.ndarray]:
        return self._obs_of()

    @property
    def acting_C(self) -> np.ndarray:
        acting = np.zeros(self.num_columns, dtype=bool)
        for env in range(self.num_envs):
            acting[self.columns.column(int(self.move[env] % 2), env)] = True
        return acting

    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        c, e = self.num_columns, self.num_envs
        rew = np.zeros(c, dtype=np.float32)
        term = np.zeros(c, dtype=bool)
        final = self._obs_of()
        done = np.zeros(e, dtype=bool)
        for a, col in zip(act, columns, strict=True):
            agent, env = divmod(int(col), e)
            assert agent == self.move[env] % 2
            self.log.append((env, agent, int(a)))
            rew[col] += float(a)
            self.move[env] += 1
            if self.move[env] == self.length:
                rew[col] += 10.0
                rew[self.columns.column(1 - agent, env)] -= 10.0
                term[[self.columns.column(0, env), self.columns.column(1, env)]] = True
                done[env] = True
        final = self._obs_of()
        self.move[done] = 0
        return AgentStep(rew, term, np.zeros(c, dtype=bool), final, done)

    def state_snapshot(self) -> bytes | None:
        return pickle.dumps(self.move)

    def restore_snapshot(self, data: bytes) -> bool:
        self.move = pickle.loads(data)
        return True

    def close(self) -> None:
        pass


class LeavingParallel(MultiAgentVectorEnv):
    """Parallel env of 2 agents: every live agent acts each step, reward = action; agent 1 leaves
    (terminated) after 1 step, the episode ends (agent 0 truncated) after 3 steps."""

    def __init__(self, num_envs: int):
        self.columns = AgentColumns(("a", "b"), num_envs)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(3)
        self.turn_based = False
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        del seed
        self.t[:] = 0

    @property
    def obs(self) -> np.ndarray:
        e = self.num_envs
        return np.array([[self.t[col % e], col // e] for col in range(self.num_columns)], dtype=np.float32)

    @property
    def acting_C(self) -> np.ndarray:
        e = self.num_envs
        return np.array([col < e or self.t[col % e] < 1 for col in range(self.num_columns)])

    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        e, c = self.num_envs, self.num_columns
        rew = np.zeros(c, dtype=np.float32)
        rew[columns] = act
        self.t += 1
        term = np.zeros(c, dtype=bool)
        trunc = np.zeros(c, dtype=bool)
        term[e:] = self.t == 1
        done = self.t == 3
        trunc[:e] = done
        final = self.obs
        self.t[done] = 0
        return AgentStep(rew, term, trunc, final, done)

    def close(self) -> None:
        pass


class TwoTeams(MultiAgentVectorEnv):
    """Agents of two groups with different spaces (:mod:`tshtrain.env.groups`): a ``scout`` that sees a
    one-hot target among 3 (obs (3,)) and a team of two ``runner`` s that see one among 2 (obs (2,)).
    Discrete: an agent is paid 1 when its action is its target (scout Discrete(3), runners
    Discrete(2)); continuous: ``-|action - target|`` summed over its action's dimensions (scout Box(1),
    runners Box(2), targets in [0, 1]). Targets are drawn anew every step; episodes last ``length``."""

    def __init__(self, num_envs: int, *, continuous: bool = False, length: int = 4, seed: int = 0):
        self.columns = AgentColumns(("scout_0", "runner_0", "runner_1"), num_envs)
        self.turn_based = False
        self.continuous, self.length = continuous, length
        widths = {"scout": 3, "runner": 2}
        if continuous:
            acts: dict[str, gym.Space[Any]] = {
                "scout": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
                "runner": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        else:
            acts = {"scout": gym.spaces.Discrete(3), "runner": gym.spaces.Discrete(2)}
        members = {"scout": ("scout_0",), "runner": ("runner_0", "runner_1")}
        first = {"scout": 0, "runner": 1}
        self.groups = {
            name: AgentGroup(
                name,
                members[name],
                first[name],
                gym.spaces.Box(0.0, 1.0, (widths[name],), np.float32),
                acts[name],
            )
            for name in ("scout", "runner")
        }
        stored = storage_action_space(acts, "TwoTeams")
        width = int(stored.shape[0]) if isinstance(stored, gym.spaces.Box) else None
        self.group_views = {name: GroupView(g, stored_action_width=width) for name, g in self.groups.items()}
        self.single_observation_space = gym.spaces.Dict(
            {group_obs_key(name): self.groups[name].observation_space for name in ("runner", "scout")}
        )
        self.single_action_space = stored
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.target_C = np.zeros(self.num_columns, dtype=np.int64)
        self.value_C = np.zeros((self.num_columns, 2), dtype=np.float32)
        self._draw(np.arange(num_envs))

    def _draw(self, envs: np.ndarray) -> None:
        e = self.num_envs
        for env in envs:
            for agent in range(3):
                col = agent * e + int(env)
                self.target_C[col] = self.rng.integers(3 if agent == 0 else 2)
                self.value_C[col] = self.rng.uniform(0.0, 1.0, 2)

    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        self.t[ids] = 0
        self._draw(ids)

    @property
    def obs(self) -> dict[str, np.ndarray]:
        c, e = self.num_columns, self.num_envs
        scout = np.zeros((c, 3), np.float32)
        runner = np.zeros((c, 2), np.float32)
        for col in range(c):
            if self.continuous and col < e:
                scout[col, 0] = self.value_C[col, 0]
            elif self.continuous:
                runner[col] = self.value_C[col]
            elif col < e:
                scout[col, self.target_C[col]] = 1.0
            else:
                runner[col, self.target_C[col]] = 1.0
        return {group_obs_key("runner"): runner, group_obs_key("scout"): scout}

    @property
    def acting_C(self) -> np.ndarray:
        return np.ones(self.num_columns, dtype=bool)

    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        c, e = self.num_columns, self.num_envs
        assert len(columns) == c
        rew = np.zeros(c, dtype=np.float32)
        for col in range(c):
            if self.continuous:
                width = 1 if col < e else 2
                assert not np.any(act[col, width:]), "padding reached the env"
                rew[col] = -float(np.abs(act[col, :width] - self.value_C[col, :width]).sum())
            else:
                rew[col] = float(int(act[col]) == self.target_C[col])
        self.t += 1
        done = self.t == self.length
        trunc = np.tile(done, 3)
        final = self.obs
        self.t[done] = 0
        self._draw(np.arange(e))
        return AgentStep(rew, np.zeros(c, dtype=bool), trunc, final, done)

    def close(self) -> None:
        pass


class CoopReach(MultiAgentVectorEnv):
    """Parallel cooperative env of 2 agents with continuous actions in [-1, 1]: for 3 steps both get the
    shared reward ``-|u_a + u_b - g_t|`` with goal ``g_t = 0.5`` on even steps, ``-0.5`` on odd ones;
    both terminate after the third step. Observation: ``obs`` = (t / 3, agent index), ``state`` =
    (t / 3, g_t)."""

    def __init__(self, num_envs: int):
        self.columns = AgentColumns(("a", "b"), num_envs)
        self.single_observation_space = gym.spaces.Dict(
            {
                OBS_KEY: gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                "state": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
            }
        )
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.turn_based = False
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        del seed
        ids = np.arange(self.num_envs) if env_ids is None else env_ids
        self.t[ids] = 0

    def _goal(self) -> np.ndarray:
        return np.where(self.t % 2 == 0, 0.5, -0.5).astype(np.float32)

    @property
    def obs(self) -> dict[str, np.ndarray]:
        e = self.num_envs
        agent = np.repeat(np.arange(2), e).astype(np.float32)
        t = np.tile(self.t / 3.0, 2).astype(np.float32)
        state = np.stack([self.t / 3.0, self._goal()], axis=1).astype(np.float32)
        return {OBS_KEY: np.stack([t, agent], axis=1), "state": np.tile(state, (2, 1))}

    @property
    def acting_C(self) -> np.ndarray:
        return np.ones(self.num_columns, dtype=bool)

    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        e, c = self.num_envs, self.num_columns
        assert len(columns) == c
        u = np.asarray(act, dtype=np.float32).reshape(c)
        rew = np.tile(-np.abs(u[:e] + u[e:] - self._goal()), 2)
        self.t += 1
        done = self.t == 3
        final = self.obs
        self.t[done] = 0
        return AgentStep(rew, np.tile(done, 2), np.zeros(c, dtype=bool), final, done)

    def close(self) -> None:
        pass
