"""Hand-written IPPO / MAPPO loops (plain torch): the baselines of ``bench_marl.py``.

One PPO shared by all agents (parameter sharing), as tshtrain's ``mappo_actor_critic`` builds it: the
actor reads the agent's observation and its one-hot id; the critic reads the env's global state and
the id (MAPPO) or what the actor reads (IPPO); MLPs of ``hidden_sizes`` with tanh. Every agent of every
env is one column, agent-major (column ``a * E + e``), like tshtrain's agent columns.

The loop is :class:`HandMAPPO` over a :class:`ColumnEnv` that hands it ready network inputs:

* :class:`VmasColumns`: tshtrain's ``VmasEnv(agent_layout="columns", agent_id=True,
  global_state=True)`` (the same env object tshtrain's contestant steps, so the env cost is the same);
  the id is concatenated once per step; Gaussian actions (state-independent log std, sampled as
  ``mean + std * noise``, clipped to [-1, 1] and scaled to the bounds, like tshtrain's GaussianPolicy);
* :class:`MpeColumns`: ``E`` raw ``mpe2`` ``parallel_env`` objects stepped in a Python loop, their dict
  observations stacked into arrays and ``env.state()`` as the global state; categorical actions; an env
  whose episode ended is reset in the same step.

Rollouts go into tensors allocated once (time x column); values and log-probabilities are stored
while collecting; a truncated episode bootstraps from its last observation (``r += gamma *
V(final)``); GAE backwards over time; then ``epochs`` passes of ``minibatches`` shuffled mini-batches
of the clipped surrogate plus the squared-error value loss, advantages normalised per mini-batch,
one fused Adam over actor (+ log std) and critic, joint gradient norm clipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def mlp_tanh(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class ColumnEnv:
    """What the hand loop steps: C = A * E columns, ready network inputs."""

    num_columns: int
    actor_dim: int
    critic_dim: int
    continuous: bool
    act_dim: int
    """Box: action dims; Discrete: number of actions"""

    def reset(self, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(actor inputs (C, actor_dim), critic inputs (C, critic_dim))"""
        raise NotImplementedError

    def step(
        self, act_C: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(actor inputs, critic inputs, reward (C,), ended (C,), cut (C,) = truncated and not
        terminated, critic inputs of the cut columns' last observations (or None when none is cut))"""
        raise NotImplementedError


class VmasColumns(ColumnEnv):
    def __init__(self, env: Any, centralised: bool):
        import gymnasium as gym

        self.env, self.centralised = env, centralised
        space = env.single_observation_space
        assert isinstance(space, gym.spaces.Dict)
        self.num_columns = int(env.num_envs)
        o, s, a = (int(space.spaces[k].shape[0]) for k in ("obs", "state", "agent_id"))
        self.actor_dim, self.critic_dim = o + a, (s + a if centralised else o + a)
        act_space = env.single_action_space
        self.continuous, self.act_dim = True, int(act_space.shape[0])
        self.low_A = torch.as_tensor(act_space.low, dtype=torch.float32)
        self.half_A = 0.5 * (torch.as_tensor(act_space.high, dtype=torch.float32) - self.low_A)

    def _inputs(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        actor_in = torch.cat((obs["obs"], obs["agent_id"]), dim=1)
        critic_in = torch.cat((obs["state"], obs["agent_id"]), dim=1) if self.centralised else actor_in
        return actor_in, critic_in

    def reset(self, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        obs, _ = self.env.reset(seed=seed)
        return self._inputs(obs)

    def step(self, act_C: torch.Tensor) -> Any:
        out = self.env.step(self.low_A + (act_C.clamp(-1.0, 1.0) + 1.0) * self.half_A)
        actor_in, critic_in = self._inputs(out.obs)
        cut_C = out.truncated & ~out.terminated
        final = None
        if bool(cut_C.any()):
            final = self._inputs({k: v[cut_C] for k, v in out.final_obs.items()})[1]
        return actor_in, critic_in, out.rew, out.terminated | out.truncated, cut_C, final


class MpeColumns(ColumnEnv):
    """E raw mpe2 parallel envs; columns agent-major."""

    def __init__(self, make: Callable[[], Any], num_envs: int, centralised: bool):
        self.envs = [make() for _ in range(num_envs)]
        self.E, self.centralised = num_envs, centralised
        first = self.envs[0]
        self.agents = list(first.possible_agents)
        self.A = len(self.agents)
        self.num_columns = self.A * self.E
        o = int(first.observation_space(self.agents[0]).shape[0])
        s = int(first.state_space.shape[0])
        self.actor_dim, self.critic_dim = o + self.A, (s + self.A if centralised else o + self.A)
        self.continuous, self.act_dim = False, int(first.action_space(self.agents[0]).n)
        self.id_CA = torch.eye(self.A).repeat_interleave(self.E, dim=0)
        self.obs_AEO = np.zeros((self.A, self.E, o), np.float32)
        self.state_ES = np.zeros((self.E, s), np.float32)
        self.steps_E = np.zeros(self.E, np.int64)

    def _inputs(self, obs_AEO: np.ndarray, state_ES: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        obs_C = torch.from_numpy(obs_AEO.reshape(self.num_columns, -1))
        actor_in = torch.cat((obs_C, self.id_CA), dim=1)
        if not self.centralised:
            return actor_in, actor_in
        state_C = torch.from_numpy(np.tile(state_ES, (self.A, 1)))
        return actor_in, torch.cat((state_C, self.id_CA), dim=1)

    def _put(self, e: int, obs: dict[str, np.ndarray], env: Any) -> None:
        for a, name in enumerate(self.agents):
            self.obs_AEO[a, e] = obs[name]
        if self.centralised:
            self.state_ES[e] = env.state()

    def reset(self, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        for e, env in enumerate(self.envs):
            obs, _ = env.reset(seed=seed + e)
            self._put(e, obs, env)
        return self._inputs(self.obs_AEO, self.state_ES)

    def step(self, act_C: torch.Tensor) -> Any:
        act_AE = act_C.view(self.A, self.E).numpy()
        rew_AE = np.zeros((self.A, self.E), np.float32)
        term_E = np.zeros(self.E, bool)
        trunc_E = np.zeros(self.E, bool)
        final_obs: list[tuple[int, np.ndarray, np.ndarray]] = []
        for e, env in enumerate(self.envs):
            obs, rew, term, trunc, _ = env.step(
                {name: int(act_AE[a, e]) for a, name in enumerate(self.agents)}
            )
            for a, name in enumerate(self.agents):
                rew_AE[a, e] = rew[name]
            term_E[e] = any(term.values())
            trunc_E[e] = any(trunc.values())
            self._put(e, obs, env)
            if term_E[e] or trunc_E[e]:
                if trunc_E[e] and not term_E[e]:
                    final_obs.append((e, self.obs_AEO[:, e].copy(), self.state_ES[e].copy()))
                obs, _ = env.reset()
                self._put(e, obs, env)
        actor_in, critic_in = self._inputs(self.obs_AEO, self.state_ES)
        ended_C = torch.from_numpy(np.tile(term_E | trunc_E, self.A))
        cut_C = torch.from_numpy(np.tile(trunc_E & ~term_E, self.A))
        final = None
        if final_obs:  # critic inputs of the cut columns, in column order (agent-major)
            cut_envs = [e for e, _, _ in final_obs]
            obs_AKO = np.stack([o for _, o, _ in final_obs], axis=1)
            state_KS = np.stack([s for _, _, s in final_obs])
            id_rows = torch.cat([self.id_CA[a * self.E + np.array(cut_envs)] for a in range(self.A)])
            if self.centralised:
                feats = torch.from_numpy(np.tile(state_KS, (self.A, 1)))
            else:
                feats = torch.from_numpy(obs_AKO.reshape(self.A * len(cut_envs), -1))
            final = torch.cat((feats, id_rows), dim=1)
        return actor_in, critic_in, torch.from_numpy(rew_AE.reshape(-1)), ended_C, cut_C, final


class HandMAPPO:
    """The hand loop (module docstring). Built (and the env reset) in ``__init__``; :meth:`train` is the
    timed part. ``c`` is a ``marl_config`` task dict."""

    def __init__(self, env: ColumnEnv, c: dict[str, Any], *, seed: int, per_env_critic: bool = False):
        torch.manual_seed(seed)
        self.env, self.c = env, c
        n, t_len, h = env.num_columns, c["rollout_len"], list(c["hidden_sizes"])
        self.A = int(c["n_agents"])
        self.E = n // self.A
        self.per_env = per_env_critic
        """MAPPO as BenchMARL builds it: the critic reads the global state only (no agent id) and runs
        once per env; its value stands for every agent of the env (the mini-batches are then drawn
        over env steps, with all agents of each)."""
        critic_dim = env.critic_dim - self.A if per_env_critic else env.critic_dim
        self.actor = mlp_tanh([env.actor_dim, *h, env.act_dim])
        self.critic = mlp_tanh([critic_dim, *h, 1])
        self.params = list(self.actor.parameters()) + list(self.critic.parameters())
        if env.continuous:
            self.log_std = nn.Parameter(torch.full((env.act_dim,), float(c["init_log_std"])))
            self.params.append(self.log_std)
        self.optimizer = torch.optim.Adam(self.params, lr=c["lr"], fused=True)
        self.actor_in_TNX = torch.zeros(t_len, n, env.actor_dim)
        self.critic_in_TNY = torch.zeros(t_len, self.E if per_env_critic else n, critic_dim)
        self.act_TN = (
            torch.zeros(t_len, n, env.act_dim) if env.continuous else torch.zeros(t_len, n, dtype=torch.long)
        )
        self.logp_TN, self.rew_TN, self.value_TN = (torch.zeros(t_len, n) for _ in range(3))
        self.ended_TN = torch.zeros(t_len, n, dtype=torch.bool)
        self.actor_in, self.critic_in = env.reset(seed)

    def _log_prob(self, out_NX: torch.Tensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.env.continuous:
            z = (act - out_NX) * torch.exp(-self.log_std)
            logp = (-0.5 * z.square() - self.log_std - _HALF_LOG_2PI).sum(1)
            return logp, (self.log_std + 0.5 + _HALF_LOG_2PI).sum()
        logits = out_NX - out_NX.logsumexp(1, keepdim=True)
        return logits.gather(1, act.unsqueeze(1)).squeeze(1), -(logits.exp() * logits).sum(1).mean()

    def train(self, num_iterations: int) -> None:
        for _ in range(num_iterations):
            self.rollout()
            self.update()

    @torch.no_grad()
    def rollout(self) -> None:
        c, env = self.c, self.env
        if env.continuous:
            std = self.log_std.exp()
            logp_const = -(self.log_std + _HALF_LOG_2PI).sum()
        actor_in, critic_in = self.actor_in, self.critic_in
        for t in range(c["rollout_len"]):
            out = self.actor(actor_in)
            if env.continuous:
                noise = torch.randn_like(out)
                act = out + std * noise
                self.logp_TN[t] = logp_const - 0.5 * noise.square().sum(1)
            else:
                logits = out - out.logsumexp(1, keepdim=True)
                act = torch.multinomial(logits.exp(), 1).squeeze(1)
                self.logp_TN[t] = logits.gather(1, act.unsqueeze(1)).squeeze(1)
            self.actor_in_TNX[t] = actor_in
            self.act_TN[t] = act
            if self.per_env:
                state_E = critic_in[: self.E, : -self.A]
                self.critic_in_TNY[t] = state_E
                self.value_TN[t] = self.critic(state_E).squeeze(-1).repeat(self.A)
            else:
                self.critic_in_TNY[t] = critic_in
                self.value_TN[t] = self.critic(critic_in).squeeze(-1)
            actor_in, critic_in, rew, ended, cut, final = env.step(act)
            if final is not None:
                rew = rew.clone()
                if self.per_env:  # final: the cut columns agent-major, agent 0's rows first
                    k = int(cut[: self.E].sum())
                    rew[cut] += c["gamma"] * self.critic(final[:k, : -self.A]).squeeze(-1).repeat(self.A)
                else:
                    rew[cut] += c["gamma"] * self.critic(final).squeeze(-1)
            self.rew_TN[t] = rew
            self.ended_TN[t] = ended
        self.actor_in, self.critic_in = actor_in, critic_in

    def update(self) -> None:
        c, n, t_len = self.c, self.env.num_columns, self.c["rollout_len"]
        gamma, lam = c["gamma"], c["gae_lambda"]
        with torch.no_grad():
            if self.per_env:
                next_v = self.critic(self.critic_in[: self.E, : -self.A]).squeeze(-1).repeat(self.A)
            else:
                next_v = self.critic(self.critic_in).squeeze(-1)
            adv_TN = torch.empty_like(self.rew_TN)
            last = torch.zeros(n)
            not_done = 1.0 - self.ended_TN.float()
            for t in reversed(range(t_len)):
                delta = self.rew_TN[t] + gamma * next_v * not_done[t] - self.value_TN[t]
                last = delta + gamma * lam * not_done[t] * last
                adv_TN[t] = last
                next_v = self.value_TN[t]
        ain, cin = self.actor_in_TNX.flatten(0, 1), self.critic_in_TNY.flatten(0, 1)
        act = self.act_TN.flatten(0, 1)
        logp_old, adv_B, ret_B = self.logp_TN.flatten(), adv_TN.flatten(), (adv_TN + self.value_TN).flatten()
        if self.per_env:
            self._update_per_env(ain=ain, cin_F=cin, act=act, logp_old=logp_old, adv_B=adv_B, ret_B=ret_B)
            return
        num = t_len * n
        size = num // c["minibatches"]
        for _ in range(c["epochs"]):
            perm = torch.randperm(num)
            for k in range(c["minibatches"]):
                idx = perm[k * size : (k + 1) * size]
                adv = adv_B.index_select(0, idx)
                logp, entropy = self._log_prob(self.actor(ain.index_select(0, idx)), act.index_select(0, idx))
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (logp - logp_old.index_select(0, idx)).exp()
                clipped = ratio.clamp(1.0 - c["clip"], 1.0 + c["clip"])
                policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                value = self.critic(cin.index_select(0, idx)).squeeze(-1)
                value_loss = (value - ret_B.index_select(0, idx)).square().mean()
                loss = policy_loss + c["value_coef"] * value_loss - c["entropy_coef"] * entropy
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, c["max_grad_norm"])
                self.optimizer.step()

    def _update_per_env(
        self,
        *,
        ain: torch.Tensor,
        cin_F: torch.Tensor,
        act: torch.Tensor,
        logp_old: torch.Tensor,
        adv_B: torch.Tensor,
        ret_B: torch.Tensor,
    ) -> None:
        """Mini-batches of env steps (frames f = t * E + e) with all A agents of each: the actor on the
        A rows of a frame, the critic once per frame, its value against each agent's return."""
        c, A, E, n = self.c, self.A, self.E, self.env.num_columns
        num = c["rollout_len"] * E
        size = num // c["minibatches"]
        agent_offset_A1 = (torch.arange(A) * E).unsqueeze(1)
        for _ in range(c["epochs"]):
            perm = torch.randperm(num)
            for k in range(c["minibatches"]):
                idx_F = perm[k * size : (k + 1) * size]
                rows = ((idx_F // E) * n + idx_F % E + agent_offset_A1).reshape(-1)  # (A * F,)
                adv = adv_B.index_select(0, rows)
                logp, entropy = self._log_prob(
                    self.actor(ain.index_select(0, rows)), act.index_select(0, rows)
                )
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (logp - logp_old.index_select(0, rows)).exp()
                clipped = ratio.clamp(1.0 - c["clip"], 1.0 + c["clip"])
                policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                value_F = self.critic(cin_F.index_select(0, idx_F)).squeeze(-1)
                value_loss = (value_F.unsqueeze(0) - ret_B.index_select(0, rows).view(A, -1)).square().mean()
                loss = policy_loss + c["value_coef"] * value_loss - c["entropy_coef"] * entropy
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, c["max_grad_norm"])
                self.optimizer.step()
