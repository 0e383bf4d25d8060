"""PPO's Tianshou options: ``dual_clip``, ``recompute_advantage``, ``return_scaling``.

Each option is checked against numbers computed here by hand on a tiny batch or rollout (tiny
networks with weights set by hand), plus validation and reproducibility.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams
from tshtrain.algorithm.algos.ppo import clipped_surrogate_loss
from tshtrain.algorithm.blocks.onpolicy import RolloutTensors
from tshtrain.algorithm.blocks.return_scaling import ReturnScale
from tshtrain.data import RolloutBatch
from tshtrain.errors import ConfigurationError

DISCRETE = gym.spaces.Discrete(2)


def linear(weight: list[list[float]], bias: list[float]) -> nn.Linear:
    layer = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return layer


def rollout(obs: list[float], act: list[int], rew: list[float], terminated: list[bool]) -> RolloutBatch:
    """One env column of T steps, 1-dim observations; the last step ends the column."""
    t = len(obs)
    term = np.array(terminated).reshape(t, 1)
    boundary = term.copy()
    boundary[-1] = True
    obs_T = np.array(obs, dtype=np.float32).reshape(t, 1, 1)
    return RolloutBatch(
        obs=obs_T,
        act=np.array(act, dtype=np.int64).reshape(t, 1),
        rew=np.array(rew, dtype=np.float32).reshape(t, 1),
        terminated=term,
        truncated=np.zeros((t, 1), dtype=bool),
        obs_next=np.roll(obs_T, -1, axis=0),
        boundary=boundary,
        valid=np.ones((t, 1), dtype=bool),
    )


class Recorder:
    """Update hooks recording every reported loss, in order."""

    def __init__(self) -> None:
        self.losses: list[dict[str, float]] = []

    def on_sampled_batch(self, batch: Any, /) -> Any:
        return batch

    def on_loss(self, losses: Any, /) -> None:
        self.losses.append({name: float(loss.detach()) for name, loss in losses.items()})

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        del name, optimizer


def close(actual: float, expected: float, tol: float = 1e-5) -> None:
    assert actual == pytest.approx(expected, rel=tol, abs=tol)


def make_ppo(params: PPOParams, critic_weight: float = 0.5) -> PPO:
    policy = CategoricalPolicy(linear([[0.0], [0.0]], [0.0, 0.0]), DISCRETE, seed=0)  # pi = (1/2, 1/2)
    critic = linear([[critic_weight]], [0.0])  # V(o) = w * o
    return PPO(policy=policy, critic=critic, params=params, seed=0)


# ------------------------------------------------------------------------------------------ params
@pytest.mark.parametrize("value", [1.0, 0.5, -2.0, math.inf])
def test_dual_clip_must_be_above_one(value: float) -> None:
    with pytest.raises(ConfigurationError, match=r"PPOParams\.dual_clip.*> 1"):
        PPOParams(dual_clip=value)


def test_defaults_are_off() -> None:
    params = PPOParams()
    assert params.dual_clip is None
    assert params.recompute_advantage is False
    assert params.return_scaling is False


# ------------------------------------------------------------------------------------------ dual clip
def test_dual_clip_bounds_only_negative_advantages() -> None:
    # ratios 4 (A = -1), 4 (A = +1), 0.5 (A = -1); eps = 0.2, c = 3
    ratio = torch.tensor([4.0, 4.0, 0.5])
    adv = torch.tensor([-1.0, 1.0, -1.0])
    # plain clipped objective: min(r A, clip(r) A) = (-4, 1.2, -0.8)
    plain = -(-4.0 + 1.2 - 0.8) / 3
    close(float(clipped_surrogate_loss(ratio, adv, 0.2, None)), plain)
    # dual clip: for A < 0 the objective is max(., c A) = max(-4, -3) = -3 and max(-0.8, -3) = -0.8;
    # the positive-advantage step keeps 1.2 (c A = 3 would exceed it: not applied where A > 0)
    dual = -(-3.0 + 1.2 - 0.8) / 3
    close(float(clipped_surrogate_loss(ratio, adv, 0.2, 3.0)), dual)


def test_dual_clip_in_the_minibatch_loss_and_its_gradient() -> None:
    algorithm = make_ppo(PPOParams(advantage_normalization=False, dual_clip=2.0, vf_coef=0.0))
    # pi(a | o) = 1/2 now; the old probabilities were 0.1: ratio 5; A = -1, so min(rA, clip(r)A) = -5
    # and the dual clip lifts it to c * A = -2: loss 2 and no gradient through the ratio
    batch = RolloutTensors(
        obs=torch.tensor([[1.0]]),
        act=torch.tensor([0]),
        logp_old=torch.log(torch.tensor([0.1])),
        value_old=torch.tensor([0.5]),
        advantages=torch.tensor([-1.0]),
        returns=torch.tensor([0.5]),
    )
    terms = algorithm.minibatch_loss(batch, 0.2)
    close(float(terms.policy_loss.detach()), 2.0)
    terms.policy_loss.backward()
    grads = [p.grad for p in algorithm.policy.parameters()]
    assert all(g is None or float(g.abs().max()) == 0.0 for g in grads)
    # without the dual clip the same batch has loss 5 and a gradient
    plain = make_ppo(PPOParams(advantage_normalization=False, vf_coef=0.0))
    close(float(plain.minibatch_loss(batch, 0.2).policy_loss.detach()), 5.0)


# ------------------------------------------------------------------------------------------ recompute
def _two_step_update(params: PPOParams, num_repetitions: int) -> list[dict[str, float]]:
    algorithm = make_ppo(params)
    hooks = Recorder()
    algorithm.update(
        rollout([1.0, 2.0], [0, 1], [1.0, 2.0], [False, True]),
        batch_size=None,
        num_repetitions=num_repetitions,
        hooks=hooks,
    )
    return hooks.losses


def test_recompute_advantage_uses_the_updated_critic_in_the_second_repetition() -> None:
    lr = 0.1
    base = {"gamma": 0.9, "gae_lambda": 0.8, "vf_coef": 1.0, "advantage_normalization": False, "lr": lr}
    recomputed = _two_step_update(PPOParams(**base, recompute_advantage=True, max_grad_norm=None), 2)
    kept = _two_step_update(PPOParams(**base, max_grad_norm=None), 2)
    # first repetition identical: V = (0.5, 1.0), returns (2.62, 2.0) (see test_golden_updates)
    value_loss_0 = ((0.5 - 2.62) ** 2 + (1.0 - 2.0) ** 2) / 2
    close(recomputed[0]["value loss"], value_loss_0)
    close(kept[0]["value loss"], value_loss_0)
    # one Adam step moves the critic's weight and bias by +lr each (the gradient is negative in both)
    w, b = 0.5 + lr, lr
    v0, v1 = w * 1.0 + b, w * 2.0 + b
    # kept targets: returns (2.62, 2.0) of the old critic
    close(kept[1]["value loss"], ((v0 - 2.62) ** 2 + (v1 - 2.0) ** 2) / 2)
    # recomputed: A_1 = 2 - v1 (terminal), A_0 = 1 + 0.9 v1 - v0 + 0.72 A_1; returns = A + V
    a1 = 2.0 - v1
    a0 = 1.0 + 0.9 * v1 - v0 + 0.9 * 0.8 * a1
    close(recomputed[1]["value loss"], ((v0 - (a0 + v0)) ** 2 + (v1 - (a1 + v1)) ** 2) / 2)
    # the policy loss: the ratio against the *collecting* policy (logp_old not recomputed); the
    # actor moved in the first step, so -mean(ratio * A) with ratio != 1 for the new advantages
    assert recomputed[1]["policy loss"] != pytest.approx(kept[1]["policy loss"])


def test_recompute_advantage_keeps_logp_old_of_the_collecting_policy() -> None:
    algorithm = make_ppo(PPOParams(recompute_advantage=True, advantage_normalization=False, lr=0.1))
    seen: list[torch.Tensor] = []
    original = algorithm.minibatch_loss

    def spy(batch: RolloutTensors, clip: float) -> Any:
        seen.append(batch.logp_old.clone())
        return original(batch, clip)

    algorithm.minibatch_loss = spy  # type: ignore[method-assign]
    algorithm.update(
        rollout([1.0, 2.0, 3.0], [0, 1, 0], [1.0, 2.0, 0.5], [False, False, True]),
        batch_size=None,
        num_repetitions=3,
    )
    assert len(seen) == 3
    for logp in seen:  # pi_old = (1/2, 1/2) for every step, in every repetition
        torch.testing.assert_close(logp, torch.full((3,), math.log(0.5)))


def test_recompute_with_one_repetition_equals_the_default_bit_for_bit() -> None:
    params = {"gamma": 0.9, "gae_lambda": 0.8, "advantage_normalization": False, "lr": 0.1}
    a = _two_step_update(PPOParams(**params, recompute_advantage=True), 1)
    b = _two_step_update(PPOParams(**params), 1)
    assert a == b


# ------------------------------------------------------------------------------------------ return scaling
def test_return_scale_merges_like_a_running_variance() -> None:
    scale = ReturnScale()
    close(scale.scale, 1.0)
    scale.update(torch.tensor([1.0, 3.0]))
    close(scale.var, 1.0)  # the first merge replaces the initial variance: var(1, 3) = 1
    scale.update(torch.tensor([5.0, 7.0, 9.0]))
    close(scale.var, float(np.var([1.0, 3.0, 5.0, 7.0, 9.0])))
    close(scale.scale, math.sqrt(8.0 + 1e-8))
    restored = ReturnScale()
    restored.load_state(scale.state())
    assert restored.state() == scale.state()


def test_return_scaling_divides_the_value_targets_and_keeps_advantages_in_reward_units() -> None:
    params = PPOParams(
        gamma=0.9, gae_lambda=0.8, vf_coef=1.0, ent_coef=0.0, advantage_normalization=False,
        return_scaling=True, lr=1e-9,
    )  # fmt: skip
    algorithm = make_ppo(params)
    assert algorithm.return_scale is not None
    algorithm.return_scale.load_state({"mean": 0.0, "var": 4.0, "count": 10})  # s = 2
    hooks = Recorder()
    algorithm.update(
        rollout([1.0, 2.0], [0, 1], [1.0, 2.0], [False, True]),
        batch_size=None,
        num_repetitions=1,
        hooks=hooks,
    )
    # critic outputs (0.5, 1.0) are scaled values: V = 2 * (0.5, 1.0) = (1, 2) in reward units
    # A_1 = 2 - 2 = 0 (terminal); A_0 = 1 + 0.9 * 2 - 1 + 0.72 * 0 = 1.8; returns = (2.8, 2.0)
    # value targets: returns / 2 = (1.4, 1.0); policy loss at ratio 1: -mean(A) = -0.9
    close(hooks.losses[0]["value loss"], ((0.5 - 1.4) ** 2 + (1.0 - 1.0) ** 2) / 2)
    close(hooks.losses[0]["policy loss"], -0.9)
    # then the unscaled returns (2.8, 2.0) are merged: count 10 -> 12
    merged = ReturnScale()
    merged.load_state({"mean": 0.0, "var": 4.0, "count": 10})
    merged.update(torch.tensor([2.8, 2.0]))
    close(algorithm.return_scale.var, merged.var)
    assert algorithm.return_scale.count == 12
    # and it is saved with the algorithm
    assert algorithm.extra_state()["return_scale"]["count"] == 12


def test_return_scaling_starts_unscaled() -> None:
    base = {"gamma": 0.9, "gae_lambda": 0.8, "advantage_normalization": False, "lr": 0.1}
    scaled = _two_step_update(PPOParams(**base, return_scaling=True), 1)
    plain = _two_step_update(PPOParams(**base), 1)
    # s = sqrt(1 + 1e-8) on the first update: the same losses to float precision
    close(scaled[0]["value loss"], plain[0]["value loss"])
    close(scaled[0]["policy loss"], plain[0]["policy loss"])


# ------------------------------------------------------------------------------------------ reproducibility
@pytest.mark.parametrize(
    "options",
    [{"dual_clip": 1.001}, {"recompute_advantage": True}, {"return_scaling": True}],
    ids=["dual_clip", "recompute_advantage", "return_scaling"],
)
def test_same_seed_same_result_and_the_option_changes_it(options: dict[str, Any]) -> None:
    def run(**extra: Any) -> list[float]:
        torch.manual_seed(0)  # the initial weights of the two-layer nets below
        policy = CategoricalPolicy(
            nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 2)), DISCRETE, seed=3
        )
        critic = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
        params = PPOParams(lr=0.05, clip_range=0.1, **extra)
        algorithm = PPO(policy=policy, critic=critic, params=params, seed=3)
        data = rollout(
            [0.1, 0.5, -0.3, 0.9, 1.2, -1.0], [0, 1, 1, 0, 1, 0], [1.0, -2.0, 3.0, 0.5, -1.0, 4.0],
            [False, False, True, False, False, True],
        )  # fmt: skip
        losses: list[float] = []
        for _ in range(3):
            stats = algorithm.update(data, batch_size=2, num_repetitions=4)
            losses += [stats.loss, stats.policy_loss, stats.value_loss]
        return losses + [float(p.detach().sum()) for p in policy.parameters()]

    first, second = run(**options), run(**options)
    assert first == second
    assert first != run()
