"""A hand-written torch PPO loop on VMAS through :class:`tshtrain.env.vmas.VmasEnv`: the baseline of the
VMAS benchmark against tshtrain, rsl_rl and skrl.

Everything stays in torch: rollouts go into tensors allocated once (time x env), advantages are GAE
computed backwards over time, the update is PPO's clipped surrogate with a clipped value loss and Adam,
several epochs of shuffled minibatches. A truncated episode bootstraps from its true last observation
(``final_obs``): ``r += gamma * V(final_obs)`` for the truncated envs, then the episode boundary cuts
GAE as a termination does.

Run from the repository root::

    python benchmarks/hand_ppo_vmas.py                      # 3 seeds: learning curves, threshold check
    python benchmarks/hand_ppo_vmas.py --seeds 0 --env-steps 2000000
    python benchmarks/hand_ppo_vmas.py --random             # what a uniform random policy gets

The task (``TASK``): VMAS ``navigation`` with two agents (the joint view: 12-dim observation, 4-dim
action), no collisions, 100-step episodes, 1024 envs. Each agent observes its position, velocity and
the vector to its goal; the shared reward is the decrease of the agents' summed distance to their goals
(plus 0.01 once all are on their goals, which ends the episode). ``THRESHOLD`` is the mean return of
the episodes finished in the last 50k env steps; measured (torch 2.13 CPU, one thread, default
``PPOConfig``; mean return at 131k / 262k / 393k / 524k env steps, then the range up to 1.5M)::

    seed 0: -0.093  1.270  1.811  1.902   then 1.83-1.93
    seed 1:  0.116  1.314  1.756  1.876   then 1.83-1.91
    seed 2:  0.424  1.482  1.778  1.903   then 1.81-1.93
    uniform random policy: -0.045

So every seed passes 1.7 by 393k env steps (12-20 s of training here); the budget of 1M env steps
(about 40 s) leaves a margin of 2.5x. The time goes mostly outside ``env.step`` (about 8 s of 45-58 s
over 1.5M env steps: the PPO update of 5 epochs x 4 minibatches of 8192 dominates).

This is a script: it prints numbers and never asserts a timing.
"""

# ruff: noqa: N815  (tensor fields carry shape suffixes, as everywhere in tshtrain: obs_TBO, rew_TB)
from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from tshtrain.env.vmas import VmasEnv

TASK: dict[str, Any] = {
    "scenario": "navigation",
    "max_episode_steps": 100,
    "n_agents": 2,
    "collisions": False,
}
"""The VMAS task: scenario, time limit, scenario kwargs."""
THRESHOLD = 1.7
"""Mean episode return (last 50k env steps) that PPO reaches on ``TASK`` within the budget."""
BUDGET_ENV_STEPS = 1_000_000
"""The env-step budget within which every seed reaches ``THRESHOLD``."""


@dataclass(frozen=True, kw_only=True)
class PPOConfig:
    """Standard PPO hyperparameters for 1024 torch envs."""

    num_envs: int = 1024
    rollout_steps: int = 32
    """env steps per env per rollout (a rollout is num_envs * rollout_steps transitions)"""
    num_epochs: int = 5
    num_minibatches: int = 4
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 1.0
    hidden: int = 64
    init_log_std: float = -0.5


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


class ActorCritic(nn.Module):
    """Separate tanh MLPs for the Gaussian policy mean and the value; state-independent log std."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int, init_log_std: float) -> None:
        super().__init__()
        self.actor = nn.Sequential(
            nn.Linear(obs_dim, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, act_dim),
        )
        self.critic = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )
        self.log_std = nn.Parameter(torch.full((act_dim,), init_log_std))

    def dist(self, obs: torch.Tensor) -> torch.distributions.Normal:
        mean = self.actor(obs)
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.critic(obs).squeeze(-1)
        return out


def gae(
    rew_TB: torch.Tensor,
    value_TB: torch.Tensor,
    done_TB: torch.Tensor,
    last_value_B: torch.Tensor,
    *,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates; ``done_TB`` cuts the recursion after step t."""
    adv_TB = torch.zeros_like(rew_TB)
    next_adv_B = torch.zeros_like(last_value_B)
    next_value_B = last_value_B
    for t in range(rew_TB.shape[0] - 1, -1, -1):
        not_done_B = 1.0 - done_TB[t]
        delta_B = rew_TB[t] + gamma * next_value_B * not_done_B - value_TB[t]
        next_adv_B = delta_B + gamma * lam * not_done_B * next_adv_B
        adv_TB[t] = next_adv_B
        next_value_B = value_TB[t]
    return adv_TB


@dataclass(frozen=True, kw_only=True)
class Rollout:
    """One rollout, allocated once and overwritten every iteration (T = rollout steps, B = envs)."""

    obs_TBO: torch.Tensor
    act_TBA: torch.Tensor
    logp_TB: torch.Tensor
    rew_TB: torch.Tensor
    """rewards, plus gamma * V(final_obs) where an episode was truncated"""
    value_TB: torch.Tensor
    done_TB: torch.Tensor
    adv_TB: torch.Tensor
    ret_TB: torch.Tensor

    @classmethod
    def zeros(cls, steps: int, envs: int, obs_dim: int, act_dim: int) -> Rollout:
        def z(*shape: int) -> torch.Tensor:
            return torch.zeros(steps, envs, *shape)

        return cls(
            obs_TBO=z(obs_dim),
            act_TBA=z(act_dim),
            logp_TB=z(),
            rew_TB=z(),
            value_TB=z(),
            done_TB=z(),
            adv_TB=z(),
            ret_TB=z(),
        )


@dataclass(kw_only=True)
class Episodes:
    """Running returns per env and the finished episodes as (env step, return)."""

    return_B: torch.Tensor
    finished: list[tuple[int, float]] = field(default_factory=list)

    def windowed_mean(self, env_steps: int, window: int = 50_000) -> float:
        recent = [r for s, r in self.finished if s > env_steps - window]
        return float(np.mean(recent)) if recent else float("nan")


def collect(
    env: VmasEnv, agent: ActorCritic, cfg: PPOConfig, rollout: Rollout, obs_BO: torch.Tensor, *, run: RunState
) -> torch.Tensor:
    """Fill ``rollout`` with ``cfg.rollout_steps`` vector steps from ``obs_BO``, compute advantages and
    returns; returns the observation to continue from."""
    with torch.no_grad():
        for t in range(cfg.rollout_steps):
            dist = agent.dist(obs_BO)
            act_BA = dist.sample()
            rollout.obs_TBO[t], rollout.act_TBA[t] = obs_BO, act_BA
            rollout.logp_TB[t] = dist.log_prob(act_BA).sum(-1)
            rollout.value_TB[t] = agent.value(obs_BO)
            env_start = time.perf_counter()
            step = env.step(torch.clamp(act_BA, run.low_A, run.high_A))
            run.result.seconds_in_env_step += time.perf_counter() - env_start
            rew_B = step.rew
            if bool(step.truncated.any()):  # bootstrap from the true last observation
                cut_B = step.truncated & ~step.terminated
                rew_B = rew_B + cfg.gamma * agent.value(step.final_obs) * cut_B
            rollout.rew_TB[t] = rew_B
            ended_B = step.terminated | step.truncated
            rollout.done_TB[t] = ended_B.float()
            run.episodes.return_B += step.rew
            run.result.env_steps += cfg.num_envs
            if bool(ended_B.any()):
                returns = run.episodes.return_B[ended_B].tolist()
                run.episodes.finished.extend((run.result.env_steps, r) for r in returns)
                run.episodes.return_B[ended_B] = 0.0
            obs_BO = step.obs
        last_value_B = agent.value(obs_BO)
        adv_TB = gae(
            rollout.rew_TB,
            rollout.value_TB,
            rollout.done_TB,
            last_value_B,
            gamma=cfg.gamma,
            lam=cfg.gae_lambda,
        )
        rollout.adv_TB.copy_(adv_TB)
        rollout.ret_TB.copy_(adv_TB + rollout.value_TB)
    return obs_BO


@dataclass(kw_only=True)
class RunState:
    """What the collection updates besides the rollout."""

    result: TrainResult
    episodes: Episodes
    low_A: torch.Tensor
    high_A: torch.Tensor


def make_env(num_envs: int, seed: int) -> VmasEnv:
    """The ``TASK`` env."""
    kwargs = {k: v for k, v in TASK.items() if k != "scenario"}
    return VmasEnv(TASK["scenario"], num_envs=num_envs, seed=seed, **kwargs)


def train(
    seed: int,
    num_env_steps: int,
    config: PPOConfig | None = None,
    *,
    report_every: int = 131_072,
    stop_at_return: float | None = None,
) -> TrainResult:
    """Train PPO on ``TASK`` for ``num_env_steps`` env steps (or until the windowed return reaches
    ``stop_at_return``); returns the learning curve and the time inside / outside ``env.step``."""
    cfg = config or PPOConfig()
    torch.manual_seed(seed)
    env = make_env(cfg.num_envs, seed)
    obs_dim = env.single_observation_space.shape[0]
    run = RunState(
        result=TrainResult(),
        episodes=Episodes(return_B=torch.zeros(cfg.num_envs)),
        low_A=torch.as_tensor(env.single_action_space.low),
        high_A=torch.as_tensor(env.single_action_space.high),
    )
    act_dim = run.low_A.shape[0]
    agent = ActorCritic(obs_dim, act_dim, cfg.hidden, cfg.init_log_std)
    optim = torch.optim.Adam(agent.parameters(), lr=cfg.lr, eps=1e-5)
    rollout = Rollout.zeros(cfg.rollout_steps, cfg.num_envs, obs_dim, act_dim)
    obs_BO, _ = env.reset(seed=seed)
    start = time.perf_counter()
    next_report = report_every
    result = run.result
    while result.env_steps < num_env_steps:
        obs_BO = collect(env, agent, cfg, rollout, obs_BO, run=run)
        update(agent, optim, cfg, rollout)
        if result.env_steps >= next_report or result.env_steps >= num_env_steps:
            next_report += report_every
            mean_return = run.episodes.windowed_mean(result.env_steps)
            result.curve.append((result.env_steps, mean_return, time.perf_counter() - start))
            if stop_at_return is not None and mean_return >= stop_at_return:
                break
    result.seconds_total = time.perf_counter() - start
    env.close()
    return result


def update(agent: ActorCritic, optim: torch.optim.Optimizer, cfg: PPOConfig, rollout: Rollout) -> None:
    """PPO epochs over shuffled minibatches: clipped surrogate, clipped value loss, entropy bonus."""
    obs_NO, act_NA = rollout.obs_TBO.flatten(0, 1), rollout.act_TBA.flatten(0, 1)
    logp_N, adv_N, ret_N, value_N = (
        x.flatten() for x in (rollout.logp_TB, rollout.adv_TB, rollout.ret_TB, rollout.value_TB)
    )
    n = obs_NO.shape[0]
    size = n // cfg.num_minibatches
    for _ in range(cfg.num_epochs):
        perm = torch.randperm(n)
        for i in range(cfg.num_minibatches):
            idx = perm[i * size : (i + 1) * size]
            dist = agent.dist(obs_NO[idx])
            ratio = (dist.log_prob(act_NA[idx]).sum(-1) - logp_N[idx]).exp()
            adv = adv_N[idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv).mean()
            value = agent.value(obs_NO[idx])
            value_clipped = value_N[idx] + (value - value_N[idx]).clamp(-cfg.clip, cfg.clip)
            value_loss = 0.5 * torch.max((value - ret_N[idx]) ** 2, (value_clipped - ret_N[idx]) ** 2).mean()
            loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * dist.entropy().sum(-1).mean()
            optim.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
            optim.step()


def random_policy_return(seed: int, num_env_steps: int = 500_000, num_envs: int = 1024) -> float:
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


def throughput(
    seed: int = 0, num_env_steps: int = 500_000, config: PPOConfig | None = None
) -> dict[str, float]:
    """Env steps/s of the training loop and its time inside vs outside ``env.step`` (the benchmark's
    baseline numbers)."""
    result = train(seed, num_env_steps, config, report_every=num_env_steps)
    return {
        "env_steps_per_second": result.env_steps_per_second,
        "seconds_total": result.seconds_total,
        "seconds_in_env_step": result.seconds_in_env_step,
        "seconds_outside_env_step": result.seconds_outside_env_step,
    }


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
    if args.random:
        for seed in args.seeds:
            print(f"random policy, seed {seed}: mean episode return {random_policy_return(seed):.3f}")
        return
    for seed in args.seeds:
        result = train(seed, args.env_steps)
        print(f"seed {seed}:")
        for env_steps, mean_return, seconds in result.curve:
            print(f"  {env_steps:>9,} env steps  {seconds:6.1f} s  return {mean_return:7.3f}")
        reached = next((s for s, r, _ in result.curve if r >= THRESHOLD), None)
        print(
            f"  threshold {THRESHOLD} reached at {reached} env steps; "
            f"{result.env_steps_per_second:,.0f} env steps/s, "
            f"{result.seconds_in_env_step:.1f} s in env.step, {result.seconds_outside_env_step:.1f} s outside"
        )


if __name__ == "__main__":
    main()
