"""Distributional blocks against hand-computed values: the categorical projection, the quantile Huber
loss, the networks' shapes, and noisy layers (noise only from the given generator, off when deterministic)."""

from __future__ import annotations

import io

import pytest
import torch

from tshtrain.algorithm import (
    C51Params,
    EpsilonSchedule,
    NoisyLinear,
    NoisyQPolicy,
    QValuePolicy,
    Rainbow,
    categorical_mlp,
    categorical_projection,
    iqn_mlp,
    mlp,
    quantile_huber_loss,
    quantile_mlp,
    resample_noise,
)
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError


def _cartpole_space() -> object:
    return make_vector_env("CartPole-v1", 1).single_action_space


def test_projection_of_a_shift_between_atoms_splits_the_mass_by_closeness() -> None:
    support = torch.tensor([0.0, 1.0, 2.0])
    next_probs = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    # row 0: 0.25 + 1.0 * 0 = 0.25 -> 0.75 on atom 0, 0.25 on atom 1
    # row 1: 0.5 + 0.5 * {1, 2} = {1.0, 1.5} -> atom 1 gets 0.5 + 0.25, atom 2 gets 0.25
    target = categorical_projection(torch.tensor([0.25, 0.5]), torch.tensor([1.0, 0.5]), next_probs, support)
    torch.testing.assert_close(target, torch.tensor([[0.75, 0.25, 0.0], [0.0, 0.75, 0.25]]))


def test_projection_clamps_to_the_support_and_a_terminal_is_a_point_mass() -> None:
    support = torch.tensor([-1.0, 0.0, 1.0])
    next_probs = torch.tensor([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    # row 0: returns 5 beyond v_max -> all mass on v_max; row 1: terminal (discount 0), return -0.5
    target = categorical_projection(torch.tensor([5.0, -0.5]), torch.tensor([0.9, 0.0]), next_probs, support)
    torch.testing.assert_close(target, torch.tensor([[0.0, 0.0, 1.0], [0.5, 0.5, 0.0]]))
    torch.testing.assert_close(target.sum(-1), torch.ones(2))


def test_quantile_huber_loss_matches_a_hand_computed_value() -> None:
    pred = torch.tensor([[0.0, 2.0]])
    target = torch.tensor([[1.0, 0.5]])
    taus = torch.tensor([[0.25, 0.75]])
    # q=0 (tau .25): u = 1.0 -> .25*.5 ; u = .5 -> .25*.125   mean = (.125+.03125)/2 = .078125
    # q=1 (tau .75): u = -1 -> .25*.5 ; u = -1.5 -> .25*1.0  mean = (.125+.25)/2 = .1875
    loss = quantile_huber_loss(pred, target, taus)
    torch.testing.assert_close(loss, torch.tensor([0.078125 + 0.1875]))


def test_quantile_huber_loss_is_minimal_at_the_true_quantile() -> None:
    target = torch.linspace(0.0, 1.0, 101).unsqueeze(0)
    tau = torch.tensor([[0.3]])
    values = [
        float(quantile_huber_loss(torch.tensor([[v]]), target, tau, kappa=0.01)) for v in (0.1, 0.3, 0.5)
    ]
    assert values[1] < values[0] and values[1] < values[2]


def test_networks_give_expected_q_values_of_their_distributions() -> None:
    obs = torch.randn(5, 4)
    cat = categorical_mlp(4, 3, (8,), num_atoms=7, v_min=-2.0, v_max=2.0, dueling=True)
    probs = cat.log_probs(obs).exp()
    assert probs.shape == (5, 3, 7)
    torch.testing.assert_close(probs.sum(-1), torch.ones(5, 3))
    torch.testing.assert_close(cat(obs), (probs * torch.linspace(-2.0, 2.0, 7)).sum(-1))
    qr = quantile_mlp(4, 3, (8,), num_quantiles=5)
    assert qr.quantiles(obs).shape == (5, 3, 5)
    torch.testing.assert_close(qr.tau_hat, torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9]))
    iqn = iqn_mlp(4, 3, (8,), num_policy_quantiles=4)
    assert iqn.quantiles(obs, torch.rand(5, 6)).shape == (5, 3, 6)
    taus = torch.tensor([0.125, 0.375, 0.625, 0.875]).expand(5, -1)
    torch.testing.assert_close(iqn(obs), iqn.quantiles(obs, taus).mean(-1))


def test_network_arguments_are_checked() -> None:
    with pytest.raises(ConfigurationError, match=r"CategoricalQNet.num_atoms must be an int >= 2, got 1"):
        categorical_mlp(4, 2, num_atoms=1)
    with pytest.raises(ConfigurationError, match=r"v_min must be < v_max, got v_min=1.0, v_max=1.0"):
        categorical_mlp(4, 2, v_min=1.0, v_max=1.0)
    with pytest.raises(ConfigurationError, match=r"QuantileQNet.num_quantiles must be an int >= 2, got 1"):
        quantile_mlp(4, 2, num_quantiles=1)
    with pytest.raises(ConfigurationError, match=r"NoisyLinear.sigma0 must be a finite number >= 0, got -1"):
        NoisyLinear(2, 2, -1.0)


def test_noisy_linear_uses_its_noise_only_in_training_mode() -> None:
    layer = NoisyLinear(3, 2)
    x = torch.ones(1, 3)
    mean = layer.eval()(x)
    layer.train()
    torch.testing.assert_close(layer(x), mean)  # zero noise before the first resample
    resample_noise(layer, torch.Generator().manual_seed(0))
    assert not torch.equal(layer(x), mean)
    torch.testing.assert_close(layer.eval()(x), mean)


def test_resampling_is_a_function_of_the_generator_state() -> None:
    a, b = NoisyLinear(3, 2), NoisyLinear(3, 2)
    resample_noise(a, torch.Generator().manual_seed(5))
    resample_noise(b, torch.Generator().manual_seed(5))
    torch.testing.assert_close(a.eps_in, b.eps_in)
    torch.testing.assert_close(a.eps_out, b.eps_out)


def test_noisy_policy_is_deterministic_on_test_steps_and_noisy_in_training() -> None:
    net = categorical_mlp(4, 2, (16,), num_atoms=5, noisy_sigma0=5.0)
    policy = NoisyQPolicy(
        QValuePolicy(net, _cartpole_space(), eps_schedule=EpsilonSchedule(start=0.0, end=0.0)), seed=0
    )
    obs = torch.randn(64, 4)
    with torch.inference_mode():
        greedy = [policy.actions(obs, deterministic=True) for _ in range(3)]
        noisy = [policy.actions(obs, deterministic=False) for _ in range(3)]
    assert all(torch.equal(greedy[0], g) for g in greedy)
    assert not all(torch.equal(noisy[0], n) for n in noisy)


def test_noisy_policy_needs_noisy_layers() -> None:
    with pytest.raises(ConfigurationError, match=r"NoisyQPolicy: q_policy\.q_net has no NoisyLinear layer"):
        NoisyQPolicy(QValuePolicy(mlp(4, 2), _cartpole_space()))


def _rainbow(seed: int) -> Rainbow:
    torch.manual_seed(seed)
    net = categorical_mlp(4, 2, (16,), num_atoms=5, dueling=True, noisy_sigma0=0.5)
    policy = NoisyQPolicy(QValuePolicy(net, _cartpole_space()), seed=seed)
    return Rainbow(policy=policy, params=C51Params(), seed=seed)


def test_rainbow_checkpoint_carries_both_noise_generators() -> None:
    trained = _rainbow(0)
    trained.generator.manual_seed(123)
    trained.policy.noise_generator.manual_seed(456)
    blob = io.BytesIO()
    torch.save(trained.state_dict(), blob)
    blob.seek(0)
    fresh = _rainbow(7)
    fresh.load_state_dict(torch.load(blob))
    assert torch.equal(fresh.generator.get_state(), trained.generator.get_state())
    assert torch.equal(fresh.policy.noise_generator.get_state(), trained.policy.noise_generator.get_state())
    obs = torch.randn(8, 4)
    with torch.inference_mode():
        torch.testing.assert_close(fresh.policy.q_values(obs), trained.policy.q_values(obs))
        resample_noise(fresh.policy.q_net, fresh.policy.noise_generator)
        resample_noise(trained.policy.q_net, trained.policy.noise_generator)
        torch.testing.assert_close(fresh.policy.q_values(obs), trained.policy.q_values(obs))


def test_c51_params_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"C51Params.n_step must be an int >= 1, got 0"):
        C51Params(n_step=0)
