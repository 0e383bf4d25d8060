"""Seed batches (issue 35): the wall and CPU time of K seeds of PPO (or DQN) on CartPole trained together
(``tshtrain.seeds.SeedBatch``) against one seed's run, and (``--learning``) each seed's learning in a
batch against the same seed's run of its own.

The experiment is ``tshtrain train``'s default (PPO on CartPole-v1, 8 gymnasium envs per seed, rollouts
of 256 env steps, 20 passes of one 256-row mini-batch, linear lr and clip decay) with a fixed budget:
``--env-steps`` per seed (default 102,400: the default's 25 epochs of 4,096), no stop score, no loggers
or checkpoints, no progress bars. Contestants: ``1 run`` (seed 0, a plain trainer) and ``batch of K``
for each ``--members`` K (seeds 0..K-1 in one :class:`~tshtrain.seeds.SeedBatch`).

Every timed run is a fresh child process (``--child``): build (untimed), train (timed: wall clock and
this process's CPU time), peak resident memory (``ru_maxrss``), and per seed the best test return and the
env steps at which the test return first reached 475. The parent rotates the contestants
(A B C, B C A, ...) for ``--repeats`` repetitions and reports medians, the ratio of each batch's wall
time to the single run's (paired by repetition), the goal of the issue (10 seeds in at most 2.5x one
run's wall time) and the memory each extra seed adds. It never asserts a timing.

``--own-collection``: also times each batch with ``lockstep_collection=False`` (the seeds' collectors
step on their own instead of in lockstep with one stacked pass of the networks per vector step).

``--learning``: also runs seeds 0..K-1 (K = the largest of ``--members``) each on its own, once, and
compares each seed's steps to 475 and best return with its batched twin.

    python benchmarks/bench_seeds.py                       # K = 4, 10; 3 repetitions
    python benchmarks/bench_seeds.py --members 4 10 32 --repeats 3 --learning
    python benchmarks/bench_seeds.py --quick               # smoke run (tiny budget)
    python benchmarks/bench_seeds.py --algorithm dqn --env-steps 50000 --members 4 10   # DQN's default
                                                           # experiment (the issue's DQN budget)
    python benchmarks/bench_seeds.py --algorithm sac --env-steps 3000 --members 4 10   # SAC Pendulum
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import paired_ratio, pin_torch_threads, rotated
from report import run_header, write_json, write_report

PACKAGES = ("tshtrain", "torch", "gymnasium", "numpy")
CHILD_PREFIX = "BENCH-SEEDS-CHILD "
THRESHOLDS = {"ppo": 475.0, "dqn": 475.0, "sac": -200.0}
"""the test return whose first reach is recorded, per algorithm (CartPole; Pendulum for SAC)"""
GOALS = {"ppo": 2.5, "dqn": 2.5, "sac": 3.0}
"""issue 35: 10 seeds of PPO CartPole (100k env steps) and of DQN CartPole (50k) in at most 2.5x the
wall time of one seed's run, SAC Pendulum in at most 3x"""
GOAL_K = 10
ENVS = {"ppo": "CartPole-v1", "dqn": "CartPole-v1", "sac": "Pendulum-v1"}


def _overrides(env_steps: int, algorithm: str) -> list[str]:
    return [
        f"algorithm.name={algorithm}",
        f"env.id={ENVS[algorithm]}",
        "trainer.stop_score=null",
        "trainer.max_epochs=1000000",
        f"trainer.max_env_steps={env_steps}",
        "trainer.verbose=false",
        "trainer.show_progress=false",
        "loggers=[]",
        "checkpoint.enabled=false",
    ]


def child_main(args: argparse.Namespace) -> None:
    """Build seeds ``0..members-1`` (``members`` 0: one plain run of seed 0), train, print one JSON line."""
    pin_torch_threads()
    from tshtrain.config import build_run, load_experiment
    from tshtrain.seeds import SeedBatch
    from tshtrain.trainer import Callback

    class FirstReach(Callback):
        def __init__(self) -> None:
            self.env_step: int | None = None

        def on_test_end(self, ctx: Any, result: Any) -> None:
            if self.env_step is None and result.score >= THRESHOLDS[args.algorithm]:
                self.env_step = ctx.counters.env_step

    args.child_own_collection = args.child_members < 0
    args.child_members = abs(args.child_members)
    seeds = [args.first_seed] if args.child_members == 0 else list(range(args.child_members))
    runs, reach = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            overrides = [*_overrides(args.env_steps, args.algorithm), *args.set, f"seed={seed}"]
            experiment = load_experiment(None, overrides)
            run = build_run(experiment, Path(tmp) / f"seed-{seed}")
            probe = FirstReach()
            run.trainer.add_callback(probe)
            runs.append(run)
            reach.append(probe)
        trainers = [r.trainer for r in runs]
        wall0, cpu0 = time.perf_counter(), time.process_time()
        if args.child_members == 0:
            infos = [trainers[0].run()]
        else:
            infos = SeedBatch(trainers, lockstep_collection=not args.child_own_collection).run()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        for run in runs:
            run.close()
    payload = {
        "wall": wall,
        "cpu": cpu,
        "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seeds": seeds,
        "best": [i.best_reward for i in infos],
        "reach": [p.env_step for p in reach],
        "env_steps": [i.train_step for i in infos],
    }
    print(CHILD_PREFIX + json.dumps(payload), flush=True)


def update_times(members: list[int], repeats: int) -> list[dict[str, Any]]:
    """One PPO update (the default experiment's: 256 rows, 20 passes of one 256-row mini-batch, 64-64
    tanh actor and critic, CartPole's spaces) of K members: ``PPO.stacked_update`` against K updates one
    after another, on the same synthetic rollouts; medians over ``repeats`` rotated measurements."""
    import gymnasium as gym
    import numpy as np
    import torch

    from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams, mlp
    from tshtrain.data import RolloutBatch

    def member(seed: int) -> PPO:
        torch.manual_seed(seed)
        policy = CategoricalPolicy(mlp(4, 2, (64, 64)), gym.spaces.Discrete(2), seed=seed)
        return PPO(policy=policy, critic=mlp(4, 1, (64, 64)), params=PPOParams(max_grad_norm=0.5), seed=seed)

    def data(seed: int) -> RolloutBatch:
        rng = np.random.default_rng(seed)
        shape = (32, 8)
        boundary = rng.random(shape) < 0.05
        boundary[-1] = True
        return RolloutBatch(
            obs=rng.normal(size=(*shape, 4)).astype(np.float32),
            act=rng.integers(0, 2, shape),
            rew=np.ones(shape, np.float32),
            terminated=boundary.copy(),
            truncated=np.zeros(shape, dtype=bool),
            obs_next=rng.normal(size=(*shape, 4)).astype(np.float32),
            boundary=boundary,
            valid=np.ones(shape, dtype=bool),
        )

    pin_torch_threads()
    rows = []
    for k in members:
        solo, stacked = [member(s) for s in range(k)], [member(s) for s in range(k)]
        rollouts = [data(s) for s in range(k)]

        def one_by_one(solo: list[PPO] = solo, rollouts: list[RolloutBatch] = rollouts) -> None:
            for m, d in zip(solo, rollouts, strict=True):
                m.update(d, batch_size=256, num_repetitions=20)

        def together(stacked: list[PPO] = stacked, rollouts: list[RolloutBatch] = rollouts) -> None:
            PPO.stacked_update(stacked, rollouts, batch_size=256, num_repetitions=20)

        times: dict[str, list[float]] = {"one by one": [], "stacked": []}
        one_by_one()
        together()
        for rep in range(repeats):
            for name, fn in rotated([("one by one", one_by_one), ("stacked", together)], rep):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        loop, stack = statistics.median(times["one by one"]), statistics.median(times["stacked"])
        rows.append({"members": k, "one_by_one_ms": 1e3 * loop, "stacked_ms": 1e3 * stack})
        print(f"  update, K={k}: one by one {1e3 * loop:.1f} ms, stacked {1e3 * stack:.1f} ms", flush=True)
    return rows


def _spawn(
    members: int, env_steps: int, algorithm: str, first_seed: int = 0, extra: list[str] | None = None
) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        *[x for override in extra or [] for x in ("--set", override)],
        "--algorithm",
        algorithm,
        "--child-members",
        str(members),
        "--first-seed",
        str(first_seed),
        "--env-steps",
        str(env_steps),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith(CHILD_PREFIX)]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"child (members={members}) failed with exit {done.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1].removeprefix(CHILD_PREFIX))
    return result


def _steps(env_step: int | None) -> str:
    """Env steps to the threshold (0: the initial test step already reached it), "—" if never."""
    return "—" if env_step is None else str(env_step)


def _name(members: int) -> str:
    """Contestant ``members``: 0 one run, K a batch of K, -K a batch of K whose seeds collect on their own
    (``lockstep_collection=False``)."""
    if members == 0:
        return "1 run"
    return f"batch of {members}" if members > 0 else f"batch of {-members}, own collection"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--algorithm",
        choices=("ppo", "dqn", "sac"),
        default="ppo",
        help="the default experiment of ppo or dqn (CartPole), or of sac (Pendulum)",
    )
    parser.add_argument(
        "--members", type=int, nargs="+", default=[4, 10], help="batch sizes K (default 4 10)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions (default 3)")
    parser.add_argument("--env-steps", type=int, default=102_400, help="env steps per seed (default 102,400)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override of every run's experiment (repeatable), e.g. buffer.prefill_env_steps=500",
    )
    parser.add_argument("--tag", default="", help="appended to the result files' name (runs with --set)")
    parser.add_argument("--learning", action="store_true", help="also run seeds 0..K-1 alone, once each")
    parser.add_argument(
        "--own-collection",
        action="store_true",
        help="also time each batch with lockstep_collection=False (its seeds collect on their own)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: K = 2, 4,096 env steps, 1 repetition"
    )
    parser.add_argument(
        "--update-only", action="store_true", help="only time one update of K members (K = 1 and --members)"
    )
    parser.add_argument("--child-members", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--first-seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_members is not None:
        child_main(args)
        return
    if args.quick:
        args.members, args.repeats, args.env_steps = [2], 1, 4096
    header = run_header(PACKAGES)
    updates = (
        update_times(sorted({1, *args.members}), repeats=3 if args.quick else 7)
        if args.algorithm == "ppo"
        else []
    )
    if args.update_only:
        return
    contestants = [0, *args.members, *([-k for k in args.members] if args.own_collection else [])]
    results: dict[int, list[dict[str, Any]]] = {k: [] for k in contestants}
    names = [_name(k) for k in contestants]
    env = ENVS[args.algorithm]
    print(f"{args.algorithm.upper()} {env}, {args.env_steps:,} env steps per seed; contestants {names}")
    for rep in range(args.repeats):
        for members in rotated(contestants, rep):
            results[members].append(_spawn(members, args.env_steps, args.algorithm, extra=args.set))
        line = "  ".join(f"{_name(k)}={results[k][-1]['wall']:.1f}s" for k in contestants)
        print(f"  [rep {rep + 1}/{args.repeats}] {line}", flush=True)
    solo_walls = [r["wall"] for r in results[0]]
    solo_rss = statistics.median(r["maxrss_mib"] for r in results[0])
    rows = []
    for k in contestants:
        walls, cpus = [r["wall"] for r in results[k]], [r["cpu"] for r in results[k]]
        ratio = paired_ratio(walls, solo_walls)
        seeds = max(abs(k), 1)
        rss = statistics.median(r["maxrss_mib"] for r in results[k])
        rows.append(
            {
                "contestant": _name(k),
                "seeds": seeds,
                "wall_median": statistics.median(walls),
                "cpu_median": statistics.median(cpus),
                "wall_x_one_run": ratio,
                "per_seed_x_one_run": statistics.median(walls) / statistics.median(solo_walls) / seeds,
                "maxrss_mib": rss,
                "mib_per_extra_seed": (rss - solo_rss) / (seeds - 1) if seeds > 1 else None,
            }
        )
    learning: list[dict[str, Any]] = []
    if args.learning:
        top = max(args.members)
        batched = results[top][0]
        for seed in range(top):
            alone = _spawn(0, args.env_steps, args.algorithm, first_seed=seed, extra=args.set)
            learning.append(
                {
                    "seed": seed,
                    "alone_reach": alone["reach"][0],
                    "batched_reach": batched["reach"][seed],
                    "alone_best": alone["best"][0],
                    "batched_best": batched["best"][seed],
                }
            )
            print(f"  seed {seed}: alone {learning[-1]}", flush=True)
    _report(args, header, results=results, rows=rows, learning=learning, updates=updates)


def _report(
    args: argparse.Namespace,
    header: dict[str, Any],
    *,
    results: dict[int, list[dict[str, Any]]],
    rows: list[dict[str, Any]],
    learning: list[dict[str, Any]],
    updates: list[dict[str, Any]],
) -> None:
    update_lines = [
        "| K | K updates one by one (ms) | stacked (ms) | speed-up | stacked ÷ one seed's update |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    one = updates[0]["one_by_one_ms"] if updates else 1.0
    update_lines += [
        f"| {u['members']} | {u['one_by_one_ms']:.1f} | {u['stacked_ms']:.1f} | "
        f"{u['one_by_one_ms'] / u['stacked_ms']:.2f}x | {u['stacked_ms'] / one:.2f} |"
        for u in updates
    ]
    table = [
        "| contestant | seeds | wall s (median) | CPU s (median) | wall ÷ one run (paired median; range) "
        "| per seed ÷ one run | peak RSS MiB | MiB per extra seed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        r = row["wall_x_one_run"]
        extra = "—" if row["mib_per_extra_seed"] is None else f"{row['mib_per_extra_seed']:.1f}"
        table.append(
            f"| {row['contestant']} | {row['seeds']} | {row['wall_median']:.1f} | {row['cpu_median']:.1f} | "
            f"{r['ratio_of_medians']:.2f} ({r['paired_median']:.2f}; "
            f"{r['paired_min']:.2f}-{r['paired_max']:.2f}) | "
            f"{row['per_seed_x_one_run']:.2f} | {row['maxrss_mib']:.0f} | {extra} |"
        )
    goal = next((row for row in rows if row["seeds"] == GOAL_K and row["contestant"] != "1 run"), None)
    goal_ratio = GOALS[args.algorithm]
    verdict = f"goal (issue 35): {GOAL_K} seeds in at most {goal_ratio}x one run's wall time: " + (
        "not measured (no batch of 10)"
        if goal is None
        else f"{goal['wall_x_one_run']['ratio_of_medians']:.2f}x: "
        + ("met" if goal["wall_x_one_run"]["ratio_of_medians"] <= goal_ratio else "MISSED")
    )
    lines = [*table, "", verdict]
    if updates:
        lines += ["", "One update (PPO.stacked_update against one by one):", "", *update_lines]
    if learning:
        lines += [
            "",
            f"| seed | env steps to test return {THRESHOLDS[args.algorithm]:g}: alone | in the batch "
            "| best test return: alone "
            "| in the batch |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {x['seed']} | {_steps(x['alone_reach'])} | {_steps(x['batched_reach'])} | "
            f"{x['alone_best']:.1f} | {x['batched_best']:.1f} |"
            for x in learning
        ]
    print("\n".join(lines))
    payload = {
        "overrides": args.set,
        "env_steps_per_seed": args.env_steps,
        "repeats": args.repeats,
        **header,
        "results": {_name(k): v for k, v in results.items()},
        "rows": rows,
        "learning": learning,
        "updates": updates,
    }
    name = (
        "bench_seeds"
        + ("" if args.algorithm == "ppo" else f"_{args.algorithm}")
        + (f"_{args.tag}" if args.tag else "")
        + ("_quick" if args.quick else "")
    )
    json_path = write_json(name, payload)
    if args.quick:
        print(f"wrote {json_path}")
        return
    env = ENVS[args.algorithm]
    md = write_report(
        name,
        f"Seed batches: K seeds of {args.algorithm.upper()} {env} in one process against one seed's run",
        payload,
        [
            f"- {args.algorithm.upper()} on {env}, the default experiment of `--set "
            f"algorithm.name={args.algorithm} --set env.id={env}`, {args.env_steps:,} env steps per "
            f"seed{', with ' + ', '.join(f'`{o}`' for o in args.set) if args.set else ''}, no stop score, "
            f"no loggers or checkpoints; each timed run a fresh process; "
            f"{args.repeats} interleaved repetitions",
            "",
            *lines,
            "",
            "Written by `benchmarks/bench_seeds.py`.",
        ],
    )
    print(f"wrote {json_path} and {md}")


if __name__ == "__main__":
    main()
