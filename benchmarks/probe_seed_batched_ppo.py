"""Seed-batched PPO feasibility probe (issue 35, "many seeds at the cost of a few").

K independent PPO runs on CartPole trained side by side in one process: one ``TorchCartPole`` of
K x N envs (seed k owns the k-th block of N = 8 columns), the K actors and the K critics stacked by
``stack_mlps`` into (K, N, ...) networks, one fused Adam over the stacked parameters (element-wise, so
K independent Adams), ``clip_grad_norm_per_member_``. Compared with one run ("plain": the same loop with
unstacked ``mlp`` networks, ``nn.utils.clip_grad_norm_``, tensors with a member axis of size 1).

Run from the repository root (one torch thread)::

    python benchmarks/probe_seed_batched_ppo.py                 # plain, K = 1, 4, 10; 3 reps rotated
    python benchmarks/probe_seed_batched_ppo.py --members 1 4 10 32 --reps 3
    python benchmarks/probe_seed_batched_ppo.py --quick         # smoke run (5 rollouts)
    python benchmarks/probe_seed_batched_ppo.py --solo-seeds 10 # + plain runs of seeds 0..9 (learning)
    python benchmarks/probe_seed_batched_ppo.py --update-parts --members 1 10  # one gradient step, split
    python benchmarks/probe_seed_batched_ppo.py --fast-tanh ...  # hidden FastTanh (an opt-in lever)

Results and the judgement: ``benchmarks/results/probe_seed_batched_ppo.md``.

The PPO loop follows ``hand_loops.ppo_cartpole`` (rl-zoo's CartPole-v1 settings, ``PPOSettings``):
8 envs per seed, 32 steps per rollout, one mini-batch of 256 (the whole rollout), 20 epochs,
gamma 0.98, GAE lambda 0.8, lr 1e-3 and clip 0.2 both decayed linearly to 0, vf_coef 0.5,
max_grad_norm 0.5 (per seed), no entropy bonus, advantages standardised per seed per mini-batch,
the reward topped up with gamma x V(final obs) at a truncation. Differences from the hand loop: the
env is the torch CartPole (no numpy), the categorical is written out (``log_softmax`` + ``multinomial``
+ ``gather`` instead of ``torch.distributions.Categorical``; the same code for every contestant),
the rows of an epoch are permuted once for all members (the mini-batch is the whole rollout, so the
order changes only summation order), denormals are flushed and Adam is fused (the hand loop's
"fused" contestant).

Seeding: member k's networks are built after ``torch.manual_seed(k)`` exactly as a solo run of seed k
would; the env has one generator for all K x N envs (``TorchCartPole`` draws all initial states in one
call), so it is seeded once (seed 0) and each block's initial states are a disjoint slice of one
stream; the actions of all members are drawn by one ``multinomial`` from the global generator
(seeded once, 1000 + K). Members are therefore independent runs, but member k is not bit for bit the
solo run of seed k.

Printed: median wall / CPU seconds per contestant over the interleaved reps (order rotated), the
ratio to the plain run, per-seed env steps until the mean of the last 10 finished training
episodes first reaches 475 and the final such mean, a perf_counter breakdown (env step, policy
forward + sampling, truncation bootstrap, episode book-keeping, GAE, update), load average before
and after. It never asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from tshtrain.algorithm import FastTanh, clip_grad_norm_per_member_, mlp, stack_mlps
from tshtrain.env.torch_cartpole import TorchCartPole

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hand_loops import PPOSettings  # rl-zoo's CartPole settings

OBS_DIM, NUM_ACTIONS, HIDDEN = 4, 2, (64, 64)
ENV_STEPS_PER_SEED = 100_096  # 391 rollouts of 32 x 8
TARGET, WINDOW = 475.0, 10
SETTINGS = PPOSettings()
ACTIVATION: list[type[nn.Module]] = [nn.Tanh]
"""the hidden activation (``--fast-tanh``: tshtrain.algorithm.FastTanh, an opt-in lever, not the default)"""


@dataclass
class RunResult:
    name: str
    members: int
    wall: float
    cpu: float
    phases: dict[str, float]
    reach_475: list[int | None]
    """per seed: env steps (of that seed) when the mean of its last 10 finished episodes first reached 475"""
    final_return: list[float]
    """per seed: mean of its last 10 finished training episodes at the end"""
    episodes: list[int] = field(default_factory=list)


def build_nets(members: int, stacked: bool, first_seed: int = 0) -> tuple[nn.Module, nn.Module]:
    """Member k's actor and critic built after ``torch.manual_seed(first_seed + k)``."""
    actors, critics = [], []
    for k in range(members):
        torch.manual_seed(first_seed + k)
        actors.append(mlp(OBS_DIM, NUM_ACTIONS, HIDDEN, ACTIVATION[0]))
        critics.append(mlp(OBS_DIM, 1, HIDDEN, ACTIVATION[0]))
    if stacked:
        return stack_mlps(actors), stack_mlps(critics)
    assert members == 1
    return actors[0], critics[0]  # plain nn.Linear layers; (1, N, ...) inputs pass through unchanged


def train(  # noqa: PLR0915  (a hand loop, top to bottom on purpose)
    members: int,
    stacked: bool,
    num_rollouts: int,
    s: PPOSettings = SETTINGS,
    *,
    first_seed: int = 0,
    env_seed: int = 0,
    sample_seed: int | None = None,
) -> RunResult:
    K, N, T = members, s.num_envs, s.num_steps
    actor, critic = build_nets(K, stacked, first_seed)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=s.lr, fused=True)
    torch.manual_seed(1000 + K if sample_seed is None else sample_seed)  # actions, permutations
    env = TorchCartPole(K * N, seed=env_seed)
    obs = env.reset()[0].view(K, N, OBS_DIM)

    obs_buf = torch.zeros((T, K, N, OBS_DIM))
    act_buf = torch.zeros((T, K, N), dtype=torch.long)
    logp_buf, rew_buf, done_buf, value_buf = (torch.zeros((T, K, N)) for _ in range(4))
    ep_ret = torch.zeros((K, N))
    ended_ret_buf = torch.zeros((T, K, N))  # return of the episode that ended at (t, k, n), else 0

    recent: list[list[float]] = [[] for _ in range(K)]
    reach: list[int | None] = [None] * K
    episodes = [0] * K
    ph = dict.fromkeys(("env", "policy", "bootstrap", "bookkeeping", "gae", "update"), 0.0)
    pc = time.perf_counter
    rows = T * N
    wall0, cpu0 = pc(), time.process_time()
    for update in range(num_rollouts):
        frac = 1.0 - update / num_rollouts
        for group in optimizer.param_groups:
            group["lr"] = s.lr * frac
        clip_now = s.clip * frac
        # ------------------------------------------------------------------------ rollout
        for t in range(T):
            t0 = pc()
            with torch.no_grad():
                logp_all = actor(obs).log_softmax(-1)  # (K, N, A)
                action = torch.multinomial(logp_all.exp().view(K * N, NUM_ACTIONS), 1).view(K, N)
                logp_buf[t] = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
                value_buf[t] = critic(obs).squeeze(-1)
            obs_buf[t] = obs
            act_buf[t] = action
            t1 = pc()
            step = env.step(action.view(-1))
            t2 = pc()
            reward = step.rew.view(K, N)
            cut = step.truncated & ~step.terminated
            if cut.any():  # bootstrap through the time limit from the episode's last observation
                with torch.no_grad():
                    v_final = critic(step.final_obs.view(K, N, OBS_DIM)).squeeze(-1)
                reward = reward + s.gamma * v_final * cut.view(K, N)
            done = (step.terminated | step.truncated).view(K, N).float()
            rew_buf[t] = reward
            done_buf[t] = done
            obs = step.obs.view(K, N, OBS_DIM)
            t3 = pc()
            ep_ret += step.rew.view(K, N)
            ended_ret_buf[t] = ep_ret * done
            ep_ret *= 1.0 - done
            t4 = pc()
            ph["policy"] += t1 - t0
            ph["env"] += t2 - t1
            ph["bootstrap"] += t3 - t2
            ph["bookkeeping"] += t4 - t3
        t0 = pc()
        _record_episodes(
            ended_ret_buf=ended_ret_buf,
            done_buf=done_buf,
            update=update,
            T=T,
            N=N,
            recent=recent,
            reach=reach,
            episodes=episodes,
        )
        t1 = pc()
        # ------------------------------------------------------------------------ GAE, per seed
        with torch.no_grad():
            next_value = critic(obs).squeeze(-1)
            advantages = torch.zeros_like(rew_buf)
            last_gae = torch.zeros((K, N))
            for t in reversed(range(T)):
                not_done = 1.0 - done_buf[t]
                delta = rew_buf[t] + s.gamma * next_value * not_done - value_buf[t]
                last_gae = delta + s.gamma * s.gae_lambda * not_done * last_gae
                advantages[t] = last_gae
                next_value = value_buf[t]
            returns = advantages + value_buf
        # (T, K, N, ...) -> (K, T * N, ...): member axis first, rows of one seed together
        b_obs = obs_buf.transpose(0, 1).reshape(K, rows, OBS_DIM)
        b_act = act_buf.transpose(0, 1).reshape(K, rows)
        b_logp = logp_buf.transpose(0, 1).reshape(K, rows)
        b_adv = advantages.transpose(0, 1).reshape(K, rows)
        b_ret = returns.transpose(0, 1).reshape(K, rows)
        t2 = pc()
        # ------------------------------------------------------------------------ update
        for _ in range(s.num_epochs):
            perm = torch.randperm(rows)
            for start in range(0, rows, s.batch_size):
                idx = perm[start : start + s.batch_size]
                mb_obs = b_obs[:, idx]
                logp_all = actor(mb_obs).log_softmax(-1)
                new_logp = logp_all.gather(-1, b_act[:, idx].unsqueeze(-1)).squeeze(-1)
                ratio = (new_logp - b_logp[:, idx]).exp()
                adv = b_adv[:, idx]
                adv = (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_now, 1 + clip_now)).mean(-1)
                v_loss = (critic(mb_obs).squeeze(-1) - b_ret[:, idx]).square().mean(-1)
                loss = (pg_loss + s.vf_coef * v_loss).sum()  # (K,) per-member losses summed
                optimizer.zero_grad()
                loss.backward()
                if stacked:
                    clip_grad_norm_per_member_(params, s.max_grad_norm, K)
                else:
                    nn.utils.clip_grad_norm_(params, s.max_grad_norm)
                optimizer.step()
        t3 = pc()
        ph["bookkeeping"] += t1 - t0
        ph["gae"] += t2 - t1
        ph["update"] += t3 - t2
    wall, cpu = pc() - wall0, time.process_time() - cpu0
    final = [statistics.fmean(r[-WINDOW:]) if r else float("nan") for r in recent]
    name = f"stacked K={K}" if stacked else "plain K=1"
    return RunResult(name, K, wall, cpu, ph, reach, final, episodes)


def _record_episodes(
    *,
    ended_ret_buf: torch.Tensor,
    done_buf: torch.Tensor,
    update: int,
    T: int,
    N: int,
    recent: list[list[float]],
    reach: list[int | None],
    episodes: list[int],
) -> None:
    """Finished episodes of one rollout, in time order per seed; first time the last-10 mean >= 475."""
    ts, ks, _ = done_buf.nonzero(as_tuple=True)
    if len(ts) == 0:
        return
    rets = ended_ret_buf[done_buf.bool()].tolist()  # same (t, k, n) row-major order as nonzero
    for t, k, r in zip(ts.tolist(), ks.tolist(), rets, strict=True):
        window = recent[k]
        window.append(r)
        if len(window) > WINDOW:
            del window[0]
        episodes[k] += 1
        if reach[k] is None and len(window) == WINDOW and statistics.fmean(window) >= TARGET:
            reach[k] = (update * T + t + 1) * N


def update_parts(  # noqa: PLR0915
    members: int, steps: int, s: PPOSettings = SETTINGS
) -> dict[str, float]:
    """Milliseconds per gradient step of all ``members`` (stacked; 256 random rows per member) spent in:
    the forward of actor + critic with the PPO loss, backward, per-member clipping, the fused Adam
    step, zero_grad; and the achieved GFLOP/s of the network matmuls (forward + backward)."""
    K, rows = members, s.batch_size
    actor, critic = build_nets(K, True)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-4, fused=True)
    gen = torch.Generator().manual_seed(0)
    obs = torch.randn(K, rows, OBS_DIM, generator=gen)
    act = torch.randint(0, NUM_ACTIONS, (K, rows), generator=gen)
    old_logp = torch.full((K, rows), -0.69)
    adv_raw, ret = torch.randn(K, rows, generator=gen), torch.randn(K, rows, generator=gen)
    parts = dict.fromkeys(("forward+loss", "backward", "clip", "adam", "zero_grad"), 0.0)
    pc = time.perf_counter
    for i in range(steps + 20):  # the first 20 are a warm-up
        t0 = pc()
        logp = actor(obs).log_softmax(-1).gather(-1, act.unsqueeze(-1)).squeeze(-1)
        ratio = (logp - old_logp).exp()
        adv = (adv_raw - adv_raw.mean(-1, keepdim=True)) / (adv_raw.std(-1, keepdim=True) + 1e-8)
        pg = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean(-1)
        v = (critic(obs).squeeze(-1) - ret).square().mean(-1)
        loss = (pg + s.vf_coef * v).sum()
        t1 = pc()
        optimizer.zero_grad()
        t2 = pc()
        loss.backward()
        t3 = pc()
        clip_grad_norm_per_member_(params, s.max_grad_norm, K)
        t4 = pc()
        optimizer.step()
        t5 = pc()
        if i >= 20:
            for name, dt in zip(parts, (t1 - t0, t3 - t2, t4 - t3, t5 - t4, t2 - t1), strict=True):
                parts[name] += dt
    out = {name: 1e3 * v / steps for name, v in parts.items()}
    # the matmul floor: forward + backward of the three layers of both nets, as bare baddbmm / bmm
    sizes = [(OBS_DIM, 64), (64, 64), (64, NUM_ACTIONS), (OBS_DIM, 64), (64, 64), (64, 1)]
    ws = [torch.randn(K, i, o, generator=gen) for i, o in sizes]
    xs = [torch.randn(K, rows, i, generator=gen) for i, _ in sizes]
    gs = [torch.randn(K, rows, o, generator=gen) for _, o in sizes]
    flops = 0
    for i, o in sizes:
        flops += 2 * K * rows * i * o * (2 if i == OBS_DIM else 3)  # no input gradient for layer 1
    t0 = pc()
    for _ in range(steps):
        for (i, _o), w, x, g in zip(sizes, ws, xs, gs, strict=True):
            torch.bmm(x, w)
            torch.bmm(x.transpose(1, 2), g)  # weight gradient
            if i != OBS_DIM:
                torch.bmm(g, w.transpose(1, 2))  # input gradient
    matmul_ms = 1e3 * (pc() - t0) / steps
    out["matmuls only"] = matmul_ms
    # the hidden tanh of both nets, forward and backward, alone (4 tensors of (K, rows, 64))
    hs = [torch.randn(K, rows, 64, generator=gen) for _ in range(4)]
    gh = torch.randn(K, rows, 64, generator=gen)
    t0 = pc()
    for _ in range(steps):
        for h in hs:
            y = torch.tanh(h)
            torch.ops.aten.tanh_backward(gh, y)
    out["tanh fwd+bwd only"] = 1e3 * (pc() - t0) / steps
    out["matmul GFLOP/s"] = flops / (matmul_ms * 1e-3) / 1e9
    return out


def load() -> float:
    return os.getloadavg()[0]


def contestants(members: Sequence[int]) -> list[tuple[int, bool]]:
    return [(1, False), *((k, True) for k in members)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, nargs="+", default=[1, 4, 10])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5 rollouts, 1 rep")
    parser.add_argument("--solo-seeds", type=int, default=0, help="then plain runs of seeds 0..n-1")
    parser.add_argument("--only-solo", action="store_true", help="skip the timed contestants")
    parser.add_argument("--update-parts", action="store_true", help="only time the parts of a gradient step")
    parser.add_argument("--fast-tanh", action="store_true", help="hidden activation FastTanh (a lever)")
    args = parser.parse_args()
    if args.fast_tanh:
        ACTIVATION[0] = FastTanh
    print(f"hidden activation: {ACTIVATION[0].__name__}")
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.set_flush_denormal(True)
    s = PPOSettings()
    num_rollouts = 5 if args.quick else -(-ENV_STEPS_PER_SEED // (s.num_steps * s.num_envs))
    reps = 1 if args.quick else args.reps
    print(
        f"torch {torch.__version__}, 1 thread; {num_rollouts} rollouts = "
        f"{num_rollouts * s.num_steps * s.num_envs} env steps per seed; {reps} reps"
    )
    load_before = load()
    print(f"load average (1 min) before: {load_before:.2f}", flush=True)
    if args.update_parts:
        steps = 50 if args.quick else 1000
        for members in args.members:
            parts = update_parts(members, steps, s)
            print(
                f"K={members:<3} ms per gradient step of all members: "
                + "  ".join(f"{k} {v:.3f}" for k, v in parts.items()),
                flush=True,
            )
        print(f"load average (1 min) before / after: {load_before:.2f} / {load():.2f}")
        return
    results: dict[str, list[RunResult]] = {}
    plan = contestants(args.members) if not args.only_solo else []
    for rep in range(reps):
        order = plan[rep % len(plan) :] + plan[: rep % len(plan)] if plan else []
        for members, stacked in order:
            r = train(members, stacked, num_rollouts, s)
            results.setdefault(r.name, []).append(r)
            print(
                f"rep {rep} {r.name:<13} wall {r.wall:7.2f} s  CPU {r.cpu:7.2f} s  load {load():.2f}  "
                f"reach475 {r.reach_475}  final {[round(x) for x in r.final_return]}",
                flush=True,
            )
    if results:
        base = statistics.median(x.wall for x in results["plain K=1"])
        base_cpu = statistics.median(x.cpu for x in results["plain K=1"])
        print(
            f"\nmedians over {reps} reps (order rotated); wall / CPU seconds for "
            f"{num_rollouts * s.num_steps * s.num_envs} env steps per seed"
        )
        print(
            f"{'contestant':<14}{'wall s':>8}{'CPU s':>8}{'x plain wall':>13}{'x plain CPU':>12}"
            f"{'per seed':>10}  " + "  ".join(f"{p:>8}" for p in results["plain K=1"][0].phases)
        )
        for name, runs in results.items():
            wall = statistics.median(x.wall for x in runs)
            cpu = statistics.median(x.cpu for x in runs)
            phases = {p: statistics.median(x.phases[p] for x in runs) for p in runs[0].phases}
            print(
                f"{name:<14}{wall:>8.2f}{cpu:>8.2f}{wall / base:>13.2f}{cpu / base_cpu:>12.2f}"
                f"{wall / base / runs[0].members:>10.2f}  " + "  ".join(f"{phases[p]:>8.2f}" for p in phases)
            )
    for seed in range(args.solo_seeds):
        r = _solo(seed, num_rollouts, s)
        print(
            f"solo seed {seed}: wall {r.wall:6.2f} s reach475 {r.reach_475[0]} final {r.final_return[0]:.0f}",
            flush=True,
        )
    print(f"load average (1 min) before / after: {load_before:.2f} / {load():.2f}")


def _solo(seed: int, num_rollouts: int, s: PPOSettings) -> RunResult:
    """A plain run of seed ``seed``: networks from ``torch.manual_seed(seed)``, env seeded ``seed``,
    sampling seeded ``2000 + seed``."""
    return train(1, False, num_rollouts, s, first_seed=seed, env_seed=seed, sample_seed=2000 + seed)


if __name__ == "__main__":
    main()
