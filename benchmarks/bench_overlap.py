"""Overlapped collection: DQN wall time with and without ``overlap_collection`` (docs/overlap.md).

Contestants (one training run each, no test steps, interleaved over ``--reps`` repetitions with seeds
0, 1, ...; the rate is training env steps per wall-clock second):

* ``cartpole``: the DQN CartPole example's settings (tshtrain/config/defaults.py: one env, 256 env
  steps per collection step, 128 gradient steps of batch 64 on a 256-256 MLP), in-process env;
* ``busy``: the same learner on 2 CartPole envs in subprocesses (``AsyncVectorEnv``) whose every step
  also spins the CPU for ``--busy-us`` microseconds (a stand-in for a simulator; it runs outside the
  trainer's GIL);
* ``heavy``: the ``busy`` envs with a kernel-bound learner: batches of ``--heavy-batch`` transitions
  (torch holds the GIL for a smaller share of each gradient step).

Each with ``overlap_collection`` off and on. torch is pinned to one thread per thread (harness rule),
so with overlap the process can use two cores: the learner's and the collection thread's.

Run: python benchmarks/bench_overlap.py [--reps 3] [--epochs 1] [--busy-us 500]
Writes benchmarks/results/overlap.json.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Contestant, Goal, TableResult, pin_torch_threads, print_table, run_interleaved
from report import run_header, write_json
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, mlp
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams, TrainerOptions

PACKAGES = ("tshtrain", "torch", "gymnasium", "numpy")
EXPERIMENT = default_experiment("dqn")
TRAINER = EXPERIMENT.trainer
HPARAMS = EXPERIMENT.algorithm.params


class BusyStep(gym.Wrapper[Any, Any, Any, Any]):
    """Spins the CPU for ``busy_us`` microseconds in every step (no sleep: it costs CPU like a simulator)."""

    def __init__(self, env: gym.Env[Any, Any], busy_us: int):
        super().__init__(env)
        self.busy_s = busy_us / 1e6

    def step(self, action: Any) -> Any:
        end = time.perf_counter() + self.busy_s
        while time.perf_counter() < end:
            pass
        return self.env.step(action)


def _busy_cartpole(busy_us: int) -> Callable[[], gym.Env[Any, Any]]:
    return lambda: BusyStep(gym.make("CartPole-v1"), busy_us)


def make_run(
    *, overlap: bool, busy_us: int | None, epochs: int, seed: int, batch_size: int
) -> Callable[[], None]:
    """Build (untimed: envs, networks, a 1000-step random prefill) and return the timed training run."""
    torch.manual_seed(seed)
    if busy_us is None:
        envs = make_vector_env("CartPole-v1", 1)
    else:
        envs = gym.vector.AsyncVectorEnv(
            [_busy_cartpole(busy_us)] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )
    hidden = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])
    policy = QValuePolicy(
        mlp(4, 2, hidden, nn.ReLU),
        envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.04, num_env_steps=8000),
        seed=seed,
    )
    algorithm = DQN(
        policy=policy,
        params=DQNParams(
            lr=HPARAMS["lr"],
            gamma=HPARAMS["gamma"],
            target_update_freq=HPARAMS["target_update_freq"],
            huber_loss=HPARAMS["huber_loss"],
            max_grad_norm=HPARAMS["max_grad_norm"],
        ),
    )
    num_envs = int(envs.num_envs)
    buffer = VectorReplayBuffer(EXPERIMENT.buffer.size, num_envs, seed=seed)
    collector = Collector(policy, envs, buffer, exploration_noise=True, seed=seed)
    collector.collect(n_step=1000, random=True)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=epochs,
        epoch_num_steps=TRAINER["epoch_num_steps"],
        collection_step_num_env_steps=TRAINER["collection_step_num_env_steps"],
        update_step_num_gradient_steps_per_sample=TRAINER["update_step_num_gradient_steps_per_sample"],
        batch_size=batch_size,
        verbose=False,
        show_progress=False,
        overlap_collection=overlap,
    )
    trainer = OffPolicyTrainer(algorithm, params, TrainerOptions(close_envs=True))

    def run() -> None:
        trainer.run()  # closes the envs (close_envs=True)

    return run


def contestant(name: str, *, overlap: bool, busy_us: int | None, epochs: int, batch_size: int) -> Contestant:
    seeds = itertools.count()
    return Contestant(
        name=name,
        setup=lambda: make_run(
            overlap=overlap, busy_us=busy_us, epochs=epochs, seed=next(seeds), batch_size=batch_size
        ),
        work=float(epochs * TRAINER["epoch_num_steps"]),
        warmup_setup=lambda: make_run(
            overlap=overlap, busy_us=busy_us, epochs=1, seed=99, batch_size=batch_size
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1, help="epochs of 2560 env steps per run")
    parser.add_argument("--busy-us", type=int, default=500, help="CPU spin per env step of the busy env")
    parser.add_argument("--heavy-batch", type=int, default=1024, help="batch size of the heavy learner")
    parser.add_argument("--groups", default="cartpole,busy,heavy", help="comma-separated groups to run")
    args = parser.parse_args()
    pin_torch_threads()
    header = run_header(PACKAGES)
    tables = []
    groups = {
        "cartpole": (None, TRAINER["batch_size"]),
        "busy": (args.busy_us, TRAINER["batch_size"]),
        "heavy": (args.busy_us, args.heavy_batch),
    }
    for label in args.groups.split(","):
        busy, batch = groups[label]
        rows = run_interleaved(
            [
                contestant(
                    f"{label} overlap off", overlap=False, busy_us=busy, epochs=args.epochs, batch_size=batch
                ),
                contestant(
                    f"{label} overlap on", overlap=True, busy_us=busy, epochs=args.epochs, batch_size=batch
                ),
            ],
            reps=args.reps,
            unit="env steps/s",
            label=label,
        )
        env_text = (
            "1 in-process CartPole env" if busy is None else f"2 subprocess CartPole envs + {busy} us spin"
        )
        table = TableResult(
            title=f"DQN ({env_text}, batch {batch}), {args.epochs} x 2560 env steps, 1280 gradient steps",
            unit="env steps/s",
            rows=rows,
            goals=[Goal(numerator=f"{label} overlap on", denominator=f"{label} overlap off", target=1.0)],
            notes=[f"{args.reps} repetitions (seeds 0..{args.reps - 1}), interleaved; machine shared"],
        )
        print_table(table)
        tables.append(table)
    path = write_json(
        "overlap",
        {
            **header,
            "args": vars(args),
            "tables": [t.to_json() for t in tables],
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
