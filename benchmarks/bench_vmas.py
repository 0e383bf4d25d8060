"""PPO on a batched torch env (VMAS) end to end: env steps/s of a hand-written torch loop, tshtrain,
rsl_rl and skrl at several numbers of envs, on the CPU, with the same env and the same settings.

Run from the repository root, in the benchmark venv (tshtrain[bench] and vmas)::

    python benchmarks/bench_vmas.py                              # full run: 256 / 1024 / 4096 envs
    python benchmarks/bench_vmas.py --envs 1024 --iterations 5 --repeats 3
    python benchmarks/bench_vmas.py --quick                      # smoke run (< 2 min), stub env
    python benchmarks/bench_vmas.py --env stub                   # the stand-in env of vmas_contestants

The env (``--env vmas:navigation``, the default) is :class:`tshtrain.env.vmas.VmasEnv` on the task of
``vmas_task.TASK``: navigation, two agents in the joint view (12 observation dims, 4 action
dims), no collisions, 100-step episodes with desynchronised clocks, on the CPU. The settings are
``vmas_contestants.PPOSettings()``, with which the hand loop reaches the task's return threshold
(``python benchmarks/hand_ppo_vmas.py``).

What it measures, for each number of envs N (contestants: ``vmas_contestants.py``):

* a run = ``--iterations`` PPO iterations (a rollout of ``rollout_len`` vector steps of N envs, then
  the update), built untimed, run timed; env steps/s = iterations * rollout_len * N / wall seconds;
  the median over ``--repeats`` interleaved repetitions (A B C D A B C D ...; harness.py), with the
  ratio to the hand loop;
* every contestant steps a :class:`vmas_contestants.TimedEnv` around a fresh env, so the time inside
  ``env.step`` is measured the same way for all: *outside env.step* = 1 - env.step seconds / wall;
* the update phase (GAE + epochs of mini-batches) is timed by wrapping each library's update call,
  and on the CPU it is most of the run; so the collection phase is also reported per vector step,
  without ``env.step``: *collect* = the collection phase where a library has one apart (the hand
  loop's rollout loop, tshtrain's collection steps, rsl_rl's rollout loop as its runner times it),
  *non-update* = wall - update - env.step (every contestant; includes the trainer's bookkeeping
  between phases).
  The phases split the work differently: the hand loop, rsl_rl and skrl evaluate the critic and the
  log-probabilities while collecting, tshtrain in its update; the end-to-end rate is the fair figure.

Goals (issue 37): tshtrain at most 0.95x the hand loop's time (env steps/s >= 1.053x) and ahead of rsl_rl
and skrl; the opt-in compiled path (``tshtrain (compiled)``: ``PPOParams(compile_loss=True)``) at most
0.80x (>= 1.25x). torch runs on one
thread, with denormals flushed for every contestant (what tshtrain's trainer does by default).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vmas_contestants as vc
import vmas_task as vt
from harness import (
    Contestant,
    Goal,
    RowResult,
    TableResult,
    format_rate,
    markdown_table,
    measure,
    pin_torch_threads,
    print_table,
    rotated,
    run_interleaved,
)
from report import run_header, write_json, write_report

from tshtrain.env.tensor_env import TensorVectorEnv

PACKAGES = ("tshtrain", "torch", "vmas", "rsl-rl-lib", "tensordict", "skrl", "gymnasium", "numpy")
HAND = "hand loop"
GOALS = (
    ("tshtrain", HAND, 1 / 0.95),
    ("tshtrain", "rsl_rl", 1.0),
    ("tshtrain", "skrl", 1.0),
    ("tshtrain (compiled)", HAND, 1 / 0.80),
    ("tshtrain (fast tanh)", HAND, 1 / 0.95),
    ("tshtrain (fast tanh)", "hand loop (fast tanh)", 1.0),
    ("tshtrain", "hand loop (kept memory)", 1.0),
)
"""(numerator, denominator, lowest ratio of env steps/s): the default path at most 0.95x the hand loop's
time and ahead of rsl_rl and skrl, the compiled path at most 0.80x the hand loop's time (issue 37); the
opt-in FastTanh path against both hand loops (the second: the library's cost at equal arithmetic); the
default path against the hand loop given the allocator setting tshtrain's trainer makes (equal settings)"""
EnvFactory = Callable[[int, int], TensorVectorEnv]
"""(num_envs, seed) -> a fresh env"""


# ============================================================================ envs
def env_factory(spec: str, max_episode_steps: int) -> EnvFactory:
    """``stub`` or ``vmas:<scenario>`` -> a factory of fresh envs on the CPU."""
    if spec == "stub":
        return lambda n, seed: vt.StubNavEnv(num_envs=n, seed=seed, max_episode_steps=max_episode_steps)
    if spec.startswith("vmas:") and len(spec) > len("vmas:"):
        scenario = spec.removeprefix("vmas:")
        try:
            from tshtrain.env.vmas import VmasEnv
        except ImportError as exc:
            raise SystemExit(f"--env {spec}: tshtrain.env.vmas.VmasEnv cannot be imported ({exc})") from exc

        task_kwargs = vt.task_kwargs(scenario)

        def make(n: int, seed: int) -> TensorVectorEnv:
            env: TensorVectorEnv = VmasEnv(
                scenario,
                num_envs=n,
                device="cpu",
                continuous_actions=True,
                seed=seed,
                max_episode_steps=max_episode_steps,
                **task_kwargs,
            )
            return env

        return make
    raise SystemExit(f"--env {spec!r}: expected 'stub' or 'vmas:<scenario>' (e.g. vmas:navigation)")


# ============================================================================ measuring
@dataclass(frozen=True)
class RepProbe:
    """What one timed run reports besides its wall time."""

    env_seconds: float
    num_vector_steps: int
    update_seconds: float
    collect_seconds: float | None


@dataclass
class Probe:
    """The runs of one contestant at one number of envs, in run order."""

    reps: list[RepProbe] = field(default_factory=list)
    envs: list[TensorVectorEnv] = field(default_factory=list)
    """envs built so far (closed when the table is done)"""


def _contestant(
    name: str,
    *,
    builder: vc.Builder,
    make_env: EnvFactory,
    num_envs: int,
    settings: vt.PPOSettings,
    iterations: int,
    probe: Probe,
    first_seed: int = 0,
) -> Contestant:
    seeds: Iterator[int] = iter(range(first_seed, first_seed + 10**6))

    def setup() -> vc.Run:
        seed = next(seeds)  # rep r of every contestant uses seed r
        env = vt.TimedEnv(make_env(num_envs, seed))
        probe.envs.append(env)
        phases = vt.Phases()
        run = builder(env, settings, seed, iterations, phases)

        def timed() -> None:
            torch.set_flush_denormal(True)
            try:
                run()
            finally:
                torch.set_flush_denormal(False)
            probe.reps.append(RepProbe(env.step_seconds, env.num_vector_steps, phases.update, phases.collect))

        return timed

    work = float(iterations * settings.rollout_len * num_envs)
    return Contestant(name=name, setup=setup, work=work)


def _preflight(
    names: list[str], make_env: EnvFactory, num_envs: int, settings: vt.PPOSettings
) -> tuple[list[str], dict[str, str]]:
    """Build and run every contestant for one iteration (the warm-up round); those that fail are
    dropped, with the reason."""
    ok, failed = [], {}
    for name in names:
        probe = Probe()
        try:
            _contestant(
                name,
                builder=vc.CONTESTANTS[name],
                make_env=make_env,
                num_envs=num_envs,
                settings=settings,
                iterations=1,
                probe=probe,
            ).setup()()
            ok.append(name)
        except Exception as exc:  # a contestant that cannot run must not stop the others
            failed[name] = f"{type(exc).__name__}: {exc}"
            print(f"  {name}: failed, left out ({failed[name]})", flush=True)
        for env in probe.envs:
            env.close()
    return ok, failed


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def phase_summary(table: TableResult, probes: dict[str, Probe], expected_vector_steps: int) -> dict[str, Any]:
    """Per contestant: medians over the repetitions of the phase shares and per-vector-step costs."""
    out: dict[str, Any] = {}
    for row in table.rows:
        reps = probes[row.name].reps
        walls = row.seconds
        collects = [(r.collect_seconds - r.env_seconds, r) for r in reps if r.collect_seconds is not None]
        out[row.name] = {
            "outside_env_step": _median([1.0 - r.env_seconds / w for r, w in zip(reps, walls, strict=True)]),
            "update_share": _median([r.update_seconds / w for r, w in zip(reps, walls, strict=True)]),
            "env_step_us_per_vector_step": _median([1e6 * r.env_seconds / r.num_vector_steps for r in reps]),
            "non_update_us_per_vector_step": _median(
                [
                    1e6 * (w - r.update_seconds - r.env_seconds) / r.num_vector_steps
                    for r, w in zip(reps, walls, strict=True)
                ]
            ),
            "collect_us_per_vector_step": _median([1e6 * c / r.num_vector_steps for c, r in collects]),
            "vector_steps": [r.num_vector_steps for r in reps],
            "vector_steps_ok": all(r.num_vector_steps == expected_vector_steps for r in reps),
            "reps": [asdict(r) for r in reps],
        }
    return out


# ============================================================================ reporting
def _us(x: float | None) -> str:
    return "—" if x is None else f"{x:,.1f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


SUMMARY_HEADER = (
    "envs",
    "contestant",
    "env steps/s",
    "min",
    "max",
    "x hand",
    "outside env.step",
    "update share",
    "env.step µs/vstep",
    "collect µs/vstep",
    "non-update µs/vstep",
)


def summary_rows(num_envs: int, table: TableResult, phases: dict[str, Any]) -> list[tuple[str, ...]]:
    ref = table.row(HAND).median() if any(r.name == HAND for r in table.rows) else None
    rows = []
    for r in table.rows:
        p, rates = phases[r.name], r.rates()
        rows.append(
            (
                str(num_envs),
                r.name + ("" if p["vector_steps_ok"] else " (!steps)"),
                format_rate(r.median()),
                format_rate(min(rates)),
                format_rate(max(rates)),
                "—" if ref is None else f"{r.median() / ref:.3f}",
                _pct(p["outside_env_step"]),
                _pct(p["update_share"]),
                _us(p["env_step_us_per_vector_step"]),
                _us(p["collect_us_per_vector_step"]),
                _us(p["non_update_us_per_vector_step"]),
            )
        )
    return rows


def plain_table(rows: list[tuple[str, ...]]) -> str:
    cells = [SUMMARY_HEADER, *rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(SUMMARY_HEADER))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    )


def markdown_summary(rows: list[tuple[str, ...]]) -> str:
    lines = [
        "| " + " | ".join(SUMMARY_HEADER) + " |",
        "| --- | --- |" + " ---: |" * (len(SUMMARY_HEADER) - 2),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def collection_ratio(phases: dict[str, Any]) -> str | None:
    """tshtrain's collector time per vector step (without env.step) over the hand loop's."""
    try:
        ours, hand = (
            phases["tshtrain"]["collect_us_per_vector_step"],
            phases[HAND]["collect_us_per_vector_step"],
        )
    except KeyError:
        return None
    if ours is None or hand is None or hand <= 0:
        return None
    return (
        f"collection phase without env.step: tshtrain {ours:,.1f} µs vs hand loop {hand:,.1f} µs per "
        f"vector step ({ours / hand:.2f}x)"
    )


# ============================================================================ one process per run
CHILD_PREFIX = "BENCH-VMAS-CHILD "


def child_main(args: argparse.Namespace) -> None:
    """``--child NAME``: in this fresh process, one untimed warm-up iteration (another seed), then the
    timed run of ``--iterations`` with seed ``--child-seed``; print its measurements as one JSON line."""
    pin_torch_threads()
    settings = replace(vt.PPOSettings(), rollout_len=args.rollout_len)
    make_env = env_factory(args.env, args.max_episode_steps)
    num_envs = args.envs[0]
    common = {"builder": vc.CONTESTANTS[args.child], "make_env": make_env, "num_envs": num_envs}
    warm = Probe()
    _contestant(args.child, **common, settings=settings, iterations=1, probe=warm, first_seed=10**6).setup()()
    for env in warm.envs:
        env.close()
    probe = Probe()
    contestant = _contestant(
        args.child,
        **common,
        settings=settings,
        iterations=args.iterations,
        probe=probe,
        first_seed=args.child_seed,
    )
    wall, cpu = measure(contestant.setup())
    payload = {"wall": wall, "cpu": cpu, "work": contestant.work, "probe": asdict(probe.reps[0])}
    print(CHILD_PREFIX + json.dumps(payload), flush=True)


def run_in_process(
    names: list[str], args: argparse.Namespace, num_envs: int
) -> tuple[list[RowResult], dict[str, Probe], dict[str, str]]:
    """``--in-process``: one warm-up iteration of each contestant, then ``run_interleaved`` here."""
    settings = replace(vt.PPOSettings(), rollout_len=args.rollout_len)
    make_env = env_factory(args.env, args.max_episode_steps)
    ok, failed = _preflight(names, make_env, num_envs, settings)
    probes = {name: Probe() for name in ok}
    contestants = [
        _contestant(
            n,
            builder=vc.CONTESTANTS[n],
            make_env=make_env,
            num_envs=num_envs,
            settings=settings,
            iterations=args.iterations,
            probe=probes[n],
        )
        for n in ok
    ]
    rows = run_interleaved(
        contestants, reps=args.repeats, unit="env steps/s", warmup=False, label=f"{num_envs} envs"
    )
    return rows, probes, failed


def run_isolated(
    names: list[str], args: argparse.Namespace, num_envs: int
) -> tuple[list[RowResult], dict[str, Probe], dict[str, str]]:
    """Every (contestant, repetition) in its own fresh process (``child_main``), rotated as
    ``run_interleaved`` does: no contestant inherits another's heap or process-wide settings (glibc's
    allocator thresholds, which tshtrain's trainer sets, cannot be undone). Rep r runs seed r."""
    rows = {n: RowResult(name=n, unit="env steps/s", work=0.0, seconds=[], cpu_seconds=[]) for n in names}
    probes = {n: Probe() for n in names}
    failed: dict[str, str] = {}
    for rep in range(args.repeats):
        for name in rotated([n for n in names if n not in failed], rep):
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                name,
                "--child-seed",
                str(rep),
                "--envs",
                str(num_envs),
                "--env",
                args.env,
                "--iterations",
                str(args.iterations),
                "--rollout-len",
                str(args.rollout_len),
                "--max-episode-steps",
                str(args.max_episode_steps),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            lines = [x for x in done.stdout.splitlines() if x.startswith(CHILD_PREFIX)]
            if done.returncode != 0 or not lines:
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                failed[name] = f"exit {done.returncode}: {tail}"
                print(f"  {name}: failed, left out ({failed[name]})", flush=True)
                continue
            payload = json.loads(lines[-1].removeprefix(CHILD_PREFIX))
            row = rows[name]
            row.work = payload["work"]
            row.seconds.append(payload["wall"])
            row.cpu_seconds.append(payload["cpu"])
            probes[name].reps.append(RepProbe(**payload["probe"]))
        progress = "  ".join(f"{r.name}={r.rates()[-1]:,.0f}" for r in rows.values() if r.seconds)
        print(f"  [{num_envs} envs rep {rep + 1}/{args.repeats}, one process per run] {progress}", flush=True)
    kept = [rows[n] for n in names if n not in failed]
    return kept, {n: probes[n] for n in names if n not in failed}, failed


# ============================================================================ main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env", default=None, help="stub | vmas:<scenario> (default: vmas:navigation; --quick: stub)"
    )
    parser.add_argument(
        "--envs", default=None, help="comma-separated numbers of envs (default 256,1024,4096)"
    )
    parser.add_argument("--iterations", type=int, default=None, help="PPO iterations per run (default 6)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repetitions (default 9)")
    parser.add_argument("--rollout-len", type=int, default=None, help="vector steps per rollout (default 32)")
    parser.add_argument(
        "--max-episode-steps",
        type=int,
        default=100,
        help="time limit of an episode (default 100: vmas_task.TASK)",
    )
    parser.add_argument(
        "--only", default=None, help=f"comma-separated contestants of: {', '.join(vc.CONTESTANTS)}"
    )
    parser.add_argument("--quick", action="store_true", help="tiny settings for a smoke run (< 2 min)")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every contestant in this process (faster; the default runs each timed run in its own "
        "process, since glibc's allocator thresholds that tshtrain's trainer sets are process-wide: in this "
        "mode they are set for every contestant from the start)",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    args.env = args.env or ("stub" if quick else "vmas:navigation")
    args.envs = [int(x) for x in (args.envs or ("32,128" if quick else "256,1024,4096")).split(",")]
    args.iterations = args.iterations or (2 if quick else 6)
    args.repeats = args.repeats or (2 if quick else 9)
    args.rollout_len = args.rollout_len or (8 if quick else vt.PPOSettings().rollout_len)
    names = list(vc.CONTESTANTS) if args.only is None else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in names if n not in vc.CONTESTANTS]
    if unknown:
        parser.error(f"--only: unknown contestants {unknown}; known: {list(vc.CONTESTANTS)}")
    args.names = names
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child is not None:
        child_main(args)
        return
    pin_torch_threads()
    notes: list[str] = []
    if not args.in_process:
        notes.append("each timed run in its own fresh process (after one untimed warm-up iteration there)")
    if args.in_process:  # the same allocator setting for every contestant (tshtrain's trainer sets it)
        from tshtrain.cpu_memory import keep_freed_memory

        notes.append(f"one process for every run; allocator: {keep_freed_memory().reason}")
    header = run_header(PACKAGES)
    settings = replace(vt.PPOSettings(), rollout_len=args.rollout_len)
    names: list[str] = list(args.names)
    missing = vc.tshtrain_available()
    if "tshtrain" in names and missing is not None:
        print(f"tshtrain: not available yet ({missing})")
        notes.append(f"tshtrain: not available yet ({missing})")
        names.remove("tshtrain")
    hand_source = vc.HAND_LOOP
    print(
        f"PPO on {args.env}: envs {args.envs}, {args.iterations} iterations x {args.repeats} repeats; "
        f"hand loop: {hand_source}; settings: {settings}",
        flush=True,
    )

    results: list[dict[str, Any]] = []
    summary: list[tuple[str, ...]] = []
    markdown_parts: list[str] = []
    for num_envs in args.envs:
        if args.in_process:
            print(f"\n-- {num_envs} envs: warm-up (one iteration each)", flush=True)
            rows, probes, failed = run_in_process(names, args, num_envs)
        else:
            print(f"\n-- {num_envs} envs: one fresh process per run", flush=True)
            rows, probes, failed = run_isolated(names, args, num_envs)
        notes += [f"{num_envs} envs: {n} failed, left out ({why})" for n, why in failed.items()]
        ok = [r.name for r in rows]
        if not ok:
            continue
        goals = [  # issue 37, on rates: CPU time <= 0.95x the hand loop's is a rate >= 1 / 0.95
            Goal(numerator=n, denominator=d, target=t) for n, d, t in GOALS if n in ok and d in ok
        ]
        table = TableResult(
            title=f"PPO, {args.env}, {num_envs} envs, {args.iterations} iterations of "
            f"{settings.rollout_len} vector steps",
            unit="env steps/s",
            rows=rows,
            goals=goals,
            notes=[f"{n}: failed, left out ({why})" for n, why in failed.items()],
        )
        phases = phase_summary(table, probes, args.iterations * settings.rollout_len)
        for probe in probes.values():
            for env in probe.envs:
                env.close()
        gc.collect()
        print_table(table)
        ratio = collection_ratio(phases)
        if ratio:
            print(f"  {ratio}")
        rows_now = summary_rows(num_envs, table, phases)
        summary += rows_now
        results.append(
            {"num_envs": num_envs, "table": table.to_json(), "phases": phases, "collection": ratio}
        )
        markdown_parts += (
            [markdown_table(table), "", markdown_summary(rows_now)] + ([f"\n{ratio}"] if ratio else []) + [""]
        )

    print("\n== PPO end to end, env steps/s (median) and where the time goes ==")
    print(plain_table(summary))
    for note in notes:
        print(f"note: {note}")
    write_results(
        args,
        header,
        settings=settings,
        hand_source=hand_source,
        notes=notes,
        results=results,
        summary=summary,
        markdown_parts=markdown_parts,
    )


def write_results(
    args: argparse.Namespace,
    header: dict[str, Any],
    *,
    settings: vt.PPOSettings,
    hand_source: str,
    notes: list[str],
    results: list[dict[str, Any]],
    summary: list[tuple[str, ...]],
    markdown_parts: list[str],
) -> None:
    name = "bench_vmas_quick" if args.quick else "bench_vmas"
    payload = {
        "env": args.env,
        "envs": args.envs,
        "iterations": args.iterations,
        "repeats": args.repeats,
        "max_episode_steps": args.max_episode_steps,
        "settings": asdict(settings),
        "unmatched_knobs": vc.UNMATCHED_KNOBS,
        "hand_loop": hand_source,
        "notes": notes,
        **header,
        "results": results,
    }
    json_path = write_json(name, payload)
    if args.quick:  # a smoke run: JSON only (results/*_quick.json, ignored by git), as every benchmark
        print(f"\nwrote {json_path}")
        return
    settings_text = ", ".join(f"{k}={v}" for k, v in asdict(settings).items())
    md_path = write_report(
        name,
        "PPO on a batched torch env: hand loop vs tshtrain vs rsl_rl vs skrl",
        payload,
        [
            f"- Env: `{args.env}`, max {args.max_episode_steps} steps per episode, on the CPU; "
            f"{args.iterations} PPO iterations per run, {args.repeats} interleaved repetitions; "
            f"hand loop: `{hand_source}`",
            f"- Settings (every contestant): {settings_text}; separate actor and critic with tanh "
            "activations, state-independent log std, no value clipping, no observation normalisation, "
            "bootstrapping at time-outs, denormals flushed",
            f"- {vc.UNMATCHED_KNOBS}",
            *[f"- {note}" for note in notes],
            "",
            "Columns: *outside env.step* = 1 - time in env.step / wall time; *update share* = time in the "
            "update phase / wall time; per vector step (µs): *env.step*, *collect* = the library's "
            "collection phase without env.step (hand loop, tshtrain, rsl_rl), *non-update* = wall - update "
            "- env.step. The hand loop, rsl_rl and skrl evaluate the critic and the log-probabilities while "
            "collecting, tshtrain at the start of its update: its collection phase is lighter by design.",
            "",
            "## Summary",
            "",
            markdown_summary(summary),
            "",
            "## Per number of envs",
            "",
            *markdown_parts,
            "",
            "Written by `benchmarks/bench_vmas.py` (see its docstring and `benchmarks/README.md`).",
        ],
    )
    print(f"\nwrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
