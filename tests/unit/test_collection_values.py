"""Values during collection (issue 37, torch path): ``TensorCollector(values=algorithm.collection_values())``
stores V(obs) with the transitions, as rsl_rl computes them while collecting, and the on-policy update
uses them instead of a critic pass over the rollout: the same runs, bit for bit, as without the option
(a CPU critic treats rows independently, so a 4-row pass and the update's chunked pass give the same
floats), with ``recompute_advantage`` too (later passes compute fresh values)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch

from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams, mlp
from tshtrain.algorithm.blocks.onpolicy import TimeoutBootstrap
from tshtrain.algorithm.blocks.world_critic import PerWorldCritic
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.env import TorchCartPole
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

CPU = torch.device("cpu")
E, T = 4, 16


def _run(*, collection_values: bool, **ppo: Any) -> tuple[PPO, list[float]]:
    torch.manual_seed(0)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=0)
    algorithm = PPO(policy=policy, critic=mlp(4, 1, (16,)), params=PPOParams(lr=1e-2, **ppo), seed=0)
    env = TorchCartPole(E, CPU, seed=0, max_episode_steps=20)
    values = algorithm.collection_values() if collection_values else None
    collector = TensorCollector(policy, env, TensorReplayBuffer(T * E, E, device=CPU), seed=0, values=values)
    losses: list[float] = []
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=collector,
            max_epochs=3,
            epoch_num_steps=T * E,
            collection_step_num_env_steps=T * E,
            batch_size=16,
            update_step_num_repetitions=3,
            verbose=False,
            show_progress=False,
        ),
    )
    for epoch in trainer:
        assert epoch.training_stat is not None
        losses.append(epoch.training_stat.as_scalars()["loss"])
    return algorithm, losses


@pytest.mark.parametrize(
    "ppo", [{}, {"recompute_advantage": True}, {"timeout_bootstrap": TimeoutBootstrap.STEP_OBS}]
)
def test_runs_are_bit_identical_with_values_during_collection(ppo: dict[str, Any]) -> None:
    with_values, losses_with = _run(collection_values=True, **ppo)
    without, losses_without = _run(collection_values=False, **ppo)
    assert losses_with == losses_without
    state_with, state_without = with_values.state_dict(), without.state_dict()
    for name in ("policy", "critic"):
        for key, tensor in state_without[name].items():
            assert torch.equal(state_with[name][key], tensor), f"{name}.{key}"


def test_the_buffer_hands_out_values_only_while_every_row_has_one() -> None:
    algorithm, _ = _run(collection_values=False)
    env = TorchCartPole(E, CPU, seed=1)
    buffer = TensorReplayBuffer(T * E, E, device=CPU)
    collector = TensorCollector(algorithm.policy, env, buffer, seed=1, values=algorithm.collection_values())
    collector.collect(n_step=2 * E)
    rollout = buffer.rollout()
    assert rollout.value is not None and rollout.value.shape == (2, E)
    obs = rollout.obs
    assert isinstance(obs, torch.Tensor)
    with torch.no_grad():
        expected = algorithm.critic(obs.reshape(2 * E, 4)).reshape(2, E)
    assert torch.equal(rollout.value, expected)
    collector.values = None  # rows without values: the rollout has none, the update computes them
    collector.collect(n_step=E)
    assert buffer.rollout().value is None
    buffer.reset()
    collector.values = algorithm.collection_values()
    collector.collect(n_step=E)
    assert buffer.rollout().value is not None


def test_bad_values_are_one_line_errors() -> None:
    algorithm, _ = _run(collection_values=False)
    env = TorchCartPole(E, CPU, seed=0)
    with pytest.raises(ConfigurationError, match=r"TensorCollector.values must be a callable"):
        TensorCollector(algorithm.policy, env, TensorReplayBuffer(8, E, device=CPU), values=3)  # type: ignore[arg-type]
    collector = TensorCollector(
        algorithm.policy, env, TensorReplayBuffer(8, E, device=CPU), values=lambda obs: torch.zeros(E, 1)
    )
    with pytest.raises(ConfigurationError, match=r"returned shape \(4, 1\) for 4 rows"):
        collector.collect(n_step=E)


def test_a_per_world_critic_refuses_collection_values() -> None:
    policy = CategoricalPolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=0)
    critic = PerWorldCritic(mlp(8, 2, (16,)), num_agents=2)
    algorithm = PPO(policy=policy, critic=critic, params=PPOParams(), seed=0)
    with pytest.raises(ConfigurationError, match=r"PerWorldCritic"):
        algorithm.collection_values()
