"""Small seeded runs for the checkpoint tests (also run as a child process by the SIGKILL test)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tshtrain.algorithm import (
    DQN,
    CategoricalPolicy,
    DQNParams,
    EpsilonSchedule,
    QValuePolicy,
    Reinforce,
    ReinforceParams,
    mlp,
)
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.logger import CsvLogger
from tshtrain.trainer import (
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    Trainer,
)

MAX_EPOCHS = 4


def off_policy(
    directory: Path,
    seed: int = 0,
    training_fn: Callable[[int, int], None] | None = None,
    max_epochs: int = MAX_EPOCHS,
    **checkpoint: Any,
) -> Trainer[Any, Any]:
    """DQN on CartPole: ``max_epochs`` (4) epochs of 400 env steps, CSV logs and automatic checkpoints in
    ``directory``."""
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", 4), make_vector_env("CartPole-v1", 2)
    policy = QValuePolicy(
        mlp(4, 2, (32, 32), nn.ReLU),
        envs.single_action_space,
        eps_schedule=EpsilonSchedule(num_env_steps=800),
        seed=seed,
    )
    algorithm = DQN(policy=policy, params=DQNParams(target_update_freq=50))
    training = Collector(
        policy, envs, VectorReplayBuffer(4000, 4, seed=seed), exploration_noise=True, seed=seed
    )
    training.collect(n_step=200, random=True)
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(policy, test_envs, seed=seed + 100),
        max_epochs=max_epochs,
        epoch_num_steps=400,
        collection_step_num_env_steps=16,
        update_step_num_gradient_steps_per_sample=0.25,
        test_step_num_episodes=2,
        training_fn=training_fn,
        logger=CsvLogger(directory / "log"),
        checkpoint=CheckpointParams(directory=directory / "checkpoints", **checkpoint),
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(algorithm, params)


def on_policy(
    directory: Path, seed: int = 0, training_fn: Callable[[int, int], None] | None = None, **checkpoint: Any
) -> Trainer[Any, Any]:
    """REINFORCE on CartPole: 4 epochs of 1000 env steps (256 per collection step: episodes carry over)."""
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", 4), make_vector_env("CartPole-v1", 2)
    policy = CategoricalPolicy(mlp(4, 2, (32, 32)), envs.single_action_space, seed=seed)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(), seed=seed)
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, envs, VectorReplayBuffer(512, 4), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 100),
        max_epochs=MAX_EPOCHS,
        epoch_num_steps=1000,
        collection_step_num_env_steps=256,
        batch_size=64,
        test_step_num_episodes=2,
        training_fn=training_fn,
        logger=CsvLogger(directory / "log"),
        checkpoint=CheckpointParams(directory=directory / "checkpoints", **checkpoint),
        verbose=False,
        show_progress=False,
    )
    return OnPolicyTrainer(algorithm, params)


if __name__ == "__main__":  # child process of the SIGKILL test: a slow-writing checkpointed run
    import time

    from tshtrain import atomic

    original = atomic.fsync_tree

    def slow_fsync(root: Path) -> None:
        time.sleep(0.5)  # widen the window in which the parent kills us mid-write
        original(root)

    atomic.fsync_tree = slow_fsync
    trainer = off_policy(Path(sys.argv[1]))
    if len(sys.argv) > 2:
        trainer.load_checkpoint(sys.argv[2], trusted=True)
    trainer.run()
