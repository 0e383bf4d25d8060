"""VMAS autoreset cost: VmasEnv's one batched reset per step vs the per-env ``reset_at`` loop.

Run from the repository root (vmas installed)::

    python benchmarks/bench_vmas_reset.py            # 256 / 1024 / 4096 envs, writes results JSON
    python benchmarks/bench_vmas_reset.py --quick    # smoke run

Each row is the wall time of one vector step *including* the autoreset of the envs that ended in it,
with time limit 100 and desynchronised episode clocks (so about N/100 envs reset per step), zero
actions (no terminations), torch on one thread, contestants interleaved over several repetitions:

* ``vmas step alone``: ``Environment.step`` without any reset (the floor);
* ``VmasEnv batched``: this adapter (snapshot batched state, one vectorised reset, restore);
* ``VmasEnv loop``: the adapter's fallback, ``reset_at(i, return_observations=False)`` per ended env,
  then one observation call;
* ``reset_at loop + obs each``: ``reset_at(i)`` returning observations each time, as VMAS's Gymnasium
  wrapper does per env.

This is a script: it prints and records numbers, it never asserts a timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Contestant, pin_torch_threads, run_interleaved
from report import run_header, write_json

from tshtrain.env.vmas import VmasEnv

PACKAGES = ("tshtrain", "torch", "vmas")
MAX_STEPS = 100
SCENARIOS: dict[str, dict[str, Any]] = {
    "navigation": {"n_agents": 1, "collisions": False},
    "transport": {"n_agents": 2},
}


def adapter_run(
    scenario: str, num_envs: int, steps: int, *, batched: bool
) -> Callable[[], Callable[[], None]]:
    def setup() -> Callable[[], None]:
        env = VmasEnv(
            scenario,
            num_envs=num_envs,
            seed=0,
            max_episode_steps=MAX_STEPS,
            batched_reset=batched,
            **SCENARIOS[scenario],
        )
        env.reset(seed=0)
        actions = torch.zeros(num_envs, *env.single_action_space.shape)

        def run() -> None:
            for _ in range(steps):
                env.step(actions)

        return run

    return setup


def raw_run(scenario: str, num_envs: int, steps: int, *, resets: bool) -> Callable[[], Callable[[], None]]:
    """VMAS directly: step alone (``resets=False``) or step + ``reset_at(i)`` with observations per env."""

    def setup() -> Callable[[], None]:
        import vmas

        env = vmas.make_env(
            scenario,
            num_envs=num_envs,
            seed=0,
            max_steps=MAX_STEPS,
            terminated_truncated=True,
            **SCENARIOS[scenario],
        )
        env.reset()
        env.steps = torch.randint(
            0, MAX_STEPS, (num_envs,), generator=torch.Generator().manual_seed(0)
        ).float()
        actions = [torch.zeros(num_envs, env.get_agent_action_size(agent)) for agent in env.agents]

        def run() -> None:
            for _ in range(steps):
                _, _, terminated, truncated, _ = env.step(actions)
                if not resets:
                    env.steps[env.steps >= MAX_STEPS] = 0  # keep counters cycling, reset nothing
                    continue
                for index in (terminated | truncated).nonzero().flatten().tolist():
                    env.reset_at(index)

        return run

    return setup


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    pin_torch_threads()
    header = run_header(PACKAGES)
    sizes = [256] if args.quick else [256, 1024, 4096]
    steps, reps = (20, 2) if args.quick else (200, 5)
    rows: list[dict[str, Any]] = []
    for scenario in SCENARIOS:
        for num_envs in sizes:
            contestants = [
                Contestant(
                    name="vmas step alone", setup=raw_run(scenario, num_envs, steps, resets=False), work=steps
                ),
                Contestant(
                    name="VmasEnv batched",
                    setup=adapter_run(scenario, num_envs, steps, batched=True),
                    work=steps,
                ),
                Contestant(
                    name="VmasEnv loop",
                    setup=adapter_run(scenario, num_envs, steps, batched=False),
                    work=steps,
                ),
                Contestant(
                    name="reset_at loop + obs each",
                    setup=raw_run(scenario, num_envs, steps, resets=True),
                    work=steps,
                ),
            ]
            results = run_interleaved(
                contestants, reps=reps, unit="vector steps/s", label=f"{scenario} N={num_envs}"
            )
            floor = statistics.median(results[0].seconds) / steps
            for result in results:
                ms = statistics.median(result.seconds) / steps * 1e3
                rows.append(
                    {
                        "scenario": scenario,
                        "num_envs": num_envs,
                        "contestant": result.name,
                        "ms_per_vector_step": ms,
                    }
                )
                rows[-1]["x_step_alone"] = ms / 1e3 / floor
    print(f"\n{'scenario':<11} {'N':>5}  {'contestant':<26} {'ms/vector step':>15} {'x step alone':>13}")
    for row in rows:
        print(
            f"{row['scenario']:<11} {row['num_envs']:>5}  {row['contestant']:<26} "
            f"{row['ms_per_vector_step']:>15.3f} {row['x_step_alone']:>13.2f}"
        )
    if not args.quick:
        path = write_json(
            "vmas_reset",
            {
                **header,
                "rows": rows,
                "steps": steps,
            },
        )
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
