"""Values during collection (issue 37, torch path): ``TensorCollector(values=algorithm.collection_values())``
stores V(obs) with the transitions, as rsl_rl computes them while collecting, and the on-policy update
uses them instead of a critic pass over the rollout; ``recompute_advantage``'s later passes compute fresh
values. The stored values are the critic's on one vector step's rows, the update's on chunks of the
whole rollout: the same maths, but a CPU matrix product may round a small batch differently (by ~1e-7;
on this machine's MKL not at all when the rows per step are a multiple of 4), so runs agree to float
tolerance, not bit for bit."""

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


def _run(*, collection_values: bool, num_envs: int = E, **ppo: Any) -> tuple[PPO, list[float]]:
    torch.manual_seed(0)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=0)
    algorithm = PPO(policy=policy, critic=mlp(4, 1, (16,)), params=PPOParams(lr=1e-2, **ppo), seed=0)
    env = TorchCartPole(num_envs, CPU, seed=0, max_episode_steps=20)
    values = algorithm.collection_values() if collection_values else None
    buffer = TensorReplayBuffer(T * num_envs, num_envs, device=CPU)
    collector = TensorCollector(policy, env, buffer, seed=0, values=values)
    losses: list[float] = []
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=collector,
            max_epochs=3,
            epoch_num_steps=T * num_envs,
            collection_step_num_env_steps=T * num_envs,
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


@pytest.mark.parametrize("num_envs", [4, 3])
@pytest.mark.parametrize(
    "ppo", [{}, {"recompute_advantage": True}, {"timeout_bootstrap": TimeoutBootstrap.STEP_OBS}]
)
def test_runs_agree_with_values_during_collection(ppo: dict[str, Any], num_envs: int) -> None:
    with_values, losses_with = _run(collection_values=True, num_envs=num_envs, **ppo)
    without, losses_without = _run(collection_values=False, num_envs=num_envs, **ppo)
    assert losses_with == pytest.approx(losses_without, rel=1e-4, abs=1e-6)
    state_with, state_without = with_values.state_dict(), without.state_dict()
    for name in ("policy", "critic"):
        for key, tensor in state_without[name].items():
            torch.testing.assert_close(
                state_with[name][key], tensor, rtol=1e-4, atol=1e-6, msg=f"{name}.{key}"
            )


def _offset_values(algorithm: PPO, offset: float) -> Any:
    """The algorithm's collection values plus ``offset``: stored values an update can be told apart by."""
    values = algorithm.collection_values()
    return lambda obs: values(obs) + offset


@pytest.mark.parametrize("recompute", [False, True])
def test_the_update_uses_the_stored_values_and_recomputes_them_later(recompute: bool) -> None:
    algorithm, _ = _run(collection_values=False, recompute_advantage=recompute)
    env = TorchCartPole(E, CPU, seed=2)
    buffer = TensorReplayBuffer(T * E, E, device=CPU)
    TensorCollector(algorithm.policy, env, buffer, seed=2, values=_offset_values(algorithm, 100.0)).collect(
        n_step=T * E
    )
    seen: list[torch.Tensor] = []
    original = algorithm.minibatch_loss

    def spy(batch: Any, clip: Any) -> Any:
        seen.append(batch.value_old)
        return original(batch, clip)

    algorithm.minibatch_loss = spy  # type: ignore[method-assign]
    algorithm.update(buffer.rollout(), batch_size=None, num_repetitions=2)
    assert float(seen[0].mean()) > 50.0  # the stored (offset) values, not a critic pass
    assert (float(seen[1].mean()) < 50.0) == recompute  # recompute_advantage: fresh values after the first


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
    torch.testing.assert_close(rollout.value, expected, rtol=1e-6, atol=1e-6)
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
