"""Log-probabilities stored at collection (torch path): the TensorCollector stores log pi(act | obs)
of the policy that acted, the TensorReplayBuffer hands them to the rollout while every row has one,
and the on-policy update uses them instead of a second actor pass: the same numbers, bit for bit, as
the recomputation they replace."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import pytest
import torch

from tests.extras import need
from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams, mlp
from tshtrain.algorithm.blocks.agent_nets import mappo_actor_critic
from tshtrain.algorithm.blocks.onpolicy import float_obs, map_obs_tensor
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.data.buffer_io import load_buffer_into, save_buffer
from tshtrain.env import TorchCartPole

CPU = torch.device("cpu")
E, T = 4, 6


def _cartpole(seed: int = 0) -> tuple[PPO, TensorCollector]:
    torch.manual_seed(seed)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=seed)
    ppo = PPO(policy=policy, critic=mlp(4, 1, (16,)), params=PPOParams(lr=1e-2), seed=seed)
    env = TorchCartPole(E, CPU, seed=seed, max_episode_steps=4)
    return ppo, TensorCollector(policy, env, TensorReplayBuffer(T * E, E, device=CPU), seed=seed)


def _balance(seed: int = 0) -> tuple[PPO, TensorCollector]:
    need("vmas", "vmas")
    from tshtrain.env.vmas import VmasEnv

    num_agents = 2
    torch.manual_seed(seed)
    env = VmasEnv(
        "balance", num_envs=E, device="cpu", continuous_actions=True, seed=seed, max_episode_steps=4,
        agent_layout="columns", agent_id=True, global_state=True, n_agents=num_agents,
    )  # fmt: skip
    policy, critic = mappo_actor_critic(
        env.single_observation_space, env.single_action_space, hidden_sizes=(16,), critic_per_world=True,
        seed=seed,
    )  # fmt: skip
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(lr=1e-2), seed=seed)
    buffer = TensorReplayBuffer(T * E * num_agents, E * num_agents, device=CPU)
    return ppo, TensorCollector(policy, env, buffer, seed=seed)


BUILDERS = {
    "categorical, CartPole": _cartpole,
    "Gaussian, per-world critic, VMAS balance": pytest.param(_balance, marks=pytest.mark.integration),
}


def _recomputed(policy: Any, rollout: Any) -> torch.Tensor:
    num_t, num_e = rollout.act.shape[:2]
    obs = map_obs_tensor(float_obs(rollout.obs), lambda x: x.reshape(num_t * num_e, *x.shape[2:]))
    logp, _ = policy.log_prob_entropy(obs, rollout.act.reshape(num_t * num_e, *rollout.act.shape[2:]))
    return logp.detach().reshape(num_t, num_e)


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS.keys())
def test_stored_log_probs_equal_the_recomputed_ones(build: Any) -> None:
    ppo, collector = build()
    collector.collect(n_step=T * collector.num_envs)
    rollout = collector.buffer.rollout()
    assert rollout.logp is not None and rollout.logp.shape == rollout.rew.shape
    assert torch.equal(rollout.logp, _recomputed(ppo.policy, rollout))


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS.keys())
def test_an_update_is_the_same_with_stored_or_recomputed_log_probs(build: Any) -> None:
    ppo, collector = build()
    twin, _ = build()
    for got, want in zip(ppo.policy.parameters(), twin.policy.parameters(), strict=True):
        assert torch.equal(got, want)
    collector.collect(n_step=T * collector.num_envs)
    rollout = collector.buffer.rollout()
    assert rollout.logp is not None
    batch = rollout.rew.numel() // 2
    stats = ppo.update(rollout, batch_size=batch, num_repetitions=2)
    twin_stats = twin.update(dataclasses.replace(rollout, logp=None), batch_size=batch, num_repetitions=2)
    assert stats == twin_stats
    for got, want in zip(ppo.policy.parameters(), twin.policy.parameters(), strict=True):
        assert torch.equal(got, want)


def test_rows_without_log_probs_drop_them_until_the_buffer_is_reset(tmp_path: Any) -> None:
    _, collector = _cartpole()
    buffer = collector.buffer
    assert isinstance(buffer, TensorReplayBuffer)
    collector.collect(n_step=2 * E, random=True)  # random actions have no policy log-probability
    assert buffer.rollout().logp is None
    buffer.reset()
    collector.collect(n_step=2 * E)
    assert buffer.rollout().logp is not None
    collector.collect(n_step=E, random=True)  # one step of rows without them
    assert buffer.rollout().logp is None
    buffer.reset()
    collector.collect(n_step=2 * E)
    assert buffer.rollout().logp is not None
    save_buffer(buffer, tmp_path / "buf")
    restored = load_buffer_into(TensorReplayBuffer(T * E, E, device=CPU), tmp_path / "buf")
    assert restored.rollout().logp is None  # a loaded buffer's rows are recomputed
    assert torch.equal(restored.rollout().act, buffer.rollout().act)


def test_exploration_noise_and_deterministic_actions_store_none() -> None:
    _, collector = _cartpole()
    buffer = collector.buffer
    assert isinstance(buffer, TensorReplayBuffer)
    collector.collect(n_step=2 * E, deterministic=True)
    assert buffer.rollout().logp is None
    buffer.reset()
    collector.exploration_noise = True
    collector.collect(n_step=2 * E)
    assert buffer.rollout().logp is None


def test_a_swapped_in_policy_gives_the_stored_log_probs() -> None:
    """The collector asks the policy it holds now (overlapped collection swaps in an actor copy)."""
    ppo, collector = _cartpole()
    copy = CategoricalPolicy(mlp(4, 2, (16,)), gym.spaces.Discrete(2), seed=1)
    collector.collect(n_step=E)
    collector.policy = copy
    collector.buffer.reset()
    collector.collect(n_step=T * E)
    rollout = collector.buffer.rollout()
    assert rollout.logp is not None
    torch.testing.assert_close(rollout.logp, _recomputed(copy, rollout), rtol=0, atol=0)
