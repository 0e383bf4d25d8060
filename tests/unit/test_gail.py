"""GAIL: the reward formula and the discriminator step against hand-computed numbers, the chunking
of the rollout, the rewards PPO receives, and input validation."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    GAIL,
    A2CParams,
    CategoricalPolicy,
    GAILParams,
    GAILTrainingStats,
    GaussianPolicy,
    PPOParams,
    discriminator_loss,
    gail_rewards,
    mlp,
)
from tshtrain.algorithm.blocks.onpolicy import rollout_to_torch
from tshtrain.data import ReplayBuffer, RolloutBatch, TensorRolloutBatch
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

LN3 = math.log(3.0)


def test_reward_is_minus_log_one_minus_d() -> None:
    # D = sigmoid(logit): logit 0 -> D = 1/2, ln 3 -> 3/4, -ln 3 -> 1/4
    rew = gail_rewards(torch.tensor([0.0, LN3, -LN3, 50.0, -50.0], dtype=torch.float64))
    expected = [math.log(2.0), math.log(4.0), -math.log(0.75), 50.0, math.exp(-50.0)]
    torch.testing.assert_close(rew, torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=0.0)
    assert bool(torch.isfinite(gail_rewards(torch.tensor([1e4, -1e4]))).all())


def test_discriminator_loss_is_binary_cross_entropy_with_expert_one() -> None:
    loss = discriminator_loss(
        torch.tensor([0.0, LN3], dtype=torch.float64), torch.tensor([LN3], dtype=torch.float64)
    )
    # policy rows: -log(1 - 1/2) = ln 2, -log(1 - 3/4) = ln 4 (mean); expert row: -log(3/4)
    expected = (math.log(2.0) + math.log(4.0)) / 2 - math.log(0.75)
    assert float(loss) == pytest.approx(expected, rel=1e-12)


def expert_buffer(obs: np.ndarray, act: np.ndarray) -> ReplayBuffer:
    buffer = ReplayBuffer(len(act))
    for o, a in zip(obs, act, strict=True):
        buffer.add_single(
            obs=o[None], act=np.asarray(a)[None], rew=0.0, terminated=False, truncated=False, obs_next=o[None]
        )
    return buffer


def rollout(obs_TEO: np.ndarray, act_TE: np.ndarray, valid_TE: np.ndarray | None = None) -> RolloutBatch:
    num_t, num_e = act_TE.shape[:2]
    valid = np.ones((num_t, num_e), dtype=bool) if valid_TE is None else valid_TE
    boundary = np.zeros((num_t, num_e), dtype=bool)
    boundary[-1] = True
    return RolloutBatch(
        obs=obs_TEO.astype(np.float32),
        act=act_TE,
        rew=np.full((num_t, num_e), 7.0, dtype=np.float32),  # the env's rewards: GAIL ignores them
        terminated=np.zeros((num_t, num_e), dtype=bool),
        truncated=np.zeros((num_t, num_e), dtype=bool),
        obs_next=obs_TEO.astype(np.float32),
        boundary=boundary | ~valid,
        valid=valid,
    )


def linear_gail(weight: list[float], bias: float, params: GAILParams | None = None, **kwargs: Any) -> GAIL:
    """GAIL on CartPole's spaces with a linear discriminator of the given weights (4 obs + 2 one-hot)."""
    torch.manual_seed(0)
    disc = nn.Linear(6, 1)
    with torch.no_grad():
        disc.weight.copy_(torch.tensor([weight]))
        disc.bias.fill_(bias)
    policy = CategoricalPolicy(mlp(4, 2, (8,)), gym.spaces.Discrete(2), seed=0)
    expert = kwargs.pop("expert", expert_buffer(np.full((3, 4), 2.0, np.float32), np.array([1, 1, 1])))
    return GAIL(
        policy=policy,
        critic=mlp(4, 1, (8,)),
        expert_buffer=expert,
        discriminator=disc,
        params=params,
        seed=0,
        **kwargs,
    )


def capture_ppo_rollout(gail: GAIL) -> list[Any]:
    seen: list[Any] = []
    original = gail.ppo.update

    def update(data: Any, **kwargs: Any) -> Any:
        seen.append(data)
        return original(data, **kwargs)

    gail.ppo.update = update  # type: ignore[method-assign]  # a spy on the PPO step
    return seen


def test_discriminator_step_and_rewards_by_hand() -> None:
    # every policy row is x_pi = (1, 0, -1, 0.5 | one_hot(0)),
    # every expert row x_exp = (2, 2, 2, 2 | one_hot(1));
    # the discriminator starts at w = 0, b = 0: all logits 0, D = 1/2
    gail = linear_gail([0.0] * 6, 0.0, GAILParams(disc_update_num=1, disc_lr=0.01))
    seen = capture_ppo_rollout(gail)
    obs = np.tile(np.array([1.0, 0.0, -1.0, 0.5]), (3, 2, 1))
    stats = gail.update(rollout(obs, np.zeros((3, 2), dtype=np.int64)), batch_size=None, num_repetitions=1)
    assert isinstance(stats, GAILTrainingStats)
    # the loss before the step: ln 2 + ln 2; nothing classified right yet (logits exactly 0)
    assert stats.disc_loss == pytest.approx(2 * math.log(2.0), rel=1e-6)
    assert (stats.acc_pi, stats.acc_exp) == (0.0, 0.0)
    # rewards PPO got: -log(1 - 1/2) = ln 2 for every step, from the discriminator before its step
    (data,) = seen
    torch.testing.assert_close(data.rew, torch.full((3, 2), math.log(2.0)))
    assert stats.gail_reward == pytest.approx(math.log(2.0), rel=1e-6)
    # gradient: dL/dw = 0.5 * x_pi - 0.5 * x_exp; dL/db = 0.5 - 0.5 = 0. Adam's first step moves each
    # weight by -lr * g / (|g| + 1e-8): -lr * sign(x_pi - x_exp), the bias not at all
    diff = np.array([1 - 2, 0 - 2, -1 - 2, 0.5 - 2, 1 - 0, 0 - 1])
    expected = -0.01 * np.sign(diff)
    np.testing.assert_allclose(gail.discriminator.weight.detach().numpy()[0], expected, rtol=1e-5)
    assert float(gail.discriminator.bias.detach()) == 0.0
    assert stats.num_gradient_steps == 1 + 1  # one discriminator step, one PPO step (one batch of all)


def test_rewards_use_the_discriminator_before_its_update_and_zero_padding() -> None:
    weight = [0.5, -1.0, 0.25, 2.0, 0.3, -0.7]
    gail = linear_gail(weight, 0.1, GAILParams(disc_update_num=2))
    seen = capture_ppo_rollout(gail)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, size=(4, 2, 4)).astype(np.float32)
    act = rng.integers(0, 2, size=(4, 2))
    valid = np.ones((4, 2), dtype=bool)
    valid[3, 1] = False
    gail.update(rollout(obs, act, valid), batch_size=4, num_repetitions=1)
    logits = obs @ np.array(weight[:4]) + np.where(act == 0, weight[4], weight[5]) + 0.1
    expected = np.log1p(np.exp(logits)) * valid  # softplus(logit) = -log(1 - sigmoid(logit))
    np.testing.assert_allclose(seen[0].rew.numpy(), expected, rtol=1e-5)
    assert not np.allclose(gail.discriminator.weight.detach().numpy()[0], weight)  # it did learn after


@pytest.mark.parametrize(
    ("num_rows", "params", "sizes"),
    [
        (10, GAILParams(disc_update_num=4), [2, 2, 2, 2, 2]),  # Tianshou: chunks of N // 4 = 2
        (11, GAILParams(disc_update_num=4), [2, 2, 2, 2, 3]),  # the remainder joins the last chunk
        (8, GAILParams(disc_update_num=4), [2, 2, 2, 2]),
        (3, GAILParams(disc_update_num=4), [1, 1, 1]),
        (10, GAILParams(disc_update_num=3, disc_batch_size=4), [4, 4, 4]),
        (10, GAILParams(disc_update_num=2, disc_batch_size=64), [10, 10]),
    ],
)
def test_discriminator_chunks(num_rows: int, params: GAILParams, sizes: list[int]) -> None:
    chunks = linear_gail([0.0] * 6, 0.0, params)._chunks(num_rows)
    assert [len(c) for c in chunks] == sizes
    if params.disc_batch_size is None:
        assert sorted(torch.cat(chunks).tolist()) == list(range(num_rows))  # a partition of the rollout
    else:
        assert all(len(set(c.tolist())) == len(c) for c in chunks)


def test_box_actions_feed_the_discriminator_as_floats() -> None:
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    policy = GaussianPolicy(mlp(3, 1, (8,)), space, seed=0)
    rng = np.random.default_rng(1)
    expert = expert_buffer(
        rng.normal(size=(20, 3)).astype(np.float32), rng.uniform(-1, 1, (20, 1)).astype(np.float32)
    )
    gail = GAIL(
        policy=policy, critic=mlp(3, 1, (8,)), expert_buffer=expert, discriminator=mlp(4, 1, (8,)), seed=0
    )
    stats = gail.update(
        rollout(rng.normal(size=(4, 2, 3)), rng.uniform(-1, 1, (4, 2, 1)).astype(np.float32)),
        batch_size=4,
        num_repetitions=2,
    )
    assert all(math.isfinite(v) for v in stats.as_scalars().values())
    assert stats.num_gradient_steps == 4 + 4  # 4 discriminator chunks of 2 rows, 2 passes x 2 mini-batches
    with pytest.raises(ConfigurationError, match=r"expert_buffer actions .* \[-1, 1\] space"):
        GAIL(
            policy=policy,
            critic=mlp(3, 1, (8,)),
            expert_buffer=expert_buffer(np.zeros((2, 3), np.float32), np.full((2, 1), 1.5, np.float32)),
            discriminator=mlp(4, 1, (8,)),
        )


def test_params_validation() -> None:
    assert GAILParams().ppo == PPOParams()
    with pytest.raises(ConfigurationError, match=r"^GAILParams.disc_lr must be a finite number > 0, got 0"):
        GAILParams(disc_lr=0.0)
    with pytest.raises(ConfigurationError, match=r"^GAILParams.disc_update_num must be an int >= 1, got 0"):
        GAILParams(disc_update_num=0)
    with pytest.raises(ConfigurationError, match=r"^GAILParams.disc_batch_size must be"):
        GAILParams(disc_batch_size=0)
    with pytest.raises(ConfigurationError, match=r"^GAILParams.ppo must be a PPOParams, got A2CParams"):
        GAILParams(ppo=A2CParams())  # type: ignore[arg-type]  # the error under test


def test_bad_expert_data_and_discriminator_are_refused() -> None:
    ok_obs = np.zeros((3, 4), np.float32)
    with pytest.raises(ConfigurationError, match=r"^GAIL: expert_buffer is empty \(0 transitions\)"):
        linear_gail([0.0] * 6, 0.0, expert=ReplayBuffer(10))
    with pytest.raises(ConfigurationError, match=r"^GAIL: expert_buffer is a list"):
        linear_gail([0.0] * 6, 0.0, expert=[1, 2])
    with pytest.raises(
        ConfigurationError,
        match=r"^GAIL: expert_buffer observations have shape \(3,\), which the policy does not take",
    ):
        linear_gail([0.0] * 6, 0.0, expert=expert_buffer(np.zeros((2, 3), np.float32), np.array([0, 1])))
    with pytest.raises(ConfigurationError, match=r"^GAIL: expert_buffer actions .* integers in \[0, 1\]"):
        linear_gail([0.0] * 6, 0.0, expert=expert_buffer(ok_obs, np.array([0, 1, 2])))
    policy = CategoricalPolicy(mlp(4, 2, (8,)), gym.spaces.Discrete(2))
    expert = expert_buffer(ok_obs, np.array([0, 1, 1]))
    with pytest.raises(
        ConfigurationError, match=r"^GAIL: the discriminator failed on input of shape \(2, 6\)"
    ):
        GAIL(policy=policy, critic=mlp(4, 1, (8,)), expert_buffer=expert, discriminator=mlp(5, 1, (8,)))
    with pytest.raises(
        ConfigurationError, match=r"^GAIL: the discriminator returned shape \(2, 2\) for 2 rows"
    ):
        GAIL(policy=policy, critic=mlp(4, 1, (8,)), expert_buffer=expert, discriminator=mlp(6, 2, (8,)))


def test_rollout_from_another_env_and_unsupported_spaces_are_refused() -> None:
    gail = linear_gail([0.0] * 6, 0.0)
    bad = rollout(np.zeros((2, 1, 3)), np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(
        ConfigurationError, match=r"rollout's observations have shape \(3,\), expert_buffer's \(4,\)"
    ):
        gail.update(bad, batch_size=None, num_repetitions=1)
    from tshtrain.algorithm import MultiCategoricalPolicy

    space = gym.spaces.MultiDiscrete([2, 3])
    policy = MultiCategoricalPolicy(mlp(4, 5, (8,)), space)
    with pytest.raises(UnsupportedSpaceError, match=r"^GAIL: the policy's action space is MultiDiscrete"):
        GAIL(
            policy=policy,
            critic=mlp(4, 1, (8,)),
            expert_buffer=expert_buffer(np.zeros((2, 4), np.float32), np.array([0, 1])),
            discriminator=mlp(6, 1, (8,)),
        )


def test_env_rewards_do_not_matter() -> None:
    rng = np.random.default_rng(2)
    obs = rng.uniform(-1, 1, size=(4, 2, 4))
    act = rng.integers(0, 2, size=(4, 2))
    results = []
    for env_reward in (0.0, 100.0):
        gail = linear_gail([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 0.0)
        data = dataclasses.replace(rollout(obs, act), rew=np.full((4, 2), env_reward, np.float32))
        gail.update(data, batch_size=4, num_repetitions=1)
        results.append([p.detach().clone() for p in gail.policy.parameters()])
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)


def test_tensor_rollouts_give_the_same_update_as_numpy_rollouts() -> None:
    rng = np.random.default_rng(3)
    data = rollout(rng.uniform(-1, 1, size=(4, 2, 4)), rng.integers(0, 2, size=(4, 2)))
    weight = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6]
    from_numpy = linear_gail(weight, 0.0).update(data, batch_size=4, num_repetitions=2)
    tensor_data = rollout_to_torch(data, torch.device("cpu"))
    assert isinstance(tensor_data, TensorRolloutBatch)
    from_tensors = linear_gail(weight, 0.0).update(tensor_data, batch_size=4, num_repetitions=2)
    assert from_numpy == from_tensors
