"""Learning-curve images for docs/algorithms/: one real run per algorithm, plotted from its CSV logs.

Each run calls an example script's own ``train(...)`` / ``run(...)`` (``examples/*.py``), seed 0, so the
networks, hyperparameters, collectors and seeds are exactly the example's. Only the trainer's params
are changed, by wrapping the example's trainer class for the duration of the call:

* ``logger``: a ``CsvLogger`` writing to ``LOG_DIR/<name>/``;
* ``stop_fn=None``: the run uses its whole budget (below) instead of stopping at the example's
  threshold, so the curve shows what happens after the threshold too;
* offline runs whose example evaluates only at the end get a test collector (10 episodes per epoch,
  the same env and seeds as the example's final evaluation), so that they have a test curve;
* ``verbose=False``, ``show_progress=False``.

Each image shows the mean test return (10 episodes per test step) against training env steps (offline:
against gradient steps) and, online, the mean return of the last 100 training episodes. A summary of
every run (env steps, first / best / final test return, wall time) goes to
``docs/img/learning_curves.json``, which the algorithm pages quote.

Usage::

    python scripts/make_learning_curves.py                 # every run, in the order below
    python scripts/make_learning_curves.py ppo dqn         # some of them
    python scripts/make_learning_curves.py --list

One CPU thread (``torch.set_num_threads(1)``). On a 2-core machine shared with other jobs (load average
6-10) the online runs took 40 minutes together and the offline ones 31 more, including making their
datasets (a DQN run for CartPole; for Pendulum a SAC run of 12,000 env steps, cached in the temp dir by
``examples/cql_pendulum.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
IMG_DIR = ROOT / "docs" / "img"
SUMMARY = IMG_DIR / "learning_curves.json"


@dataclass(frozen=True)
class Run:
    """One learning-curve run: an example function called with some arguments."""

    name: str
    """the image's name (docs/img/<name>.png) and the log directory's"""
    title: str
    example: str
    """the module under examples/"""
    function: str
    """``train`` or ``run``"""
    kwargs: dict[str, Any] = field(default_factory=dict)
    trainer: str = "OffPolicyTrainer"
    """the trainer class the example builds (the name it imports); the wrapped one"""
    budget: str = ""
    """the run's length, in words, for the summary"""
    test_env: tuple[str, int, int] | None = None
    """offline only: (env id, number of envs, collector seed) of a test collector to add"""
    offline: bool = False


RUNS = (
    Run("reinforce", "REINFORCE, CartPole-v1", "reinforce_cartpole", "train",
        {"max_epochs": 10, "epoch_num_steps": 5000}, "OnPolicyTrainer", "10 epochs of >= 5,000 env steps"),
    Run("dqn", "DQN, CartPole-v1", "dqn_cartpole", "train", {"max_epochs": 10},
        budget="10 epochs of 5,000 env steps (+1,000 random prefill steps)"),
    Run("dqn_475", "DQN (rl-zoo settings), CartPole-v1", "dqn_cartpole_475", "train", {"max_epochs": 20},
        budget="20 epochs of 2,560 env steps (+1,000 random prefill steps)"),
    Run("a2c", "A2C, CartPole-v1", "a2c_cartpole", "train", {"max_env_steps": 200_000}, "OnPolicyTrainer",
        "20 epochs of 10,000 env steps"),
    Run("ppo", "PPO, CartPole-v1", "ppo_cartpole", "train", {"max_env_steps": 100_000}, "OnPolicyTrainer",
        "24 epochs of 4,096 env steps"),
    Run("ppo_pendulum", "PPO, Pendulum-v1", "ppo_pendulum", "train", {"max_env_steps": 200_000},
        "OnPolicyTrainer", "12 epochs of 16,384 env steps"),
    Run("discrete_sac", "Discrete SAC, CartPole-v1", "discrete_sac_cartpole", "train", {"max_epochs": 5},
        budget="5 epochs of 10,000 env steps"),
    Run("ddpg", "DDPG, Pendulum-v1", "ddpg_pendulum", "train", {"max_epochs": 10},
        budget="10 epochs of 1,000 env steps (+1,000 random prefill steps)"),
    Run("td3", "TD3, Pendulum-v1", "td3_pendulum", "train", {"max_epochs": 10},
        budget="10 epochs of 1,000 env steps (+1,000 random prefill steps)"),
    Run("sac", "SAC, Pendulum-v1", "sac_pendulum", "train", {"max_epochs": 10},
        budget="10 epochs of 1,000 env steps (+1,000 random prefill steps)"),
    Run("bc", "Behaviour cloning, CartPole-v1 (dataset of a DQN agent)", "bc_cartpole", "run", {},
        "OfflineTrainer", "3 epochs of 1,000 gradient steps", offline=True),
    Run("discrete_cql", "Discrete CQL, CartPole-v1 (dataset of a DQN agent)", "discrete_cql_cartpole", "run",
        {}, "OfflineTrainer", "10 epochs of 1,000 gradient steps", ("CartPole-v1", 10, 2000), offline=True),
    Run("td3_bc", "TD3+BC, Pendulum-v1 (replay buffer of a SAC run)", "td3_bc_pendulum", "run", {},
        "OfflineTrainer", "8 epochs of 1,000 gradient steps", ("Pendulum-v1", 10, 2000), offline=True),
    Run("cql", "CQL, Pendulum-v1 (replay buffer of a SAC run)", "cql_pendulum", "run", {},
        "OfflineTrainer", "5 epochs of 1,000 gradient steps", ("Pendulum-v1", 10, 2000), offline=True),
)  # fmt: skip


def _import_example(name: str) -> ModuleType:
    examples = str(ROOT / "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)  # examples import each other (bc_cartpole uses dqn_cartpole)
    return importlib.import_module(name)


def _wrapped_trainer(run: Run, trainer_cls: Any, logger: Any) -> Callable[..., Any]:
    """The example's trainer class, building the trainer from params with the changes listed above."""

    def build(algorithm: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
        from tshtrain.data import Collector
        from tshtrain.env import make_vector_env

        changes: dict[str, Any] = {"logger": logger, "verbose": False, "show_progress": False}
        if params.test_collector is not None:
            changes["stop_fn"] = None
        elif run.test_env is not None:
            env_id, num_envs, seed = run.test_env
            envs = make_vector_env(env_id, num_envs)
            changes["test_collector"] = Collector(algorithm.policy, envs, seed=seed)
            changes["test_step_num_episodes"] = 10
        return trainer_cls(algorithm, dataclasses.replace(params, **changes), *args, **kwargs)

    return build


def train_one(run: Run, log_dir: Path) -> dict[str, Any]:
    """Train ``run`` with a CsvLogger in ``log_dir`` and return its summary."""
    from tshtrain.logger import CsvLogger

    shutil.rmtree(log_dir, ignore_errors=True)  # a CsvLogger appends to the files it finds
    module = _import_example(run.example)
    trainer_cls = getattr(module, run.trainer)
    logger = CsvLogger(log_dir)
    setattr(module, run.trainer, _wrapped_trainer(run, trainer_cls, logger))
    start = time.monotonic()
    try:
        getattr(module, run.function)(seed=0, verbose=False, **run.kwargs)
    finally:
        setattr(module, run.trainer, trainer_cls)
        logger.close()
    return {"wall_time_s": round(time.monotonic() - start)}


def _curve(log_dir: Path, scope: Any, key: str, label: str, step_divisor: int = 1) -> Any:
    import numpy as np

    from tshtrain.logger.plot import CurveGroup, load_curve

    curve = load_curve(log_dir, scope=scope, key=key)
    steps = curve.steps // step_divisor
    curve = dataclasses.replace(curve, steps=steps)
    return CurveGroup(label=label, runs=(curve,), steps=steps, mean=curve.values, std=np.zeros(len(steps)))


def plot_one(run: Run, log_dir: Path, summary: dict[str, Any]) -> Path:
    """Draw the run's curves into docs/img/<name>.png and fill in the summary's returns."""
    from tshtrain.logger import LogScope, read_csv_log
    from tshtrain.logger.plot import plot_learning_curves

    records = read_csv_log(log_dir)
    # offline, env_step counts sampled transitions (batch_size per gradient step): plot gradient steps
    info = records[LogScope.INFO][-1][1]
    divisor = 1
    if run.offline:
        divisor = max(1, round(info["env_step"] / info["gradient_step"]))
    episodes = round(records[LogScope.TEST][0][1]["n_collected_episodes"])
    groups = [_curve(log_dir, LogScope.TEST, "returns/mean", f"test return ({episodes} episodes)", divisor)]
    if not run.offline:
        groups.append(
            _curve(log_dir, LogScope.TRAINING, "returns_window/mean", "training return (last 100 episodes)")
        )
    output = plot_learning_curves(
        groups,
        IMG_DIR / f"{run.name}.png",
        title=f"{run.title}, seed 0",
        xlabel="gradient steps" if run.offline else "training env steps",
        ylabel="episode return",
    )
    test = groups[0]
    summary.update(
        title=run.title,
        example=f"examples/{run.example}.py",
        call=f"{run.function}(seed=0, {', '.join(f'{k}={v!r}' for k, v in run.kwargs.items())})".replace(
            ", )", ")"
        ),
        budget=run.budget,
        env_steps=int(info["env_step"]),
        gradient_steps=int(info["gradient_step"]),
        test_at=[int(s) for s in test.steps],
        test_returns=[round(float(v), 1) for v in test.mean],
        initial_test_return=round(float(test.mean[0]), 1),
        best_test_return=round(float(test.mean.max()), 1),
        final_test_return=round(float(test.mean[-1]), 1),
    )
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="runs to make (default: all)")
    parser.add_argument("--list", action="store_true", help="list the runs and exit")
    parser.add_argument("--log-dir", default=None, help="where the CSV logs go (default: a temp dir)")
    parser.add_argument(
        "--replot", action="store_true", help="only redraw the runs whose logs are in --log-dir already"
    )
    args = parser.parse_args(argv)
    if args.list:
        for run in RUNS:
            print(f"{run.name:14} examples/{run.example}.py {run.function}(...)  {run.budget}")
        return 0
    unknown = set(args.names) - {run.name for run in RUNS}
    if unknown:
        parser.error(f"unknown runs {sorted(unknown)}; see --list")
    torch.set_num_threads(1)
    log_root = Path(args.log_dir or tempfile.mkdtemp(prefix="tshtrain_curves_"))
    summaries = json.loads(SUMMARY.read_text()) if SUMMARY.exists() else {}
    for run in RUNS:
        if args.names and run.name not in args.names:
            continue
        log_dir = log_root / run.name
        if args.replot:
            if not (log_dir / "info.csv").exists():
                continue
            summary = {"wall_time_s": summaries.get(run.name, {}).get("wall_time_s")}
        else:
            print(f"[{run.name}] training ({run.budget}), logs in {log_dir}", flush=True)
            summary = train_one(run, log_dir)
        output = plot_one(run, log_dir, summary)
        summaries[run.name] = summary
        IMG_DIR.mkdir(parents=True, exist_ok=True)
        SUMMARY.write_text(json.dumps(summaries, indent=1, sort_keys=True) + "\n")
        print(
            f"[{run.name}] wrote {output.relative_to(ROOT)}: {summary['env_steps']} env steps, "
            f"test return {summary['initial_test_return']} -> best {summary['best_test_return']}, "
            f"final {summary['final_test_return']}, {summary['wall_time_s']} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
