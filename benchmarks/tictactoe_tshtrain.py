"""tshtrain DQN on PettingZoo tic-tac-toe, moving second against a random first player (issue 17).

The setup, the trainer and the greedy evaluation are those of ``tests/learning/test_tictactoe_learning.py``
(``TicTacToeSetup``, ``build_trainer``, ``greedy_outcomes``); this script runs them for several seeds,
times them, and also evaluates each learner with a plain PettingZoo loop (the same loop, seeds and
random-player draws as ``benchmarks/tianshou_tictactoe.py``), as a cross-check of the collector-based
count. One JSON line per seed (``--json-out`` appends them to a file).

Run: ``PYTHONPATH=. python benchmarks/tictactoe_tshtrain.py --setup full --seeds 0 1 2``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import Clock

from tests.learning.test_tictactoe_learning import (
    CI,
    FULL,
    LEARNER,
    TicTacToeSetup,
    build_trainer,
    greedy_outcomes,
)
from tshtrain.algorithm import QValuePolicy
from tshtrain.env import OBS_KEY
from tshtrain.env.multi_agent import ACTION_MASK_KEY


def plain_loop_outcomes(q_net: torch.nn.Module, n_games: int, seed: int) -> dict[str, float]:
    """The learner (greedy over legal moves) as player_2 against a uniformly random player_1, in a plain
    PettingZoo loop (no tshtrain env or collector)."""
    from pettingzoo.classic import tictactoe_v3  # type: ignore[import-untyped]  # (no py.typed)

    rng = np.random.default_rng(seed)
    env = tictactoe_v3.env()
    wins = draws = losses = 0
    with torch.no_grad():
        for g in range(n_games):
            env.reset(seed=seed * 100003 + g)
            final = None
            for agent in env.agent_iter():
                obs, rew, term, trunc, _ = env.last()
                if term or trunc:
                    if agent == LEARNER:
                        final = rew
                    env.step(None)
                    continue
                if agent == LEARNER:
                    q = q_net(
                        {
                            OBS_KEY: torch.as_tensor(obs["observation"][None], dtype=torch.float32),
                            ACTION_MASK_KEY: torch.as_tensor(obs["action_mask"][None]),
                        }
                    )
                    action = int(q[0].argmax())
                    assert obs["action_mask"][action] == 1
                else:
                    action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                env.step(action)
            assert final is not None
            wins += final > 0
            draws += final == 0
            losses += final < 0
    return {"win": wins / n_games, "draw": draws / n_games, "loss": losses / n_games}


def run_seed(setup: TicTacToeSetup, seed: int, eval_games: int) -> dict[str, Any]:
    train_clock = Clock()
    trainer = build_trainer(setup, seed)
    info = trainer.run()
    wall, cpu = train_clock.wall(), train_clock.cpu()
    eval_clock = Clock()
    outcome = greedy_outcomes(trainer, eval_games)
    q_net = next(m for m in trainer.algorithm.policy.modules() if isinstance(m, QValuePolicy)).q_net
    plain = plain_loop_outcomes(q_net, eval_games, seed)
    return {
        "seed": seed,
        "setup": dataclasses.asdict(setup),
        "train_env_steps": int(info.train_step),
        "gradient_steps": int(info.gradient_step),
        "train_episodes": int(info.train_episode),
        "train_wall_s": wall,
        "train_cpu_s": cpu,
        "eval_collector": {"win": outcome.win, "draw": outcome.draw, "loss": outcome.loss},
        "eval_plain_loop": plain,
        "eval_wall_s": eval_clock.wall(),
    }


def _pct(outcome: dict[str, float]) -> str:
    return " / ".join(f"{100 * outcome[k]:.1f}" for k in ("win", "draw", "loss"))


def report(path: str) -> str:
    """A markdown table (one row per seed) of a JSON-lines file of this script or of
    ``benchmarks/tianshou_tictactoe.py``."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.startswith('{"seed"')]
    ours = "eval_collector" in rows[0]
    head = "| seed | env steps | gradient steps | wall s (CPU s) | greedy win / draw / loss % | " + (
        "same, plain PettingZoo loop |" if ours else "best-test-reward snapshot |"
    )
    lines = [head, "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        second = r["eval_plain_loop"] if ours else r.get("eval_best", r["eval_final"])
        first = r["eval_collector"] if ours else r["eval_final"]
        steps = r.get("gradient_steps", r.get("update_steps"))
        lines.append(
            f"| {r['seed']} | {r['train_env_steps']:,} | {steps:,} | {r['train_wall_s']:.0f} "
            f"({r['train_cpu_s']:.0f}) | {_pct(first)} | {_pct(second)} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", nargs="*", default=[], help="print markdown tables of these JSON-lines files")
    p.add_argument("--setup", choices=("full", "ci"), default="full")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--set", nargs="*", default=[], help="override setup fields: name=value")
    p.add_argument("--eval-games", type=int, default=1000)
    p.add_argument("--json-out", default="")
    args = p.parse_args()
    if args.report:
        print("\n\n".join(report(path) for path in args.report))
        return
    torch.set_num_threads(1)
    setup = FULL if args.setup == "full" else CI
    for item in args.set:
        name, value = item.split("=", 1)
        current = getattr(setup, name)
        if isinstance(current, tuple):
            parsed: Any = tuple(int(v) for v in value.split(","))
        else:
            parsed = None if value == "none" else type(current if current is not None else 0.0)(value)
        setup = dataclasses.replace(setup, **{name: parsed})
    for seed in args.seeds:
        row = run_seed(setup, seed, args.eval_games)
        row["setup_name"] = args.setup
        line = json.dumps(row)
        print(line, flush=True)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
