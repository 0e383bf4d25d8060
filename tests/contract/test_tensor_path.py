"""The torch path through the normal Trainer API: PPO and DQN on TorchCartPole with a TensorCollector
and a TensorReplayBuffer, checkpoint save + resume bit-exact, and (``learning``) PPO reaching a mean
test return of 400 on TorchCartPole(num_envs=64)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tshtrain.algorithm import DQN, PPO, CategoricalPolicy, DQNParams, PPOParams, QValuePolicy, mlp
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.env import TorchCartPole
from tshtrain.errors import CheckpointError
from tshtrain.trainer import (
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
)

CPU = torch.device("cpu")


def _ppo_trainer(seed: int, *, num_envs: int = 4, max_epochs: int = 2, **kwargs: Any) -> OnPolicyTrainer:
    torch.manual_seed(seed)
    train_env = TorchCartPole(num_envs, CPU, seed=seed)
    test_env = TorchCartPole(2, CPU, seed=seed + 1000)
    policy = CategoricalPolicy(mlp(4, 2, (32, 32)), train_env.single_action_space, seed=seed)
    algorithm = PPO(policy=policy, critic=mlp(4, 1, (32, 32)), params=PPOParams(lr=1e-3), seed=seed)
    steps = kwargs.pop("collection_step_num_env_steps", 64)
    params = OnPolicyTrainerParams(
        training_collector=TensorCollector(
            policy, train_env, TensorReplayBuffer(steps, num_envs, device=CPU, seed=seed), seed=seed
        ),
        test_collector=TensorCollector(policy, test_env, seed=seed + 1),
        max_epochs=max_epochs,
        epoch_num_steps=128,
        collection_step_num_env_steps=steps,
        batch_size=32,
        verbose=False,
        show_progress=False,
        **{"test_step_num_episodes": 2, **kwargs},
    )
    return OnPolicyTrainer(algorithm, params)


def _dqn_trainer(
    seed: int, *, max_epochs: int = 2, checkpoint: CheckpointParams | None = None
) -> OffPolicyTrainer:
    torch.manual_seed(seed)
    train_env = TorchCartPole(4, CPU, seed=seed)
    test_env = TorchCartPole(2, CPU, seed=seed + 1000)
    policy = QValuePolicy(
        mlp(4, 2, (32,)),
        train_env.single_action_space,
        eps_schedule=EpsilonSchedule(num_env_steps=200),
        seed=seed,
    )
    algorithm = DQN(policy=policy, params=DQNParams(lr=1e-3, n_step=3, target_update_freq=20))
    params = OffPolicyTrainerParams(
        training_collector=TensorCollector(
            policy,
            train_env,
            TensorReplayBuffer(2000, 4, device=CPU, seed=seed),
            exploration_noise=True,
            seed=seed,
        ),
        test_collector=TensorCollector(policy, test_env, seed=seed + 1),
        max_epochs=max_epochs,
        epoch_num_steps=100,
        collection_step_num_env_steps=20,
        batch_size=32,
        test_step_num_episodes=2,
        checkpoint=checkpoint,
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(algorithm, params)


def _weights(trainer: Any) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.algorithm.policy.parameters()]


def test_ppo_trains_on_a_tensor_env_through_the_trainer() -> None:
    trainer = _ppo_trainer(0)
    before = _weights(trainer)
    info = trainer.run()
    assert info.train_step == 2 * 128
    assert info.gradient_step > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, _weights(trainer), strict=True))


def test_dqn_trains_on_a_tensor_env_with_nstep_targets() -> None:
    trainer = _dqn_trainer(0)
    info = trainer.run()
    assert info.train_step == 2 * 100
    assert info.gradient_step == 2 * 100  # u = 1: one gradient step per collected env step
    buffer = trainer.params.training_collector.buffer
    assert isinstance(buffer, TensorReplayBuffer)
    assert len(buffer) == 200


def test_same_seed_same_run_on_the_tensor_path() -> None:
    first, second = _ppo_trainer(3), _ppo_trainer(3)
    first.run()
    second.run()
    assert all(torch.equal(a, b) for a, b in zip(_weights(first), _weights(second), strict=True))


@pytest.mark.parametrize("family", ["ppo", "dqn"])
def test_checkpoint_resume_is_bit_exact_on_the_tensor_path(family: str, tmp_path: Path) -> None:
    def make(directory: Path | None) -> Any:
        checkpoint = None if directory is None else CheckpointParams(directory=directory, every_num_epochs=1)
        if family == "ppo":
            return _ppo_trainer(5, max_epochs=4, checkpoint=checkpoint)
        return _dqn_trainer(5, max_epochs=4, checkpoint=checkpoint)

    straight = make(tmp_path / "ckpt")
    straight.run()
    periodic = sorted((tmp_path / "ckpt").glob("periodic-000002-*"))
    assert len(periodic) == 1
    assert (periodic[0] / "envs" / "training.pt").is_file()  # torch format: no pickle, no --trust needed
    resumed = make(None)
    resumed.load_checkpoint(periodic[0])
    resumed.run()
    assert all(torch.equal(a, b) for a, b in zip(_weights(straight), _weights(resumed), strict=True))
    buffers = straight.params.training_collector.buffer, resumed.params.training_collector.buffer
    assert isinstance(buffers[0], TensorReplayBuffer) and isinstance(buffers[1], TensorReplayBuffer)
    for name, arr in buffers[0].field_arrays().items():
        np.testing.assert_array_equal(arr, buffers[1].field_arrays()[name])


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppo_learns_torch_cartpole_with_64_envs(seed: int) -> None:
    start = time.perf_counter()
    trainer = _ppo_trainer(
        seed,
        num_envs=64,
        max_epochs=12,
        collection_step_num_env_steps=64 * 32,
        test_step_num_episodes=16,
        stop_fn=lambda score: score >= 400,
    )
    info = trainer.run()
    seconds = time.perf_counter() - start
    print(
        f"RESULT ppo_torch_cartpole seed={seed} best_reward={info.best_reward:.1f} "
        f"best_epoch={info.best_epoch} env_steps={info.train_step} seconds={seconds:.1f}"
    )
    assert info.best_reward >= 400


def test_a_pickle_in_a_torch_env_snapshot_is_refused_untrusted(tmp_path: Path) -> None:
    """The env snapshot of a tensor collector is read with weights_only=True: a pickle planted in its
    place is not run, and the load fails naming the file; a `.pkl` snapshot for a tensor collector is
    not handed to it at all."""
    import hashlib
    import json
    import pickle

    straight = _ppo_trainer(
        5, max_epochs=2, checkpoint=CheckpointParams(directory=tmp_path / "c", every_num_epochs=1)
    )
    straight.run()
    checkpoint = sorted((tmp_path / "c").glob("periodic-000001-*"))[0]
    marker = tmp_path / "pwned"
    (checkpoint / "envs" / "training.pt").write_bytes(pickle.dumps(_MakesFile(marker)))
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    for rel in manifest["files"]:  # what an attacker who controls the directory can always do
        data = (checkpoint / rel).read_bytes()
        manifest["files"][rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))
    resumed = _ppo_trainer(5, max_epochs=2)
    before = [w.clone() for w in _weights(resumed)]
    with pytest.raises(CheckpointError, match=r"envs/training\.pt: not a tensor env snapshot"):
        resumed.load_checkpoint(checkpoint)
    assert not marker.exists()
    assert all(torch.equal(a, b) for a, b in zip(before, _weights(resumed), strict=True))  # nothing applied


class _MakesFile:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (open, (str(self.path), "w"))
