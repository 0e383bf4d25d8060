"""The MultiAgentCollector: runs a multi-agent policy in a :class:`~tshtrain.env.MultiAgentVectorEnv`.

Every agent of every env is a buffer column (agent-major, see :mod:`tshtrain.env.multi_agent`). In each
vector step the acting columns (every live agent of a parallel env; the player to move in a turn-based
game) get actions from one batched policy call, and the env steps. A column's transition is written
when it is complete: when the agent acts again or its episode ends. It holds the observation the agent
acted on, its action, every reward it received in between and the observation it acts on next (or its
final one). So in tic-tac-toe a player's transition spans the opponent's reply, and a loss in the
opponent's move is the player's terminal reward.

Counting: an **env step** is one step of one env (all its agents count once), so ``collect(n_step=n)``
takes ``ceil(n / E)`` vector steps and reports ``E`` env steps per vector step (``n_collected_steps``);
``collect(n_episode=n)`` finishes ``n`` env episodes. ``CollectStats.returns`` has one row per finished
episode and one column per agent (reduce them with the trainer's ``multi_agent_return_reduction``);
``CollectStats.agents`` names the columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

import numpy as np
import torch
from typing_extensions import override

from tshtrain.data.batch import ObsArray
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import BaseCollector, CollectedEpisodes, EpisodeQuota
from tshtrain.data.stats import CollectStats
from tshtrain.env.multi_agent import MultiAgentVectorEnv
from tshtrain.errors import ConfigurationError, EpisodeLimitError


class MultiAgentCollectorPolicy(Protocol):
    """What the multi-agent collector needs from a policy
    (:class:`tshtrain.algorithm.multi_agent.MultiAgentPolicy` implements it)."""

    def compute_actions_for(
        self,
        obs: ObsArray,
        columns: np.ndarray | None,
        *,
        deterministic: bool,
        num_columns: int | None = None,
    ) -> np.ndarray:
        """Actions of the columns ``columns`` (ascending; None: all) of an env with ``num_columns``
        columns, for their observations."""
        ...

    def route(self, columns: np.ndarray | None, num_rows: int, num_columns: int | None = None) -> None:
        """Take the rows of the next ``map_action`` calls to be the columns ``columns`` (random
        actions, which need no ``compute_actions_for`` call)."""
        ...

    def map_action(self, act: np.ndarray) -> np.ndarray:
        """Stored actions -> env actions, for the rows of the latest ``compute_actions_for`` call."""
        ...

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        """Env actions -> stored actions (random actions)."""
        ...

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exploration noise for the rows of the latest ``compute_actions_for`` call."""
        ...


def _rows(obs: ObsArray, rows: np.ndarray | None) -> ObsArray:
    if rows is None:
        return obs
    if isinstance(obs, np.ndarray):
        return np.asarray(obs[rows])
    return {key: value[rows] for key, value in obs.items()}


def _copy_rows(target: dict[str, np.ndarray], obs: ObsArray, rows: np.ndarray | None) -> None:
    """``target[key][rows] = obs`` for every key (``""`` for array observations)."""
    if isinstance(obs, np.ndarray):
        if rows is None:
            target[""][:] = obs
        else:
            target[""][rows] = obs
        return
    for key, value in obs.items():
        if rows is None:
            target[key][:] = value
        else:
            target[key][rows] = value


def _as_obs(store: Mapping[str, np.ndarray], rows: np.ndarray) -> ObsArray:
    if "" in store:
        return np.asarray(store[""][rows])
    return {key: value[rows] for key, value in store.items()}


class MultiAgentCollector(BaseCollector):
    """Collects per-agent transitions from a :class:`~tshtrain.env.MultiAgentVectorEnv` (see the
    module docstring)."""

    buffer: BaseReplayBuffer | None

    def __init__(
        self,
        policy: MultiAgentCollectorPolicy,
        env: MultiAgentVectorEnv,
        buffer: BaseReplayBuffer | None = None,
        *,
        exploration_noise: bool = False,
        seed: int | None = None,
    ):
        """Args:
        policy: the joint policy (:class:`~tshtrain.algorithm.multi_agent.MultiAgentPolicy`).
        env: the envs; their ``A * E`` columns are the buffer's columns.
        buffer: where transitions go; it needs exactly ``A * E`` sub-buffers
            (``VectorReplayBuffer(total_size, buffer_num=env.num_columns)``). None: nothing is stored.
        exploration_noise: apply the policy's exploration noise.
        seed: seeds the envs (env i gets seed + i) and the collector's generator.
        """
        if buffer is not None and buffer.num_columns != env.num_columns:
            raise ConfigurationError(
                f"MultiAgentCollector: the buffer has {buffer.num_columns} sub-buffer(s) but the env has "
                f"{env.num_columns} columns ({env.columns.num_agents} agents x {env.num_envs} envs); use "
                f"{type(buffer).__name__}(total_size, buffer_num={env.num_columns})."
            )
        super().__init__(
            num_envs=env.num_envs, buffer=None, exploration_noise=exploration_noise, info_key=None
        )
        self.buffer = buffer
        self.policy = policy
        self.env = env
        self.agents = env.agents
        """the agents' names (the columns of ``CollectStats.returns``)"""
        self.rng = np.random.default_rng(seed)
        """the collector's generator (random actions, exploration noise)"""
        num_columns = env.num_columns
        self._pending = np.zeros(num_columns, dtype=bool)  # the column acted and its transition is open
        self._pending_obs: dict[str, np.ndarray] = {}
        self._pending_act = np.zeros(0)
        self._acc_rew = np.zeros(num_columns, dtype=np.float64)  # rewards since the column acted
        self._ep_return = np.zeros((env.num_envs, env.columns.num_agents), dtype=np.float64)
        self._ep_len = np.zeros(env.num_envs, dtype=np.int64)
        self._ep_stored = np.zeros(num_columns, dtype=bool)  # the column's episode has stored transitions
        self._transitions = 0  # transitions stored in this collect call
        self.reset_env(seed)

    # ------------------------------------------------------------------ resetting
    @override
    def reset_env(self, seed: int | None = None) -> None:
        if self.buffer is not None and self._ep_stored.any():
            self.buffer.truncate_episodes(np.flatnonzero(self._ep_stored))
        self._ep_stored[:] = False
        if self.listener is not None:
            self.listener.on_env_reset(np.arange(self.num_envs))
        self.env.reset(seed=seed)
        self._pending[:] = False
        self._acc_rew[:] = 0.0
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0

    # ------------------------------------------------------------------ collecting
    @override
    def _begin_collect(self) -> None:
        self._transitions = 0

    def _allocate(self, obs: ObsArray, act: np.ndarray) -> None:
        num_columns = self.env.num_columns
        if isinstance(obs, np.ndarray):
            self._pending_obs = {"": np.zeros((num_columns, *obs.shape[1:]), dtype=obs.dtype)}
        else:
            self._pending_obs = {
                key: np.zeros((num_columns, *value.shape[1:]), dtype=value.dtype)
                for key, value in obs.items()
            }
        self._pending_act = np.zeros((num_columns, *act.shape[1:]), dtype=act.dtype)

    def _actions(
        self, obs: ObsArray, columns: np.ndarray | None, random: bool, deterministic: bool
    ) -> np.ndarray:
        """(stored actions, env actions) of the acting columns."""
        if random:
            num = len(columns) if columns is not None else self.env.num_columns
            env_act = self.env.sample_actions(columns, self.rng)
            self.policy.route(columns, num, self.env.num_columns)  # rows of map_action(_inverse)
            return self.policy.map_action_inverse(env_act)
        act = self.policy.compute_actions_for(
            obs, columns, deterministic=deterministic, num_columns=self.env.num_columns
        )
        if self.exploration_noise:
            act = self.policy.add_exploration_noise(act, self.rng)
        return act

    def _vector_step(
        self, random: bool, deterministic: bool, active_E: np.ndarray | None
    ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """One vector step. Returns (transitions stored, ended env ids, their returns (n, A), their
        lengths)."""
        env = self.env
        acting = env.acting_C
        columns = np.flatnonzero(acting)
        all_act = len(columns) == env.num_columns
        col_arg = None if all_act else columns
        obs_now = env.obs
        obs = _rows(obs_now, col_arg)
        act = self._actions(obs, col_arg, random, deterministic)
        env_act = self.policy.map_action(act)
        if not self._pending_obs:
            self._allocate(obs, act)
        _copy_rows(self._pending_obs, obs, col_arg)
        if all_act:
            self._pending_act[:] = act
            self._pending[:] = True
            self._acc_rew[:] = 0.0
        else:
            self._pending_act[columns] = act
            self._pending[columns] = True
            self._acc_rew[columns] = 0.0
        step = env.step(env_act, columns)
        rew = step.rew_C
        self._acc_rew += rew
        num_envs = self.num_envs
        self._ep_return += rew.reshape(-1, num_envs).T
        self._ep_len += 1
        ended = step.terminated_C | step.truncated_C
        complete = self._pending & (env.acting_C | ended)
        if active_E is not None:
            complete &= np.tile(active_E, env.columns.num_agents)
        stored = 0
        if complete.any():
            cols = np.flatnonzero(complete)
            stored = len(cols)
            if self.buffer is not None:
                next_obs = self._next_obs(cols, ended, step.final_obs)
                self.buffer.add(
                    obs=_as_obs(self._pending_obs, cols),
                    act=self._pending_act[cols],
                    rew=self._acc_rew[cols],
                    terminated=step.terminated_C[cols],
                    truncated=step.truncated_C[cols],
                    obs_next=next_obs,
                    env_ids=cols,
                )
                self._ep_stored[cols] = True
            self._pending[cols] = False
        self._ep_stored[ended] = False
        self._pending[ended] = False
        done = np.flatnonzero(step.env_done_E)
        returns = self._ep_return[done].copy()
        lens = self._ep_len[done].copy()
        self._ep_return[done] = 0.0
        self._ep_len[done] = 0
        if self.listener is not None:
            self.listener.on_vector_step(done)
        return stored, done, returns, lens

    def _next_obs(self, cols: np.ndarray, ended: np.ndarray, final_obs: ObsArray) -> ObsArray:
        """o' of the completed columns: the final observation where the agent's episode ended, else
        its current one."""
        ended_rows = ended[cols]
        current = self.env.obs
        if not ended_rows.any():
            return _rows(current, cols)
        if isinstance(current, np.ndarray):
            assert isinstance(final_obs, np.ndarray)
            return np.asarray(
                np.where(ended_rows.reshape(-1, *([1] * (current.ndim - 1))), final_obs[cols], current[cols])
            )
        assert not isinstance(final_obs, np.ndarray)
        return {
            key: np.where(
                ended_rows.reshape(-1, *([1] * (value.ndim - 1))), final_obs[key][cols], value[cols]
            )
            for key, value in current.items()
        }

    @override
    def _collect_steps(self, num_vector_steps: int, random: bool, deterministic: bool) -> CollectedEpisodes:
        stored = 0
        returns: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        for _ in range(num_vector_steps):
            written, done, ep_returns, ep_lens = self._vector_step(random, deterministic, None)
            self._transitions += written
            stored += self.num_envs
            if len(done):
                returns.append(ep_returns)
                lens.append(ep_lens)
        return self._collected(stored, returns, lens)

    @override
    def _collect_episodes(
        self, n_episode: int, random: bool, deterministic: bool, max_env_steps: int | None
    ) -> CollectedEpisodes:
        quota = EpisodeQuota(
            n_episode, self.num_envs, owner="MultiAgentCollector.collect", max_env_steps=max_env_steps
        )
        returns: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        while quota.running():
            if max_env_steps is not None and quota.over_limit(max_env_steps):
                raise EpisodeLimitError(
                    f"MultiAgentCollector.collect(n_episode={n_episode}): {quota.stored} env steps taken "
                    f"without finishing the episodes (max_env_steps={max_env_steps}); does the env end "
                    f"its episodes?"
                )
            active = quota.active_mask.copy()
            quota.step_envs()
            written, done, ep_returns, ep_lens = self._vector_step(random, deterministic, active)
            self._transitions += written
            counted = quota.finish(done)  # every step: it also counts the steps without an episode end
            if counted.any():
                returns.append(ep_returns[counted])
                lens.append(ep_lens[counted])
        return self._collected(quota.stored, returns, lens)

    def _collected(self, stored: int, returns: list[np.ndarray], lens: list[np.ndarray]) -> CollectedEpisodes:
        num_agents = len(self.agents)
        return CollectedEpisodes(
            stored,
            np.concatenate(returns) if returns else np.zeros((0, num_agents), dtype=np.float64),
            np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64),
        )

    @override
    def _finish_stats(self, stats: CollectStats) -> CollectStats:
        """Env steps and episodes are counted per env (module docstring); the stats name the agents
        and the transitions stored."""
        return replace(stats, agents=self.agents, n_stored_transitions=self._transitions)

    # ------------------------------------------------------------------ the envs
    @override
    def render_env(self) -> None:
        render = getattr(self.env, "render", None)
        if callable(render):
            render()

    @override
    def close_env(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ checkpoints
    @override
    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "pending": torch.from_numpy(self._pending.copy()),
            "pending_obs": {key: torch.from_numpy(value.copy()) for key, value in self._pending_obs.items()},
            "pending_act": torch.from_numpy(np.array(self._pending_act)),
            "acc_rew": torch.from_numpy(self._acc_rew.copy()),
            "ep_return": torch.from_numpy(self._ep_return.copy()),
            "ep_len": torch.from_numpy(self._ep_len.copy()),
            "ep_stored": torch.from_numpy(self._ep_stored.copy()),
            **self._counters_state(),
        }

    @override
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = dict(state["rng"])
        self._pending = state["pending"].numpy().copy()
        self._pending_obs = {key: value.numpy().copy() for key, value in state["pending_obs"].items()}
        self._pending_act = state["pending_act"].numpy().copy()
        self._acc_rew = state["acc_rew"].numpy().copy()
        self._ep_return = state["ep_return"].numpy().copy()
        self._ep_len = state["ep_len"].numpy().copy()
        self._ep_stored = state["ep_stored"].numpy().copy()
        self._load_counters(state)

    @override
    def env_snapshot(self) -> bytes | None:
        """The envs' state (:meth:`MultiAgentVectorEnv.state_snapshot`: pickle bytes), or None."""
        return self.env.state_snapshot()

    @override
    def restore_env_snapshot(self, snapshot: bytes | None) -> bool:
        """Put the envs back (trusted input only: unpickling runs code); None, or an env that cannot:
        reset them. Returns True if restored."""
        if snapshot is None or not self.env.restore_snapshot(snapshot):
            self.reset_env()
            return False
        return True


__all__ = ["MultiAgentCollector", "MultiAgentCollectorPolicy"]
