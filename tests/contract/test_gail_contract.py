"""Contract tests of GAIL: a tiny run on the OnPolicyTrainer, the trainer family check, state_dict round
trip (discriminator and its optimizer included), same seed -> same run, and a checkpointed run that is
interrupted and resumed equals the uninterrupted one bit for bit."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tshtrain.algorithm import GAIL, CategoricalPolicy, GAILParams, GAILTrainingStats, Policy, PPOParams, mlp
from tshtrain.checkpoint import CheckpointManager, CheckpointParams
from tshtrain.data import Collector, ObsTensor, ReplayBuffer, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.logger import CsvLogger
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams, OnPolicyTrainer, OnPolicyTrainerParams


class _Expert(Policy):
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)
        return (obs[:, 2] + obs[:, 3] > 0).long()


def _expert_buffer() -> ReplayBuffer:
    envs = make_vector_env("CartPole-v1", 1)
    buffer = ReplayBuffer(300, seed=0)
    Collector(_Expert(action_space=envs.single_action_space), envs, buffer, seed=0).collect(n_step=300)
    envs.close()
    return buffer


EXPERT = _expert_buffer()


def build(
    seed: int = 0,
    directory: Path | None = None,
    training_fn: Callable[[int, int], None] | None = None,
    max_epochs: int = 1,
) -> OnPolicyTrainer[Any]:
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", 2), make_vector_env("CartPole-v1", 2)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), envs.single_action_space, seed=seed)
    algorithm = GAIL(
        policy=policy,
        critic=mlp(4, 1, (16,)),
        expert_buffer=EXPERT,
        discriminator=mlp(6, 1, (16,)),
        params=GAILParams(ppo=PPOParams(lr=1e-3), disc_update_num=2),
        seed=seed,
    )
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, envs, VectorReplayBuffer(32, 2), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 100),
        max_epochs=max_epochs,
        epoch_num_steps=64,
        collection_step_num_env_steps=32,
        batch_size=16,
        update_step_num_repetitions=2,
        test_step_num_episodes=2,
        training_fn=training_fn,
        logger=None if directory is None else CsvLogger(directory / "log"),
        checkpoint=None if directory is None else CheckpointParams(directory=directory / "checkpoints"),
        verbose=False,
        show_progress=False,
    )
    return OnPolicyTrainer(algorithm, params)


def tensors(algorithm: GAIL) -> dict[str, torch.Tensor]:
    flat: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            flat[prefix] = value
        elif isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}/{key}", sub)
        elif isinstance(value, list | tuple):
            for i, sub in enumerate(value):
                walk(f"{prefix}/{i}", sub)

    walk("", algorithm.state_dict())
    return {k: v for k, v in flat.items() if not k.startswith("/_generators/policy")}


def assert_same_tensors(a: GAIL, b: GAIL) -> None:
    ta, tb = tensors(a), tensors(b)
    assert ta.keys() == tb.keys()
    for key, value in ta.items():
        torch.testing.assert_close(value, tb[key], rtol=0, atol=0, msg=key)


def test_one_tiny_epoch_on_the_trainer() -> None:
    trainer = build()
    (epoch,) = list(trainer)
    stat = epoch.training_stat
    assert type(stat) is GAILTrainingStats
    info = epoch.info_stat
    # 2 training steps of 32 env steps; each update: 2 discriminator steps (chunks of 16 rows), then
    # PPO's 2 passes x 2 mini-batches of 16
    assert (info.train_step, info.update_step, info.gradient_step) == (64, 2, 12)
    for name, value in stat.as_scalars().items():
        assert math.isfinite(value), (name, value)
    assert stat.gail_reward > 0.0  # -log(1 - D) > 0 always
    assert set(trainer.algorithm.state_dict()) >= {"policy", "critic", "optim", "discriminator", "disc_optim"}


def test_off_policy_trainer_refuses_gail() -> None:
    setup = build()
    params = OffPolicyTrainerParams(
        training_collector=setup.params.training_collector,
        test_collector=setup.params.test_collector,
        max_epochs=1,
        epoch_num_steps=10,
        collection_step_num_env_steps=2,
        batch_size=8,
    )
    with pytest.raises(
        ConfigurationError, match=r"^OffPolicyTrainer cannot train GAIL: .* Use OnPolicyTrainer with GAIL"
    ):
        OffPolicyTrainer(setup.algorithm, params)  # type: ignore[type-var, arg-type]  # the error under test


def test_state_dict_round_trip_gives_the_same_next_update() -> None:
    original = build(seed=0)
    original.run()
    saved = io.BytesIO()
    torch.save(original.algorithm.state_dict(), saved)
    saved.seek(0)
    restored = build(seed=1)
    restored.algorithm.load_state_dict(torch.load(saved, weights_only=True))
    assert_same_tensors(original.algorithm, restored.algorithm)
    collector = original.params.training_collector
    assert collector.buffer is not None
    collector.buffer.reset()
    collector.collect(n_step=32)
    rollout = collector.buffer.rollout()
    stats_a = original.algorithm.update(rollout, batch_size=16, num_repetitions=2)
    stats_b = restored.algorithm.update(rollout, batch_size=16, num_repetitions=2)
    assert stats_a == stats_b
    assert_same_tensors(original.algorithm, restored.algorithm)


def test_same_seed_same_run() -> None:
    first, second, other = build(seed=3), build(seed=3), build(seed=4)
    for trainer in (first, second, other):
        trainer.run()
    assert_same_tensors(first.algorithm, second.algorithm)
    with pytest.raises(AssertionError):
        assert_same_tensors(first.algorithm, other.algorithm)


def _interrupt_at(epoch: int) -> Callable[[int, int], None]:
    def training_fn(current: int, env_step: int) -> None:
        if current == epoch:
            raise KeyboardInterrupt

    return training_fn


def test_resumed_run_equals_uninterrupted_run_bitwise(tmp_path: Path) -> None:
    reference = build(directory=tmp_path / "a", max_epochs=4)
    info_a = reference.run()
    interrupted = build(directory=tmp_path / "b", max_epochs=4, training_fn=_interrupt_at(3))
    with pytest.raises(KeyboardInterrupt):
        interrupted.run()
    latest = CheckpointManager(CheckpointParams(directory=tmp_path / "b" / "checkpoints")).latest()
    assert latest is not None and latest.name.startswith("periodic-000002-")
    resumed = build(directory=tmp_path / "b", max_epochs=4)
    resumed.load_checkpoint(latest, trusted=True)
    info_b = resumed.run()
    assert_same_tensors(reference.algorithm, resumed.algorithm)  # discriminator and its Adam included
    assert (info_a.gradient_step, info_a.train_step, info_a.best_reward) == (
        info_b.gradient_step,
        info_b.train_step,
        info_b.best_reward,
    )
    assert not np.isnan(info_b.best_reward)
