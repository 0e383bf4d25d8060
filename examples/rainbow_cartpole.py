"""Rainbow on CartPole-v1 with the settings of its default experiment (``tshtrain config rainbow``), so this
script and ``tshtrain train examples/configs/rainbow_cartpole.yaml`` train alike; built by
examples/distributional_cartpole.py.

Run: python examples/rainbow_cartpole.py [--seed 0] [--max-epochs 10]
"""

from __future__ import annotations

import argparse
from typing import Any

from distributional_cartpole import build, close

from tshtrain.trainer import InfoStats, OffPolicyTrainer


def train(seed: int = 0, max_epochs: int | None = None, verbose: bool = True) -> tuple[Any, InfoStats]:
    """Train until a test step averages the default experiment's stop score or the epochs run out."""
    algorithm, params = build("rainbow", seed, max_epochs, verbose)
    try:
        return algorithm, OffPolicyTrainer(algorithm, params).run()
    finally:
        close(params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=None)
    args = parser.parse_args()
    _, info = train(args.seed, args.max_epochs)
    print(f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, {info.train_step} env steps")


if __name__ == "__main__":
    main()
