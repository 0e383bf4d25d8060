"""The collector of the torch path: :class:`TensorCollector` runs a policy in a
:class:`~tshtrain.env.TensorVectorEnv` and writes into a :class:`~tshtrain.data.TensorReplayBuffer`.

``collect`` has the semantics of :class:`tshtrain.data.Collector` (see :mod:`tshtrain.data.collector`).
Nothing is converted to numpy per vector step in ``n_step`` mode: actions, rewards, episode returns
and lengths stay on the env's device; the finished episodes' returns and lengths are selected with
tensor ops and reach the host once, at the end of the ``collect`` call. What does synchronise:

* ``n_episode`` mode reads the ended envs every vector step (it decides which envs go on), as does an
  attached listener (the trainer's ``on_episodes_end`` / ``on_envs_reset`` callbacks, rendering);
* actions are checked for shape and dtype only (metadata, no sync); their values are not
  range-checked on this path (see :func:`tshtrain.env.tensor_spaces.make_tensor_action_checker`).

**Agent columns.** An env with ``num_agents = A > 1`` (such as
:class:`~tshtrain.env.vmas.VmasEnv` with ``agent_layout="columns"``) has ``A * E`` rows, agent-major
(agent ``a`` of env ``e`` is row ``a * E + e``, see :mod:`tshtrain.env.multi_agent`), whose episodes end
together per env. Every row is a buffer column and a stream of transitions (the buffer needs ``A * E``
columns). Steps and episodes count envs, as in :class:`~tshtrain.data.MultiAgentCollector`:
``num_envs`` is ``E``, ``collect(n_step=n)`` takes ``ceil(n / E)`` steps of all envs and reports ``n``
rounded up to whole vector steps in ``n_collected_steps`` and ``A`` times as many transitions in
``CollectStats.n_stored_transitions`` (what an on-policy update receives); ``collect(n_episode=n)``
finishes ``n`` env episodes, storing all ``A`` rows of each collecting env; ``CollectStats.returns``
has shape ``(n_episodes, A)`` (agents in row-block order, named by the env's ``agents``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar, Protocol, final, runtime_checkable

import numpy as np
import torch
from typing_extensions import override

from tshtrain.data.batch import ObsTensor
from tshtrain.data.collector_base import BaseCollector, CollectedEpisodes, EnvSnapshotFormat, EpisodeQuota
from tshtrain.data.stats import CollectStats
from tshtrain.data.tensor_buffer import TensorReplayBuffer
from tshtrain.env.multi_agent import ACTION_MASK_KEY
from tshtrain.env.tensor_env import TensorVectorEnv
from tshtrain.env.tensor_spaces import (
    make_tensor_action_checker,
    sample_actions_torch,
    sample_legal_actions_torch,
)
from tshtrain.errors import ConfigurationError, EpisodeLimitError


class TensorCollectorPolicy(Protocol):
    """What a :class:`TensorCollector` needs from a policy (``tshtrain.algorithm.Policy`` has it)."""

    def compute_actions_torch(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        """Actions (as stored) for a batch of observation tensors, under inference mode."""
        ...

    def map_action_torch(self, act: torch.Tensor) -> torch.Tensor:
        """Stored actions -> env actions."""
        ...

    def map_action_inverse_torch(self, act: torch.Tensor) -> torch.Tensor:
        """Env actions -> stored actions."""
        ...

    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Stored actions with exploration noise drawn from ``generator``."""
        ...


@runtime_checkable
class LogProbPolicy(Protocol):
    """A :class:`TensorCollectorPolicy` that can also give the log-probabilities of its actions
    (``tshtrain.algorithm.Policy`` can); the collector then stores them with the transitions."""

    def compute_actions_log_prob_torch(
        self, obs: ObsTensor, *, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(actions as stored, log pi(act | obs) or None), under inference mode."""
        ...


def _select(obs: ObsTensor, rows: torch.Tensor) -> ObsTensor:
    if isinstance(obs, torch.Tensor):
        return obs[rows]
    return {key: value[rows] for key, value in obs.items()}


def _to_device(obs: Any, device: torch.device) -> ObsTensor:
    if isinstance(obs, torch.Tensor):
        return obs.to(device)
    return {key: value.to(device) for key, value in obs.items()}


class _TensorEnvInfo:
    """Sums of the numeric per-env tensors under ``info[key]`` (or a dict of them) on the device;
    ``_name`` masks select the reporting envs, as in :class:`tshtrain.data.EnvInfoAccumulator`."""

    def __init__(self, key: str):
        self.key = key
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, torch.Tensor] = {}

    def add(self, info: Mapping[str, Any], rows: torch.Tensor | None) -> None:
        entry = info.get(self.key)
        if isinstance(entry, Mapping):
            for name, value in entry.items():
                if not name.startswith("_"):
                    self._add(name, value, entry.get(f"_{name}"), rows)
        elif entry is not None:
            self._add(self.key, entry, info.get(f"_{self.key}"), rows)

    def _add(self, name: str, value: Any, mask: Any, rows: torch.Tensor | None) -> None:
        if (
            not isinstance(value, torch.Tensor)
            or value.dim() != 1
            or value.is_complex()
            or value.dtype == torch.bool
        ):
            return
        selected = torch.ones_like(value, dtype=torch.bool) if mask is None else mask.to(torch.bool)
        if rows is not None:
            in_rows = torch.zeros_like(selected)
            in_rows[rows] = True
            selected = selected & in_rows
        total = torch.where(
            selected, value.to(torch.float64), torch.zeros_like(value, dtype=torch.float64)
        ).sum()
        self.sums[name] = self.sums[name] + total if name in self.sums else total
        count = selected.sum()
        self.counts[name] = self.counts[name] + count if name in self.counts else count

    def result(self) -> tuple[dict[str, float], dict[str, int]]:
        """(means, counts) of the metrics that were reported at least once (one host transfer)."""
        names = list(self.sums)
        if not names:
            return {}, {}
        sums = torch.stack([self.sums[n] for n in names]).tolist()
        counts = torch.stack([self.counts[n] for n in names]).tolist()
        means = {n: s / c for n, s, c in zip(names, sums, counts, strict=True) if c}
        return means, {n: int(c) for n, c in zip(names, counts, strict=True) if c}


@final
class TensorCollector(BaseCollector):
    """Collects transitions from a torch-native vector env (see the module docstring)."""

    buffer: TensorReplayBuffer | None

    def __init__(
        self,
        policy: TensorCollectorPolicy,
        env: TensorVectorEnv,
        buffer: TensorReplayBuffer | None = None,
        *,
        exploration_noise: bool = False,
        seed: int | None = None,
        check_actions: bool = True,
        info_key: str | None = None,
        values: Callable[[ObsTensor], torch.Tensor] | None = None,
    ):
        """Args:
        policy: computes actions on tensors (a :class:`tshtrain.algorithm.Policy`).
        env: a :class:`~tshtrain.env.TensorVectorEnv` (same-step autoreset, ``final_obs``).
        buffer: where transitions go (on the env's device); None: nothing is stored.
        exploration_noise: apply ``policy.add_exploration_noise_torch`` to the policy's actions.
        seed: seeds the env (its ``reset(seed=...)``) and the collector's generator (random actions,
            exploration noise), which lives on the env's device. The env is reset here.
        check_actions: check the shape and dtype of every action batch (no device sync).
        info_key: report the numeric per-env tensors the env puts in ``info[info_key]`` (see
            :class:`tshtrain.data.EnvInfoAccumulator`); None: info is not read.
        values: V(obs) of the rows' observations, computed before every vector step and stored with
            the transitions (``algorithm.collection_values()`` of an actor-critic algorithm: values
            during collection, as rsl_rl computes them); the on-policy update then uses them instead
            of a critic pass over the rollout (equal up to float rounding). None: the update computes them.
        """
        if values is not None and not callable(values):
            raise ConfigurationError(
                f"TensorCollector.values must be a callable obs -> values (e.g. "
                f"algorithm.collection_values()) or None, got {type(values).__name__}."
            )
        self.values = values
        """computes V(obs) while collecting (stored with the transitions), or None"""
        if not isinstance(env, TensorVectorEnv):
            raise ConfigurationError(
                f"TensorCollector.env must implement tshtrain.env.TensorVectorEnv (num_envs, device, "
                f"single_observation_space, single_action_space, reset, step, close), got "
                f"{type(env).__name__}; Gymnasium vector envs go to tshtrain.data.Collector."
            )
        if buffer is not None and not isinstance(buffer, TensorReplayBuffer):
            raise ConfigurationError(
                f"TensorCollector.buffer must be a TensorReplayBuffer or None, got {type(buffer).__name__}."
            )
        num_rows = int(env.num_envs)
        num_agents = int(getattr(env, "num_agents", 1))
        if num_agents > 1 and num_rows % num_agents:
            raise ConfigurationError(
                f"TensorCollector: the env has num_agents={num_agents} but {num_rows} rows, not a "
                f"multiple of it; agent columns need num_envs = num_agents * number of envs."
            )
        self.num_agents = max(num_agents, 1)
        """agents per env (A): above 1 for agent columns (see the module docstring)"""
        self.num_rows = num_rows
        """rows of the env's tensors (``A * E``): the buffer columns and transition streams"""
        super().__init__(
            num_envs=num_rows // self.num_agents,
            buffer=buffer,
            exploration_noise=exploration_noise,
            info_key=info_key,
        )
        if buffer is not None and buffer.num_columns < num_rows:
            raise ConfigurationError(
                f"TensorCollector.buffer has {buffer.num_columns} columns but the env has {num_rows} rows "
                f"({self.num_agents} agents x {self.num_envs} envs); use "
                f"TensorReplayBuffer(total_size, {num_rows})."
            )
        self.num_worlds = self.num_envs
        """envs whose episodes count (E): ``num_envs``; the env has ``A * E`` rows"""
        self._log_prob_policy: LogProbPolicy | None = None
        """:attr:`policy` when it gives log-probabilities with its actions (stored in the buffer)"""
        self.policy = policy
        self.env = env
        self.device = torch.device(env.device)
        """the env's device: every tensor of the collector lives there"""
        self.check_actions = check_actions
        self._check_actions = make_tensor_action_checker(env.single_action_space, self.num_rows)
        self.rng = torch.Generator(device=self.device)
        """the collector's generator (random actions, exploration noise)"""
        if seed is None:
            self.rng.seed()
        else:
            self.rng.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))
        self._return_dtype = torch.float32 if self.device.type == "mps" else torch.float64
        self._obs: ObsTensor = torch.zeros(0, device=self.device)
        self._ep_return = torch.zeros(self.num_rows, dtype=self._return_dtype, device=self.device)
        self._ep_len = torch.zeros(self.num_rows, dtype=torch.int64, device=self.device)
        self._ep_stored = torch.zeros(self.num_rows, dtype=torch.bool, device=self.device)
        self._env_info: _TensorEnvInfo | None = None
        self.reset(reset_buffer=True, reset_stats=True, seed=seed)

    # ------------------------------------------------------------------ resetting
    @override
    def reset_env(self, seed: int | None = None) -> None:
        if self.buffer is not None:
            stored = np.flatnonzero(self._ep_stored.cpu().numpy())
            if len(stored):
                self.buffer.truncate_episodes(stored)
        self._ep_stored = torch.zeros_like(self._ep_stored)
        if self.listener is not None:
            self.listener.on_env_reset(np.arange(self.num_envs))
        obs, _ = self.env.reset(seed=seed)
        self._obs = obs
        self._ep_return = torch.zeros_like(self._ep_return)
        self._ep_len = torch.zeros_like(self._ep_len)

    # ------------------------------------------------------------------ collecting
    @override
    @property
    def policy(self) -> TensorCollectorPolicy:
        """The policy that acts. Assigning another one (overlapped collection acts with a copy of the
        learner's) also decides again whether it gives log-probabilities with its actions."""
        return self._policy

    @policy.setter
    def policy(self, policy: TensorCollectorPolicy) -> None:
        self._policy = policy
        self._log_prob_policy = policy if isinstance(policy, LogProbPolicy) else None

    def _begin_collect(self) -> None:
        self._env_info = _TensorEnvInfo(self.info_key) if self.info_key is not None else None

    def _actions(
        self, random: bool, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(stored actions, env actions, their log-probabilities if the policy gives them) for the
        current observations."""
        if random:
            obs = self._obs
            mask = None if isinstance(obs, torch.Tensor) else obs.get(ACTION_MASK_KEY)
            group_actions = getattr(self.env, "sample_group_actions", None)
            if mask is not None:  # action masks: uniform among the legal actions
                env_act = sample_legal_actions_torch(mask, self.rng)
            elif group_actions is not None and getattr(self.env, "groups", None):  # each group's own space
                env_act = group_actions(self.rng)
            else:
                space = self.env.single_action_space
                env_act = sample_actions_torch(space, self.num_rows, self.rng, self.device)
            route = getattr(self.policy, "route", None)
            if route is not None:  # a joint policy splits map_action_inverse by its learners' rows
                route(None, self.num_rows)
            return self.policy.map_action_inverse_torch(env_act), env_act, None
        # the policy may live on another device than the env: its actions come back to the env's
        logp: torch.Tensor | None = None
        if self._log_prob_policy is not None:
            act, logp = self._log_prob_policy.compute_actions_log_prob_torch(
                self._obs, deterministic=deterministic
            )
        else:
            act = self.policy.compute_actions_torch(self._obs, deterministic=deterministic)
        act = act.to(self.device)
        if self.exploration_noise:
            act = self.policy.add_exploration_noise_torch(act, self.rng)
            logp = None  # the noise changed the actions
        env_act = self.policy.map_action_torch(act)
        if self.check_actions:
            self._check_actions(env_act)
        return act, env_act, None if logp is None else logp.to(self.device)

    def _values(self) -> torch.Tensor:
        """V(obs) of the current observations, on the env's device, shape (rows,)."""
        assert self.values is not None
        value = self.values(self._obs).to(self.device)
        if value.shape != (self.num_rows,):
            raise ConfigurationError(
                f"TensorCollector.values returned shape {tuple(value.shape)} for {self.num_rows} rows; it "
                f"must return one value per row, shape ({self.num_rows},)."
            )
        return value

    def _vector_step(
        self, random: bool, deterministic: bool, active: np.ndarray | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of all envs; stores the rows of ``active`` envs (all if None; with agent columns
        ``active`` holds env ids and all their rows are stored).

        Returns:
            (done, the returns of every row's episode including this step, their lengths), one entry
            per row; the last two are only meaningful where ``done``.
        """
        if active is not None and self.num_agents > 1:
            active = (np.arange(self.num_agents)[:, None] * self.num_worlds + active[None, :]).reshape(-1)
        act, env_act, logp = self._actions(random, deterministic)
        value = None if self.values is None or self.buffer is None else self._values()
        step = self.env.step(env_act)
        rew = step.rew.to(torch.float32)
        done = step.terminated | step.truncated
        active_t = None if active is None else torch.from_numpy(active).to(self.device)
        if self._env_info is not None:
            self._env_info.add(step.info, active_t)
        if self.buffer is not None:
            if active_t is None:
                self._ep_stored = ~done
                self.buffer.add(
                    obs=self._obs,
                    act=act,
                    rew=rew,
                    terminated=step.terminated,
                    truncated=step.truncated,
                    obs_next=step.final_obs,
                    logp=logp,
                    value=value,
                )
            else:
                self._ep_stored[active_t] = ~done[active_t]
                self.buffer.add(
                    obs=_select(self._obs, active_t),
                    act=act[active_t],
                    rew=rew[active_t],
                    terminated=step.terminated[active_t],
                    truncated=step.truncated[active_t],
                    obs_next=_select(step.final_obs, active_t),
                    env_ids=active,
                    logp=None if logp is None else logp[active_t],
                    value=None if value is None else value[active_t],
                )
        if self._ep_return.dim() != rew.dim():  # multi-agent rewards: one return per agent
            self._ep_return = torch.zeros(rew.shape, dtype=self._return_dtype, device=self.device)
        returns = self._ep_return + rew
        lens = self._ep_len + 1
        done_b = done.view(-1, *([1] * (returns.dim() - 1)))
        self._ep_return = torch.where(done_b, torch.zeros_like(returns), returns)
        self._ep_len = torch.where(done, torch.zeros_like(lens), lens)
        self._obs = step.obs
        if self.listener is not None:
            self.listener.on_vector_step(np.flatnonzero(done[: self.num_envs].cpu().numpy()))
        return done, returns, lens

    def _per_env(self, returns_R: torch.Tensor) -> torch.Tensor:
        """Agent columns: the per-row returns (..., A * E) as (..., E, A)."""
        shape = returns_R.shape[:-1]
        return returns_R.view(*shape, self.num_agents, self.num_worlds).transpose(-1, -2)

    def _collected(self, stored: int, returns: np.ndarray, lens: np.ndarray) -> CollectedEpisodes:
        means, counts = self._env_info.result() if self._env_info is not None else ({}, {})
        return CollectedEpisodes(stored, returns, lens, means, counts)

    @override
    def _collect_steps(self, num_vector_steps: int, random: bool, deterministic: bool) -> CollectedEpisodes:
        done_steps: list[torch.Tensor] = []
        return_steps: list[torch.Tensor] = []
        len_steps: list[torch.Tensor] = []
        for _ in range(num_vector_steps):
            done, returns, lens = self._vector_step(random, deterministic, None)
            done_steps.append(done)
            return_steps.append(returns)
            len_steps.append(lens)
        done_TN = torch.stack(done_steps)  # ended episodes, step-major then env: the numpy order
        returns_TN = torch.stack(return_steps)
        lens_TN = torch.stack(len_steps)
        if self.num_agents > 1:  # an env's rows end together: read its first agent's row
            done_TN = done_TN[:, : self.num_worlds]
            returns_TN = self._per_env(returns_TN)
            lens_TN = lens_TN[:, : self.num_worlds]
        ep_returns = returns_TN[done_TN].to(torch.float64).cpu().numpy()
        ep_lens = lens_TN[done_TN].cpu().numpy()
        return self._collected(num_vector_steps * self.num_envs, ep_returns, ep_lens)

    @override
    def _collect_episodes(
        self, n_episode: int, random: bool, deterministic: bool, max_env_steps: int | None
    ) -> CollectedEpisodes:
        if bool(self._ep_len.any()):  # unfinished episodes from step-based collection: start afresh
            self.reset_env()
        # counts envs; rows = num_agents * envs
        quota = EpisodeQuota(
            n_episode, self.num_worlds, owner="TensorCollector.collect", max_env_steps=max_env_steps
        )
        returns: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        while quota.running():
            done, ep_returns, ep_lens = self._vector_step(random, deterministic, quota.step_envs())
            if self.num_agents > 1:
                worlds = self.num_worlds
                done, ep_returns, ep_lens = done[:worlds], self._per_env(ep_returns), ep_lens[:worlds]
            done_idx = np.flatnonzero(done.cpu().numpy())
            finished_idx = done_idx[quota.finish(done_idx)]
            if len(finished_idx):
                rows = torch.from_numpy(finished_idx).to(self.device)
                returns.append(ep_returns[rows].to(torch.float64).cpu().numpy())
                lens.append(ep_lens[rows].cpu().numpy())
            if max_env_steps is not None and quota.over_limit(max_env_steps):
                stored, active_mask = quota.stored, quota.active_mask
                ep_len = self._ep_len[: self.num_worlds]
                longest = int(ep_len[torch.from_numpy(active_mask).to(self.device)].max())
                raise EpisodeLimitError(
                    f"TensorCollector.collect: {stored} env steps without finishing {n_episode} episodes "
                    f"(max_env_steps={max_env_steps}); envs {np.flatnonzero(active_mask)[:8].tolist()} are "
                    f"{longest} steps into their episode. An env that never terminates or truncates needs "
                    f"a time limit; or raise the bound."
                )
        shape = (self.num_agents,) if self.num_agents > 1 else tuple(self._ep_return.shape[1:])
        return self._collected(
            quota.stored,
            np.concatenate(returns) if returns else np.zeros((0, *shape), dtype=np.float64),
            np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64),
        )

    @override
    def _finish_stats(self, stats: CollectStats) -> CollectStats:
        """With agent columns, env steps and episodes count envs (``A`` transitions per env step, in
        :attr:`CollectStats.n_stored_transitions`) and the stats name the agents (the env's
        ``agents``)."""
        if self.num_agents == 1:
            return stats
        agents = tuple(getattr(self.env, "agents", ())) or tuple(f"agent_{i}" for i in range(self.num_agents))
        return replace(stats, agents=agents, n_stored_transitions=stats.n_collected_steps * self.num_agents)

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
        obs = self._obs
        return {
            "rng": self.rng.get_state(),
            "obs": obs.cpu() if isinstance(obs, torch.Tensor) else {k: v.cpu() for k, v in obs.items()},
            "ep_return": self._ep_return.cpu(),
            "ep_len": self._ep_len.cpu(),
            "ep_stored": self._ep_stored.cpu(),
            **self._counters_state(),
        }

    @override
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rng.set_state(state["rng"])
        self._obs = _to_device(state["obs"], self.device)
        self._ep_return = state["ep_return"].to(self.device)
        self._ep_len = state["ep_len"].to(self.device)
        self._ep_stored = state["ep_stored"].to(self.device)
        self._load_counters(state)

    env_snapshot_format: ClassVar[EnvSnapshotFormat] = "torch"

    @override
    def env_snapshot(self) -> bytes | None:
        """``env.state_dict()`` saved with ``torch.save`` when the env has one (e.g.
        :class:`~tshtrain.env.TorchCartPole`), else None."""
        get_state = getattr(self.env, "state_dict", None)
        if not callable(get_state):
            return None
        out = io.BytesIO()
        torch.save(get_state(), out)
        return out.getvalue()

    @override
    def restore_env_snapshot(self, snapshot: bytes | None) -> bool:
        """``env.load_state_dict`` of a :meth:`env_snapshot` (read with ``weights_only=True``); with
        None, or an env without ``load_state_dict``, reset the env instead."""
        load = getattr(self.env, "load_state_dict", None)
        if snapshot is None or not callable(load):
            self.reset_env()
            return False
        load(torch.load(io.BytesIO(snapshot), map_location="cpu", weights_only=True))
        return True
