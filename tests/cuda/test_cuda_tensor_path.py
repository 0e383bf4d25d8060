"""The torch path on CUDA: TorchCartPole and VMAS stepping on the GPU with TensorCollector and
TensorReplayBuffer, PPO and DQN trained through the trainers, every tensor of the buffer on the GPU; and
an env on the CPU with the networks on the GPU (actions and rollouts cross once). Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tshtrain.config import build_run, resolve_experiment
from tshtrain.data import TensorCollector, TensorReplayBuffer

_TRAINER = {
    "max_epochs": 1,
    "epoch_num_steps": 512,
    "collection_step_num_env_steps": 256,
    "test_step_num_episodes": 2,
    "show_progress": False,
}


def _data(name: str, env_type: str, env_device: str | None) -> dict[str, object]:
    env: dict[str, object] = {"type": env_type, "num_training_envs": 8, "num_test_envs": 2}
    if env_type == "vmas":
        env.update(id="navigation", kwargs={"max_episode_steps": 50})
    if env_device is not None:
        env["device"] = env_device
    trainer = {**_TRAINER, "batch_size": 64} if name != "ppo" else dict(_TRAINER)
    return {"algorithm": {"name": name}, "device": "cuda", "env": env, "trainer": trainer, "loggers": []}


@pytest.mark.parametrize(
    ("name", "env_type", "env_device"),
    [
        ("ppo", "torch_cartpole", None),
        ("dqn", "torch_cartpole", None),
        ("ppo", "vmas", None),
        ("ppo", "torch_cartpole", "cpu"),  # env on the host, networks on the GPU
    ],
)
def test_the_torch_path_trains_on_cuda(
    tmp_path: Path, name: str, env_type: str, env_device: str | None
) -> None:
    if env_type == "vmas":
        pytest.importorskip("vmas")
    run = build_run(resolve_experiment(_data(name, env_type, env_device)), tmp_path)
    try:
        collector = run.trainer.params.training_collector  # type: ignore[attr-defined]
        assert isinstance(collector, TensorCollector)
        buffer = run.training_buffer
        assert isinstance(buffer, TensorReplayBuffer)
        gpu = torch.device("cuda", torch.cuda.current_device())
        expected = torch.device(env_device) if env_device else gpu
        info = run.trainer.run()
        assert info.gradient_step > 0
        assert buffer.device == expected
        if name == "dqn":
            assert buffer.sample(16).rew.device == expected
        assert run.algorithm.device.type == "cuda"
    finally:
        run.close()
