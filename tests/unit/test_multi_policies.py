"""MultiCategoricalPolicy (MultiDiscrete actions) and BernoulliPolicy (MultiBinary actions): shapes,
log-probabilities and entropies against torch.distributions, ``start`` offsets, sampling from the
policy's generator, updates of PPO, A2C and REINFORCE, and PPO learning two "match the observation"
tasks (fixed seeds)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    A2C,
    PPO,
    A2CParams,
    BernoulliPolicy,
    MultiCategoricalPolicy,
    PPOParams,
    Reinforce,
    ReinforceParams,
    encoder_mlp,
    mlp,
    obs_encoder,
)
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy, log_prob_entropy
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

NVEC = [3, 1, 4]
START = [1, -2, 0]
MULTI_DISCRETE = gym.spaces.MultiDiscrete(NVEC, start=START)


def _reference_multi(logits_NS: torch.Tensor, act_NK: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logp = torch.zeros(len(logits_NS))
    entropy = torch.zeros(len(logits_NS))
    for k, chunk in enumerate(torch.split(logits_NS, NVEC, dim=-1)):
        dist = torch.distributions.Categorical(logits=chunk)
        logp += dist.log_prob(act_NK[:, k] - START[k])
        entropy += dist.entropy()
    return logp, entropy


def test_multi_categorical_log_prob_and_entropy_match_torch_distributions() -> None:
    torch.manual_seed(0)
    policy = MultiCategoricalPolicy(mlp(2, sum(NVEC), (8,)), MULTI_DISCRETE, seed=0)
    obs = torch.randn(64, 2)
    act = policy.actions(obs, deterministic=False)
    assert act.shape == (64, 3) and act.dtype == torch.int64
    assert MULTI_DISCRETE.contains(act[0].numpy()) and all(MULTI_DISCRETE.contains(a) for a in act.numpy())
    logp, entropy = policy.log_prob_entropy(obs, act)
    ref_logp, ref_entropy = _reference_multi(policy.actor(obs), act)
    torch.testing.assert_close(logp, ref_logp)
    torch.testing.assert_close(entropy, ref_entropy)
    assert logp.requires_grad and entropy.requires_grad
    greedy = policy.actions(obs, deterministic=True)
    logits = policy.actor(obs)
    expected = torch.stack([c.argmax(-1) for c in torch.split(logits, NVEC, dim=-1)], dim=-1)
    assert torch.equal(greedy, expected + torch.tensor(START))


def test_multi_categorical_samples_follow_the_probabilities_and_the_generator() -> None:
    logits = torch.log(torch.tensor([[0.2, 0.8, 0.5, 0.25, 0.25]]))
    actor = nn.Linear(1, 5)
    with torch.no_grad():
        actor.weight.zero_()
        actor.bias.copy_(logits[0])
    space = gym.spaces.MultiDiscrete([2, 3])
    policy = MultiCategoricalPolicy(actor, space, seed=3)
    act = policy.actions(torch.zeros(20_000, 1), deterministic=False)
    torch.testing.assert_close((act[:, 0] == 1).float().mean(), torch.tensor(0.8), atol=0.015, rtol=0)
    torch.testing.assert_close((act[:, 1] == 0).float().mean(), torch.tensor(0.5), atol=0.015, rtol=0)
    again = MultiCategoricalPolicy(actor, space, seed=3).actions(torch.zeros(20_000, 1), deterministic=False)
    assert torch.equal(act, again)


def test_multi_categorical_takes_multi_dimensional_nvec() -> None:
    space = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 2]]))
    policy = MultiCategoricalPolicy(mlp(2, 11, (8,)), space, seed=0)
    act = policy.actions(torch.randn(5, 2), deterministic=False)
    assert act.shape == (5, 2, 2) and all(space.contains(a) for a in act.numpy())
    logp, entropy = policy.log_prob_entropy(torch.randn(5, 2), act)
    assert logp.shape == (5,) and entropy.shape == (5,)


def test_bernoulli_log_prob_and_entropy_match_torch_distributions() -> None:
    torch.manual_seed(0)
    space = gym.spaces.MultiBinary(5)
    policy = BernoulliPolicy(mlp(3, 5, (8,)), space, seed=0)
    obs = torch.randn(64, 3)
    act = policy.actions(obs, deterministic=False)
    assert act.shape == (64, 5) and act.dtype == torch.int8
    assert all(space.contains(a) for a in act.numpy())
    logp, entropy = policy.log_prob_entropy(obs, act)
    dist = torch.distributions.Bernoulli(logits=policy.actor(obs))
    torch.testing.assert_close(logp, dist.log_prob(act.float()).sum(-1))
    torch.testing.assert_close(entropy, dist.entropy().sum(-1))
    assert torch.equal(policy.actions(obs, deterministic=True), (policy.actor(obs) > 0).to(torch.int8))


def test_bernoulli_takes_multi_dimensional_spaces_and_samples_with_the_probabilities() -> None:
    space = gym.spaces.MultiBinary([2, 2])
    actor = nn.Linear(1, 4)
    with torch.no_grad():
        actor.weight.zero_()
        actor.bias.copy_(torch.tensor([0.0, 2.0, -2.0, 0.0]))
    act = BernoulliPolicy(actor, space, seed=1).actions(torch.zeros(20_000, 1), deterministic=False)
    assert act.shape == (20_000, 2, 2)
    p1 = torch.sigmoid(torch.tensor([0.0, 2.0, -2.0, 0.0])).reshape(2, 2)
    torch.testing.assert_close(act.float().mean(0), p1, atol=0.015, rtol=0)


def test_wrong_spaces_and_output_sizes_are_refused() -> None:
    with pytest.raises(UnsupportedSpaceError, match="MultiCategoricalPolicy needs a MultiDiscrete"):
        MultiCategoricalPolicy(mlp(2, 3), gym.spaces.Discrete(3))
    with pytest.raises(UnsupportedSpaceError, match="BernoulliPolicy needs a MultiBinary"):
        BernoulliPolicy(mlp(2, 3), gym.spaces.MultiDiscrete([2, 2]))
    with pytest.raises(
        ConfigurationError, match=r"gives 7 outputs .* needs 8 \(the logits of each component"
    ):
        MultiCategoricalPolicy(mlp(2, 7), MULTI_DISCRETE)
    with pytest.raises(ConfigurationError, match=r"gives 4 outputs .* needs 5 \(one logit per bit\)"):
        BernoulliPolicy(mlp(2, 4), gym.spaces.MultiBinary(5))


class MatchBitsEnv(gym.Env[np.ndarray, np.ndarray]):
    """Observes 4 random bits, acts with 4 bits; reward = fraction of action bits equal to the observed
    ones. Episodes last 4 steps (truncated)."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.MultiBinary(4)
        self.action_space = gym.spaces.MultiBinary(4)
        self._bits = np.zeros(4, dtype=np.int8)
        self._t = 0

    def _draw(self) -> np.ndarray:
        self._bits = self.np_random.integers(0, 2, 4).astype(np.int8)
        return self._bits.copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        reward = float(np.mean(action == self._bits))
        self._t += 1
        return self._draw(), reward, False, self._t >= 4, {}


class MatchIndicesEnv(gym.Env[dict[str, Any], np.ndarray]):
    """Dict observations {a: Discrete(3), b: Discrete(4)}, actions MultiDiscrete([3, 4], start=[1, -1]);
    reward = fraction of components with ``action - start == observation``. Episodes last 4 steps."""

    START = np.array([1, -1])

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(4)})
        self.action_space = gym.spaces.MultiDiscrete([3, 4], start=self.START)
        self._target = np.zeros(2, dtype=np.int64)
        self._t = 0

    def _draw(self) -> dict[str, Any]:
        self._target = np.array([self.np_random.integers(3), self.np_random.integers(4)])
        return {"a": np.int64(self._target[0]), "b": np.int64(self._target[1])}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        reward = float(np.mean(action - self.START == self._target))
        self._t += 1
        return self._draw(), reward, False, self._t >= 4, {}


def _policy(kind: str, env: gym.vector.VectorEnv[Any, Any, Any], seed: int) -> tuple[ActorPolicy, nn.Module]:
    torch.manual_seed(seed)
    obs_space, act_space = env.single_observation_space, env.single_action_space
    if kind == "bits":
        policy: ActorPolicy = BernoulliPolicy(
            encoder_mlp(obs_encoder(obs_space), 4, (32,)), act_space, seed=seed
        )
    else:
        policy = MultiCategoricalPolicy(encoder_mlp(obs_encoder(obs_space), 7, (32,)), act_space, seed=seed)
    return policy, encoder_mlp(obs_encoder(obs_space), 1, (32,))


def _env(kind: str, num: int) -> gym.vector.VectorEnv[Any, Any, Any]:
    return make_vector_env(MatchBitsEnv if kind == "bits" else MatchIndicesEnv, num)


@pytest.mark.parametrize("kind", ["bits", "indices"])
@pytest.mark.parametrize("algo", ["ppo", "a2c", "reinforce"])
def test_on_policy_updates_run_and_change_the_policy(algo: str, kind: str) -> None:
    envs = _env(kind, 2)
    policy, critic = _policy(kind, envs, 0)
    algorithm: PPO | A2C | Reinforce
    if algo == "ppo":
        algorithm = PPO(policy=policy, critic=critic, params=PPOParams(lr=1e-2, ent_coef=0.01), seed=0)
    elif algo == "a2c":
        algorithm = A2C(policy=policy, critic=critic, params=A2CParams(lr=1e-2, ent_coef=0.01), seed=0)
    else:
        algorithm = Reinforce(policy=policy, params=ReinforceParams(lr=1e-2), seed=0)
    buffer = VectorReplayBuffer(16, 2, seed=0)
    Collector(policy, envs, buffer, seed=0).collect(n_step=16)
    before = [p.detach().clone() for p in policy.parameters()]
    stats = algorithm.update(buffer.rollout(), batch_size=8, num_repetitions=2)
    assert stats.num_gradient_steps == 4
    assert all(np.isfinite(v) for v in stats.as_scalars().values())
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters(), strict=True))
    act = buffer.sample_all().act
    assert act.shape == (16, *envs.single_action_space.shape)
    envs.close()


def test_log_prob_entropy_dispatches_to_the_policy() -> None:
    policy = BernoulliPolicy(mlp(2, 3), gym.spaces.MultiBinary(3), seed=0)
    obs, act = torch.randn(4, 2), torch.ones(4, 3, dtype=torch.int8)
    for got, want in zip(log_prob_entropy(policy, obs, act), policy.log_prob_entropy(obs, act), strict=True):
        torch.testing.assert_close(got, want)


def _mean_test_reward(policy: ActorPolicy, kind: str, seed: int) -> float:
    envs = _env(kind, 4)
    stats = Collector(policy, envs, seed=seed + 1000).collect(n_episode=40, deterministic=True)
    envs.close()
    return float(stats.returns.mean()) / 4  # 4 steps per episode: the mean per-step reward


@pytest.mark.learning
@pytest.mark.parametrize("kind", ["bits", "indices"])
def test_ppo_learns_to_match_the_observation(kind: str) -> None:
    """A random policy scores 0.5 (bits) / about 0.29 (indices) per step; PPO with a fixed seed reaches
    0.95 within 40 updates of 128 env steps (5120 env steps)."""
    seed = 0
    envs = _env(kind, 8)
    policy, critic = _policy(kind, envs, seed)
    ppo = PPO(policy=policy, critic=critic, params=PPOParams(lr=3e-3, gamma=0.0, ent_coef=0.0), seed=seed)
    start = _mean_test_reward(policy, kind, seed)
    buffer = VectorReplayBuffer(128, 8, seed=seed)
    collector = Collector(policy, envs, buffer, seed=seed)
    for _ in range(40):
        buffer.reset()
        collector.collect(n_step=128)
        ppo.update(buffer.rollout(), batch_size=64, num_repetitions=4)
    envs.close()
    end = _mean_test_reward(policy, kind, seed)
    print(f"RESULT match-{kind} seed={seed} start={start:.3f} end={end:.3f}")
    assert start < 0.8 and end >= 0.95, (start, end)
