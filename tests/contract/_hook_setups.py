"""Small setups for the hook and event tests: algorithms with real optimizers that call the update
hooks, and builders of REINFORCE / off-policy / behaviour-cloning trainers that run in well under a
second."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm import BCParams, BehaviorCloning, CategoricalPolicy, Reinforce, ReinforceParams, mlp
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    Policy,
    TrainingStats,
    UpdateHooks,
    check_finite_loss,
)
from tshtrain.data import Collector, ObsTensor, RolloutBatch, TransitionBatch, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    Trainer,
    TrainerOptions,
)


class RandomPolicy(Policy):
    """Uniformly random Discrete actions from the policy's generator (records ``deterministic``)."""

    def __init__(self, action_space: Any, *, seed: int = 0):
        super().__init__(action_space=action_space, seed=seed)
        self.num_actions = int(action_space.n)
        self.deterministic_calls: list[bool] = []

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)
        self.deterministic_calls.append(deterministic)
        if deterministic:
            return torch.zeros(int(obs.shape[0]), dtype=torch.int64)
        return torch.randint(0, self.num_actions, (int(obs.shape[0]),), generator=self.generator)


@dataclass(frozen=True, kw_only=True)
class LossStats(TrainingStats):
    loss: float = 0.0


class LinearOffPolicy(OffPolicyAlgorithm[RandomPolicy]):
    """Regresses a linear function of the observation onto the reward with SGD, through the update
    hooks (on_sampled_batch, on_loss). ``nan_at``: the loss of that gradient step (1-based) is NaN,
    and the update raises NonFiniteLossError after its optimizer step, as the built-in algorithms do."""

    def __init__(
        self, *, policy: RandomPolicy, obs_dim: int = 4, lr: float = 0.01, nan_at: int | None = None
    ):
        super().__init__(policy=policy)
        torch.manual_seed(0)
        self.net = nn.Linear(obs_dim, 1)
        self.optim = torch.optim.SGD(self.net.parameters(), lr=lr)
        self.batches: list[TransitionBatch] = []
        self.nan_at = nan_at

    @override
    def components(self) -> dict[str, Any]:
        return {"policy": self.policy, "net": self.net, "optim": self.optim}

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TrainingStats:
        batch = hooks.on_sampled_batch(buffer.sample(batch_size))
        self.batches.append(batch)
        obs = torch.as_tensor(np.asarray(batch.obs), dtype=torch.float32)
        prediction: torch.Tensor = self.net(obs)
        loss = (prediction.squeeze(-1) - torch.as_tensor(batch.rew)).pow(2).mean()
        if self.nan_at is not None and len(self.batches) == self.nan_at:
            loss = loss * math.nan
        hooks.on_loss({"regression loss": loss})
        self.optim.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        self.optim.step()
        hooks.on_optimizer_step("optim", self.optim)
        check_finite_loss("LinearOffPolicy", "regression loss", loss)  # as the built-in algorithms do
        return LossStats(loss=float(loss.detach()))


class RecordingOnPolicy(OnPolicyAlgorithm[RandomPolicy]):
    """Records the rollouts it receives; one SGD step per update on a dummy loss."""

    def __init__(self, *, policy: RandomPolicy):
        super().__init__(policy=policy)
        self.net = nn.Linear(1, 1)
        self.optim = torch.optim.SGD(self.net.parameters(), lr=0.01)
        self.rollouts: list[RolloutBatch] = []

    @override
    def components(self) -> dict[str, Any]:
        return {"policy": self.policy, "net": self.net, "optim": self.optim}

    @override
    def update(
        self,
        rollout: RolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> TrainingStats:
        self.rollouts.append(
            RolloutBatch(
                obs=np.array(rollout.obs, copy=True),
                act=np.array(rollout.act, copy=True),
                rew=np.array(rollout.rew, copy=True),
                terminated=np.array(rollout.terminated, copy=True),
                truncated=np.array(rollout.truncated, copy=True),
                obs_next=np.array(rollout.obs_next, copy=True),
                boundary=np.array(rollout.boundary, copy=True),
                valid=np.array(rollout.valid, copy=True),
            )
        )
        prediction: torch.Tensor = self.net(torch.ones(1, 1))
        loss = prediction.pow(2).mean()
        hooks.on_loss({"dummy loss": loss})
        self.optim.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        self.optim.step()
        hooks.on_optimizer_step("optim", self.optim)
        check_finite_loss("LinearOffPolicy", "regression loss", loss)  # as the built-in algorithms do
        return LossStats(loss=float(loss.detach()))


def reinforce_trainer(
    *, seed: int = 0, num_envs: int = 2, options: TrainerOptions | None = None, **overrides: Any
) -> OnPolicyTrainer:
    """REINFORCE on CartPole: 2 epochs of 64 env steps, one mini-batch per update step."""
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", num_envs), make_vector_env("CartPole-v1", 1)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), envs.single_action_space, seed=seed)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(lr=1e-2), seed=seed)
    kwargs: dict[str, Any] = {
        "training_collector": Collector(policy, envs, VectorReplayBuffer(256, num_envs), seed=seed),
        "test_collector": Collector(policy, test_envs, seed=seed + 100),
        "max_epochs": 2,
        "epoch_num_steps": 64,
        "collection_step_num_env_steps": 32,
        "batch_size": None,
        "test_step_num_episodes": 1,
        "show_progress": False,
        "verbose": False,
        **overrides,
    }
    return OnPolicyTrainer(algorithm, OnPolicyTrainerParams(**kwargs), options)


def off_policy_trainer(
    *,
    seed: int = 0,
    num_envs: int = 2,
    nan_at: int | None = None,
    options: TrainerOptions | None = None,
    algorithm_factory: Callable[[RandomPolicy], OffPolicyAlgorithm[Any]] | None = None,
    env_factory: Callable[[], Any] | None = None,
    **overrides: Any,
) -> OffPolicyTrainer:
    """:class:`LinearOffPolicy` on CartPole (or ``env_factory()``'s vector env): 2 epochs of 2 training
    steps of 10 env steps, 2 gradient steps each."""
    envs = make_vector_env("CartPole-v1", num_envs) if env_factory is None else env_factory()
    test_envs = make_vector_env("CartPole-v1", 1) if env_factory is None else env_factory()
    policy = RandomPolicy(envs.single_action_space, seed=seed)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    algorithm = (
        algorithm_factory(policy)
        if algorithm_factory is not None
        else LinearOffPolicy(policy=policy, obs_dim=obs_dim, nan_at=nan_at)
    )
    kwargs: dict[str, Any] = {
        "training_collector": Collector(
            policy, envs, VectorReplayBuffer(512, num_envs, seed=seed), seed=seed
        ),
        "test_collector": Collector(policy, test_envs, seed=seed + 100),
        "max_epochs": 2,
        "epoch_num_steps": 20,
        "collection_step_num_env_steps": 10,
        "batch_size": 8,
        "update_step_num_gradient_steps_per_sample": 0.2,
        "show_progress": False,
        "verbose": False,
        **overrides,
    }
    return OffPolicyTrainer(algorithm, OffPolicyTrainerParams(**kwargs), options)


def recording_on_policy_trainer(*, seed: int = 0, num_envs: int = 2, **overrides: Any) -> OnPolicyTrainer:
    """:class:`RecordingOnPolicy` on CartPole (same sizes as :func:`reinforce_trainer`)."""
    envs, test_envs = make_vector_env("CartPole-v1", num_envs), make_vector_env("CartPole-v1", 1)
    policy = RandomPolicy(envs.single_action_space, seed=seed)
    kwargs: dict[str, Any] = {
        "training_collector": Collector(policy, envs, VectorReplayBuffer(256, num_envs), seed=seed),
        "test_collector": Collector(policy, test_envs, seed=seed + 100),
        "max_epochs": 2,
        "epoch_num_steps": 64,
        "collection_step_num_env_steps": 32,
        "batch_size": None,
        "show_progress": False,
        "verbose": False,
        **overrides,
    }
    return OnPolicyTrainer(RecordingOnPolicy(policy=policy), OnPolicyTrainerParams(**kwargs))


def bc_trainer(*, seed: int = 0, **overrides: Any) -> OfflineTrainer:
    """Behaviour cloning on 200 random CartPole transitions: 2 epochs of 3 gradient steps."""
    torch.manual_seed(seed)
    envs = make_vector_env("CartPole-v1", 2)
    buffer = VectorReplayBuffer(200, 2, seed=seed)
    Collector(RandomPolicy(envs.single_action_space, seed=seed), envs, buffer, seed=seed).collect(n_step=200)
    test_envs = make_vector_env("CartPole-v1", 1)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), test_envs.single_action_space, seed=seed)
    kwargs: dict[str, Any] = {
        "buffer": buffer,
        "test_collector": Collector(policy, test_envs, seed=seed + 100),
        "max_epochs": 2,
        "epoch_num_steps": 3,
        "batch_size": 16,
        "show_progress": False,
        "verbose": False,
        **overrides,
    }
    return OfflineTrainer(
        BehaviorCloning(policy=policy, params=BCParams(lr=1e-2)), OfflineTrainerParams(**kwargs)
    )


def any_trainer(family: str, **overrides: Any) -> Trainer[Any, Any]:
    """One of the builders above by family: "on", "off" or "offline"."""
    builders: dict[str, Callable[..., Trainer[Any, Any]]] = {
        "on": reinforce_trainer,
        "off": off_policy_trainer,
        "offline": bc_trainer,
    }
    return builders[family](**overrides)
