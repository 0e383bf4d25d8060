"""BCQ's and discrete CRR's losses and targets against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    BCQPolicy,
    CategoricalPolicy,
    ConditionalVAE,
    DiscreteCRR,
    DiscreteCRRParams,
    Perturbation,
    PolicyImprovement,
)
from tshtrain.algorithm.algos.bcq import bcq_target
from tshtrain.algorithm.algos.discrete_crr import crr_losses
from tshtrain.algorithm.blocks.offpolicy import ReplaySample
from tshtrain.algorithm.blocks.vae import LATENT_CLIP, VAEOutput, vae_loss
from tshtrain.env import make_vector_env


def _sample(returns: list[float], discounts: list[float]) -> ReplaySample:
    n = len(returns)
    return ReplaySample(
        obs=torch.zeros(n, 3),
        act=torch.zeros(n, 1),
        returns=torch.tensor(returns),
        discounts=torch.tensor(discounts),
        obs_next=torch.zeros(n, 3),
        weight=None,
        indices=torch.arange(n),
    )


def test_vae_loss_matches_hand_computed_values() -> None:
    out = VAEOutput(
        reconstruction=torch.tensor([[0.5], [-1.0]]),
        mean=torch.tensor([[1.0, 0.0], [0.0, 0.0]]),
        std=torch.tensor([[1.0, math.exp(-1.0)], [1.0, 1.0]]),
    )
    act = torch.tensor([[0.0], [-0.5]])
    loss, recon, kl = vae_loss(out, act)
    expected_recon = (0.25 + 0.25) / 2
    # per latent: -log sigma + (sigma^2 + mu^2 - 1) / 2
    expected_kl = (0.5 + (1.0 + (math.exp(-2.0) - 1.0) / 2) + 0.0 + 0.0) / 4
    torch.testing.assert_close(recon, torch.tensor(expected_recon))
    torch.testing.assert_close(kl, torch.tensor(expected_kl))
    torch.testing.assert_close(loss, torch.tensor(expected_recon + 0.5 * expected_kl))


def test_bcq_target_is_the_best_sample_of_the_soft_clipped_double_q() -> None:
    # 2 transitions x 2 sampled next actions (rows of one transition adjacent), 2 target critics
    q_MK = torch.tensor([[1.0, 4.0, -2.0, 0.0], [3.0, 2.0, -1.0, -5.0]])
    # lmbda * min + (1 - lmbda) * max: [1.5, 2.5, -1.75, -3.75]; best per transition: [2.5, -1.75]
    target = bcq_target(q_MK, _sample([1.0, 0.5], [0.99, 0.0]), lmbda=0.75, num_sampled=2)
    torch.testing.assert_close(target, torch.tensor([1.0 + 0.99 * 2.5, 0.5]))
    # lmbda = 1: TD3's clipped double Q, min then max: [1, 2] -> 2 and [-2, -5] -> -2
    target_1 = bcq_target(q_MK, _sample([0.0, 0.0], [1.0, 1.0]), lmbda=1.0, num_sampled=2)
    torch.testing.assert_close(target_1, torch.tensor([2.0, -2.0]))


def test_perturbation_moves_by_at_most_phi_and_stays_in_bounds() -> None:
    net = nn.Linear(4, 1)
    nn.init.zeros_(net.weight)
    nn.init.constant_(net.bias, 100.0)  # tanh -> 1: the largest move
    xi = Perturbation(net, phi=0.05)
    out = xi(torch.zeros(3, 3), torch.tensor([[0.5], [0.98], [-1.0]]))
    torch.testing.assert_close(out, torch.tensor([[0.55], [1.0], [-0.95]]))


class _QIsTheAction(nn.Module):
    """Two critics, both Q(s, a) = a_0."""

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return act[:, 0].expand(2, -1)


def test_bcq_policy_acts_with_the_candidate_of_largest_q1() -> None:
    torch.manual_seed(0)
    policy = BCQPolicy(
        perturbation=Perturbation.from_sizes(3, 1, (8,)),
        vae=ConditionalVAE(3, 1, (8,)),
        critic=_QIsTheAction(),
        action_space=make_vector_env("Pendulum-v1", 1).single_action_space,
        num_forward_sampled_actions=7,
        seed=5,
    )
    obs = torch.randn(4, 3)
    replay = torch.Generator().manual_seed(0)
    replay.set_state(policy.generator.get_state())
    with torch.no_grad():
        candidates = policy.perturbed_actions(obs.repeat_interleave(7, dim=0), replay).reshape(4, 7)
        act = policy.actions(obs, deterministic=True)
    torch.testing.assert_close(act[:, 0], candidates.max(dim=1).values)
    assert len(set(candidates[0].tolist())) > 3  # the candidates differ: the choice is not trivial


def test_generated_latents_are_clipped() -> None:
    torch.manual_seed(0)
    vae = ConditionalVAE(1, 1, (4,), latent_dim=1)
    seen: list[torch.Tensor] = []
    vae.decode = lambda obs, latent: seen.append(latent) or latent  # type: ignore[method-assign]  # a probe
    vae.generate(torch.zeros(500, 1), torch.Generator().manual_seed(0))
    assert float(seen[0].abs().max()) == LATENT_CLIP


# ---------------------------------------------------------------------- discrete CRR

Q_NA = [[1.0, 3.0], [2.0, 0.0]]
LOGITS_NA = [[0.0, 0.0], [math.log(3.0), 0.0]]  # pi = [0.5, 0.5] and [0.75, 0.25]
ACT_N = [1, 1]
TARGET_N = [2.0, 1.0]
# advantages: Q(s, a) - sum_b pi(b | s) Q(s, b) = [3 - 2, 0 - 1.5] = [1, -1.5]
LOGP_N = [math.log(0.5), math.log(0.25)]


def _crr_losses(**kw: object) -> dict[str, torch.Tensor]:
    return crr_losses(
        torch.tensor(Q_NA),
        torch.tensor(LOGITS_NA),
        torch.tensor(ACT_N),
        torch.tensor(TARGET_N),
        DiscreteCRRParams(**kw),  # type: ignore[arg-type]  # test values
    )


@pytest.mark.parametrize(
    ("kw", "weights"),
    [
        ({}, [math.e, math.exp(-1.5)]),
        ({"beta": 2.0}, [math.exp(0.5), math.exp(-0.75)]),
        ({"ratio_upper_bound": 2.0}, [2.0, math.exp(-1.5)]),
        ({"policy_improvement": "binary"}, [1.0, 0.0]),
        ({"policy_improvement": PolicyImprovement.ALL}, [1.0, 1.0]),
    ],
)
def test_crr_actor_loss_is_the_advantage_weighted_log_likelihood(
    kw: dict[str, object], weights: list[float]
) -> None:
    losses = _crr_losses(**kw)
    expected = -(weights[0] * LOGP_N[0] + weights[1] * LOGP_N[1]) / 2
    torch.testing.assert_close(losses["actor loss"], torch.tensor(expected))
    torch.testing.assert_close(losses["weight"], torch.tensor(sum(weights) / 2))


def test_crr_critic_penalty_and_total_match_hand_computed_values() -> None:
    losses = _crr_losses(min_q_weight=10.0)
    critic = 0.5 * ((3.0 - 2.0) ** 2 + (0.0 - 1.0) ** 2) / 2
    penalty = ((math.log(math.e + math.e**3) - 3.0) + math.log(math.e**2 + 1.0)) / 2
    actor = -(math.e * LOGP_N[0] + math.exp(-1.5) * LOGP_N[1]) / 2
    torch.testing.assert_close(losses["critic loss"], torch.tensor(critic))
    torch.testing.assert_close(losses["cql penalty"], torch.tensor(penalty))
    torch.testing.assert_close(losses["loss"], torch.tensor(actor + critic + 10.0 * penalty))


def test_crr_actor_loss_sends_no_gradient_into_the_critic() -> None:
    q = torch.tensor(Q_NA, requires_grad=True)
    logits = torch.tensor(LOGITS_NA, requires_grad=True)
    losses = crr_losses(q, logits, torch.tensor(ACT_N), torch.tensor(TARGET_N), DiscreteCRRParams())
    losses["actor loss"].backward()  # type: ignore[no-untyped-call]  # torch's backward is untyped
    assert q.grad is None
    assert logits.grad is not None and bool(logits.grad.abs().sum() > 0)


def _constant(values: list[float]) -> nn.Linear:
    layer = nn.Linear(4, len(values))
    nn.init.zeros_(layer.weight)
    with torch.no_grad():
        layer.bias.copy_(torch.tensor(values))
    return layer


@pytest.mark.parametrize("target_update_freq", [0, 5])
def test_crr_next_value_is_the_expected_q_under_the_target_policy(target_update_freq: int) -> None:
    space = make_vector_env("CartPole-v1", 1).single_action_space
    policy = CategoricalPolicy(_constant([0.0, math.log(3.0)]), space)  # pi = [0.25, 0.75]
    algorithm = DiscreteCRR(
        policy=policy,
        critic=_constant([4.0, 8.0]),
        params=DiscreteCRRParams(target_update_freq=target_update_freq),
    )
    value = algorithm._next_value(torch.zeros(3, 4))
    torch.testing.assert_close(value, torch.full((3,), 0.25 * 4.0 + 0.75 * 8.0))


def test_crr_policy_improvement_strings_become_the_enum() -> None:
    params = DiscreteCRRParams(policy_improvement="binary")  # type: ignore[arg-type]  # a config value
    assert params.policy_improvement is PolicyImprovement.BINARY
