"""Every end-to-end run against its floor (issue 21): PPO, DQN and SAC in tshtrain, two kinds of hand
loop, SB3 and Tianshou, each as a ratio to the time of the env alone plus the network work alone.

Run from the repository root, in the benchmark venv (tshtrain[bench])::

    python benchmarks/bench_e2e_floor.py                                   # full: JSON, .md, docs section
    python benchmarks/bench_e2e_floor.py --quick                           # smoke run, JSON only
    python benchmarks/bench_e2e_floor.py --only dqn --seeds 3 --dqn-steps 13288
    python benchmarks/bench_e2e_floor.py --profile dqn                     # cProfile one tshtrain run

Contestants per workload (``e2e_floor.CONTESTANTS``): tshtrain; ``hand (raw envs)`` (raw ``gym.make``
envs stepped directly, reset by hand, plain Adam, denormals flushed: the reference of the goals);
``hand (vector)`` (the same loop stepping a SAME_STEP ``SyncVectorEnv``, denormals flushed); for DQN
and SAC ``hand (raw env, no FTZ)`` (``bench_e2e.py``'s "hand loop", slowed by denormal floats); SB3;
Tianshou; and the two parts of the floor, ``floor: env`` and ``floor: net`` (``e2e_floor.py``).
Every contestant builds its envs with ``bench_e2e``'s recording factory and is timed the same way
(construction excluded). For each seed all of them run back to back, who goes first rotating with
the seed; the floor of a seed is the sum of its two parts measured in that seed's round, so every
ratio has a paired range over seeds.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import pstats
import statistics
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e_floor as ef
from bench_e2e import PACKAGES, WINDOW, RecordEpisodes, Recorder, evaluate, timed_run, workloads
from harness import paired_ratio, pin_torch_threads, rotated
from report import (
    RESULTS_DIR,
    environment_markdown,
    git_revision,
    load_average,
    load_before_after,
    run_header,
    write_docs_section,
    write_json,
)

FLOOR = "floor (env + net)"
FUSED_FLOOR = "floor (env + net, fused Adam)"
PARTS = (ef.ENV_PART, ef.NET_PART, ef.FUSED_NET_PART, FLOOR, FUSED_FLOOR)
DEFAULT_SEEDS = {"ppo": 5, "dqn": 5, "sac": 3}


@dataclass(kw_only=True)
class FloorRun:
    workload: str
    contestant: str
    seed: int
    seconds: float
    cpu_seconds: float
    env_steps: int
    episodes: int
    last_train_return: float
    test_return: float
    load_1min: float


def run_one(key: str, env_id: str, name: str, seed: int, num_env_steps: int) -> FloorRun:
    recorder = Recorder(threshold=None)

    def make_env() -> gym.Env[Any, Any]:
        return RecordEpisodes(gym.make(env_id), recorder)

    run, act = ef.CONTESTANTS[key][name](make_env, seed, num_env_steps)
    seconds, cpu_seconds = timed_run(run, recorder)
    last = recorder.returns[-WINDOW:]
    return FloorRun(
        workload=key,
        contestant=name,
        seed=seed,
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        env_steps=recorder.env_steps,
        episodes=len(recorder.returns),
        last_train_return=sum(last) / len(last) if last else math.nan,
        test_return=math.nan if act is None else evaluate(env_id, act, seed=seed),
        load_1min=load_average(),
    )


# ============================================================================ tables
def _ratio(num: dict[int, float], den: dict[int, float]) -> dict[str, Any]:
    """``num / den``: the median of the per-seed (paired) ratios, their range, and the ratio of the
    medians (over the seeds both have)."""
    seeds = sorted(set(num) & set(den))
    if not seeds:
        return {"paired_median": math.nan, "paired": [], "ratio_of_medians": math.nan}
    nums, dens = [num[s] for s in seeds], [den[s] for s in seeds]
    return {**paired_ratio(nums, dens), "paired": [a / b for a, b in zip(nums, dens, strict=True)]}


def summarise(key: str, runs: list[FloorRun]) -> dict[str, Any]:
    """Per contestant: wall and CPU seconds (median, min, max), ratios to the floors and to the raw-env
    hand loop (median of the per-seed paired ratios, their range, and the ratio of medians)."""
    wall: dict[str, dict[int, float]] = {}
    cpu: dict[str, dict[int, float]] = {}
    for r in runs:
        wall.setdefault(r.contestant, {})[r.seed] = r.seconds
        cpu.setdefault(r.contestant, {})[r.seed] = r.cpu_seconds
    for times in (wall, cpu):
        env = times.get(ef.ENV_PART, {})
        for floor_name, net_name in ((FLOOR, ef.NET_PART), (FUSED_FLOOR, ef.FUSED_NET_PART)):
            net = times.get(net_name, {})
            if set(env) & set(net):
                times[floor_name] = {s: env[s] + net[s] for s in sorted(set(env) & set(net))}
    ordered = [n for n in ef.CONTESTANTS[key] if n in wall and n not in PARTS]
    rows: dict[str, Any] = {}
    for name in [*ordered, *PARTS]:
        secs, cpus = wall.get(name, {}), cpu.get(name, {})
        if not secs:
            continue
        cpu_floor = cpu.get(FLOOR, {})
        rs = [r for r in runs if r.contestant == name]
        rows[name] = {
            "seconds": secs,
            "seconds_median": statistics.median(secs.values()),
            "seconds_min": min(secs.values()),
            "seconds_max": max(secs.values()),
            "cpu_seconds": cpus,
            "cpu_seconds_median": statistics.median(cpus.values()),
            "seeds": sorted(secs),
            "vs_floor": _ratio(secs, wall.get(FLOOR, {})),
            "cpu_vs_floor": _ratio(cpus, cpu_floor),
            "vs_fused_floor": _ratio(secs, wall.get(FUSED_FLOOR, {})),
            "cpu_vs_fused_floor": _ratio(cpus, cpu.get(FUSED_FLOOR, {})),
            "vs_raw_hand": _ratio(secs, wall.get(ef.RAW_HAND, {})),
            "cpu_vs_raw_hand": _ratio(cpus, cpu.get(ef.RAW_HAND, {})),
            "cpu_over_floor_seconds": statistics.median(
                cpus[s] - cpu_floor[s] for s in cpus if s in cpu_floor
            )
            if set(cpus) & set(cpu_floor)
            else math.nan,
            "test_return_median": statistics.median(r.test_return for r in rs) if rs else math.nan,
            "last_train_return_median": statistics.median(r.last_train_return for r in rs)
            if rs
            else math.nan,
        }
    tsh = rows.get("tshtrain", {})
    goal = ef.GOALS[key]
    wall_q, cpu_q = tsh.get("vs_raw_hand", _ratio({}, {})), tsh.get("cpu_vs_raw_hand", _ratio({}, {}))
    return {
        "rows": rows,
        "goal": {
            "tshtrain_vs_raw_hand_at_most": goal,
            "wall_paired_median": wall_q["paired_median"],
            "wall_paired": wall_q["paired"],
            "cpu_paired_median": cpu_q["paired_median"],
            "cpu_paired": cpu_q["paired"],
            "met": bool(wall_q["paired"]) and wall_q["paired_median"] <= goal,
            "met_on_cpu_time": bool(cpu_q["paired"]) and cpu_q["paired_median"] <= goal,
        },
    }


def _cell(q: dict[str, Any], bold: bool = True) -> str:
    if not q["paired"]:
        return "–"
    value = f"{q['paired_median']:.2f}x"
    return f"{f'**{value}**' if bold else value} ({min(q['paired']):.2f}–{max(q['paired']):.2f})"


def markdown(key: str, title: str, settings: str, runs: list[FloorRun], summary: dict[str, Any]) -> str:
    """The workload's table (ratios: median of the per-seed paired ratios, with their range) and the
    wall and CPU seconds per seed."""
    rows, goal = summary["rows"], summary["goal"]
    seeds = sorted({r.seed for r in runs})
    loads = [r.load_1min for r in runs]
    lines = [
        f"**{title}** ({len(seeds)} seeds: {', '.join(map(str, seeds))}; seconds of training, imports and "
        "construction excluded; a ratio is the median over seeds of the per-seed (paired) ratio, with "
        f"their range; load average (1 min) {min(loads):.1f}–{max(loads):.1f} during the runs, on 2 CPUs)",
        "",
        f"| contestant | wall s median (min–max) | CPU s median | CPU s over the floor | wall / floor "
        f"| CPU / floor | wall / {ef.RAW_HAND} | CPU / {ef.RAW_HAND} | goal "
        "| CPU / floor with fused Adam | final training return | test return (10 ep.) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, row in rows.items():
        goal_cell = ""
        if name == "tshtrain":
            mark = "met" if goal["met"] else "**not met**"
            cpu_mark = "met" if goal["met_on_cpu_time"] else "not met"
            goal_cell = f"<= {goal['tshtrain_vs_raw_hand_at_most']:.2f}x: {mark} (CPU: {cpu_mark})"
        part = name in PARTS
        train, test = row["last_train_return_median"], row["test_return_median"]
        cells = [
            f"*{name}*" if part else name,
            f"{row['seconds_median']:.1f} ({row['seconds_min']:.1f}–{row['seconds_max']:.1f})",
            f"{row['cpu_seconds_median']:.1f}",
            "" if part else f"{row['cpu_over_floor_seconds']:.1f}",
            _cell(row["vs_floor"]),
            _cell(row["cpu_vs_floor"]),
            _cell(row["vs_raw_hand"]),
            _cell(row["cpu_vs_raw_hand"]),
            goal_cell,
            _cell(row["cpu_vs_fused_floor"], bold=False),
            "" if part or math.isnan(train) else f"{train:.1f}",
            "" if part or math.isnan(test) else f"{test:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Wall seconds (CPU seconds) per seed:",
        "",
        "| contestant | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "| --- | " + " | ".join("---:" for _ in seeds) + " |",
    ]
    for name, row in rows.items():
        cells = [
            f"{row['seconds'][s]:.1f} ({row['cpu_seconds'][s]:.1f})" if s in row["seconds"] else ""
            for s in seeds
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", settings]
    return "\n".join(lines)


# ============================================================================ main
def profile_tshtrain(key: str, env_id: str, num_env_steps: int, seed: int = 0, top: int = 25) -> Path:
    """cProfile one tshtrain run (cumulative, top ``top``; then by own time; then tshtrain's own functions
    and the one-env collection loop's callees) into ``results/e2e_floor_profile_<key>.txt``."""
    recorder = Recorder(threshold=None)

    def make_env() -> gym.Env[Any, Any]:
        return RecordEpisodes(gym.make(env_id), recorder)

    run, _ = ef.CONTESTANTS[key]["tshtrain"](make_env, seed, num_env_steps)
    gc.collect()
    prof = cProfile.Profile()
    recorder.begin()
    prof.enable()
    run()
    prof.disable()
    seconds = recorder.clock.wall()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    buf.write("\n\ntshtrain's own functions (and the collector's callees) by cumulative time:\n")
    stats.sort_stats("cumulative").print_stats(r"tshtrain/", top)
    stats.print_callees(r"collector.py:\d+\(_collect_single\)")
    out = RESULTS_DIR / f"e2e_floor_profile_{key}.txt"
    header = (
        f"cProfile of one tshtrain {key} run ({num_env_steps:,} env steps, seed {seed}, env {env_id}), "
        f"{seconds:.2f} s under the profiler; revision {git_revision()}; load average (1 min) "
        f"{load_average():.2f}\n\n"
    )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out.write_text(header + buf.getvalue())
    print(f"tshtrain {key}: {seconds:.2f} s under cProfile; written to {out}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny budgets, 1 seed, JSON only")
    parser.add_argument("--only", nargs="*", choices=["ppo", "dqn", "sac"], help="workloads to run")
    parser.add_argument("--seeds", type=int, help="seeds per workload (default 5 PPO, 5 DQN, 3 SAC)")
    parser.add_argument("--contestants", nargs="*", help="subset of contestants (names as printed)")
    parser.add_argument("--ppo-steps", type=int, help="PPO budget (default 100,096)")
    parser.add_argument("--dqn-steps", type=int, help="DQN budget (default 50,152)")
    parser.add_argument("--sac-steps", type=int, help="SAC budget (default 20,000)")
    parser.add_argument("--profile", choices=["ppo", "dqn", "sac"], help="cProfile one tshtrain run")
    parser.add_argument("--render", type=Path, help="rebuild the tables and docs from a results JSON")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument(
        "--tag", help="write results/e2e_floor_<tag>.json / .md instead (a side run: docs untouched)"
    )
    args = parser.parse_args()
    pin_torch_threads()
    warnings.filterwarnings("ignore")
    budgets = {"ppo": args.ppo_steps, "dqn": args.dqn_steps, "sac": args.sac_steps}
    all_w = {k: workloads(args.quick, budgets[k])[k] for k in ("ppo", "dqn", "sac")}
    if args.profile:
        w = all_w[args.profile]
        profile_tshtrain(args.profile, w.env_id, w.num_env_steps)
        return
    if args.render:
        data = json.loads(args.render.read_text())
        report(data, docs=not args.no_docs and not args.tag, name=args.render.stem)
        return
    name = "e2e_floor_quick" if args.quick else "e2e_floor"
    if args.tag:
        name, args.no_docs = f"{name}_{args.tag}", True
    data: dict[str, Any] = {**run_header(PACKAGES), "workloads": {}}
    for key in args.only or ["ppo", "dqn", "sac"]:
        w = all_w[key]
        num_seeds = 1 if args.quick else (args.seeds or DEFAULT_SEEDS[key])
        names = args.contestants or list(ef.CONTESTANTS[key])
        names = [n for n in names if n in ef.CONTESTANTS[key]]
        print(f"== {w.title}: {num_seeds} seeds, {len(names)} contestants ==", flush=True)
        runs: list[FloorRun] = []
        entry: dict[str, Any] = {"title": w.title, "env_id": w.env_id, "num_env_steps": w.num_env_steps}
        data["workloads"][key] = entry
        for seed in range(num_seeds):
            for contestant in rotated(names, seed):
                r = run_one(key, w.env_id, contestant, seed, w.num_env_steps)
                runs.append(r)
                print(
                    f"  [{key} seed {seed}] {contestant:<24} {r.seconds:7.2f} s (cpu {r.cpu_seconds:6.2f}) "
                    f"env steps {r.env_steps:6d}  train {r.last_train_return:7.1f}  "
                    f"test {r.test_return:7.1f}  load {r.load_1min:.2f}",
                    flush=True,
                )
                entry.update(
                    settings=w.settings, runs=[asdict(x) for x in runs], summary=summarise(key, runs)
                )
                write_json(name, data)
        print(markdown(key, w.title, w.settings, runs, entry["summary"]), flush=True)
    if not args.quick:
        report(data, docs=not args.no_docs, name=name)


def report(data: dict[str, Any], *, docs: bool, name: str = "e2e_floor") -> None:
    """Write ``results/<name>.md`` and (``docs``) the section of docs/benchmarks.md from ``data``."""
    parts = []
    for key, entry in data["workloads"].items():
        runs = [FloorRun(**r) for r in entry["runs"]]
        summary = summarise(key, runs)
        parts.append(
            f"### {entry['title']}\n\n" + markdown(key, entry["title"], entry["settings"], runs, summary)
        )
    quiet = (load_before_after(data)[0] or 0.0) <= 1.5
    body = (
        f"{environment_markdown(data)} "
        f"({'quiet: the load is the run itself' if quiet else 'shared with other jobs'})"
        "\n\n" + "\n\n".join(parts)
    )
    if data.get("note"):
        body = f"{data['note']}\n\n{body}"
    md_path = RESULTS_DIR / f"{name}.md"
    md_path.write_text(f"# End to end against the floor\n\n{body}\n")
    print(f"written {md_path}")
    if docs:
        write_docs_section("e2e-floor", f"## End to end against the floor (issue 21)\n\n{body}")


if __name__ == "__main__":
    main()
