"""The port of Tianshou's test/offline/test_cql.py (examples/from_tianshou/from_test_cql.py): a tiny
run in CI, the script's own threshold (-1200 on the best test return) on 4 of 5 seeds in the slow tier."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "from_tianshou"))

import from_test_cql as cql_pendulum


def test_tiny_gather_and_run(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    buffer = cql_pendulum.gather_data(0, max_epochs=1, epoch_num_steps=100, num_env_steps=400)
    assert len(buffer) == 400
    act = buffer.sample_all().act
    assert float(np.abs(act).max()) <= 1.0  # stored in the policy's [-1, 1] space
    best = cql_pendulum.run(0, epochs=1, epoch_num_steps=5, buffer=buffer)
    assert -2000.0 < best < 0.0  # Pendulum's returns over 200 steps lie in (-16.3 * 200, 0]


def test_the_actor_ends_in_one_unit() -> None:
    actor = cql_pendulum.one_unit_actor()
    linears = [m for m in actor.modules() if isinstance(m, torch.nn.Linear)]
    assert linears[-2].out_features == 1  # the MLP's single output unit
    assert (linears[-1].in_features, linears[-1].out_features) == (1, 2)  # mean and log-std heads


@pytest.mark.slow
def test_reaches_tianshous_threshold_on_most_seeds() -> None:
    """The script's budget (5 epochs of 500 gradient steps, batch 64) on the deterministic dataset:
    measured best test returns, seeds 0-4: -1292.1, -1161.1, -1076.2, -1161.1, -1116.1 (4 of 5 reach
    -1200, which is close to a random policy's return: single runs are noisy). Requires 4 of 5."""
    torch.set_num_threads(1)
    best = [cql_pendulum.run(seed) for seed in range(5)]
    print("RESULT from_test_cql best test returns, seeds 0-4:", [round(b, 1) for b in best])
    assert sum(b >= cql_pendulum.REWARD_THRESHOLD for b in best) >= 4, best
