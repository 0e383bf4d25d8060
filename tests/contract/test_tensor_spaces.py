"""Dict observations, MultiDiscrete / MultiBinary actions and uint8 images on the torch path (TensorCollector,
TensorReplayBuffer): the same policies and encoders as on the numpy path, with data that never leaves
torch; PPO learns the "match the observation" tasks of tests/unit/test_multi_policies.py as torch envs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from torch import nn

from tests.extras import need
from tshtrain.algorithm import (
    PPO,
    BernoulliPolicy,
    CategoricalPolicy,
    MultiCategoricalPolicy,
    PPOParams,
    encoder_mlp,
    obs_encoder,
)
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.config import build_run, resolve_experiment
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.env import TensorStep, TensorVectorEnv

CPU = torch.device("cpu")
START = torch.tensor([1, -1])


class TorchMatchEnv:
    """Batched torch "match the observation" tasks, 4-step episodes (truncated), reward = fraction of
    matched components:

    * ``bits``: obs {"bits": MultiBinary(4) as int8, "bias": Box(1,)}, actions MultiBinary(4);
    * ``indices``: obs {"a": Discrete(3), "b": Discrete(4)}, actions MultiDiscrete([3, 4], start=[1, -1]);
    * ``image``: obs a uint8 (6, 6, 1) image with one lit pixel in row 0, actions Discrete(6) = its column.
    """

    def __init__(self, kind: str, num_envs: int, *, seed: int):
        self.kind = kind
        self._num_envs = num_envs
        self._gen = torch.Generator(device=CPU).manual_seed(seed)
        self._t = torch.zeros(num_envs, dtype=torch.int64, device=CPU)
        self._target = torch.zeros(num_envs, 4, dtype=torch.int64, device=CPU)
        if kind == "bits":
            self._obs_space: gym.Space[Any] = gym.spaces.Dict(
                {"bits": gym.spaces.MultiBinary(4), "bias": gym.spaces.Box(-1.0, 1.0, (1,))}
            )
            self._act_space: gym.Space[Any] = gym.spaces.MultiBinary(4)
        elif kind == "indices":
            self._obs_space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(4)})
            self._act_space = gym.spaces.MultiDiscrete([3, 4], start=START.numpy())
        else:
            self._obs_space = gym.spaces.Box(0, 255, (6, 6, 1), dtype="uint8")
            self._act_space = gym.spaces.Discrete(6)

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def device(self) -> torch.device:
        return CPU

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        return self._obs_space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        return self._act_space

    def _draw(self) -> Any:
        n = self._num_envs
        self._target = torch.stack(
            [torch.randint(0, high, (n,), generator=self._gen, device=CPU) for high in (2, 2, 2, 2)]
            if self.kind == "bits"
            else [torch.randint(0, high, (n,), generator=self._gen, device=CPU) for high in (3, 4, 6, 1)],
            dim=1,
        )
        if self.kind == "bits":
            return {"bits": self._target.to(torch.int8), "bias": torch.ones(n, 1, device=CPU)}
        if self.kind == "indices":
            return {"a": self._target[:, 0], "b": self._target[:, 1]}
        image = torch.zeros(n, 6, 6, 1, dtype=torch.uint8, device=CPU)
        image[torch.arange(n, device=CPU), 0, self._target[:, 2], 0] = 255
        return image

    def reset(self, *, seed: int | None = None) -> tuple[Any, Mapping[str, Any]]:
        if seed is not None:
            self._gen.manual_seed(seed)
        self._t.zero_()
        return self._draw(), {}

    def step(self, actions: torch.Tensor) -> TensorStep:
        if self.kind == "bits":
            reward = (actions.long() == self._target).float().mean(dim=1)
        elif self.kind == "indices":
            reward = (actions - START == self._target[:, :2]).float().mean(dim=1)
        else:
            reward = (actions == self._target[:, 2]).float()
        self._t += 1
        truncated = self._t >= 4
        self._t[truncated] = 0
        obs = self._draw()  # every step draws a new target; an ended episode's last obs is not used
        return TensorStep(obs, reward, torch.zeros_like(truncated), truncated, obs, {})

    def close(self) -> None:
        pass


def _policy(env: TorchMatchEnv, seed: int) -> tuple[ActorPolicy, nn.Module]:
    torch.manual_seed(seed)
    space, act = env.single_observation_space, env.single_action_space
    actor = encoder_mlp(obs_encoder(space), {"bits": 4, "indices": 7, "image": 6}[env.kind], (32,))
    policy: ActorPolicy
    if env.kind == "bits":
        policy = BernoulliPolicy(actor, act, seed=seed)
    elif env.kind == "indices":
        policy = MultiCategoricalPolicy(actor, act, seed=seed)
    else:
        policy = CategoricalPolicy(actor, act, seed=seed)
    return policy, encoder_mlp(obs_encoder(space), 1, (32,))


def _mean_reward(policy: ActorPolicy, kind: str, seed: int) -> float:
    collector = TensorCollector(policy, TorchMatchEnv(kind, 4, seed=seed + 1000), seed=seed + 1000)
    stats = collector.collect(n_episode=40, deterministic=True)
    return float(stats.returns.mean()) / 4


def test_the_test_env_implements_the_protocol() -> None:
    assert isinstance(TorchMatchEnv("bits", 2, seed=0), TensorVectorEnv)


@pytest.mark.parametrize("kind", ["bits", "indices", "image"])
def test_the_tensor_buffer_keeps_the_observation_and_action_dtypes(kind: str) -> None:
    env = TorchMatchEnv(kind, 2, seed=0)
    policy, critic = _policy(env, 0)
    buffer = TensorReplayBuffer(16, 2, device=CPU, seed=0)
    TensorCollector(policy, env, buffer, seed=0).collect(n_step=16)
    rollout = buffer.rollout()
    if kind == "bits":
        assert isinstance(rollout.obs, Mapping) and rollout.obs["bits"].dtype == torch.int8
        assert rollout.act.shape == (8, 2, 4)
    elif kind == "indices":
        assert isinstance(rollout.obs, Mapping) and set(rollout.obs) == {"a", "b"}
        assert rollout.act.shape == (8, 2, 2) and bool(((rollout.act - START) >= 0).all())
    else:
        assert isinstance(rollout.obs, torch.Tensor) and rollout.obs.dtype == torch.uint8  # scaled in the CNN
        assert rollout.obs.shape == (8, 2, 6, 6, 1)
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(lr=1e-2), seed=0)
    before = [p.detach().clone() for p in policy.parameters()]
    stats = ppo.update(rollout, batch_size=8, num_repetitions=1)
    assert stats.num_gradient_steps == 2
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters(), strict=True))


@pytest.mark.learning
@pytest.mark.parametrize("kind", ["bits", "indices", "image"])
def test_ppo_learns_to_match_the_observation_on_the_torch_path(kind: str) -> None:
    """Random policies score 0.5 (bits), about 0.29 (indices), 0.17 (image) per step; PPO with seed 0
    reaches 0.95 within 40 updates of 128 env steps."""
    seed = 0
    env = TorchMatchEnv(kind, 8, seed=seed)
    policy, critic = _policy(env, seed)
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(lr=3e-3, gamma=0.0), seed=seed)
    start = _mean_reward(policy, kind, seed)
    buffer = TensorReplayBuffer(128, 8, device=CPU, seed=seed)
    collector = TensorCollector(policy, env, buffer, seed=seed)
    for _ in range(40):
        buffer.reset()
        collector.collect(n_step=128)
        ppo.update(buffer.rollout(), batch_size=64, num_repetitions=4)
    end = _mean_reward(policy, kind, seed)
    print(f"RESULT torch-match-{kind} seed={seed} start={start:.3f} end={end:.3f}")
    assert start < 0.8 and end >= 0.95, (start, end)


@pytest.mark.integration
def test_ppo_on_vmas_with_discrete_actions_from_an_experiment(tmp_path: Path) -> None:
    """Two VMAS agents with discrete actions: a MultiDiscrete joint action, picked by the builder."""
    need("vmas", "vmas")
    data = {
        "algorithm": {"name": "ppo"},
        "device": "cpu",
        "env": {
            "type": "vmas",
            "id": "navigation",
            "kwargs": {"n_agents": 2, "continuous_actions": False, "max_episode_steps": 20},
            "num_training_envs": 16,
            "num_test_envs": 2,
        },
        "trainer": {
            "max_epochs": 1,
            "epoch_num_steps": 256,
            "collection_step_num_env_steps": 128,
            "batch_size": 64,
            "test_step_num_episodes": 2,
            "show_progress": False,
        },
        "loggers": [],
    }
    run = build_run(resolve_experiment(data), tmp_path)
    try:
        assert isinstance(run.algorithm.policy, MultiCategoricalPolicy)
        assert isinstance(run.training_buffer, TensorReplayBuffer)
        info = run.trainer.run()
        assert info.train_step == 256 and info.gradient_step > 0
    finally:
        run.close()
