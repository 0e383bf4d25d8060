"""QR-DQN on CartPole-v1 with the settings of its default experiment (``tshtrain config qrdqn``), so this
script and ``tshtrain train examples/configs/qrdqn_cartpole.yaml`` train alike; built by
examples/distributional_cartpole.py.

Run: python examples/qrdqn_cartpole.py [--seed 0] [--max-epochs 10]
"""

from __future__ import annotations

from typing import Any

import distributional_cartpole

from tshtrain.trainer import InfoStats, OffPolicyTrainer


def train(seed: int = 0, max_epochs: int | None = None, verbose: bool = True) -> tuple[Any, InfoStats]:
    """Train until a test step averages the default experiment's stop score or the epochs run out."""
    return distributional_cartpole.train("qrdqn", seed, max_epochs, verbose, trainer=OffPolicyTrainer)


if __name__ == "__main__":
    distributional_cartpole.script_main(__doc__, train)
