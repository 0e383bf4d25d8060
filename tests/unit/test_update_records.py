"""The values a short DQN and SAC run log are pinned: every ``update`` record (one per gradient step)
and every epoch's aggregated TrainingStats, compared exactly with ``update_records.json``.

The file was written by the code that converted each gradient step's statistics to floats inside
``algorithm.update`` (commit 23dd258); the statistics are now converted once per update step
(issue 36), and the logged numbers must not change. Regenerate only for an intended change of what is
logged: ``python tests/unit/test_update_records.py --write``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    DQN,
    SAC,
    DQNParams,
    EpsilonSchedule,
    QEnsemble,
    QValuePolicy,
    SACParams,
    TanhGaussianPolicy,
    mlp,
)
from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.algorithm.pending_stats import resolve_stats
from tshtrain.data import Collector, ReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import NonFiniteLossError
from tshtrain.logger import LogIntervals, LogScope, MemoryLogger
from tshtrain.trainer import Callback, EpochStats, OffPolicyTrainer, OffPolicyTrainerParams, RunContext

GOLDEN = Path(__file__).with_name("update_records.json")
TIMING_KEYS = ("update_time", "gradient_speed")
"""wall-clock keys of an update record: left out of the comparison"""


class StatsSeen(Callback):
    """What the callbacks see: each update step's aggregated stats, each epoch's."""

    def __init__(self) -> None:
        self.updates: list[dict[str, float]] = []
        self.epochs: list[dict[str, float]] = []

    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        self.updates.append({"num_gradient_steps": float(stats.num_gradient_steps), **stats.as_scalars()})

    def on_epoch_end(self, ctx: RunContext, stats: EpochStats) -> None:
        assert stats.training_stat is not None
        self.epochs.append(stats.training_stat.as_scalars())


def _run(algorithm: Algorithm[Any], env_id: str, *, collect: int, batch_size: int) -> dict[str, Any]:
    envs = make_vector_env(env_id, 1)
    collector = Collector(algorithm.policy, envs, ReplayBuffer(2000, seed=3), exploration_noise=True, seed=3)
    collector.collect(n_step=64, random=True)
    logger = MemoryLogger(LogIntervals(training_interval=1, update_interval=1))
    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=3,
        epoch_num_steps=2 * collect,
        collection_step_num_env_steps=collect,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=batch_size,
        logger=logger,
        verbose=False,
        show_progress=False,
    )
    trainer = OffPolicyTrainer(algorithm, params)
    seen = StatsSeen()
    trainer.add_callback(seen, name="stats")
    info = trainer.run()
    envs.close()
    updates = [
        [step, {k: v for k, v in data.items() if k not in TIMING_KEYS}]
        for step, data in logger.records[LogScope.UPDATE]
    ]
    return {
        "updates": updates,
        "after_update": seen.updates,
        "epochs": seen.epochs,
        "gradient_steps": info.gradient_step,
    }


def dqn_records() -> dict[str, Any]:
    torch.manual_seed(0)
    envs = make_vector_env("CartPole-v1", 1)
    policy = QValuePolicy(
        mlp(4, 2, (32, 32), nn.ReLU),
        envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=200),
        seed=1,
    )
    envs.close()
    algorithm = DQN(policy=policy, params=DQNParams(lr=1e-3, target_update_freq=8, max_grad_norm=10.0))
    return _run(algorithm, "CartPole-v1", collect=16, batch_size=32)


def sac_records() -> dict[str, Any]:
    torch.manual_seed(0)
    envs = make_vector_env("Pendulum-v1", 1)
    policy = TanhGaussianPolicy(mlp(3, 2, (32, 32), nn.ReLU), envs.single_action_space, seed=1)
    envs.close()
    critic = QEnsemble(3, 1, (32, 32), num_critics=2)
    algorithm = SAC(policy=policy, critic=critic, params=SACParams(actor_lr=1e-3, critic_lr=1e-3))
    return _run(algorithm, "Pendulum-v1", collect=8, batch_size=32)


def all_records() -> dict[str, Any]:
    return {"DQN": dqn_records(), "SAC": sac_records()}


@pytest.mark.parametrize("name", ["DQN", "SAC"])
def test_update_records_are_the_pinned_ones(name: str) -> None:
    expected = json.loads(GOLDEN.read_text())[name]
    got = json.loads(json.dumps({"DQN": dqn_records, "SAC": sac_records}[name]()))
    assert got["gradient_steps"] == expected["gradient_steps"]
    assert len(got["updates"]) == len(expected["updates"]) == expected["gradient_steps"]
    for (step, data), (want_step, want) in zip(got["updates"], expected["updates"], strict=True):
        assert step == want_step
        assert data == want, f"update record at gradient step {step}"
    assert got["after_update"] == expected["after_update"]
    assert got["epochs"] == expected["epochs"]
    assert all(np.isfinite(v) for _, data in got["updates"] for v in data.values())


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(json.dumps(all_records(), indent=1) + "\n")


# ------------------------------------------------------------------ deferred statistics (issue 36)
def _dqn_and_buffer(seed: int) -> tuple[DQN, ReplayBuffer]:
    torch.manual_seed(seed)
    policy = QValuePolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=seed)
    buffer = ReplayBuffer(64, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(64):
        buffer.add(
            obs=rng.standard_normal((1, 4)).astype(np.float32),
            act=rng.integers(0, 2, 1),
            rew=rng.standard_normal(1),
            terminated=rng.random(1) < 0.1,
            truncated=np.zeros(1, bool),
            obs_next=rng.standard_normal((1, 4)).astype(np.float32),
        )
    return DQN(policy=policy), buffer


def test_deferred_stats_resolve_to_the_floats_of_immediate_ones() -> None:
    deferred_dqn, deferred_buffer = _dqn_and_buffer(0)
    immediate_dqn, immediate_buffer = _dqn_and_buffer(0)
    immediate = [immediate_dqn.update(immediate_buffer, 16) for _ in range(5)]
    with deferred_dqn.deferring_stats():
        assert deferred_dqn.defers_stats
        deferred = [deferred_dqn.update(deferred_buffer, 16) for _ in range(5)]
    assert not deferred_dqn.defers_stats
    assert all(math.isnan(s.loss) for s in deferred)  # not resolved yet
    resolve_stats(deferred)
    assert deferred == immediate
    assert all(isinstance(s.loss, float) for s in deferred)
    resolve_stats(deferred)  # resolved records are left as they are
    assert deferred == immediate


def test_a_non_finite_loss_is_raised_when_the_deferred_stats_resolve() -> None:
    dqn, buffer = _dqn_and_buffer(1)
    with dqn.deferring_stats():
        stats = [dqn.update(buffer, 16)]
        with torch.no_grad():
            for param in dqn.policy.q_net.parameters():
                param.fill_(math.nan)
        stats.append(dqn.update(buffer, 16))
    with pytest.raises(NonFiniteLossError, match="DQN: the TD loss is nan"):
        resolve_stats(stats)
    assert math.isfinite(stats[0].loss)  # the records before the failing one are complete
