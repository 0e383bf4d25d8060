"""VDN and QMIX on MPE2 simple_spread against IPPO and a random policy, one run at a time.

``--kind vdn|qmix`` trains :func:`train_vd` (tests/learning/test_value_decomposition_spread_learning.py),
``--kind ippo|mappo`` :func:`train_spread` (tests/learning/test_multi_agent_spread_learning.py), both
with greedy tests every ``--test-every`` env steps (the training itself does not depend on it: greedy
tests draw no random numbers of the training run, but they advance the test envs' own episode stream);
``--kind random`` plays 1,000 episodes of uniformly random actions. Every run appends one JSON line to
``--out``: each test's mean per-agent return, the score (the mean of the tests after 80k and 100k env
steps, what the learning tests score), the env steps of the first test at or above ``--threshold``, and
CPU seconds.

Run: PYTHONPATH=. python benchmarks/vd_spread.py --kind vdn --seeds 0 1 2 [--set lr=1e-3 ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from tests.learning.test_multi_agent_spread_learning import SETTINGS, train_spread
from tests.learning.test_value_decomposition_spread_learning import (
    ENV_ID,
    ENV_KWARGS,
    SETUP,
    THRESHOLD,
    VDSpreadSetup,
    train_vd,
)
from tshtrain.algorithm import MultiAgentPolicy, RandomPolicy, independent_learners
from tshtrain.data import MultiAgentCollector
from tshtrain.env.pettingzoo import make_pettingzoo_vector_env


def _parse(setup: VDSpreadSetup, pairs: list[str]) -> VDSpreadSetup:
    fields = {f.name for f in dataclasses.fields(setup)}
    changes: dict[str, object] = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        if key not in fields:
            raise SystemExit(f"--set: unknown field {key!r}; fields: {sorted(fields)}")
        changes[key] = _scalar(getattr(setup, key), value)
    return dataclasses.replace(setup, **changes)  # type: ignore[arg-type]


def _scalar(current: object, value: str) -> object:
    if value == "None":
        return None
    if isinstance(current, bool):
        return value.lower() in ("1", "true")
    if isinstance(current, int):
        return int(float(value))
    if isinstance(current, float):
        return float(value)
    if isinstance(current, tuple):
        return tuple(int(v) for v in value.split(","))
    return value


def _random_returns(seed: int, num_episodes: int = 1000) -> list[float]:
    env = make_pettingzoo_vector_env(ENV_ID, 8, kwargs=ENV_KWARGS, kind="parallel")
    space = env.single_action_space
    members = {name: RandomPolicy(space, seed=seed + k) for k, name in enumerate(env.columns.agents)}
    policy = MultiAgentPolicy(independent_learners(env.columns, members))
    stat = MultiAgentCollector(policy, env, seed=seed).collect(
        n_episode=num_episodes, reset_before_collect=True
    )
    env.close()
    returns = stat.per_agent_returns
    assert returns is not None
    return [float(r) for r in returns.mean(axis=1)]


def _row(
    kind: str, seed: int, test_every: int, returns: tuple[float, ...], extra: dict[str, Any]
) -> dict[str, Any]:
    at = {k * test_every: r for k, r in enumerate(returns)}
    reached = next((steps for steps, r in at.items() if steps > 0 and r >= THRESHOLD), None)
    score = (at[80_000] + at[100_000]) / 2 if 80_000 in at and 100_000 in at else None
    return {
        "kind": kind,
        "seed": seed,
        "test_every": test_every,
        "test_returns": [round(r, 2) for r in returns],
        "score_80k_100k": None if score is None else round(score, 2),
        "last_two_tests": round(sum(returns[-2:]) / 2, 2),
        "env_steps_to_threshold": reached,
        "threshold": THRESHOLD,
        **extra,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=["vdn", "qmix", "ippo", "mappo", "random"], required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="VDSpreadSetup fields, key=value")
    parser.add_argument("--test-every", type=int, default=SETUP.epoch_num_env_steps, help="env steps")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="benchmarks/results/vd_spread.jsonl")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for seed in args.seeds:
        cpu, wall = time.process_time(), time.perf_counter()
        if args.kind == "random":
            returns = _random_returns(seed)
            row: dict[str, Any] = {
                "kind": "random",
                "seed": seed,
                "episodes": len(returns),
                "mean": round(sum(returns) / len(returns), 2),
            }
        elif args.kind in ("vdn", "qmix"):
            setup = dataclasses.replace(_parse(SETUP, args.set), epoch_num_env_steps=args.test_every)
            vd = train_vd(args.kind, seed, setup)
            row = _row(args.kind, seed, args.test_every, vd.test_returns, {"changes": args.set})
            row |= {"env_steps": vd.num_env_steps, "gradient_steps": vd.num_gradient_steps}
        else:
            settings = dataclasses.replace(SETTINGS, epoch_num_env_steps=args.test_every)
            spread = train_spread(args.kind, seed, 100_000, settings)
            row = _row(
                args.kind, seed, args.test_every, spread.test_returns, {"env_steps": spread.num_env_steps}
            )
        row |= {
            "label": args.label,
            "cpu_s": round(time.process_time() - cpu, 1),
            "wall_s": round(time.perf_counter() - wall, 1),
        }
        print(json.dumps(row), flush=True)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
