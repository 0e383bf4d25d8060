"""A hand-written IPPO / MAPPO on MPE2 ``simple_spread_v3`` in plain numpy + torch: the baseline that
justifies the thresholds of tests/learning/test_multi_agent_spread_learning.py. Run as a script it
trains the hand loop and tshtrain side by side (one run at a time) and prints / saves per-seed numbers.

The hand loop steps ``E`` PettingZoo parallel envs directly (no tshtrain code on its path). Agent ``a``
of env ``e`` is row ``a * E + e``, as in tshtrain. Parameter sharing: one actor and one critic over
every row; the actor reads the agent's 18-dim observation and its one-hot id; the critic reads the same
(IPPO) or the env's global state (``env.state()``, 54 dims) and the id (MAPPO). A rollout is ``T``
steps of every env (episodes cross rollout ends); the values are computed while collecting; a truncated
episode (simple_spread only truncates, at ``max_cycles``) bootstraps ``r += gamma * V(final obs)`` and
then cuts GAE like a termination; the rollout's end bootstraps from V of the current observation.
The update is PPO: returns = GAE advantages + values, ``num_repetitions`` passes of shuffled
mini-batches of ``batch_size`` rows, advantages standardised per mini-batch, clipped surrogate +
``vf_coef`` * squared value error - ``ent_coef`` * entropy, one Adam over actor and critic with the
joint gradient norm clipped. The settings are tshtrain's test's (``SpreadSettings``); the score is the
greedy (argmax) team return of the final policy, the sum over the 3 agents of their episode returns,
over ``num_test_episodes`` episodes of separately seeded test envs, as in the test.

Run from the repository root (one thread; results go to benchmarks/results/simple_spread.json)::

    python benchmarks/hand_mappo_spread.py --random                       # uniform random policy
    python benchmarks/hand_mappo_spread.py --runs hand-ippo hand-mappo tshtrain-ippo tshtrain-mappo

This is a script: it prints numbers and never asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mpe2 import simple_spread_v3
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import Clock

from tests.learning.test_multi_agent_spread_learning import (
    BUDGET_ENV_STEPS,
    ENV_KWARGS,
    SETTINGS,
    SpreadSettings,
    train_spread,
)

RESULTS = Path(__file__).resolve().parent / "results" / "simple_spread.json"


def mlp_tanh(sizes: list[int]) -> nn.Sequential:
    """Linear -> Tanh -> ... -> Linear with torch's default initialisation (tshtrain's ``mlp``)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class SpreadEnvs:
    """``E`` simple_spread parallel envs as ``A * E`` rows of observations (agent-major)."""

    def __init__(self, num_envs: int, seed: int, *, state: bool):
        self.envs = [simple_spread_v3.parallel_env(**ENV_KWARGS) for _ in range(num_envs)]
        self.agents = list(self.envs[0].possible_agents)
        self.num_envs, self.num_agents = num_envs, len(self.agents)
        self.num_rows = num_envs * self.num_agents
        self.use_state = state
        obs_dim = int(self.envs[0].observation_space(self.agents[0]).shape[0])
        self.state_dim = int(self.envs[0].state_space.shape[0])
        self.obs_RO = np.zeros((self.num_rows, obs_dim), np.float32)
        self.state_RS = np.zeros((self.num_rows, self.state_dim), np.float32)
        self.id_RA = np.repeat(np.eye(self.num_agents, dtype=np.float32), num_envs, axis=0)
        for e, env in enumerate(self.envs):
            obs, _ = env.reset(seed=seed + e)
            self._write(e, obs, self.obs_RO, self.state_RS)

    def _write(self, e: int, obs: dict[str, Any], obs_RO: np.ndarray, state_RS: np.ndarray) -> None:
        for a, agent in enumerate(self.agents):
            obs_RO[a * self.num_envs + e] = obs[agent]
        if self.use_state:
            state_RS[e :: self.num_envs] = self.envs[e].state()

    def step(self, act_R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Steps every env; returns (reward_R, terminated_R, truncated_R, final_obs_RO, final_state_RS):
        the final observations in the rows of envs whose episode ended (those envs are reset)."""
        n, e_count = self.num_rows, self.num_envs
        rew_R, term_R, trunc_R = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool)
        final_obs_RO, final_state_RS = np.zeros_like(self.obs_RO), np.zeros_like(self.state_RS)
        for e, env in enumerate(self.envs):
            actions = {agent: int(act_R[a * e_count + e]) for a, agent in enumerate(self.agents)}
            obs, rew, term, trunc, _ = env.step(actions)
            for a, agent in enumerate(self.agents):
                row = a * e_count + e
                rew_R[row], term_R[row], trunc_R[row] = rew[agent], term[agent], trunc[agent]
            if env.agents and not any(term.values()) and not any(trunc.values()):
                self._write(e, obs, self.obs_RO, self.state_RS)
                continue
            self._write(e, obs, final_obs_RO, final_state_RS)  # every agent ends together here
            obs, _ = env.reset()
            self._write(e, obs, self.obs_RO, self.state_RS)
        return rew_R, term_R, trunc_R, final_obs_RO, final_state_RS


class HandMAPPO:
    """IPPO (``mappo=False``) or MAPPO with parameter sharing, written by hand (module docstring)."""

    def __init__(self, *, mappo: bool, seed: int, s: SpreadSettings = SETTINGS):
        torch.manual_seed(seed)
        self.s, self.mappo, self.seed = s, mappo, seed
        self.env = SpreadEnvs(s.num_envs, seed, state=mappo)
        env = self.env
        obs_dim, ids = env.obs_RO.shape[1], env.num_agents
        self.actor = mlp_tanh([obs_dim + ids, *s.hidden_sizes, 5])
        self.critic = mlp_tanh([(env.state_dim if mappo else obs_dim) + ids, *s.hidden_sizes, 1])
        self.optimizer = torch.optim.Adam([*self.actor.parameters(), *self.critic.parameters()], lr=s.lr)
        self.ep_return_R = np.zeros(env.num_rows)
        self.train_returns: list[float] = []
        """team returns of the training episodes, in the order they ended"""
        self.num_env_steps = 0

    def actor_in(self, obs_RO: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([obs_RO, self.env.id_RA], axis=1))

    def critic_in(self, obs_RO: np.ndarray, state_RS: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([state_RS if self.mappo else obs_RO, self.env.id_RA], axis=1))

    @torch.no_grad()
    def rollout(self) -> tuple[torch.Tensor, ...]:
        s, env = self.s, self.env
        t_len, n = s.rollout_num_env_steps_per_env, env.num_rows
        actor_in_TRI = torch.zeros(t_len, n, env.obs_RO.shape[1] + env.num_agents)
        critic_in_TRI = torch.zeros(t_len, n, self.critic[0].in_features)
        act_TR, logp_TR, value_TR, rew_TR = (torch.zeros(t_len, n) for _ in range(4))
        done_TR = torch.zeros(t_len, n)
        for t in range(t_len):
            x = self.actor_in(env.obs_RO)
            cx = self.critic_in(env.obs_RO, env.state_RS)
            dist = torch.distributions.Categorical(logits=self.actor(x))
            act_R = dist.sample()
            actor_in_TRI[t], critic_in_TRI[t], act_TR[t] = x, cx, act_R
            logp_TR[t] = dist.log_prob(act_R)
            value_TR[t] = self.critic(cx).squeeze(-1)
            rew_R, term_R, trunc_R, final_obs_RO, final_state_RS = env.step(act_R.numpy())
            self.num_env_steps += env.num_envs
            rew = torch.from_numpy(rew_R)
            cut_R = trunc_R & ~term_R
            if cut_R.any():  # bootstrap through the time limit from the episode's final observation
                final_v = self.critic(self.critic_in(final_obs_RO, final_state_RS)).squeeze(-1)
                rew = rew + s.gamma * final_v * torch.from_numpy(cut_R.astype(np.float32))
            rew_TR[t] = rew
            ended_R = term_R | trunc_R
            done_TR[t] = torch.from_numpy(ended_R.astype(np.float32))
            self.ep_return_R += rew_R
            if ended_R.any():
                ended_E = ended_R.reshape(env.num_agents, env.num_envs).all(axis=0)
                team_E = self.ep_return_R.reshape(env.num_agents, env.num_envs).sum(axis=0)
                self.train_returns += team_E[ended_E].tolist()
                self.ep_return_R[ended_R] = 0.0
        last_value_R = self.critic(self.critic_in(env.obs_RO, env.state_RS)).squeeze(-1)
        adv_TR = torch.zeros(t_len, n)
        gae_R = torch.zeros(n)
        for t in reversed(range(t_len)):
            next_v = last_value_R if t == t_len - 1 else value_TR[t + 1]
            keep = 1.0 - done_TR[t]
            delta = rew_TR[t] + s.gamma * next_v * keep - value_TR[t]
            gae_R = delta + s.gamma * s.gae_lambda * keep * gae_R
            adv_TR[t] = gae_R
        returns_TR = adv_TR + value_TR
        flat = (actor_in_TRI, critic_in_TRI, act_TR, logp_TR, adv_TR, returns_TR)
        return tuple(x.reshape(t_len * n, *x.shape[2:]) for x in flat)

    def update(self, data: tuple[torch.Tensor, ...]) -> None:
        s = self.s
        x_N, cx_N, act_N, logp_old_N, adv_N, ret_N = data
        params = [*self.actor.parameters(), *self.critic.parameters()]
        num = len(act_N)
        for _ in range(s.num_repetitions):
            perm = torch.randperm(num)
            for start in range(0, num, s.batch_size):
                idx = perm[start : start + s.batch_size]
                dist = torch.distributions.Categorical(logits=self.actor(x_N[idx]))
                logp = dist.log_prob(act_N[idx])
                adv = adv_N[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = torch.exp(logp - logp_old_N[idx])
                clipped = ratio.clamp(1.0 - s.clip_range, 1.0 + s.clip_range)
                policy_loss = torch.maximum(-adv * ratio, -adv * clipped).mean()
                value_loss = (self.critic(cx_N[idx]).squeeze(-1) - ret_N[idx]).square().mean()
                loss = policy_loss + s.vf_coef * value_loss - s.ent_coef * dist.entropy().mean()
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, s.max_grad_norm)
                self.optimizer.step()

    @torch.no_grad()
    def test(self, test_env: SpreadEnvs) -> float:
        """Mean greedy team return over ``num_test_episodes`` episodes (whole episodes of every env)."""
        returns: list[float] = []
        ep_R = np.zeros(test_env.num_rows)
        while len(returns) < self.s.num_test_episodes:
            x = torch.from_numpy(np.concatenate([test_env.obs_RO, test_env.id_RA], axis=1))
            act_R = self.actor(x).argmax(-1).numpy()
            rew_R, term_R, trunc_R, _, _ = test_env.step(act_R)
            ep_R += rew_R
            ended_R = term_R | trunc_R
            if ended_R.any():
                ended_E = ended_R.reshape(test_env.num_agents, test_env.num_envs).all(axis=0)
                returns += ep_R.reshape(test_env.num_agents, test_env.num_envs).sum(axis=0)[ended_E].tolist()
                ep_R[ended_R] = 0.0
        return float(np.mean(returns[: self.s.num_test_episodes]))

    def train(self, num_env_steps: int) -> list[float]:
        """Trains for ``num_env_steps``; the greedy test returns before training and after every
        ``epoch_num_env_steps``."""
        test_env = SpreadEnvs(self.s.num_envs, self.seed + 10_000, state=False)
        tests = [self.test(test_env)]
        while self.num_env_steps < num_env_steps:
            self.update(self.rollout())
            if self.num_env_steps % self.s.epoch_num_env_steps == 0:
                tests.append(self.test(test_env))
        return tests


def random_return(num_episodes: int, seed: int) -> tuple[float, float]:
    """Mean and std of the team return of uniformly random actions."""
    env = SpreadEnvs(8, seed, state=False)
    rng = np.random.default_rng(seed)
    returns: list[float] = []
    ep_R = np.zeros(env.num_rows)
    while len(returns) < num_episodes:
        rew_R, term_R, trunc_R, _, _ = env.step(rng.integers(0, 5, env.num_rows))
        ep_R += rew_R
        ended_R = term_R | trunc_R
        if ended_R.any():
            returns += ep_R.reshape(env.num_agents, env.num_envs).sum(axis=0).tolist()
            ep_R[ended_R] = 0.0
    return float(np.mean(returns)), float(np.std(returns))


def run(kind: str, seed: int, num_env_steps: int) -> dict[str, Any]:
    """One training run: ``kind`` is hand-ippo, hand-mappo, tshtrain-ippo or tshtrain-mappo."""
    impl, layout = kind.split("-")
    clock = Clock()
    train_tail: float | None = None
    if impl == "hand":
        loop = HandMAPPO(mappo=layout == "mappo", seed=seed)
        tests = loop.train(num_env_steps)
        steps = loop.num_env_steps
        tail = loop.train_returns[-(SETTINGS.epoch_num_env_steps // 25) :]  # the last epoch's episodes
        train_tail = float(np.mean(tail))
    else:
        result = train_spread("mappo" if layout == "mappo" else "ippo", seed, num_env_steps)
        tests, steps = list(result.test_returns), result.num_env_steps
    return {
        "kind": kind,
        "seed": seed,
        "env_steps": steps,
        "test_returns": tests,
        "final_test_return": tests[-1],
        "train_return_last_epoch": train_tail,
        "wall_s": clock.wall(),
        "cpu_s": clock.cpu(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="*", default=[])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=BUDGET_ENV_STEPS)
    parser.add_argument("--random", action="store_true", help="measure the uniform random policy")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)
    saved: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    if args.random:
        mean, std = random_return(1000, 0)
        saved["random"] = {"episodes": 1000, "mean_team_return": mean, "std": std}
        print(f"random policy: team return {mean:.1f} +- {std:.1f} (1000 episodes)", flush=True)
    for seed in args.seeds:
        for kind in args.runs:
            row = run(kind, seed, args.env_steps)
            print(json.dumps(row), flush=True)
            saved["runs"] = [
                r
                for r in saved["runs"]
                if (r["kind"], r["seed"], r["env_steps"]) != (kind, seed, row["env_steps"])
            ] + [row]
            args.out.write_text(json.dumps(saved, indent=1))
    args.out.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
