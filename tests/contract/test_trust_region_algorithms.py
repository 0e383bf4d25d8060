"""Contract tests of NPG and TRPO, Discrete and Box actions: a tiny epoch on the OnPolicyTrainer,
state_dict round trips, determinism, NaN losses and the update hooks (as for A2C and PPO in
test_on_policy_algorithms.py)."""

from __future__ import annotations

import dataclasses
import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    NPG,
    TRPO,
    CategoricalPolicy,
    GaussianPolicy,
    LinearSchedule,
    NonFiniteLossError,
    NPGParams,
    NPGTrainingStats,
    RunningObsNormalizer,
    TRPOParams,
    TRPOTrainingStats,
    mlp,
)
from tshtrain.data import Collector, RolloutBatch, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

ALGOS = ["npg", "trpo"]
SPACES = ["discrete", "continuous"]
CASES = [(algo, space) for algo in ALGOS for space in SPACES]
NAMES = {"npg": "NPG", "trpo": "TRPO"}
STATS = {"npg": NPGTrainingStats, "trpo": TRPOTrainingStats}


@dataclass
class Setup:
    algorithm: NPG | TRPO
    training_collector: Collector
    test_collector: Collector
    normalizer: RunningObsNormalizer | None


def build(algo: str, space: str, seed: int = 0) -> Setup:
    """Small nets on CartPole (Discrete) or Pendulum (Box, with observation normalisation), 2 envs."""
    torch.manual_seed(seed)
    env_id = "CartPole-v1" if space == "discrete" else "Pendulum-v1"
    train_envs, test_envs = make_vector_env(env_id, 2), make_vector_env(env_id, 2)
    normalizer: RunningObsNormalizer | None = None
    policy: CategoricalPolicy | GaussianPolicy
    if space == "discrete":
        policy = CategoricalPolicy(mlp(4, 2, (16, 16)), train_envs.single_action_space, seed=seed)
        critic: nn.Module = mlp(4, 1, (16, 16))
    else:
        normalizer = RunningObsNormalizer(3)
        policy = GaussianPolicy(
            nn.Sequential(normalizer, mlp(3, 1, (16, 16))), train_envs.single_action_space, seed=seed
        )
        critic = nn.Sequential(normalizer, mlp(3, 1, (16, 16)))
    schedule = LinearSchedule(num_update_steps=10)
    algorithm: NPG | TRPO
    if algo == "npg":
        npg_params = NPGParams(lr_schedule=schedule, trust_region_size=0.1, num_critic_gradient_steps=2)
        algorithm = NPG(policy=policy, critic=critic, params=npg_params, obs_normalizer=normalizer, seed=seed)
    else:
        params = TRPOParams(lr_schedule=schedule, num_critic_gradient_steps=2, max_grad_norm=1.0)
        algorithm = TRPO(policy=policy, critic=critic, params=params, obs_normalizer=normalizer, seed=seed)
    return Setup(
        algorithm=algorithm,
        training_collector=Collector(policy, train_envs, VectorReplayBuffer(64, 2), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        normalizer=normalizer,
    )


def trainer(setup: Setup) -> OnPolicyTrainer:
    params = OnPolicyTrainerParams(
        training_collector=setup.training_collector,
        test_collector=setup.test_collector,
        max_epochs=1,
        epoch_num_steps=32,
        collection_step_num_env_steps=16,
        batch_size=8,
        update_step_num_repetitions=2,
        test_step_num_episodes=1,
        show_progress=False,
        verbose=False,
    )
    return OnPolicyTrainer(setup.algorithm, params)


def rollout_of(setup: Setup) -> RolloutBatch:
    """A fresh rollout of 16 env steps from the training collector, copied out of the buffer."""
    buffer = setup.training_collector.buffer
    assert buffer is not None
    buffer.reset()
    setup.training_collector.collect(n_step=16)
    rollout = buffer.rollout()
    copied = {f.name: np.array(getattr(rollout, f.name), copy=True) for f in dataclasses.fields(rollout)}
    buffer.reset()
    return RolloutBatch(**copied)


def tensors(algorithm: NPG | TRPO) -> dict[str, torch.Tensor]:
    """Every tensor of the state_dict except the policy's sampling generator, by a flat key."""
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


def assert_same_tensors(a: NPG | TRPO, b: NPG | TRPO) -> None:
    ta, tb = tensors(a), tensors(b)
    assert ta.keys() == tb.keys()
    for key, value in ta.items():
        torch.testing.assert_close(value, tb[key], rtol=0, atol=0, msg=key)


def stats_key(stats: Any) -> dict[str, Any]:
    return {
        k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
        for k, v in dataclasses.asdict(stats).items()
    }


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_one_tiny_epoch_on_the_trainer(algo: str, space: str) -> None:
    setup = build(algo, space)
    epochs = list(trainer(setup))
    assert len(epochs) == 1
    stat = epochs[0].training_stat
    assert type(stat) is STATS[algo]
    assert isinstance(stat, NPGTrainingStats | TRPOTrainingStats)
    # 2 training steps of 16 env steps; each update: 2 passes x 2 mini-batches of 8, each one policy
    # step and 2 critic steps
    info = epochs[0].info_stat
    assert (info.train_step, info.update_step, info.gradient_step) == (32, 2, 24)
    assert stat.num_gradient_steps == 24  # summed over the two updates
    for name, value in stat.as_scalars().items():
        assert math.isfinite(value), (name, value)
    assert stat.lr == pytest.approx(1e-3 * (1 - 0.5 / 10))  # mean of the lr of updates 0 and 1
    assert stat.kl > 0.0
    assert setup.algorithm.ac.num_update_steps == 2
    if setup.normalizer is not None:
        assert int(setup.normalizer.count) == 32


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_state_dict_round_trip_gives_the_same_actions_and_the_same_next_update(algo: str, space: str) -> None:
    original = build(algo, space, seed=0)
    trainer(original).run()
    saved = io.BytesIO()
    torch.save(original.algorithm.state_dict(), saved)
    saved.seek(0)
    restored = build(algo, space, seed=1)
    restored.algorithm.load_state_dict(torch.load(saved, weights_only=True))
    obs = (
        np.random.default_rng(5).uniform(-1, 1, size=(16, 4 if space == "discrete" else 3)).astype(np.float32)
    )
    np.testing.assert_array_equal(
        original.algorithm.policy.compute_actions(obs, deterministic=True),
        restored.algorithm.policy.compute_actions(obs, deterministic=True),
    )
    rollout = rollout_of(original)
    stats_a = original.algorithm.update(rollout, batch_size=8, num_repetitions=2)
    stats_b = restored.algorithm.update(rollout, batch_size=8, num_repetitions=2)
    assert stats_key(stats_a) == stats_key(stats_b)
    assert_same_tensors(original.algorithm, restored.algorithm)
    assert set(original.algorithm.state_dict()) >= {"policy", "critic", "optim", "_extra", "_generators"}


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_same_seed_same_run(algo: str, space: str) -> None:
    first, second, other = build(algo, space, seed=3), build(algo, space, seed=3), build(algo, space, seed=4)
    trainer(first).run()
    trainer(second).run()
    trainer(other).run()
    assert_same_tensors(first.algorithm, second.algorithm)
    with pytest.raises(AssertionError):
        assert_same_tensors(first.algorithm, other.algorithm)


@pytest.mark.parametrize("algo", ALGOS)
def test_nan_reward_raises_naming_the_algorithm_and_the_loss(algo: str) -> None:
    setup = build(algo, "discrete")
    rollout = rollout_of(setup)
    rew = rollout.rew.copy()
    rew[3, 1] = np.nan
    with pytest.raises(
        NonFiniteLossError, match=rf"^{NAMES[algo]}: the policy loss is nan; training stopped"
    ):
        setup.algorithm.update(dataclasses.replace(rollout, rew=rew), batch_size=None, num_repetitions=1)


class _RecordingHooks:
    def __init__(self) -> None:
        self.losses: list[dict[str, bool]] = []
        self.optimizer_steps: list[str] = []

    def on_sampled_batch(self, batch: Any, /) -> Any:
        raise AssertionError("on-policy algorithms sample no replay batches")

    def on_loss(self, losses: Any, /) -> None:
        self.losses.append({name: loss.requires_grad for name, loss in losses.items()})

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        self.optimizer_steps.append(name)


@pytest.mark.parametrize("algo", ALGOS)
def test_update_hooks_see_the_policy_loss_and_every_critic_step(algo: str) -> None:
    setup = build(algo, "discrete")
    hooks = _RecordingHooks()
    stats = setup.algorithm.update(rollout_of(setup), batch_size=8, num_repetitions=1, hooks=hooks)
    assert stats.num_gradient_steps == 2 * 3
    assert hooks.losses == [{"policy loss": True}, {"value loss": True}, {"value loss": True}] * 2
    assert hooks.optimizer_steps == ["optim"] * 4
