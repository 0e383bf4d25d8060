"""Unit tests of NPG and TRPO: the natural-gradient math against explicit matrices and
torch.distributions, a step against a hand-computed one, the line search, validation and errors."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions import Bernoulli, Categorical, Independent, Normal, kl_divergence

from tshtrain.algorithm import (
    NPG,
    TRPO,
    BernoulliPolicy,
    CategoricalPolicy,
    GaussianPolicy,
    MultiCategoricalPolicy,
    NPGParams,
    TRPOParams,
    TrustRegionParams,
    mlp,
)
from tshtrain.algorithm.blocks.natural_gradient import (
    action_distribution,
    conjugate_gradient,
    detached,
    fisher_vector_product,
    flat_grad,
    flat_parameters,
    mean_kl,
    set_flat_parameters,
)
from tshtrain.algorithm.blocks.onpolicy import RolloutTensors
from tshtrain.constraints import field_checks
from tshtrain.data import RolloutBatch
from tshtrain.errors import ConfigurationError


def test_conjugate_gradient_solves_a_positive_definite_system() -> None:
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    f = m @ m.T + 0.5 * torch.eye(6, dtype=torch.float64)
    b = torch.randn(6, generator=gen, dtype=torch.float64)
    x = conjugate_gradient(lambda v: f @ v, b, num_iterations=6)  # exact in n steps (up to rounding)
    torch.testing.assert_close(x, torch.linalg.solve(f, b))
    one_step = conjugate_gradient(lambda v: f @ v, b, num_iterations=1)
    torch.testing.assert_close(one_step, (b @ b) / (b @ f @ b) * b)  # the steepest-descent step


def _tiny_categorical(seed: int = 0) -> CategoricalPolicy:
    torch.manual_seed(seed)
    return CategoricalPolicy(nn.Linear(3, 4), gym.spaces.Discrete(4), seed=seed)


def test_fisher_vector_product_is_the_damped_hessian_of_the_kl() -> None:
    policy = _tiny_categorical()
    params = list(policy.parameters())
    obs = torch.randn(5, 3)
    old = detached(action_distribution(policy, obs))
    start = flat_parameters(params)

    def kl_at(flat: torch.Tensor) -> torch.Tensor:
        weight, bias = flat[:12].view(4, 3), flat[12:]
        logp = torch.log_softmax(obs @ weight.T + bias, dim=-1)
        return (old[0].exp() * (old[0] - logp)).sum(dim=-1).mean()

    hessian = torch.autograd.functional.hessian(kl_at, start)
    kl_grad = flat_grad(mean_kl(policy, old, action_distribution(policy, obs)), params, create_graph=True)
    product = fisher_vector_product(kl_grad, params, damping=0.1)
    v = torch.randn(16)
    torch.testing.assert_close(product(v), hessian @ v + 0.1 * v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["categorical", "gaussian", "bernoulli", "multicategorical"])
def test_mean_kl_matches_torch_distributions(kind: str) -> None:
    torch.manual_seed(1)
    obs_a, obs_b = torch.randn(7, 3), torch.randn(7, 3)
    policy: Any
    if kind == "categorical":
        policy = CategoricalPolicy(nn.Linear(3, 4), gym.spaces.Discrete(4))
    elif kind == "gaussian":
        policy = GaussianPolicy(nn.Linear(3, 2), gym.spaces.Box(-1, 1, (2,)), init_log_std=-0.3)
    elif kind == "bernoulli":
        policy = BernoulliPolicy(nn.Linear(3, 5), gym.spaces.MultiBinary(5))
    else:
        policy = MultiCategoricalPolicy(nn.Linear(3, 5), gym.spaces.MultiDiscrete([2, 3]))
    old, new = action_distribution(policy, obs_a), action_distribution(policy, obs_b)
    if kind == "gaussian":
        with torch.no_grad():
            policy.log_std.add_(0.2)
        new = action_distribution(policy, obs_b)
        expected = kl_divergence(
            Independent(Normal(old[0], old[1].exp()), 1), Independent(Normal(new[0], new[1].exp()), 1)
        )
    elif kind == "categorical":
        expected = kl_divergence(Categorical(logits=old[0]), Categorical(logits=new[0]))
    elif kind == "bernoulli":
        expected = kl_divergence(Bernoulli(logits=old[0]), Bernoulli(logits=new[0])).sum(dim=-1)
    else:  # component 0 has 2 of the 3 padded columns
        expected = kl_divergence(Categorical(logits=old[0][:, 0, :2]), Categorical(logits=new[0][:, 0, :2]))
        expected = expected + kl_divergence(
            Categorical(logits=old[0][:, 1]), Categorical(logits=new[0][:, 1])
        )
    torch.testing.assert_close(mean_kl(policy, old, new), expected.mean())
    assert float(mean_kl(policy, old, old).detach()) == pytest.approx(0.0, abs=1e-6)


def test_flat_parameters_round_trip() -> None:
    policy = _tiny_categorical()
    params = list(policy.parameters())
    flat = flat_parameters(params)
    set_flat_parameters(params, flat + 1.0)
    torch.testing.assert_close(flat_parameters(params), flat + 1.0)
    assert torch.equal(params[1].detach(), flat[12:].view(4) + 1.0)


def _rollout(num_t: int = 6, num_e: int = 2, seed: int = 0) -> RolloutBatch:
    """A CartPole-shaped rollout of random data, every step valid, no episode end."""
    rng = np.random.default_rng(seed)
    shape = (num_t, num_e)
    return RolloutBatch(
        obs=rng.normal(size=(*shape, 4)).astype(np.float32),
        act=rng.integers(0, 2, size=shape),
        rew=rng.normal(size=shape).astype(np.float32),
        terminated=np.zeros(shape, bool),
        truncated=np.zeros(shape, bool),
        obs_next=rng.normal(size=(*shape, 4)).astype(np.float32),
        boundary=np.eye(num_t, num_e, k=num_e - num_t, dtype=bool) | (np.arange(num_t) == num_t - 1)[:, None],
        valid=np.ones(shape, bool),
    )


def _npg(params: NPGParams, seed: int = 0) -> NPG:
    torch.manual_seed(seed)
    policy = CategoricalPolicy(nn.Linear(4, 2), gym.spaces.Discrete(2), seed=seed)
    return NPG(policy=policy, critic=mlp(4, 1, (8,)), params=params, seed=seed)


def test_npg_step_is_trust_region_size_times_the_natural_gradient() -> None:
    """One mini-batch of the whole rollout: the parameters move by 0.3 * -(F + 0.1 I)^-1 g with F the
    explicit Hessian of the KL and g the gradient of -mean(log pi * A) (10 CG iterations on 10
    parameters are exact up to rounding)."""
    algo = _npg(NPGParams(trust_region_size=0.3, advantage_normalization=False))
    rollout = _rollout()
    from tshtrain.algorithm.blocks.onpolicy import prepare_rollout

    data: RolloutTensors = prepare_rollout(algo.ac, rollout, gamma=0.99, gae_lambda=0.95)
    params = algo.policy_parameters
    start = flat_parameters(params)
    obs, act, adv = data.obs, data.act, data.advantages
    assert isinstance(obs, torch.Tensor)
    old_logp_NK = torch.log_softmax(algo.policy.logits(obs), dim=-1).detach()

    def logits_at(flat: torch.Tensor) -> torch.Tensor:
        return obs @ flat[:8].view(2, 4).T + flat[8:]

    def loss_at(flat: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits_at(flat), dim=-1).gather(1, act.long().unsqueeze(1)).squeeze(1)
        return -(logp * adv).mean()

    def kl_at(flat: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits_at(flat), dim=-1)
        return (old_logp_NK.exp() * (old_logp_NK - logp)).sum(dim=-1).mean()

    g = torch.autograd.functional.jacobian(loss_at, start)
    f = torch.autograd.functional.hessian(kl_at, start) + 0.1 * torch.eye(10)
    expected = start - 0.3 * torch.linalg.solve(f, g)
    stats = algo.update(rollout, batch_size=None, num_repetitions=1)
    torch.testing.assert_close(flat_parameters(params), expected, rtol=1e-4, atol=1e-5)
    assert stats.num_gradient_steps == 1 + 5
    assert stats.policy_loss == pytest.approx(float(loss_at(start)), rel=1e-5)
    assert stats.kl > 0.0


def test_trpo_step_stays_in_the_trust_region_and_improves_the_surrogate() -> None:
    torch.manual_seed(0)
    policy = CategoricalPolicy(mlp(4, 2, (8,)), gym.spaces.Discrete(2), seed=0)
    algo = TRPO(policy=policy, critic=mlp(4, 1, (8,)), params=TRPOParams(max_kl=0.002), seed=0)
    stats = algo.update(_rollout(num_t=16, num_e=4), batch_size=None, num_repetitions=3)
    assert 0.0 < stats.kl < 0.002
    assert stats.step_size > 0.0
    assert stats.line_search_failures == 0.0
    assert stats.num_gradient_steps == 3 * (1 + 5)


def test_trpo_line_search_failure_keeps_the_policy() -> None:
    """With zero rewards and a zero critic every advantage is 0: no step lowers the surrogate, so
    every trial is rejected and the parameters are restored exactly."""
    torch.manual_seed(0)
    policy = CategoricalPolicy(nn.Linear(4, 2), gym.spaces.Discrete(2), seed=0)
    critic = nn.Linear(4, 1)
    nn.init.zeros_(critic.weight)
    nn.init.zeros_(critic.bias)
    params = TRPOParams(advantage_normalization=False, max_backtracks=3)
    algo = TRPO(policy=policy, critic=critic, params=params, seed=0)
    rollout = _rollout()
    rollout.rew[:] = 0.0
    start = flat_parameters(algo.policy_parameters)
    stats = algo.update(rollout, batch_size=None, num_repetitions=1)
    assert torch.equal(flat_parameters(algo.policy_parameters), start)
    assert (stats.line_search_failures, stats.num_backtracks, stats.step_size, stats.kl) == (
        1.0,
        3.0,
        0.0,
        0.0,
    )


def test_the_critic_must_not_share_parameters_with_the_policy() -> None:
    torch.manual_seed(0)
    trunk = mlp(4, 8, (8,))
    policy = CategoricalPolicy(nn.Sequential(trunk, nn.Linear(8, 2)), gym.spaces.Discrete(2))
    with pytest.raises(
        ConfigurationError, match=r"^TRPO: the critic shares 4 parameter tensors with the policy"
    ):
        TRPO(policy=policy, critic=nn.Sequential(trunk, nn.Linear(8, 1)))


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (
            NPGParams,
            {"trust_region_size": 0.0},
            r"^NPGParams\.trust_region_size must be a finite number > 0, got 0\.0",
        ),
        (
            NPGParams,
            {"num_critic_gradient_steps": 0},
            r"^NPGParams\.num_critic_gradient_steps must be an int >= 1",
        ),
        (TRPOParams, {"max_kl": -0.01}, r"^TRPOParams\.max_kl must be a finite number > 0, got -0\.01"),
        (TRPOParams, {"backtrack_coeff": 1.0}, r"^TRPOParams\.backtrack_coeff must be < 1"),
        (TRPOParams, {"max_backtracks": 0}, r"^TRPOParams\.max_backtracks must be an int >= 1"),
        (TRPOParams, {"damping": 0}, r"^TRPOParams\.damping must be a finite number > 0"),
    ],
)
def test_params_validation(cls: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        cls(**kwargs)


def test_tianshou_defaults() -> None:
    """The defaults of Tianshou 2.0.1's NPG / TRPO constructors (its damping and CG iterations are
    constants there)."""
    npg, trpo = NPGParams(), TRPOParams()
    assert (npg.trust_region_size, npg.num_critic_gradient_steps, npg.gae_lambda, npg.gamma) == (
        0.5,
        5,
        0.95,
        0.99,
    )
    assert npg.advantage_normalization and npg.damping == 0.1 and npg.num_cg_iterations == 10
    assert (trpo.max_kl, trpo.backtrack_coeff, trpo.max_backtracks) == (0.01, 0.8, 10)


@pytest.mark.parametrize("cls", [NPGParams, TRPOParams])
def test_every_float_field_refuses_nan_and_inf_and_numbers_refuse_bools(cls: type) -> None:
    floats = [check.name for check in field_checks(cls) if check.kind is float]
    assert {"lr", "gamma", "damping"} <= set(floats)
    for name in floats:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(
                ConfigurationError, match=rf"^{cls.__name__}\.{name} must be .*, got {bad}\.$"
            ):
                cls(**{name: bad})
    for check in field_checks(cls):
        if check.kind is not bool:
            with pytest.raises(ConfigurationError, match=rf"^{cls.__name__}\.{check.name} must be "):
                cls(**{check.name: True})


def test_the_trust_region_base_params_are_abstract_and_params_frozen() -> None:
    with pytest.raises(TypeError, match="abstract"):
        TrustRegionParams()  # type: ignore[abstract]  # the point of the test
    with pytest.raises(dataclasses.FrozenInstanceError):
        NPGParams().lr = 1.0  # type: ignore[misc]  # the point of the test
