"""EnvPool vs Gymnasium's sync / async vector envs: env steps per second with random actions, 8 envs.

Rows (each builds its envs untimed, then takes ``--vector-steps`` steps of all 8 envs with actions drawn
beforehand; a rate is 8 x vector steps / seconds):

* ``gymnasium sync`` / ``gymnasium async``: ``tshtrain.env.make_vector_env`` (same-step autoreset) of the
  Gymnasium env, in-process or one subprocess per env;
* ``envpool (tshtrain)``: :class:`tshtrain.env.envpool.EnvPoolVectorEnv`, what ``env.type: envpool``
  builds (EnvPool's next-step autoreset converted to same-step);
* ``envpool (raw)``: EnvPool's own pool (next-step autoreset), for the adapter's cost (info only).

Tasks: Atari Breakout (Gymnasium: ``ALE/Breakout-v5`` through ``tshtrain.env.atari.make_atari_env``,
i.e. AtariPreprocessing + 4 stacked frames; EnvPool: ``Breakout-v5`` set to the same protocol: sticky
actions 0.25, no FIRE on reset, up to 30 no-ops, whole games, unclipped rewards) and MuJoCo Hopper-v4
if the ``mujoco`` package is installed (EnvPool bundles its own MuJoCo; Gymnasium needs the package).

Interleaved repetitions, medians and paired ratios (benchmarks/harness.py); EnvPool uses its default
thread count (one per core). Results: benchmarks/results/bench_envpool.{json,md}.

Usage::

    python benchmarks/bench_envpool.py              # about 3 minutes
    python benchmarks/bench_envpool.py --quick      # a smoke run (JSON only)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import (
    Contestant,
    Goal,
    Run,
    TableResult,
    markdown_table,
    pin_torch_threads,
    print_table,
    run_interleaved,
)
from report import RESULTS_DIR, run_header, write_json, write_report

NUM_ENVS = 8
PACKAGES = ("tshtrain", "gymnasium", "envpool", "ale-py", "mujoco", "numpy", "opencv-python-headless")
ENVPOOL_ATARI_PROTOCOL: dict[str, Any] = {
    "repeat_action_probability": 0.25,
    "use_fire_reset": False,
    "noop_max": 30,
    "episodic_life": False,
    "reward_clip": False,
}
"""EnvPool's Breakout-v5 options that match ALE/Breakout-v5 + Gymnasium's AtariPreprocessing"""


def _gym_factory(task: str) -> Callable[[], Any]:
    if task == "atari":
        from tshtrain.env.atari import make_atari_env

        return lambda: make_atari_env("ALE/Breakout-v5")
    import gymnasium as gym

    return lambda: gym.make("Hopper-v4")


def _envpool_task(task: str) -> tuple[str, dict[str, Any]]:
    return ("Breakout-v5", ENVPOOL_ATARI_PROTOCOL) if task == "atari" else ("Hopper-v4", {})


def _actions(space: Any, num_steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if hasattr(space, "n"):
        return [rng.integers(int(space.n), size=NUM_ENVS) for _ in range(num_steps)]
    low, high = space.low, space.high
    return [rng.uniform(low, high, size=(NUM_ENVS, *low.shape)) for _ in range(num_steps)]


def _stepping(env: Any, single_action_space: Any, num_steps: int, close: Callable[[], None]) -> Run:
    actions = _actions(single_action_space, num_steps, 0)

    def run() -> None:
        for act in actions:
            env.step(act)
        close()

    return run


def _gymnasium(task: str, mode: str, num_steps: int) -> Callable[[], Run]:
    def setup() -> Run:
        from tshtrain.env import make_vector_env

        env = make_vector_env(_gym_factory(task), NUM_ENVS, mode=mode)
        env.reset(seed=0)
        return _stepping(env, env.single_action_space, num_steps, env.close)

    return setup


def _envpool_adapter(task: str, num_steps: int) -> Callable[[], Run]:
    def setup() -> Run:
        from tshtrain.env.envpool import EnvPoolVectorEnv

        task_id, kwargs = _envpool_task(task)
        env = EnvPoolVectorEnv(task_id, NUM_ENVS, seed=0, **kwargs)
        env.reset()
        return _stepping(env, env.single_action_space, num_steps, env.close)

    return setup


def _envpool_raw(task: str, num_steps: int) -> Callable[[], Run]:
    def setup() -> Run:
        import envpool

        task_id, kwargs = _envpool_task(task)
        pool = envpool.make(task_id, env_type="gymnasium", num_envs=NUM_ENVS, seed=0, **kwargs)
        pool.reset()
        return _stepping(pool, pool.action_space, num_steps, pool.close)

    return setup


def _notes(num_steps: int, reps: int) -> list[str]:
    return [
        f"{num_steps} vector steps per repetition, {reps} interleaved repetitions. CPU rates count this "
        f"process's CPU time only: EnvPool's threads are in it, Gymnasium async's worker processes are not "
        f"(that CPU column is not comparable)."
    ]


def bench_task(task: str, num_steps: int, reps: int) -> TableResult:
    contestants = [
        Contestant(
            name="gymnasium sync", setup=_gymnasium(task, "sync", num_steps), work=num_steps * NUM_ENVS
        ),
        Contestant(
            name="gymnasium async", setup=_gymnasium(task, "async", num_steps), work=num_steps * NUM_ENVS
        ),
        Contestant(
            name="envpool (tshtrain)", setup=_envpool_adapter(task, num_steps), work=num_steps * NUM_ENVS
        ),
        Contestant(
            name="envpool (raw)",
            setup=_envpool_raw(task, num_steps),
            work=num_steps * NUM_ENVS,
            info_only=True,
        ),
    ]
    title = "Atari Breakout (84x84x4 frames)" if task == "atari" else "MuJoCo Hopper-v4"
    rows = run_interleaved(contestants, reps=reps, unit="env steps/s", label=task)
    table = TableResult(
        title=f"{title}: env steps/s with random actions, {NUM_ENVS} envs",
        unit="env steps/s",
        rows=rows,
        goals=[
            Goal(numerator="envpool (tshtrain)", denominator="gymnasium sync", target=1.0),
            Goal(numerator="envpool (tshtrain)", denominator="gymnasium async", target=1.0),
            Goal(numerator="envpool (tshtrain)", denominator="envpool (raw)", target=0.9),
        ],
        notes=_notes(num_steps, reps),
    )
    print_table(table)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vector-steps", type=int, default=1000, help="vector steps per repetition")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 vector steps, 2 repetitions, JSON only")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the markdown from results/bench_envpool.json only"
    )
    args = parser.parse_args(argv)
    if args.render:
        payload = json.loads((RESULTS_DIR / "bench_envpool.json").read_text(encoding="utf-8"))
        tables = {task: TableResult.from_json(t) for task, t in payload["tables"].items()}
        for table in tables.values():
            table.notes = _notes(payload["vector_steps"], payload["reps"])
        write_markdown(payload, tables)
        return
    if args.quick:
        args.vector_steps, args.reps = 100, 2
    pin_torch_threads()
    header = run_header(PACKAGES)
    tasks = ["atari"] + (["mujoco"] if importlib.util.find_spec("mujoco") is not None else [])
    tables = {task: bench_task(task, args.vector_steps, args.reps) for task in tasks}
    name = "bench_envpool_quick" if args.quick else "bench_envpool"
    payload: dict[str, Any] = {
        "vector_steps": args.vector_steps,
        "reps": args.reps,
        "num_envs": NUM_ENVS,
        "envpool_atari_protocol": ENVPOOL_ATARI_PROTOCOL,
        **header,
        "tables": {task: table.to_json() for task, table in tables.items()},
    }
    json_path = write_json(name, payload)
    print(f"\nwrote {json_path}")
    if not args.quick:
        write_markdown(payload, tables)


def write_markdown(payload: dict[str, Any], tables: dict[str, TableResult]) -> None:
    """benchmarks/results/bench_envpool.md from a run's payload and tables."""
    parts = ["", "Written by `benchmarks/bench_envpool.py` (see its docstring).", ""]
    if "mujoco" not in tables:
        parts += ["MuJoCo: not measured (the `mujoco` package is not installed).", ""]
    for table in tables.values():
        parts += [markdown_table(table), ""]
    title = "EnvPool vs Gymnasium's vector envs (env steps/s, random actions, 8 envs)"
    md_path = write_report("bench_envpool", title, payload, parts)
    print(f"wrote {md_path}")


if __name__ == "__main__":
    main()
