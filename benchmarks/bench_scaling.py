"""Scaling benchmark: collector throughput by number of envs, trainer overhead by number of epochs, and
import / start-up time.

Run from the repository root, in the benchmark venv::

    python benchmarks/bench_scaling.py              # full run: JSON + docs section
    python benchmarks/bench_scaling.py --quick      # smoke run, JSON only
    python benchmarks/bench_scaling.py --only envs startup overhead

Parts:

* **envs** — env steps/s of tshtrain's Collector and of a hand-written loop doing the same work (one
  batched forward of the 2x64 MLP, one vector step, one row write per field, final-observation
  fix-up), on CartPole-v1 with 1, 4, 16 and 64 envs, Gymnasium's sync and async vector envs. The
  buffer-size scaling (add and sample cost from 10k to 1M transitions) is ``bench_foundation.py``'s.
* **overhead** — the share of a CartPole on-policy run spent outside collection, update and test steps,
  as the number of epochs grows (``bench_trainer_overhead.one_run``).
* **startup** — wall time of fresh processes: ``python -c pass`` (the floor), ``import tshtrain``,
  ``import tshtrain.algorithm, tshtrain.trainer``, ``tshtrain --help`` and ``tshtrain train --help``
  (``python -m tshtrain.cli``; commands that are not there are reported as such), ``import tianshou``,
  ``import stable_baselines3``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_trainer_overhead
from bench_foundation import ArgmaxPolicy, argmax_actions, make_mlp
from harness import (
    Clock,
    Contestant,
    Goal,
    Run,
    TableResult,
    markdown_table,
    median_min_max,
    pin_torch_threads,
    print_table,
    rotated,
    run_interleaved,
)
from report import REPO_ROOT, environment_markdown, run_header, write_docs_section, write_json
from torch import nn

from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env

ENV_ID = "CartPole-v1"
PACKAGES = ("tshtrain", "torch", "numpy", "gymnasium", "tianshou", "stable_baselines3")


# ============================================================================ envs
def hand_setup(mlp: nn.Module, num_envs: int, mode: str, num_env_steps: int) -> Run:
    env = make_vector_env(ENV_ID, num_envs, mode=mode)
    first_obs, _ = env.reset(seed=0)
    steps = -(-num_env_steps // num_envs)
    obs_T = np.zeros((steps, num_envs, 4), np.float32)
    obs_next_T = np.zeros((steps, num_envs, 4), np.float32)
    act_T = np.zeros((steps, num_envs), np.int64)
    rew_T = np.zeros((steps, num_envs), np.float32)
    term_T = np.zeros((steps, num_envs), bool)
    trunc_T = np.zeros((steps, num_envs), bool)

    def run() -> None:
        obs = first_obs
        for t in range(steps):
            act = argmax_actions(mlp, obs)
            obs_next, rew, terminated, truncated, info = env.step(act)
            obs_T[t], act_T[t], rew_T[t] = obs, act, rew
            term_T[t], trunc_T[t], obs_next_T[t] = terminated, truncated, obs_next
            done = terminated | truncated
            if done.any():
                for i in np.flatnonzero(done):
                    obs_next_T[t, i] = info["final_obs"][i]
            obs = obs_next
        env.close()

    return run


def collector_setup(mlp: nn.Module, num_envs: int, mode: str, num_env_steps: int) -> Run:
    env = make_vector_env(ENV_ID, num_envs, mode=mode)
    buffer = VectorReplayBuffer(num_envs * (-(-num_env_steps // num_envs)), num_envs)
    collector = Collector(ArgmaxPolicy(mlp), env, buffer, seed=0)
    collector.reset()

    def run() -> None:
        collector.collect(n_step=num_env_steps)
        env.close()

    return run


def bench_envs(
    num_env_steps: int, reps: int, env_counts: tuple[int, ...], async_env_counts: tuple[int, ...]
) -> list[TableResult]:
    mlp = make_mlp()
    tables = []
    for mode, counts in (("sync", env_counts), ("async", async_env_counts)):
        if not counts:
            continue
        contestants = []
        for n in counts:
            steps = max(num_env_steps, 64 * n) if mode == "async" else num_env_steps
            contestants += [
                Contestant(
                    name=f"tshtrain {n} envs",
                    setup=lambda n=n, s=steps, m=mode: collector_setup(mlp, n, m, s),
                    warmup_setup=lambda n=n, m=mode: collector_setup(mlp, n, m, 8 * n),
                    work=steps,
                ),
                Contestant(
                    name=f"hand loop {n} envs",
                    setup=lambda n=n, s=steps, m=mode: hand_setup(mlp, n, m, s),
                    warmup_setup=lambda n=n, m=mode: hand_setup(mlp, n, m, 8 * n),
                    work=steps,
                ),
            ]
        rows = run_interleaved(contestants, reps=reps, unit="env steps/s", label=f"envs {mode}")
        goals = [
            Goal(numerator=f"tshtrain {n} envs", denominator=f"hand loop {n} envs", target=0.9)
            for n in counts
        ]
        tables.append(
            TableResult(
                title=f"Collector throughput by number of envs: {ENV_ID}, {mode} vector env, 2x64 MLP argmax",
                unit="env steps/s",
                rows=rows,
                goals=goals,
                notes=[
                    "Ratios are against the first row; the goal rows compare tshtrain with the hand loop at "
                    "the same number of envs. Async envs run in subprocesses, so with 2 CPUs shared with "
                    "other work they mostly measure the machine."
                ],
            )
        )
    return tables


# ============================================================================ trainer overhead
def bench_overhead(epoch_counts: tuple[int, ...], epoch_num_steps: int, reps: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for rep in range(reps):
        for epochs in rotated(epoch_counts, rep):
            overhead, total = bench_trainer_overhead.one_run(
                epochs, seed=rep, epoch_num_steps=epoch_num_steps
            )
            row = rows.setdefault(
                str(epochs), {"share_percent": [], "total_seconds": [], "overhead_seconds": []}
            )
            row["share_percent"].append(100 * overhead / total)
            row["total_seconds"].append(total)
            row["overhead_seconds"].append(overhead)
            share = row["share_percent"][-1]
            print(f"  [overhead rep {rep + 1}/{reps}] {epochs} epochs: {total:.2f} s, overhead {share:.2f} %")
    return {"epoch_num_steps": epoch_num_steps, "rows": rows}


def overhead_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"**Trainer overhead by number of epochs** (REINFORCE on CartPole-v1, 8 envs, "
        f"{result['epoch_num_steps']:,} env steps per epoch, a test step of 8 episodes per epoch; overhead = "
        "run time minus collection, update and test time)",
        "",
        "| epochs | run s (median) | overhead s (median) | overhead % (median) | min % | max % |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for epochs, row in result["rows"].items():
        share, share_min, share_max = median_min_max(row["share_percent"])
        lines.append(
            f"| {epochs} | {statistics.median(row['total_seconds']):.2f} | "
            f"{statistics.median(row['overhead_seconds']):.3f} | {share:.2f} | "
            f"{share_min:.2f} | {share_max:.2f} |"
        )
    lines += ["", "Goal (trainer issue): overhead < 3 % of the run, not growing with the number of epochs."]
    return "\n".join(lines)


# ============================================================================ start-up
STARTUP_COMMANDS: dict[str, list[str]] = {
    "python -c pass (floor)": ["-c", "pass"],
    "import tshtrain": ["-c", "import tshtrain"],
    "import tshtrain.algorithm, tshtrain.trainer": ["-c", "import tshtrain.algorithm, tshtrain.trainer"],
    "tshtrain --help": ["-m", "tshtrain.cli", "--help"],
    "tshtrain train --help": ["-m", "tshtrain.cli", "train", "--help"],
    "import torch": ["-c", "import torch"],
    "import tianshou": ["-c", "import tianshou"],
    "import stable_baselines3": ["-c", "import stable_baselines3"],
}


def bench_startup(reps: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    seconds: dict[str, list[float]] = {name: [] for name in STARTUP_COMMANDS}
    failed: dict[str, str] = {}
    for name, args in STARTUP_COMMANDS.items():  # warm the file cache and find commands that fail
        proc = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False
        )
        if proc.returncode != 0:
            failed[name] = (proc.stderr.strip().splitlines() or ["exit code " + str(proc.returncode)])[-1]
    for rep in range(reps):
        for name, args in rotated(list(STARTUP_COMMANDS.items()), rep):
            if name in failed:
                continue
            clock = Clock()
            subprocess.run([sys.executable, *args], capture_output=True, cwd=REPO_ROOT, env=env, check=True)
            seconds[name].append(clock.wall())
        print(f"  [startup rep {rep + 1}/{reps}]", flush=True)
    return {"seconds": seconds, "failed": failed}


def startup_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"**Import and start-up time** (fresh `python` processes, wall seconds, "
        f"{max(len(v) for v in result['seconds'].values())} interleaved repetitions; the file cache is warm)",
        "",
        "| command | median s | min s | max s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, secs in result["seconds"].items():
        if name in result["failed"]:
            lines.append(f"| `{name}` | not available: {result['failed'][name]} | | |")
        else:
            lines.append("| `{}` | {:.3f} | {:.3f} | {:.3f} |".format(name, *median_min_max(secs)))
    return "\n".join(lines)


# ============================================================================ main
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", choices=["envs", "overhead", "startup"])
    parser.add_argument("--env-steps", type=int, default=20_000, help="env steps per run (envs part)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions (envs part)")
    parser.add_argument(
        "--async-envs", type=int, nargs="*", default=[1, 4, 16, 64], help="env counts of the async runs"
    )
    args = parser.parse_args()
    pin_torch_threads()
    parts = args.only or ["envs", "overhead", "startup"]
    payload: dict[str, Any] = run_header(PACKAGES)
    sections: list[str] = []
    if "envs" in parts:
        tables = bench_envs(
            num_env_steps=2_000 if args.quick else args.env_steps,
            reps=1 if args.quick else args.reps,
            env_counts=(1, 4) if args.quick else (1, 4, 16, 64),
            async_env_counts=(1, 4) if args.quick else tuple(args.async_envs),
        )
        for t in tables:
            print_table(t)
        payload["envs"] = [t.to_json() for t in tables]
        sections += [markdown_table(t) for t in tables]
    if "overhead" in parts:
        result = bench_overhead(
            epoch_counts=(1, 2) if args.quick else (1, 4, 16),
            epoch_num_steps=1_024 if args.quick else 2_048,
            reps=1 if args.quick else 3,
        )
        payload["overhead"] = result
        sections.append(overhead_markdown(result))
        print(sections[-1])
    if "startup" in parts:
        result = bench_startup(reps=2 if args.quick else 5)
        payload["startup"] = result
        sections.append(startup_markdown(result))
        print(sections[-1])
    name = "scaling" + ("_quick" if args.quick else "") + ("" if args.only is None else "_" + "_".join(parts))
    print(f"results: {write_json(name, payload)}")
    if not args.quick:
        title = f"## Scaling, overhead and start-up ({', '.join(parts)})"
        header = f"{title}\n\n{environment_markdown(payload)}\n"
        write_docs_section("scaling-" + "-".join(parts), header + "\n" + "\n\n".join(sections))


if __name__ == "__main__":
    main()
