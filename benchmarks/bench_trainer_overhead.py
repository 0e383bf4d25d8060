"""Trainer overhead: wall time of a CartPole on-policy run spent outside collection, update and test steps.

Run: python benchmarks/bench_trainer_overhead.py [--repeats 5] [--epochs 10]
Goal (trainer issue): overhead < 3% of the run. Prints the median and min/max over repetitions.
"""

from __future__ import annotations

import argparse

import torch
from harness import Clock, median_min_max, pin_torch_threads

from tshtrain.algorithm import CategoricalPolicy, Reinforce, ReinforceParams, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams


def one_run(epochs: int, seed: int, epoch_num_steps: int = 10_000) -> tuple[float, float]:
    """(overhead seconds, total seconds) of one run."""
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", 8), make_vector_env("CartPole-v1", 8)
    policy = CategoricalPolicy(mlp(4, 2, (64, 64)), envs.single_action_space, seed=seed)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(), seed=seed)
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, envs, VectorReplayBuffer(2048, 8), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1),
        max_epochs=epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=1024,
        batch_size=256,
        test_step_num_episodes=8,
        verbose=False,
        show_progress=False,
    )
    clock = Clock()
    info = OnPolicyTrainer(algorithm, params).run()
    total = clock.wall()
    t = info.timing
    return total - t.train_time_collect - t.train_time_update - t.test_time, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    pin_torch_threads()
    shares, totals = [], []
    for rep in range(args.repeats):
        overhead, total = one_run(args.epochs, seed=rep)
        shares.append(100 * overhead / total)
        totals.append(total)
    print(
        f"trainer overhead, CartPole on-policy (REINFORCE), {args.epochs} epochs x 10k env steps, "
        f"{args.repeats} runs"
    )
    print("  run time   median {:.2f} s (min {:.2f}, max {:.2f})".format(*median_min_max(totals)))
    print("  overhead   median {:.2f} % (min {:.2f}, max {:.2f}); goal < 3 %".format(*median_min_max(shares)))


if __name__ == "__main__":
    main()
