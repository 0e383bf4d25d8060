"""End-to-end training benchmark: PPO, DQN and SAC in tshtrain vs a hand-written loop vs Tianshou 2.0.1
vs Stable-Baselines3, with identical hyperparameters.

Run from the repository root, in the benchmark venv (tshtrain[bench])::

    python benchmarks/bench_e2e.py                     # full run: all workloads, JSON + docs section
    python benchmarks/bench_e2e.py --only ppo --seeds 5
    python benchmarks/bench_e2e.py --quick             # smoke run: tiny budgets, JSON only
    python benchmarks/bench_e2e.py --profile ppo       # cProfile one tshtrain PPO run

Workloads (see ``docs/benchmarks.md`` for the settings in full):

3. PPO on CartPole-v1, rl-zoo's settings, 100,096 env steps (391 rollouts of 8 x 32).
4. DQN on CartPole-v1, rl-zoo's settings, 50,000 env steps (1,000 of them random, before learning).
5. SAC on Pendulum-v1, 20,000 env steps (1,000 of them random, before learning).

How it measures:

* Every contestant builds its envs from the same factory, which wraps each env in
  :class:`RecordEpisodes`. The wrapper counts env steps and records each finished training episode's
  return and the time it ended, so "env steps and wall time until the training return first reaches
  the threshold" are measured the same way for every library, from inside the env.
  Training return = the mean return of the last 10 finished training episodes.
* A run's wall time covers everything from the call that starts training to its return, random
  warm-up steps included; imports and object construction (networks, envs, buffers) are excluded
  (import / start-up times are measured separately, in fresh processes, by ``bench_scaling.py``).
  No test steps run during training; after it, each trained policy is evaluated untimed on 10 episodes
  with deterministic actions (the *test return* column).
* For each seed the contestants run back to back (A B C D, then the next seed), torch on one thread.
* Two references for the ratios: ``hand loop`` (plain ``torch.optim.Adam``) and ``hand, fused`` (the
  same loop with fused Adam and flushed denormals, what tshtrain uses): tshtrain / hand-fused is the
  cost of the library alone. Each ratio is given of the medians and per seed (paired range).
  For the issue-36 comparison: ``--contestants tshtrain "hand loop" "hand, fused"``.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import pstats
import re
import statistics
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e_contestants as ec
from harness import Clock, Run, pin_torch_threads, rotated
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

PACKAGES = ("tshtrain", "torch", "numpy", "gymnasium", "tianshou", "stable_baselines3")
WINDOW = 10
"""training return = mean return of the last WINDOW finished training episodes"""
DQN_THRESHOLD = 195.0
"""DQN's bar: the training return of rl-zoo's settings (epsilon 0.04 to the end) rarely averages 475
over 10 episodes within 50k env steps (the run of 2026-11-22 used 475: no contestant reached it);
195 is CartPole's classic "solved" return"""


# ============================================================================ measuring inside the env
@dataclass
class Recorder:
    """Counts env steps and records finished episodes for one training run."""

    threshold: float | None
    env_steps: int = 0
    clock: Clock = field(default_factory=Clock)
    returns: list[float] = field(default_factory=list)
    episode_ends: list[tuple[int, float]] = field(default_factory=list)
    """(env steps, seconds since begin) at the end of each episode, so that any other threshold can be
    evaluated afterwards from the JSON"""
    cross_env_steps: int | None = None
    cross_seconds: float | None = None

    def begin(self) -> None:
        """Call at the start of the timed run: counts and the clock start from here."""
        self.env_steps, self.returns, self.episode_ends = 0, [], []
        self.cross_env_steps = self.cross_seconds = None
        self.clock = Clock()

    def episode_end(self, ret: float) -> None:
        self.returns.append(ret)
        self.episode_ends.append((self.env_steps, round(self.clock.wall(), 4)))
        if self.threshold is None or self.cross_env_steps is not None or len(self.returns) < WINDOW:
            return
        if sum(self.returns[-WINDOW:]) / WINDOW >= self.threshold:
            self.cross_env_steps = self.env_steps
            self.cross_seconds = self.clock.wall()


class RecordEpisodes(gym.Wrapper[Any, Any, Any, Any]):
    """Reports every env step and finished episode of one env to a :class:`Recorder`."""

    def __init__(self, env: gym.Env[Any, Any], recorder: Recorder):
        super().__init__(env)
        self.recorder = recorder
        self.episode_return = 0.0

    def reset(self, **kwargs: Any) -> Any:
        self.episode_return = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.recorder.env_steps += 1
        self.episode_return += float(reward)
        if terminated or truncated:
            self.recorder.episode_end(self.episode_return)
            self.episode_return = 0.0
        return obs, reward, terminated, truncated, info


def evaluate(env_id: str, act: ec.ActFn, *, seed: int, num_episodes: int = 10) -> float:
    """Mean return of ``num_episodes`` episodes with deterministic actions (one env at a time)."""
    env = gym.make(env_id)
    total = 0.0
    for episode in range(num_episodes):
        obs, _ = env.reset(seed=10_000 + 100 * seed + episode)
        done = False
        while not done:
            action = act(np.asarray(obs, dtype=np.float32)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
    env.close()
    return total / num_episodes


# ============================================================================ workloads
@dataclass(frozen=True, kw_only=True)
class Workload:
    key: str
    title: str
    env_id: str
    num_env_steps: int
    threshold: float | None
    contestants: dict[str, ec.Builder]
    settings: str


def workloads(quick: bool, env_steps: int | None = None) -> dict[str, Workload]:
    """The three workloads; ``env_steps`` replaces every budget (for runs on a machine too busy for
    the full ones; the docs then say so)."""
    ppo_steps = env_steps or (2 * 256 if quick else ec.PPO_ENV_STEPS)
    dqn_steps = env_steps or (2_000 if quick else ec.DQN_ENV_STEPS)
    sac_steps = env_steps or (1_300 if quick else ec.SAC_ENV_STEPS)
    return {
        "ppo": Workload(
            key="ppo",
            title=f"PPO, CartPole-v1, {ppo_steps:,} env steps",
            env_id="CartPole-v1",
            num_env_steps=ppo_steps,
            threshold=475.0,
            contestants=ec.PPO_CONTESTANTS,
            settings=ec.PPO_SETTINGS,
        ),
        "dqn": Workload(
            key="dqn",
            title=f"DQN, CartPole-v1, {dqn_steps:,} env steps",
            env_id="CartPole-v1",
            num_env_steps=dqn_steps,
            threshold=DQN_THRESHOLD,
            contestants=ec.DQN_CONTESTANTS,
            settings=ec.DQN_SETTINGS,
        ),
        "sac": Workload(
            key="sac",
            title=f"SAC, Pendulum-v1, {sac_steps:,} env steps",
            env_id="Pendulum-v1",
            num_env_steps=sac_steps,
            threshold=None,
            contestants=ec.SAC_CONTESTANTS,
            settings=ec.SAC_SETTINGS,
        ),
    }


@dataclass(kw_only=True)
class RunResult:
    contestant: str
    seed: int
    seconds: float
    cpu_seconds: float
    env_steps: int
    episodes: int
    cross_env_steps: int | None
    cross_seconds: float | None
    last_train_return: float
    test_return: float
    episode_returns: list[float] = field(default_factory=list)
    episode_ends: list[tuple[int, float]] = field(default_factory=list)


def timed_run(run: Run, recorder: Recorder) -> tuple[float, float]:
    """(wall, CPU) seconds of one training run; the recorder's counts and clock start with it."""
    gc.collect()
    recorder.begin()
    run()
    return recorder.clock.wall(), recorder.clock.cpu()


def run_one(w: Workload, name: str, seed: int) -> RunResult:
    recorder = Recorder(threshold=w.threshold)

    def make_env() -> gym.Env[Any, Any]:
        return RecordEpisodes(gym.make(w.env_id), recorder)

    run, act = w.contestants[name](make_env, seed, w.num_env_steps)
    seconds, cpu_seconds = timed_run(run, recorder)
    last = recorder.returns[-WINDOW:]
    return RunResult(
        contestant=name,
        seed=seed,
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        env_steps=recorder.env_steps,
        episodes=len(recorder.returns),
        cross_env_steps=recorder.cross_env_steps,
        cross_seconds=recorder.cross_seconds,
        episode_returns=recorder.returns,
        episode_ends=recorder.episode_ends,
        last_train_return=sum(last) / max(len(last), 1),
        test_return=evaluate(w.env_id, act, seed=seed),
    )


def run_workload(
    w: Workload, seeds: list[int], names: list[str] | None, on_run: Callable[[list[RunResult]], None]
) -> list[RunResult]:
    """Seeds one after the other; for each, every contestant (who goes first rotates with the seed).
    ``on_run`` gets the results so far after every run (to save partial results)."""
    names = names or list(w.contestants)
    results: list[RunResult] = []
    for i, seed in enumerate(seeds):
        for name in rotated(names, i):
            r = run_one(w, name, seed)
            results.append(r)
            on_run(results)
            cross = "-" if r.cross_env_steps is None else f"{r.cross_env_steps} steps/{r.cross_seconds:.1f}s"
            print(
                f"  [{w.key} seed {seed}] {name:<13} {r.seconds:7.2f} s (cpu {r.cpu_seconds:6.2f}) "
                f"env steps {r.env_steps}  to {w.threshold}: {cross}  train {r.last_train_return:7.1f}  "
                f"test {r.test_return:7.1f}",
                flush=True,
            )
    return results


# ============================================================================ tables
def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarise(w: Workload, results: list[RunResult]) -> dict[str, Any]:
    names = list(dict.fromkeys(r.contestant for r in results))
    rows: dict[str, Any] = {}
    for name in names:
        rs = [r for r in results if r.contestant == name]
        secs = [r.seconds for r in rs]
        crossed = [r for r in rs if r.cross_env_steps is not None]
        rows[name] = {
            "seconds_median": _med(secs),
            "seconds_min": min(secs),
            "seconds_max": max(secs),
            "cpu_seconds_median": _med([r.cpu_seconds for r in rs]),
            "runs": len(rs),
            "reached": len(crossed),
            "cross_env_steps_median": _med([float(r.cross_env_steps or 0) for r in crossed]),
            "cross_seconds_median": _med([float(r.cross_seconds or 0) for r in crossed]),
            "test_return_median": _med([r.test_return for r in rs]),
            "last_train_return_median": _med([r.last_train_return for r in rs]),
        }
    ref = ec.HAND if ec.HAND in rows else names[0]
    fused = ec.HAND_FUSED if ec.HAND_FUSED in rows and ref != ec.HAND_FUSED else None
    for name in names:
        _add_ratios(rows[name], results, name, ref, "hand")
        if fused is not None:
            _add_ratios(rows[name], results, name, fused, "fused")
    return {
        "title": w.title,
        "settings": w.settings,
        "rows": rows,
        "reference": ref,
        "fused_reference": fused,
    }


def _add_ratios(row: dict[str, Any], results: list[RunResult], name: str, ref: str, key: str) -> None:
    """``time_vs_<key>`` / ``cpu_vs_<key>``: ratios of medians to contestant ``ref``; ``paired_*``: the
    ratios of the runs of one seed."""
    mine = [r for r in results if r.contestant == name]
    theirs = {r.seed: r for r in results if r.contestant == ref}
    median = {
        k: _med([getattr(r, k) for r in mine]) / _med([getattr(r, k) for r in theirs.values()])
        for k in ("seconds", "cpu_seconds")
    }
    row[f"time_vs_{key}"], row[f"cpu_vs_{key}"] = median["seconds"], median["cpu_seconds"]
    row[f"paired_time_vs_{key}"] = [a.seconds / theirs[a.seed].seconds for a in mine if a.seed in theirs]
    row[f"paired_cpu_vs_{key}"] = [
        a.cpu_seconds / theirs[a.seed].cpu_seconds for a in mine if a.seed in theirs
    ]


def markdown(w: Workload, results: list[RunResult], summary: dict[str, Any]) -> str:
    rows, ref, fused = summary["rows"], summary["reference"], summary.get("fused_reference")
    seeds = sorted({r.seed for r in results})
    thr = w.threshold
    lines = [
        f"**{w.title}** ({len(seeds)} seeds: {', '.join(map(str, seeds))}; wall seconds of training, "
        f"imports and construction excluded)",
        "",
        f"| contestant | wall s median | min | max | CPU s median | wall / {ref} (paired range) "
        f"| CPU / {ref} (paired range) "
        + (f"| wall / {fused} (paired range) | CPU / {fused} (paired range) " if fused else "")
        + (f"| reached {thr:g} | env steps to {thr:g} (median) | s to {thr:g} (median) " if thr else "")
        + "| final training return | test return (10 ep.) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: "
        + ("| ---: | ---: " if fused else "")
        + ("| ---: | ---: | ---: " if thr else "")
        + "| ---: | ---: |",
    ]
    for name, row in rows.items():
        cells = [
            name,
            f"{row['seconds_median']:.1f}",
            f"{row['seconds_min']:.1f}",
            f"{row['seconds_max']:.1f}",
            f"{row['cpu_seconds_median']:.1f}",
            *_ratio_cells(row, "hand"),
            *(_ratio_cells(row, "fused") if fused else []),
        ]
        if thr:
            cells += [
                f"{row['reached']}/{row['runs']}",
                f"{row['cross_env_steps_median']:,.0f}" if row["reached"] else "–",
                f"{row['cross_seconds_median']:.1f}" if row["reached"] else "–",
            ]
        cells += [f"{row['last_train_return_median']:.1f}", f"{row['test_return_median']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if thr:
        lines += [
            "",
            f"Env steps (and seconds) until the training return first reached {thr:g}, per seed "
            "(– : not reached within the budget):",
            "",
            "| contestant | " + " | ".join(f"seed {s}" for s in seeds) + " |",
            "| --- | " + " | ".join("---:" for _ in seeds) + " |",
        ]
        for name in rows:
            cells = []
            for s in seeds:
                r = next((r for r in results if r.contestant == name and r.seed == s), None)
                if r is None:
                    cells.append("")
                elif r.cross_env_steps is None:
                    cells.append("–")
                else:
                    cells.append(f"{r.cross_env_steps:,} ({r.cross_seconds:.1f} s)")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", w.settings]
    return "\n".join(lines)


def _ratio_cells(row: dict[str, Any], key: str) -> list[str]:
    """The wall and CPU ratio cells of ``row`` against the reference ``key`` of :func:`_add_ratios`."""
    cells = []
    for kind in ("time", "cpu"):
        paired = row.get(f"paired_{kind}_vs_{key}", [])
        ratio = row.get(f"{kind}_vs_{key}")
        cells.append(f"**{ratio:.2f}x** ({min(paired):.2f}–{max(paired):.2f})" if paired else "–")
    return cells


# ============================================================================ main
def profile_tshtrain(w: Workload, seed: int) -> None:
    recorder = Recorder(threshold=w.threshold)

    def make_env() -> gym.Env[Any, Any]:
        return RecordEpisodes(gym.make(w.env_id), recorder)

    run, _ = w.contestants["tshtrain"](make_env, seed, w.num_env_steps)
    prof = cProfile.Profile()
    recorder.begin()
    prof.enable()
    run()
    prof.disable()
    print(f"tshtrain {w.key}: {recorder.clock.wall():.2f} s (under cProfile)")
    out = RESULTS_DIR / f"e2e_{w.key}_profile.txt"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        stats = pstats.Stats(prof, stream=fh).sort_stats("cumulative")
        stats.print_stats(60)
        stats.sort_stats("tottime").print_stats(40)
    print(f"profile written to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny budgets, 1 seed, JSON only")
    parser.add_argument("--only", nargs="*", choices=["ppo", "dqn", "sac"], help="workloads to run")
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds per workload (default 5 PPO, 3 DQN/SAC)"
    )
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from this one up")
    parser.add_argument("--contestants", nargs="*", help="subset of contestants (names as printed)")
    parser.add_argument("--profile", choices=["ppo", "dqn", "sac"], help="cProfile one tshtrain run")
    parser.add_argument("--env-steps", type=int, help="replace the budget of every workload run")
    parser.add_argument("--render", type=Path, help="rebuild tables and docs from a results JSON")
    parser.add_argument("--from-log", type=Path, help="write the results JSON from a run's printed lines")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = parser.parse_args()
    pin_torch_threads()
    warnings.filterwarnings("ignore")
    if args.from_log:
        args.render = json_from_log(args.from_log)
    if args.render:
        render_from_json(args.render, docs=not args.no_docs)
        return
    all_w = workloads(args.quick, args.env_steps)
    if args.profile:
        profile_tshtrain(all_w[args.profile], seed=0)
        return
    default_seeds = {"ppo": 5, "dqn": 3, "sac": 3}
    header = run_header(PACKAGES)
    suffix = (
        ("_quick" if args.quick else "")
        + (f"_{args.env_steps}" if args.env_steps else "")
        + (f"_from_seed{args.first_seed}" if args.first_seed else "")
    )
    for key in args.only or ["ppo", "dqn", "sac"]:
        w = all_w[key]
        num_seeds = 1 if args.quick else (args.seeds or default_seeds[key])
        print(f"== {w.title}: {num_seeds} seeds ==", flush=True)
        meta = {**header, "revision": git_revision()}

        def save(results: list[RunResult], w: Workload = w, meta: dict[str, Any] = meta) -> None:
            write_json(f"e2e_{w.key}{suffix}", payload(w, results, meta))

        seeds = list(range(args.first_seed, args.first_seed + num_seeds))
        results = run_workload(w, seeds, args.contestants, save)
        report(w, results, meta, docs=not args.quick and not args.no_docs, section_suffix=suffix)


def payload(w: Workload, results: list[RunResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "workload": w.key,
        "threshold": w.threshold,
        "summary": summarise(w, results),
        "runs": [vars(r) for r in results],
        **{k: v for k, v in meta.items() if k != "note"},
    }


def report(
    w: Workload, results: list[RunResult], meta: dict[str, Any], *, docs: bool, section_suffix: str
) -> None:
    """Print the tables, and (``docs``) rewrite this workload's section of docs/benchmarks.md."""
    data = payload(w, results, meta)
    md = markdown(w, results, data["summary"])
    if meta.get("note"):
        md += f"\n\nNote: {meta['note']}"
    print(md)
    if docs:
        env_md = environment_markdown({"load_after": load_average(), **data})
        write_docs_section(
            f"e2e-{w.key}{section_suffix.replace('_', '-')}", f"### End to end: {w.title}\n\n{env_md}\n\n{md}"
        )


LOG_LINE = re.compile(
    r"\[(\w+) seed (\d+)\] (.+?)\s+([\d.]+) s \(cpu\s+([\d.]+)\) env steps (\d+)\s+to (\S+): "
    r"(?:-|(\d+) steps/([\d.]+)s)\s+train\s+(\S+)\s+test\s+(\S+)"
)


def json_from_log(log: Path) -> Path:
    """Turn the per-run lines a run printed into a results JSON (for a run stopped before the end)."""
    runs, key, threshold = [], None, None
    for line in log.read_text().splitlines():
        m = LOG_LINE.search(line)
        if not m:
            continue
        key, threshold = m.group(1), None if m.group(7) == "None" else float(m.group(7))
        runs.append(
            RunResult(
                contestant=m.group(3).strip(),
                seed=int(m.group(2)),
                seconds=float(m.group(4)),
                cpu_seconds=float(m.group(5)),
                env_steps=int(m.group(6)),
                episodes=-1,
                cross_env_steps=None if m.group(8) is None else int(m.group(8)),
                cross_seconds=None if m.group(9) is None else float(m.group(9)),
                last_train_return=float(m.group(10)),
                test_return=float(m.group(11)),
            )
        )
    assert key is not None, f"no run lines in {log}"
    w = workloads(False, None)[key]
    steps = max(r.env_steps for r in runs)
    if steps < w.num_env_steps - 1024:
        w = workloads(False, steps)[key]
    w = dataclasses.replace(w, threshold=threshold)
    meta = {**run_header(PACKAGES), "load_before": None}  # not recorded: rebuilt from printed lines
    suffix = "" if w.num_env_steps == workloads(False, None)[key].num_env_steps else f"_{steps}"
    return write_json(f"e2e_{key}{suffix}", payload(w, runs, meta))


def render_from_json(path: Path, *, docs: bool) -> None:
    """Rebuild the tables (and the docs section) from a results JSON, e.g. of an interrupted run."""
    import json

    data = json.loads(path.read_text())
    results = [RunResult(**r) for r in data["runs"]]
    num_env_steps = max(r.env_steps for r in results)
    key = data["workload"]
    w = next(x for x in workloads(False, None).values() if x.key == key)
    if num_env_steps < w.num_env_steps - 1024:  # a run with --env-steps
        w = workloads(False, num_env_steps)[key]
    if "threshold" in data:
        w = dataclasses.replace(w, threshold=data["threshold"])
    load_before, load_after = load_before_after(data)
    meta = {
        "machine": data["machine"],
        "versions": data["versions"],
        "revision": data["revision"],
        "load_before": load_before,
        "load_after": load_after,
        "note": data.get("note", ""),
    }
    suffix = path.stem.removeprefix(f"e2e_{key}")
    report(w, results, meta, docs=docs, section_suffix=suffix)


if __name__ == "__main__":
    main()
