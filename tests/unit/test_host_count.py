"""QValuePolicy counts its explored env steps in a Python int mirrored into its buffer (issue 36): the
buffer must read the same as when it was advanced with ``add_``, whoever reads or writes it."""

from __future__ import annotations

import copy
import io

import gymnasium as gym
import numpy as np
import torch

from tshtrain.algorithm import EpsilonSchedule, QValuePolicy, mlp
from tshtrain.algorithm.blocks.host_count import HostCount

SCHEDULE = EpsilonSchedule(start=1.0, end=0.0, num_env_steps=1000)


def _policy() -> QValuePolicy:
    return QValuePolicy(mlp(3, 2, (8,)), gym.spaces.Discrete(2), eps_schedule=SCHEDULE, seed=0)


def _explore(policy: QValuePolicy, num_env_steps: int, num_envs: int = 1) -> None:
    rng = np.random.default_rng(0)
    obs = np.zeros((num_envs, 3), np.float32)
    for _ in range(num_env_steps // num_envs):
        policy.compute_noisy_actions(obs, rng, deterministic=False)


def test_the_buffer_and_state_dict_follow_every_env_step() -> None:
    policy = _policy()
    _explore(policy, 7)
    assert int(policy.explored_env_steps) == 7
    assert int(policy.state_dict()["explored_env_steps"]) == 7
    assert policy.eps == SCHEDULE.value(7)
    _explore(policy, 8, num_envs=4)
    assert int(policy.explored_env_steps) == 15 and policy.eps == SCHEDULE.value(15)


def test_torch_writes_to_the_buffer_are_seen() -> None:
    policy = _policy()
    _explore(policy, 5)
    policy.load_state_dict({**policy.state_dict(), "explored_env_steps": torch.tensor(100)})
    assert policy.eps == SCHEDULE.value(100)
    _explore(policy, 1)
    assert int(policy.explored_env_steps) == 101
    with torch.no_grad():
        policy.explored_env_steps.copy_(torch.tensor(40))  # what overlapped collection does
    assert policy.eps == SCHEDULE.value(40)
    policy.explored_env_steps.fill_(3)
    _explore(policy, 2)
    assert int(policy.explored_env_steps) == 5
    policy.to(torch.float64)  # a new module state: integer buffers stay, but _apply runs
    _explore(policy, 1)
    assert int(policy.explored_env_steps) == 6


def test_copies_count_on_their_own_buffer() -> None:
    policy = _policy()
    _explore(policy, 3)
    copied = copy.deepcopy(policy)
    _explore(copied, 4)
    _explore(policy, 1)
    assert int(copied.explored_env_steps) == 7 and int(policy.explored_env_steps) == 4
    data = io.BytesIO()
    torch.save(policy, data)
    data.seek(0)
    loaded: QValuePolicy = torch.load(data, weights_only=False)
    _explore(loaded, 2)
    assert int(loaded.explored_env_steps) == 6 and int(policy.explored_env_steps) == 4


def test_inference_tensors_are_read_every_time() -> None:
    count = HostCount()
    with torch.inference_mode():
        buffer = torch.zeros((), dtype=torch.int64)
        count.add(buffer, 2)
        buffer.fill_(9)
        assert count.read(buffer) == 9
