"""Seed batching probe (issue 35): the cost of one PPO-style gradient step for K independent members,
as K separate networks in a Python loop against one stacked network (``stack_mlps``).

Run from the repository root::

    python benchmarks/bench_seed_stack.py            # K = 1, 4, 10, 32; writes results/seed_stack.json
    python benchmarks/bench_seed_stack.py --quick    # smoke run (results/seed_stack_quick.json)
    python benchmarks/bench_seed_stack.py --fast-tanh  # hidden FastTanh (results/seed_stack_fast_tanh.json)

One gradient step of one member: an actor 4-64-64-2 (tanh, categorical logits) and a critic 4-64-64-1
on a mini-batch of 256 rows, PPO's clipped surrogate + 0.5 x value loss - 0.01 x entropy with
advantages normalised per member, backward, the gradient norm of actor and critic together clipped
to 0.5 per member, a fused Adam step. The two contestants at each K:

* ``separate``: K actor / critic pairs, each with its own Adam; ``torch.nn.utils.clip_grad_norm_`` per
  pair; the K steps one after the other (what K runs in one process cost);
* ``stacked``: the K pairs stacked by ``stack_mlps`` (weights with a leading member axis, one
  ``baddbmm`` per layer), the members' losses summed, ``clip_grad_norm_per_member_``, one Adam.

Both get the same optimizer and one torch thread; all eight contestants (two kinds x four K) run
interleaved and rotated, after an untimed warm-up. Printed: the median wall and CPU milliseconds per
gradient step (of all K members), the ratio to the same contestant at K = 1 (K for perfect linear
scaling), the ratio separate / stacked at each K, and the load average before and after.

This is a script: it prints and records numbers, it never asserts a timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Contestant, RowResult, pin_torch_threads, run_interleaved
from report import load_average, run_header, write_json

from tshtrain.algorithm import FastTanh, clip_grad_norm_per_member_, mlp, stack_mlps

PACKAGES = ("tshtrain", "torch")
MEMBERS = (1, 4, 10, 32)
OBS_DIM, NUM_ACTIONS, HIDDEN, ROWS = 4, 2, (64, 64), 256
MAX_GRAD_NORM, LR = 0.5, 3e-4
ACTIVATION: list[type[nn.Module]] = [nn.Tanh]
"""the hidden activation (``--fast-tanh``: tshtrain.algorithm.FastTanh)"""


class Batch(NamedTuple):
    """A mini-batch of every member, (K, N, ...) tensors, or of one member, (N, ...)."""

    obs: torch.Tensor
    act: torch.Tensor
    old_log_prob: torch.Tensor
    adv: torch.Tensor
    ret: torch.Tensor

    def member(self, k: int) -> Batch:
        return Batch(*(t[k] for t in self))


def ppo_loss(logits: torch.Tensor, value: torch.Tensor, b: Batch) -> torch.Tensor:
    """The loss of each member, a mean over the last (row) axis: a scalar for one member's (N, ...)
    tensors, (K,) for stacked (K, N, ...) ones."""
    adv = (b.adv - b.adv.mean(dim=-1, keepdim=True)) / (b.adv.std(dim=-1, keepdim=True) + 1e-8)
    dist = torch.distributions.Categorical(logits=logits)
    ratio = (dist.log_prob(b.act) - b.old_log_prob).exp()
    surrogate = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean(dim=-1)
    value_loss = (value.squeeze(-1) - b.ret).pow(2).mean(dim=-1)
    return -surrogate + 0.5 * value_loss - 0.01 * dist.entropy().mean(dim=-1)


def member_data(num: int) -> Batch:
    gen = torch.Generator().manual_seed(0)
    return Batch(
        obs=torch.randn(num, ROWS, OBS_DIM, generator=gen),
        act=torch.randint(0, NUM_ACTIONS, (num, ROWS), generator=gen),
        old_log_prob=torch.full((num, ROWS), -0.69) + 0.1 * torch.randn(num, ROWS, generator=gen),
        adv=torch.randn(num, ROWS, generator=gen),
        ret=torch.randn(num, ROWS, generator=gen),
    )


def member_nets(num: int) -> tuple[list[nn.Sequential], list[nn.Sequential]]:
    """``num`` actors and critics, member k built after ``torch.manual_seed(k)`` (as K runs would)."""
    actors, critics = [], []
    for k in range(num):
        torch.manual_seed(k)
        actors.append(mlp(OBS_DIM, NUM_ACTIONS, HIDDEN, ACTIVATION[0]))
        critics.append(mlp(OBS_DIM, 1, HIDDEN, ACTIVATION[0]))
    return actors, critics


def separate_setup(num: int, steps: int) -> Callable[[], Callable[[], None]]:
    def setup() -> Callable[[], None]:
        actors, critics = member_nets(num)
        batches = [member_data(num).member(k) for k in range(num)]
        params = [[*a.parameters(), *c.parameters()] for a, c in zip(actors, critics, strict=True)]
        optimizers = [torch.optim.Adam(p, lr=LR, fused=True) for p in params]

        def run() -> None:
            for _ in range(steps):
                for k in range(num):
                    optimizers[k].zero_grad()
                    b = batches[k]
                    ppo_loss(actors[k](b.obs), critics[k](b.obs), b).backward()
                    torch.nn.utils.clip_grad_norm_(params[k], MAX_GRAD_NORM)
                    optimizers[k].step()

        return run

    return setup


def stacked_setup(num: int, steps: int) -> Callable[[], Callable[[], None]]:
    def setup() -> Callable[[], None]:
        actors, critics = member_nets(num)
        actor, critic = stack_mlps(actors), stack_mlps(critics)
        b = member_data(num)
        params = [*actor.parameters(), *critic.parameters()]
        optimizer = torch.optim.Adam(params, lr=LR, fused=True)

        def run() -> None:
            for _ in range(steps):
                optimizer.zero_grad()
                ppo_loss(actor(b.obs), critic(b.obs), b).sum().backward()
                clip_grad_norm_per_member_(params, MAX_GRAD_NORM, num)
                optimizer.step()

        return run

    return setup


def summary(results: list[RowResult], steps: int) -> list[dict[str, Any]]:
    """One row per contestant: ms per gradient step (wall, CPU) and the ratios to K = 1."""
    ms = {r.name: (statistics.median(r.seconds), statistics.median(r.cpu_seconds)) for r in results}
    rows = []
    for kind in ("separate", "stacked"):
        base_wall, base_cpu = ms[f"{kind} K=1"]
        for num in MEMBERS:
            wall, cpu = ms[f"{kind} K={num}"]
            sep_wall, sep_cpu = ms[f"separate K={num}"]
            rows.append(
                {
                    "contestant": kind,
                    "members": num,
                    "ms_per_step_wall": wall / steps * 1e3,
                    "ms_per_step_cpu": cpu / steps * 1e3,
                    "x_k1_wall": wall / base_wall,
                    "x_k1_cpu": cpu / base_cpu,
                    "separate_over_this_wall": sep_wall / wall,
                    "separate_over_this_cpu": sep_cpu / cpu,
                }
            )
    return rows


def print_rows(rows: list[dict[str, Any]], reps: int, load: tuple[float, float]) -> None:
    print(f"\nmedians over {reps} interleaved reps; one gradient step of all K members; torch on 1 thread")
    print(
        f"{'contestant':<9} {'K':>3}  {'ms wall':>8} {'ms CPU':>8}  {'x K=1 wall':>10} {'x K=1 CPU':>9}  "
        f"{'separate/this wall':>18} {'CPU':>5}"
    )
    for r in rows:
        print(
            f"{r['contestant']:<9} {r['members']:>3}  {r['ms_per_step_wall']:>8.3f} "
            f"{r['ms_per_step_cpu']:>8.3f}  "
            f"{r['x_k1_wall']:>10.2f} {r['x_k1_cpu']:>9.2f}  {r['separate_over_this_wall']:>18.2f} "
            f"{r['separate_over_this_cpu']:>5.2f}"
        )
    print(f"load average (1 min) before / after: {load[0]:.2f} / {load[1]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 steps per run, 2 repetitions")
    parser.add_argument(
        "--fast-tanh", action="store_true", help="hidden activation FastTanh (writes seed_stack_fast_tanh)"
    )
    args = parser.parse_args()
    if args.fast_tanh:
        ACTIVATION[0] = FastTanh
    pin_torch_threads()
    header = run_header(PACKAGES)
    steps, reps = (2, 2) if args.quick else (20, 9)
    contestants = [
        Contestant(name=f"{kind} K={num}", setup=make(num, steps), work=steps * num)
        for num in MEMBERS
        for kind, make in (("separate", separate_setup), ("stacked", stacked_setup))
    ]
    results = run_interleaved(contestants, reps=reps, unit="member gradient steps/s", label="seed stack")
    rows = summary(results, steps)
    print_rows(rows, reps, (header["load_before"], load_average()))
    path = write_json(
        "seed_stack" + ("_fast_tanh" if args.fast_tanh else "") + ("_quick" if args.quick else ""),
        {
            **header,
            "activation": ACTIVATION[0].__name__,
            "steps_per_run": steps,
            "reps": reps,
            "rows": rows,
            "runs": [r.summary() for r in results],
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
