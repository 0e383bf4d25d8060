"""The hand-written torch PPO loop on VMAS through :class:`tshtrain.env.vmas.VmasEnv`: the baseline of
the VMAS benchmark (``bench_vmas.py``, which builds it with :func:`build`) and, run as a script, the
learning check of the task.

Everything stays in torch: rollouts go into tensors allocated once (time x env); the policy is a
diagonal Gaussian with a state-independent log std, sampled as ``mean + std * noise`` so the
log-probability comes from the noise without a second forward pass; the critic is evaluated step by
step while collecting (a 1024-row pass keeps its activations in the CPU's caches); advantages are GAE
computed backwards over time; the update is PPO's clipped surrogate with a squared-error value loss,
several epochs of shuffled mini-batches gathered with ``index_select``, one Adam (torch's fused
kernel) over actor, log std and critic with the joint gradient norm clipped. A truncated episode
bootstraps from its true last observation (``final_obs``): ``r += gamma * V(final_obs)`` for the
truncated envs, then the episode boundary cuts GAE as a termination does. The returns of finished
episodes are tracked on the device and selected once per rollout (what a training loop needs for its
log; tshtrain's collector does the same). Hyperparameters: :class:`vmas_task.PPOSettings`
(the benchmark's, shared by every contestant).

Run from the repository root::

    python benchmarks/hand_ppo_vmas.py                      # 3 seeds: learning curves, threshold check
    python benchmarks/hand_ppo_vmas.py --seeds 0 --env-steps 2000000
    python benchmarks/hand_ppo_vmas.py --random             # what a uniform random policy gets

The task (``TASK``): VMAS ``navigation`` with two agents (the joint view: 12-dim observation, 4-dim
action), no collisions, 100-step episodes (episode clocks start spread, VmasEnv's default), 1024 envs.
Each agent observes its position, velocity and the vector to its goal; the shared reward is the
decrease of the agents' summed distance to their goals (plus 0.01 once all are on their goals, which
ends the episode). ``THRESHOLD`` is the mean return of the episodes finished in the last 50k env steps
(counted at rollout ends); measured (torch 2.13 CPU, one thread, ``PPOSettings()``; mean return at
131k / 262k / 393k / 524k env steps, then the range up to 1.02M)::

    seed 0: -0.135  1.222  1.784  1.894   then 1.87-1.95
    seed 1:  0.083  1.264  1.751  1.893   then 1.87-1.92
    seed 2:  0.370  1.438  1.801  1.889   then 1.85-1.90
    uniform random policy: -0.045

So every seed passes 1.7 by 393k env steps (about 5 s of training here); the budget of 1M env steps
(about 12 s) leaves a margin of 2.5x. The time goes mostly outside ``env.step`` (about 2.1 s of 11-12 s:
the PPO update of 5 epochs x 4 mini-batches of 8192 dominates).

This is a script: it prints numbers and never asserts a timing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vmas_task import TASK, Phases, PPOSettings, TimedEnv, box_bounds, mlp_tanh, obs_dim

from tshtrain.env.tensor_env import TensorVectorEnv
from tshtrain.env.vmas import VmasEnv

NUM_ENVS = 1024
"""envs of the learning check"""
THRESHOLD = 1.7
"""Mean episode return (last 50k env steps) that PPO reaches on ``TASK`` within the budget."""
BUDGET_ENV_STEPS = 1_000_000
"""The env-step budget within which every seed reaches ``THRESHOLD``."""

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class HandPPO:
    """PPO written by hand on a batched torch env (see the module docstring). Built (and the env
    reset) in ``__init__``; :meth:`train` is the timed part."""

    def __init__(
        self,
        env: TensorVectorEnv,
        s: PPOSettings,
        *,
        seed: int,
        phases: Phases | None = None,
        in_place_tanh: bool = False,
        fast_tanh: bool = False,
    ):
        torch.manual_seed(seed)
        self.env, self.s, self.phases = env, s, phases or Phases()
        n, t_len, o_dim = env.num_envs, s.rollout_len, obs_dim(env)
        self.low_A, self.high_A = box_bounds(env)
        a_dim = len(self.low_A)
        self.actor = mlp_tanh([o_dim, *s.hidden_sizes, a_dim], in_place=in_place_tanh, fast=fast_tanh)
        self.critic = mlp_tanh([o_dim, *s.hidden_sizes, 1], in_place=in_place_tanh, fast=fast_tanh)
        self.log_std = nn.Parameter(torch.full((a_dim,), s.init_log_std))
        self.params = [*self.actor.parameters(), self.log_std, *self.critic.parameters()]
        self.optimizer = torch.optim.Adam(self.params, lr=s.lr, fused=True)  # tshtrain's too
        self.obs_TNO = torch.zeros(t_len, n, o_dim)
        self.act_TNA = torch.zeros(t_len, n, a_dim)
        self.logp_TN, self.rew_TN, self.value_TN, self.ret_TN = (torch.zeros(t_len, n) for _ in range(4))
        self.ended_TN = torch.zeros(t_len, n, dtype=torch.bool)
        self.ep_return_N = torch.zeros(n)
        self.episode_returns = torch.zeros(0)
        """returns of the episodes that ended in the last rollout"""
        obs, _ = env.reset(seed=seed)
        assert isinstance(obs, torch.Tensor)
        self.obs_NO = obs

    def log_prob(self, mean_NA: torch.Tensor, act_NA: torch.Tensor) -> torch.Tensor:
        z_NA = (act_NA - mean_NA) * torch.exp(-self.log_std)
        return (-0.5 * z_NA.square() - self.log_std - _HALF_LOG_2PI).sum(1)

    def train(self, num_iterations: int) -> None:
        for _ in range(num_iterations):
            start = time.perf_counter()
            self.rollout()
            mid = time.perf_counter()
            self.update()
            self.phases.collect = (self.phases.collect or 0.0) + (mid - start)
            self.phases.update += time.perf_counter() - mid

    @torch.no_grad()
    def rollout(self) -> None:
        s, obs_NO = self.s, self.obs_NO
        std_A = self.log_std.exp()
        logp_const = -(self.log_std + _HALF_LOG_2PI).sum()
        half_A = 0.5 * (self.high_A - self.low_A)
        for t in range(s.rollout_len):
            mean_NA = self.actor(obs_NO)
            noise_NA = torch.randn_like(mean_NA)
            act_NA = mean_NA + std_A * noise_NA
            self.obs_TNO[t] = obs_NO
            self.act_TNA[t] = act_NA
            self.logp_TN[t] = logp_const - 0.5 * noise_NA.square().sum(1)  # log N(act | mean, std)
            self.value_TN[t] = self.critic(obs_NO).squeeze(-1)
            out = self.env.step(self.low_A + (act_NA.clamp(-1.0, 1.0) + 1.0) * half_A)
            rew_N = out.rew.clone()
            cut_N = out.truncated & ~out.terminated
            if bool(cut_N.any()):  # bootstrap through the time limit from the episode's last observation
                assert isinstance(out.final_obs, torch.Tensor)
                rew_N[cut_N] += s.gamma * self.critic(out.final_obs[cut_N]).squeeze(-1)
            self.rew_TN[t] = rew_N
            ended_N = out.terminated | out.truncated
            self.ended_TN[t] = ended_N
            self.ep_return_N += out.rew
            self.ret_TN[t] = self.ep_return_N
            self.ep_return_N.masked_fill_(ended_N, 0.0)
            assert isinstance(out.obs, torch.Tensor)
            obs_NO = out.obs
        self.obs_NO = obs_NO
        self.episode_returns = self.ret_TN[self.ended_TN]

    def update(self) -> None:
        s, num = self.s, self.s.rollout_len * self.env.num_envs
        with torch.no_grad():  # GAE
            next_value_N = self.critic(self.obs_NO).squeeze(-1)
            adv_TN = torch.empty_like(self.rew_TN)
            last_N = torch.zeros(self.env.num_envs)
            not_done_TN = 1.0 - self.ended_TN.float()
            for t in reversed(range(s.rollout_len)):
                delta_N = self.rew_TN[t] + s.gamma * next_value_N * not_done_TN[t] - self.value_TN[t]
                last_N = delta_N + s.gamma * s.gae_lambda * not_done_TN[t] * last_N
                adv_TN[t] = last_N
                next_value_N = self.value_TN[t]
        obs_BO, act_BA = self.obs_TNO.flatten(0, 1), self.act_TNA.flatten(0, 1)
        logp_B, adv_B, ret_B = self.logp_TN.flatten(), adv_TN.flatten(), (adv_TN + self.value_TN).flatten()
        size = num // s.num_minibatches
        for _ in range(s.num_epochs):
            perm = torch.randperm(num)
            for k in range(s.num_minibatches):
                idx = perm[k * size : (k + 1) * size]
                obs, adv = obs_BO.index_select(0, idx), adv_B.index_select(0, idx)
                logp = self.log_prob(self.actor(obs), act_BA.index_select(0, idx))
                entropy = (self.log_std + 0.5 + _HALF_LOG_2PI).sum()
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (logp - logp_B.index_select(0, idx)).exp()
                clipped = ratio.clamp(1.0 - s.clip_range, 1.0 + s.clip_range)
                policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                value_loss = (self.critic(obs).squeeze(-1) - ret_B.index_select(0, idx)).square().mean()
                loss = policy_loss + s.vf_coef * value_loss - s.ent_coef * entropy
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, s.max_grad_norm)
                self.optimizer.step()


def build(
    env: TensorVectorEnv,
    settings: PPOSettings,
    *,
    seed: int,
    phases: Phases,
    in_place_tanh: bool = False,
    fast_tanh: bool = False,
) -> Callable[[int], None]:
    """The benchmark's entry point: builds the hand loop (untimed), returns ``train(num_iterations)``."""
    return HandPPO(
        env, settings, seed=seed, phases=phases, in_place_tanh=in_place_tanh, fast_tanh=fast_tanh
    ).train


# ============================================================================ the learning check
def make_env(num_envs: int, seed: int) -> VmasEnv:
    """The ``TASK`` env."""
    kwargs = {k: v for k, v in TASK.items() if k != "scenario"}
    return VmasEnv(TASK["scenario"], num_envs=num_envs, seed=seed, **kwargs)


@dataclass(kw_only=True)
class TrainResult:
    """Learning curve and where the time went."""

    curve: list[tuple[int, float, float]] = field(default_factory=list)
    """(env steps, mean return of the episodes finished in the last window, wall seconds)"""
    env_steps: int = 0
    seconds_total: float = 0.0
    seconds_in_env_step: float = 0.0
    """time spent inside ``env.step`` (simulation and autoreset)"""

    @property
    def env_steps_per_second(self) -> float:
        return self.env_steps / self.seconds_total

    @property
    def seconds_outside_env_step(self) -> float:
        """policy forward passes, storage, GAE and the PPO update"""
        return self.seconds_total - self.seconds_in_env_step


def train(
    seed: int,
    num_env_steps: int,
    settings: PPOSettings | None = None,
    *,
    num_envs: int = NUM_ENVS,
    report_every: int = 131_072,
    window: int = 50_000,
) -> TrainResult:
    """Train the hand loop on ``TASK`` for ``num_env_steps`` env steps; returns the learning curve
    (every ``report_every`` env steps: the mean return of the episodes finished in the last
    ``window`` env steps) and the time inside / outside ``env.step``."""
    env = TimedEnv(make_env(num_envs, seed))
    ppo = HandPPO(env, settings or PPOSettings(), seed=seed)
    result, finished = TrainResult(), list[tuple[int, float]]()
    next_report, start = report_every, time.perf_counter()
    while result.env_steps < num_env_steps:
        ppo.train(1)
        result.env_steps += ppo.s.rollout_len * num_envs
        finished += [(result.env_steps, r) for r in ppo.episode_returns.tolist()]
        if result.env_steps >= next_report or result.env_steps >= num_env_steps:
            next_report += report_every
            recent = [r for at, r in finished if at > result.env_steps - window]
            mean_return = float(np.mean(recent)) if recent else float("nan")
            result.curve.append((result.env_steps, mean_return, time.perf_counter() - start))
    result.seconds_total = time.perf_counter() - start
    result.seconds_in_env_step = env.step_seconds
    env.close()
    return result


def random_policy_return(seed: int, num_env_steps: int = 500_000, num_envs: int = NUM_ENVS) -> float:
    """Mean return of the episodes a uniform random policy finishes in ``num_env_steps``."""
    env = make_env(num_envs, seed)
    env.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed)
    low = torch.as_tensor(env.single_action_space.low)
    high = torch.as_tensor(env.single_action_space.high)
    episode_return_B = torch.zeros(num_envs)
    returns: list[float] = []
    for _ in range(num_env_steps // num_envs):
        step = env.step(low + (high - low) * torch.rand((num_envs, low.shape[0]), generator=gen))
        episode_return_B += step.rew
        ended_B = step.terminated | step.truncated
        returns.extend(episode_return_B[ended_B].tolist())
        episode_return_B[ended_B] = 0.0
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=BUDGET_ENV_STEPS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--random", action="store_true", help="only report the random policy's return")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    if args.random:
        for seed in args.seeds:
            print(f"random policy, seed {seed}: mean episode return {random_policy_return(seed):.3f}")
        return
    print(f"settings: {PPOSettings()}")
    for seed in args.seeds:
        result = train(seed, args.env_steps)
        print(f"seed {seed}:")
        for env_steps, mean_return, seconds in result.curve:
            print(f"  {env_steps:>9,} env steps  {seconds:6.1f} s  return {mean_return:7.3f}")
        reached = next((s for s, r, _ in result.curve if r >= THRESHOLD), None)
        print(
            f"  threshold {THRESHOLD} reached at {reached} env steps; "
            f"{result.env_steps_per_second:,.0f} env steps/s, "
            f"{result.seconds_in_env_step:.1f} s in env.step, "
            f"{result.seconds_outside_env_step:.1f} s outside",
            flush=True,
        )


if __name__ == "__main__":
    main()
