"""MASAC: the critic loss, the actor loss, the temperature loss and one Adam step against a scalar
reference written out by hand (the squashed Gaussian's log-density, clipped double-Q, each agent's
own entropy term), on tiny linear nets with the Gaussian noise read from the policies' generators.
Training through the trainer, seeding and save/load: tests/unit/test_maddpg.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from tests.unit.test_maddpg import BOX, critic_rows, first_weight, golden_buffer, linear_critic
from tshtrain.algorithm import MASAC, MASACParams, QEnsemble, TanhGaussianPolicy
from tshtrain.algorithm.blocks.agent_nets import SelectKeys

LOG_SIGMA = math.log(0.5)
LR = 0.1
ALPHA = 0.2
INPUTS = np.array([0.5, 0.5, -0.5, 1.0])
"""(x, u_1, u_2, 1) of the sampled joint transition: Adam's first step moves w by -lr * sign(td * input)"""
CRITICS = {
    "a": [[1.0, 2.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]],
    "b": [[0.0, 1.0, -1.0, 0.5], [0.0, 1.0, -1.0, 1.0]],
}


def gaussian_actor(weight: float, seed: int) -> TanhGaussianPolicy:
    """mu(o) = weight * o, sigma = 0.5."""
    net = nn.Linear(1, 2)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[weight], [0.0]]))
        net.bias.copy_(torch.tensor([0.0, LOG_SIGMA]))
    return TanhGaussianPolicy(SelectKeys(net, ["obs"]), BOX, seed=seed)


def golden_masac(*, auto_alpha: bool = False) -> MASAC:
    return MASAC(
        ("a", "b"),
        {"a": gaussian_actor(0.5, 0), "b": gaussian_actor(-1.0, 1)},
        {name: linear_critic(members) for name, members in CRITICS.items()},
        params=MASACParams(
            actor_lr=LR,
            critic_lr=LR,
            alpha_lr=LR,
            gamma=0.5,
            tau=0.5,
            alpha=ALPHA if not auto_alpha else 0.5,
            auto_alpha=auto_alpha,
            target_entropy=-1.0,
        ),
    )


def noise(policy: TanhGaussianPolicy, count: int) -> list[float]:
    """The next ``count`` standard normal draws of the policy's generator (one per sample call)."""
    generator = torch.Generator()
    generator.set_state(policy.generator.get_state())
    return [float(torch.randn((1, 1), generator=generator)) for _ in range(count)]


def squashed(mu: float, eps: float) -> tuple[float, float]:
    """a = tanh(mu + sigma * eps) and log pi(a) = -eps^2 / 2 - log sigma - log(2 pi) / 2 - log(1 - a^2)."""
    u = mu + 0.5 * eps
    return math.tanh(u), -0.5 * eps**2 - LOG_SIGMA - 0.5 * math.log(2 * math.pi) - math.log(
        1 - math.tanh(u) ** 2
    )


def q(members: np.ndarray, x: float, u1: float, u2: float) -> np.ndarray:
    values: np.ndarray = members @ np.array([x, u1, u2, 1.0])
    return values


def reference(eps_a: list[float], eps_b: list[float], alpha: float) -> dict[str, object]:
    """The update of one joint transition (o = (1, 2), s = 0.5, u = (0.5, -0.5), r = (1, 0),
    o' = (-1, 0.5), s' = 1, gamma 0.5), by hand."""
    w = {name: np.array(members) for name, members in CRITICS.items()}
    # critic targets: u'_a ~ pi_a(.|o'_a = -1) (mu = -0.5), u'_b ~ pi_b(.|o'_b = 0.5) (mu = -0.5)
    next_a, logp_next_a = squashed(-0.5, eps_a[0])
    next_b, logp_next_b = squashed(-0.5, eps_b[0])
    y_a = 1.0 + 0.5 * (q(w["a"], 1.0, next_a, next_b).min() - alpha * logp_next_a)
    y_b = 0.0 + 0.5 * (q(w["b"], 1.0, next_a, next_b).min() - alpha * logp_next_b)
    q_a, q_b = q(w["a"], 0.5, 0.5, -0.5), q(w["b"], 0.5, 0.5, -0.5)  # (1.5, 1.0), (1.5, 2.0)
    critic_loss = float((((q_a - y_a) ** 2 + (q_b - y_b) ** 2) / 2).sum())
    stepped = {
        "a": w["a"] - LR * np.sign(q_a - y_a)[:, None] * np.sign(INPUTS),
        "b": w["b"] - LR * np.sign(q_b - y_b)[:, None] * np.sign(INPUTS),
    }

    def actor_loss(w_a: float, w_b: float) -> tuple[float, float, float]:
        # fresh actions: u~_a ~ pi_a(.|o_a = 1), u~_b ~ pi_b(.|o_b = 2); the other agent's from the sample
        own_a, logp_a = squashed(w_a * 1.0, eps_a[1])
        own_b, logp_b = squashed(w_b * 2.0, eps_b[1])
        loss_a = alpha * logp_a - q(stepped["a"], 0.5, own_a, -0.5).min()
        loss_b = alpha * logp_b - q(stepped["b"], 0.5, 0.5, own_b).min()
        return (loss_a + loss_b) / 2, logp_a, logp_b

    loss, logp_a, logp_b = actor_loss(0.5, -1.0)
    h = 1e-4  # the actor weights' gradient signs, by central differences
    grad_a = actor_loss(0.5 + h, -1.0)[0] - actor_loss(0.5 - h, -1.0)[0]
    grad_b = actor_loss(0.5, -1.0 + h)[0] - actor_loss(0.5, -1.0 - h)[0]
    return {
        "critic_loss": critic_loss,
        "critics": stepped,
        "actor_loss": loss,
        "actor_weights": (0.5 - LR * np.sign(grad_a), -1.0 - LR * np.sign(grad_b)),
        "mean_log_prob": (logp_a + logp_b) / 2,
    }


def test_masac_losses_and_one_adam_step_match_the_hand_reference() -> None:
    masac = golden_masac()
    pa, pb = masac.joint.policies
    expected = reference(noise(pa, 2), noise(pb, 2), ALPHA)
    stats = masac.update(golden_buffer(), batch_size=1)
    assert stats.q_mean == pytest.approx(1.5)  # (1.5 + 1.0 + 1.5 + 2.0) / 4
    assert stats.alpha == pytest.approx(ALPHA) and stats.alpha_loss == 0.0
    assert stats.critic_loss == pytest.approx(expected["critic_loss"], abs=1e-5)
    assert stats.actor_loss == pytest.approx(expected["actor_loss"], abs=1e-5)
    assert stats.entropy == pytest.approx(-expected["mean_log_prob"], abs=1e-5)  # type: ignore[operator]
    stepped = expected["critics"]
    assert isinstance(stepped, dict)
    for critic, name in zip(masac.joint.critics, ("a", "b"), strict=True):
        assert isinstance(critic, QEnsemble)
        torch.testing.assert_close(critic_rows(critic), torch.tensor(stepped[name], dtype=torch.float32))
    weights = tuple(first_weight(p.actor) for p in masac.joint.policies)
    assert weights == pytest.approx(expected["actor_weights"])
    # the target critics are halfway (tau 0.5) between the old and the stepped critics; no target actor
    targets = masac.nets.target_critic.net
    assert isinstance(targets, nn.ModuleList) and isinstance(targets[0], QEnsemble)
    target_a = targets[0]
    torch.testing.assert_close(
        critic_rows(target_a), torch.tensor((np.array(CRITICS["a"]) + stepped["a"]) / 2, dtype=torch.float32)
    )
    assert masac.nets.target_actor is None


def test_auto_alpha_steps_log_alpha_on_the_agents_mean_log_prob() -> None:
    masac = golden_masac(auto_alpha=True)
    pa, pb = masac.joint.policies
    expected = reference(noise(pa, 2), noise(pb, 2), 0.5)
    stats = masac.update(golden_buffer(), batch_size=1)
    mean_log_prob = expected["mean_log_prob"]
    assert isinstance(mean_log_prob, float)
    # loss = -log(alpha) * (mean log pi + target_entropy); d/d log(alpha) = -(mean log pi - 1)
    assert stats.alpha_loss == pytest.approx(-math.log(0.5) * (mean_log_prob - 1.0), abs=1e-5)
    step = -LR * np.sign(-(mean_log_prob - 1.0))
    assert math.log(masac.alpha) == pytest.approx(math.log(0.5) + step, abs=1e-6)
    assert stats.actor_loss == pytest.approx(expected["actor_loss"], abs=1e-5)
