"""Fakes and builders for the trainer contract tests.

The fake algorithms do no learning: they record what the trainer handed them (rollout shapes, batch
sizes, call counts) and return a small ``TrainingStats`` subclass, so a whole run takes milliseconds.
The builders wire fresh envs, collectors and buffers from a seed, so that two builds with the same seed
give the same run.

Everything the tests need is reached through fixtures (``kit`` and friends), because two ``conftest``
modules cannot both be imported by name.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    Policy,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.data import Collector, ObsTensor, RolloutBatch, VectorReplayBuffer
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
)

# ====================================================================== policy and stats


class FixedPolicy(Policy):
    """Discrete actions: always ``fixed_action``, or uniformly random from the policy's generator."""

    def __init__(self, action_space: gym.Space[Any], *, fixed_action: int | None = None, seed: int = 0):
        super().__init__(action_space=action_space, seed=seed)
        assert isinstance(action_space, gym.spaces.Discrete)
        self.num_actions = int(action_space.n)
        self.fixed_action = fixed_action

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)
        n = int(obs.shape[0])
        if self.fixed_action is not None:
            return torch.full((n,), self.fixed_action, dtype=torch.int64)
        return torch.randint(0, self.num_actions, (n,), generator=self.generator)


@dataclass(frozen=True, kw_only=True)
class FakeStats(TrainingStats):
    """A TrainingStats subclass with one float field."""

    loss: float = 0.0


# ====================================================================== fake algorithms


@dataclass(frozen=True, kw_only=True)
class OnPolicyCall:
    """What one on-policy update received."""

    shape: tuple[int, int]
    num_steps: int
    batch_size: int | None
    num_repetitions: int
    rew: np.ndarray
    done: np.ndarray
    valid: np.ndarray


class FakeOnPolicy(OnPolicyAlgorithm[FixedPolicy]):
    """Records every rollout; reports ceil(steps / batch_size) * repetitions gradient steps."""

    def __init__(self, *, policy: FixedPolicy):
        super().__init__(policy=policy)
        self.calls: list[OnPolicyCall] = []

    @override
    def update(
        self,
        rollout: RolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> TrainingStats:
        self.calls.append(
            OnPolicyCall(
                shape=rollout.shape,
                num_steps=rollout.num_steps,
                batch_size=batch_size,
                num_repetitions=num_repetitions,
                rew=np.array(rollout.rew, copy=True),  # the rollout views the buffer, which is cleared
                done=np.array(rollout.terminated | rollout.truncated, copy=True),
                valid=np.array(rollout.valid, copy=True),
            )
        )
        per_pass = 1 if batch_size is None else math.ceil(rollout.num_steps / batch_size)
        return FakeStats(loss=float(len(self.calls)), num_gradient_steps=per_pass * num_repetitions)


class FakeOffPolicy(OffPolicyAlgorithm[FixedPolicy]):
    """Samples ``batch_size`` transitions per call; the loss is the sample's mean observation."""

    def __init__(self, *, policy: FixedPolicy, gradient_steps_per_call: int = 1):
        super().__init__(policy=policy)
        self.gradient_steps_per_call = gradient_steps_per_call
        self.batch_sizes: list[int] = []
        self.buffer_lens: list[int] = []
        self.losses: list[float] = []

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TrainingStats:
        batch = buffer.sample(batch_size)
        assert isinstance(batch.obs, np.ndarray)
        loss = float(np.mean(batch.obs)) + len(self.losses)
        self.batch_sizes.append(batch_size)
        self.buffer_lens.append(len(buffer))
        self.losses.append(loss)
        return FakeStats(loss=loss, num_gradient_steps=self.gradient_steps_per_call)


class FakeOffline(OfflineAlgorithm[FixedPolicy]):
    """Samples ``batch_size`` transitions per call from the dataset."""

    def __init__(self, *, policy: FixedPolicy):
        super().__init__(policy=policy)
        self.batch_sizes: list[int] = []
        self.losses: list[float] = []
        self.processed: list[BaseReplayBuffer] = []

    @override
    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        self.processed.append(buffer)

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TrainingStats:
        batch = buffer.sample(batch_size)
        assert isinstance(batch.obs, np.ndarray)
        loss = float(np.mean(batch.obs))
        self.batch_sizes.append(batch_size)
        self.losses.append(loss)
        return FakeStats(loss=loss)


# ====================================================================== tiny envs


class CountingEnv(gym.Env[np.ndarray, np.int64]):
    """Episodes of exactly ``length`` steps; the reward of step t (0-based) is ``t + 1`` (``ramp``) or 1.

    An episode's return is therefore ``length * (length + 1) / 2`` or ``length``.
    """

    def __init__(self, length: int, *, ramp: bool = False):
        self.length = length
        self.ramp = ramp
        self.observation_space = gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def episode_return(self) -> float:
        return self.length * (self.length + 1) / 2 if self.ramp else float(self.length)

    @override
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], dtype=np.float32), {}

    @override
    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        reward = float(self._t) if self.ramp else 1.0
        return np.array([float(self._t)], dtype=np.float32), reward, self._t >= self.length, False, {}


def counting_vector_env(lengths: list[int], *, ramp: bool = False) -> gym.vector.VectorEnv[Any, Any, Any]:
    """A vector env whose sub-env i has episodes of ``lengths[i]`` steps."""
    pending = list(lengths)

    def factory() -> gym.Env[Any, Any]:
        return CountingEnv(pending.pop(0), ramp=ramp)

    return make_vector_env(factory, len(lengths))


class MultiAgentVectorEnv(gym.vector.VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """Same-step-autoreset vector env with one reward per agent: each step gives ``agent_rewards``.

    Every episode lasts ``length`` steps, so agent j's return is ``length * agent_rewards[j]``.
    """

    metadata: dict[str, Any] = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, num_envs: int, *, length: int, agent_rewards: tuple[float, ...]):
        self.num_envs = num_envs
        self.length = length
        self.agent_rewards = np.asarray(agent_rewards, dtype=np.float64)
        self.single_observation_space = gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._t = np.zeros(num_envs, dtype=np.int64)

    @override
    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._t[:] = 0
        return np.zeros((self.num_envs, 1), dtype=np.float32), {}

    @override
    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self._t += 1
        terminated = self._t >= self.length
        obs = self._t[:, None].astype(np.float32)
        info: dict[str, Any] = {}
        if terminated.any():
            info["final_obs"] = np.array([row.copy() for row in obs], dtype=object)
            obs = obs.copy()
            obs[terminated] = 0.0
            self._t[terminated] = 0
        rew = np.tile(self.agent_rewards, (self.num_envs, 1))
        return obs, rew, terminated, np.zeros(self.num_envs, dtype=bool), info


# ====================================================================== builders


EnvSpec = str | Callable[[], gym.vector.VectorEnv[Any, Any, Any]]
"""A Gymnasium id (built with ``make_vector_env(id, num_envs)``) or a zero-argument vector env builder."""


def _vector_env(env: EnvSpec, num_envs: int) -> gym.vector.VectorEnv[Any, Any, Any]:
    return make_vector_env(env, num_envs) if isinstance(env, str) else env()


@dataclass
class Setup:
    """A freshly wired algorithm + params; ``trainer()`` builds the matching trainer."""

    algorithm: Any
    params: Any
    training_collector: Collector | None
    test_collector: Collector | None
    buffer: BaseReplayBuffer
    trainer_cls: type[Trainer[Any, Any]]
    extra: dict[str, Any] = field(default_factory=dict)

    def trainer(self) -> Trainer[Any, Any]:
        return self.trainer_cls(self.algorithm, self.params)


def _test_collector(
    test_env: EnvSpec | None, test_num_envs: int, seed: int, action: int | None
) -> Collector | None:
    if test_env is None:
        return None
    env = _vector_env(test_env, test_num_envs)
    policy = FixedPolicy(env.single_action_space, fixed_action=action, seed=seed + 1000)
    return Collector(policy, env, None, seed=seed + 500)


def _online(
    family: str,
    *,
    num_envs: int,
    seed: int,
    env: EnvSpec,
    test_env: EnvSpec | None,
    test_num_envs: int,
    buffer_size: int,
    fixed_action: int | None,
    gradient_steps_per_call: int,
    overrides: Mapping[str, Any],
) -> Setup:
    vec = _vector_env(env, num_envs)
    policy = FixedPolicy(vec.single_action_space, fixed_action=fixed_action, seed=seed)
    buffer = VectorReplayBuffer(buffer_size, num_envs, seed=seed + 7)
    collector = Collector(policy, vec, buffer, seed=seed)
    test_collector = _test_collector(test_env, test_num_envs, seed, fixed_action)
    kwargs: dict[str, Any] = {
        "training_collector": collector,
        "test_collector": test_collector,
        "max_epochs": 2,
        "epoch_num_steps": 20,
        "collection_step_num_env_steps": 10,
        "show_progress": False,
        "verbose": False,
        **overrides,
    }
    if "collection_step_num_episodes" in overrides and "collection_step_num_env_steps" not in overrides:
        kwargs["collection_step_num_env_steps"] = None
    algorithm: Any
    params: Any
    if family == "on":
        algorithm = FakeOnPolicy(policy=policy)
        params = OnPolicyTrainerParams(**kwargs)
        trainer_cls: type[Trainer[Any, Any]] = OnPolicyTrainer
    else:
        algorithm = FakeOffPolicy(policy=policy, gradient_steps_per_call=gradient_steps_per_call)
        params = OffPolicyTrainerParams(**kwargs)
        trainer_cls = OffPolicyTrainer
    return Setup(algorithm, params, collector, test_collector, buffer, trainer_cls)


def make_on_policy(
    *,
    num_envs: int = 2,
    seed: int = 0,
    env: EnvSpec = "CartPole-v1",
    test_env: EnvSpec | None = "CartPole-v1",
    test_num_envs: int = 1,
    buffer_size: int = 4096,
    fixed_action: int | None = None,
    **overrides: Any,
) -> Setup:
    """An OnPolicyTrainer setup; ``overrides`` go to OnPolicyTrainerParams (small defaults otherwise)."""
    return _online(
        "on",
        num_envs=num_envs,
        seed=seed,
        env=env,
        test_env=test_env,
        test_num_envs=test_num_envs,
        buffer_size=buffer_size,
        fixed_action=fixed_action,
        gradient_steps_per_call=1,
        overrides=overrides,
    )


def make_off_policy(
    *,
    num_envs: int = 2,
    seed: int = 0,
    env: EnvSpec = "CartPole-v1",
    test_env: EnvSpec | None = "CartPole-v1",
    test_num_envs: int = 1,
    buffer_size: int = 4096,
    fixed_action: int | None = None,
    gradient_steps_per_call: int = 1,
    **overrides: Any,
) -> Setup:
    """An OffPolicyTrainer setup; ``overrides`` go to OffPolicyTrainerParams (small defaults otherwise)."""
    return _online(
        "off",
        num_envs=num_envs,
        seed=seed,
        env=env,
        test_env=test_env,
        test_num_envs=test_num_envs,
        buffer_size=buffer_size,
        fixed_action=fixed_action,
        gradient_steps_per_call=gradient_steps_per_call,
        overrides=overrides,
    )


def filled_buffer(*, num_envs: int = 2, num_env_steps: int = 200, seed: int = 0) -> VectorReplayBuffer:
    """A buffer with ``num_env_steps`` random CartPole transitions."""
    vec = make_vector_env("CartPole-v1", num_envs)
    policy = FixedPolicy(vec.single_action_space, seed=seed)
    buffer = VectorReplayBuffer(num_env_steps, num_envs, seed=seed + 7)
    Collector(policy, vec, buffer, seed=seed).collect(n_step=num_env_steps)
    return buffer


def make_offline(
    *,
    seed: int = 0,
    test_env: EnvSpec | None = "CartPole-v1",
    test_num_envs: int = 1,
    **overrides: Any,
) -> Setup:
    """An OfflineTrainer setup on a freshly collected dataset."""
    buffer = filled_buffer(seed=seed)
    vec = make_vector_env("CartPole-v1", 1)
    policy = FixedPolicy(vec.single_action_space, seed=seed)
    test_collector = _test_collector(test_env, test_num_envs, seed, None)
    kwargs: dict[str, Any] = {
        "buffer": buffer,
        "test_collector": test_collector,
        "max_epochs": 2,
        "epoch_num_steps": 5,
        "batch_size": 8,
        "show_progress": False,
        "verbose": False,
        **overrides,
    }
    return Setup(
        FakeOffline(policy=policy),
        OfflineTrainerParams(**kwargs),
        None,
        test_collector,
        buffer,
        OfflineTrainer,
    )


# ====================================================================== comparison helpers


def collect_stats_key(stat: Any) -> Any:
    """The numbers of a CollectStats (no timing), for equality comparisons."""
    if stat is None:
        return None
    return (
        stat.n_collected_steps,
        stat.n_collected_episodes,
        tuple(np.asarray(stat.returns).ravel().tolist()),
        tuple(np.asarray(stat.lens).ravel().tolist()),
    )


def info_stats_key(info: Any) -> dict[str, Any]:
    """The fields of an InfoStats except timing."""
    return {f.name: getattr(info, f.name) for f in dataclasses.fields(info) if f.name != "timing"}


def epoch_stats_key(stats: Any) -> tuple[Any, ...]:
    """The numbers of an EpochStats (no timing)."""
    training = None if stats.training_stat is None else dataclasses.asdict(stats.training_stat)
    return (
        stats.epoch,
        collect_stats_key(stats.train_collect_stat),
        collect_stats_key(stats.test_collect_stat),
        training,
        info_stats_key(stats.info_stat),
    )


def untimed(data: Mapping[str, float]) -> dict[str, float]:
    """Logged scalars without the wall-clock ones."""
    return {k: v for k, v in data.items() if "time" not in k and "speed" not in k}


@dataclass(frozen=True)
class Kit:
    """The fakes and builders, handed to tests as one fixture."""

    make_on_policy: Callable[..., Setup] = make_on_policy
    make_off_policy: Callable[..., Setup] = make_off_policy
    make_offline: Callable[..., Setup] = make_offline
    filled_buffer: Callable[..., VectorReplayBuffer] = filled_buffer
    counting_vector_env: Callable[..., gym.vector.VectorEnv[Any, Any, Any]] = counting_vector_env
    FixedPolicy: type[FixedPolicy] = FixedPolicy
    FakeStats: type[FakeStats] = FakeStats
    FakeOnPolicy: type[FakeOnPolicy] = FakeOnPolicy
    FakeOffPolicy: type[FakeOffPolicy] = FakeOffPolicy
    FakeOffline: type[FakeOffline] = FakeOffline
    CountingEnv: type[CountingEnv] = CountingEnv
    MultiAgentVectorEnv: type[MultiAgentVectorEnv] = MultiAgentVectorEnv
    collect_stats_key: Callable[[Any], Any] = collect_stats_key
    info_stats_key: Callable[[Any], dict[str, Any]] = info_stats_key
    epoch_stats_key: Callable[[Any], tuple[Any, ...]] = epoch_stats_key
    untimed: Callable[[Mapping[str, float]], dict[str, float]] = untimed


@pytest.fixture
def kit() -> Kit:
    """Fakes, tiny envs and setup builders for trainer contract tests."""
    return Kit()
