"""REDQ and IQL losses and targets against hand-computed numbers, and their parameter checks."""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    IQL,
    NO_UPDATE_HOOKS,
    REDQ,
    IQLParams,
    QEnsemble,
    REDQParams,
    REDQTarget,
    TanhGaussianPolicy,
    advantage_weights,
    expectile_loss,
    mlp,
    tanh_gaussian_log_prob,
)
from tshtrain.algorithm.algos.redq import subset_target_values
from tshtrain.algorithm.blocks.offpolicy import ReplaySample
from tshtrain.constraints import field_checks
from tshtrain.data import VectorReplayBuffer
from tshtrain.errors import ConfigurationError

BOX = gym.spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)
CONSTANTS = (0.0, 1.0, 2.0, 3.0)


class _ConstantCritics(nn.Module):
    """Critic i answers CONSTANTS[i] for every (o, a)."""

    num_critics = len(CONSTANTS)

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Parameter(torch.tensor(CONSTANTS))

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.c[:, None].expand(self.num_critics, obs.shape[0])


def _redq(**kw: object) -> REDQ:
    torch.manual_seed(0)
    policy = TanhGaussianPolicy(mlp(3, 2, (8,)), BOX, seed=0)
    return REDQ(policy=policy, critic=_ConstantCritics(), params=REDQParams(**kw), seed=0)  # type: ignore[arg-type]


def _sample() -> ReplaySample:
    obs = torch.linspace(-1.0, 1.0, 6).reshape(2, 3)
    return ReplaySample(
        obs=obs,
        act=torch.tensor([[0.5], [-0.5]]),
        returns=torch.tensor([1.0, 2.0]),
        discounts=torch.tensor([0.9, 0.0]),
        obs_next=obs.flip(0),
        weight=None,
        indices=np.arange(2),
    )


def test_subset_target_values_take_the_min_or_the_mean_of_the_chosen_rows() -> None:
    q_next = torch.tensor([[1.0, 5.0], [3.0, 2.0], [0.0, 4.0]])
    subset = torch.tensor([0, 1])
    torch.testing.assert_close(subset_target_values(q_next, subset, REDQTarget.MIN), torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(
        subset_target_values(q_next, subset, REDQTarget.MEAN), torch.tensor([2.0, 3.5])
    )
    torch.testing.assert_close(
        subset_target_values(q_next, torch.tensor([2]), REDQTarget.MIN), torch.tensor([0.0, 4.0])
    )


@pytest.mark.parametrize(("mode", "reduced"), [(REDQTarget.MIN, 0.0), (REDQTarget.MEAN, 1.5)])
def test_redq_target_over_the_whole_ensemble(mode: REDQTarget, reduced: float) -> None:
    algorithm = _redq(subset_size=4, target_mode=mode, alpha=0.5)
    batch = _sample()
    state = algorithm.policy.generator.get_state()
    _, log_prob_next = algorithm.policy.sample(batch.obs_next)
    algorithm.policy.generator.set_state(state)
    expected = torch.tensor([1.0, 2.0]) + torch.tensor([0.9, 0.0]) * (reduced - 0.5 * log_prob_next)
    torch.testing.assert_close(algorithm.td_target(batch, torch.tensor(0.5)), expected.detach())


def test_redq_target_uses_a_fresh_random_subset_each_step() -> None:
    algorithm = _redq(subset_size=2, alpha=0.5)
    batch = _sample()
    minima = set()
    for _ in range(30):
        policy_state, subset_state = algorithm.policy.generator.get_state(), algorithm.generator.get_state()
        _, log_prob_next = algorithm.policy.sample(batch.obs_next)
        subset = torch.randperm(4, generator=algorithm.generator)[:2]
        algorithm.policy.generator.set_state(policy_state)
        algorithm.generator.set_state(subset_state)
        reduced = min(CONSTANTS[i] for i in subset.tolist())
        target = algorithm.td_target(batch, torch.tensor(0.5))
        torch.testing.assert_close(target[0], 1.0 + 0.9 * (reduced - 0.5 * log_prob_next[0].detach()))
        torch.testing.assert_close(target[1], torch.tensor(2.0))  # terminal: no bootstrap
        minima.add(reduced)
    assert minima == {0.0, 1.0, 2.0}  # min over 2 of 4 distinct values: never 3


def test_redq_actor_loss_uses_the_ensemble_mean() -> None:
    algorithm = _redq(alpha=0.5)
    batch = _sample()
    state = algorithm.policy.generator.get_state()
    _, log_prob = algorithm.policy.sample(batch.obs)
    algorithm.policy.generator.set_state(state)
    algorithm._actor_step(batch, torch.tensor(0.5), NO_UPDATE_HOOKS)
    expected = (0.5 * log_prob - sum(CONSTANTS) / 4).mean()
    torch.testing.assert_close(algorithm._actor_loss, expected.detach())
    torch.testing.assert_close(algorithm._entropy, -log_prob.mean().detach())


def _pendulum_like_buffer(num: int = 64, act_scale: float = 1.0) -> VectorReplayBuffer:
    rng = np.random.default_rng(0)
    buffer = VectorReplayBuffer(200, 1, seed=0)
    for _ in range(num):
        buffer.add(
            obs=rng.normal(size=(1, 3)).astype(np.float32),
            act=(act_scale * rng.uniform(-1, 1, size=(1, 1))).astype(np.float32),
            rew=rng.normal(size=1).astype(np.float32),
            terminated=np.zeros(1, dtype=bool),
            truncated=np.zeros(1, dtype=bool),
            obs_next=rng.normal(size=(1, 3)).astype(np.float32),
        )
    return buffer


def test_redq_steps_the_actor_every_actor_delay_gradient_steps() -> None:
    torch.manual_seed(0)
    policy = TanhGaussianPolicy(mlp(3, 2, (8,)), BOX, seed=0)
    algorithm = REDQ(
        policy=policy, critic=QEnsemble(3, 1, (8,), num_critics=5), params=REDQParams(actor_delay=3)
    )
    buffer = _pendulum_like_buffer()
    before = [p.detach().clone() for p in policy.actor.parameters()]
    for _ in range(2):
        algorithm.update(buffer, 8)
    assert all(torch.equal(a, b) for a, b in zip(policy.actor.parameters(), before, strict=True))
    stats = algorithm.update(buffer, 8)
    assert any(not torch.equal(a, b) for a, b in zip(policy.actor.parameters(), before, strict=True))
    assert stats.actor_loss != 0.0 and stats.q_std > 0.0


def test_expectile_loss_matches_hand_computed_values() -> None:
    diff = torch.tensor([2.0, -1.0])
    torch.testing.assert_close(expectile_loss(diff, 0.7), torch.tensor((0.7 * 4 + 0.3 * 1) / 2))
    torch.testing.assert_close(expectile_loss(diff, 0.5), torch.tensor((0.5 * 4 + 0.5 * 1) / 2))


def test_expectile_loss_is_minimised_at_the_expectile() -> None:
    # targets 0 and 1, expectile 0.9: 0.9 * (1 - v) = 0.1 * v  =>  v = 0.9
    targets = torch.tensor([0.0, 1.0])
    v = torch.zeros((), requires_grad=True)
    optim = torch.optim.SGD([v], lr=0.5)
    for _ in range(300):
        optim.zero_grad()
        expectile_loss(targets - v, 0.9).backward()  # type: ignore[no-untyped-call]
        optim.step()
    assert v.item() == pytest.approx(0.9, abs=1e-4)


def test_advantage_weights_are_exponentiated_and_clipped() -> None:
    adv = torch.tensor([0.0, 1.0, 10.0, -1.0], requires_grad=True)
    w = advantage_weights(adv, 3.0, 100.0)
    torch.testing.assert_close(w, torch.tensor([1.0, math.exp(3.0), 100.0, math.exp(-3.0)]))
    assert not w.requires_grad


def test_tanh_gaussian_log_prob_matches_hand_computed_values() -> None:
    mu, log_std = torch.zeros(2, 1), torch.zeros(2, 1)
    act = torch.tensor([[0.0], [math.tanh(1.0)]])
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    expected = torch.tensor([-half_log_2pi, -0.5 - half_log_2pi - math.log(1 - math.tanh(1.0) ** 2)])
    torch.testing.assert_close(tanh_gaussian_log_prob(mu, log_std, act), expected)
    # boundary actions stay finite
    assert torch.isfinite(tanh_gaussian_log_prob(mu, log_std, torch.tensor([[1.0], [-1.0]]))).all()


def test_tanh_gaussian_log_prob_agrees_with_the_policy_samples() -> None:
    torch.manual_seed(0)
    box = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    policy = TanhGaussianPolicy(mlp(3, 4, (8,)), box, seed=0)
    obs = torch.randn(50, 3)
    act, log_prob = policy.sample(obs)
    mu, log_std = policy.mean_log_std(obs)
    keep = act.abs().amax(-1) < 0.99  # away from the clamp at the boundary
    torch.testing.assert_close(
        tanh_gaussian_log_prob(mu, log_std, act)[keep], log_prob[keep], rtol=1e-4, atol=1e-4
    )


def _iql(**kw: object) -> IQL:
    torch.manual_seed(0)
    policy = TanhGaussianPolicy(mlp(3, 2, (8,)), BOX, seed=0)
    return IQL(
        policy=policy,
        critic=QEnsemble(3, 1, (8,)),
        value=mlp(3, 1, (8,)),
        params=IQLParams(**kw),  # type: ignore[arg-type]
    )


def test_iql_update_moves_every_network_and_reports_consistent_stats() -> None:
    algorithm = _iql()
    buffer = _pendulum_like_buffer()
    algorithm.process_buffer(buffer)
    before = {name: [p.detach().clone() for p in net.parameters()] for name, net in _nets(algorithm).items()}
    stats = algorithm.update(buffer, 16)
    for name, net in _nets(algorithm).items():
        assert any(not torch.equal(a, b) for a, b in zip(net.parameters(), before[name], strict=True)), name
    assert 0.0 < stats.weight_mean <= 100.0
    assert stats.value_loss > 0.0 and stats.critic_loss > 0.0


def _nets(algorithm: IQL) -> dict[str, nn.Module]:
    return {
        "actor": algorithm.policy.actor,
        "critic": algorithm.nets.critic,
        "target": algorithm.nets.target_critic.net,
        "value": algorithm.value,
    }


def test_iql_rejects_a_dataset_of_unscaled_actions() -> None:
    with pytest.raises(ConfigurationError, match=r"^IQL: the dataset's actions range over \[-1.9"):
        _iql().process_buffer(_pendulum_like_buffer(act_scale=2.0))


def test_redq_rejects_a_subset_larger_than_the_ensemble_and_a_critic_without_num_critics() -> None:
    policy = TanhGaussianPolicy(mlp(3, 2, (8,)), BOX, seed=0)
    with pytest.raises(ConfigurationError, match=r"^REDQParams.subset_size=3 exceeds .* num_critics=2"):
        REDQ(policy=policy, critic=QEnsemble(3, 1, (8,)), params=REDQParams(subset_size=3))
    with pytest.raises(ConfigurationError, match=r"^REDQ: the critic needs an int attribute num_critics"):
        REDQ(policy=policy, critic=nn.Linear(4, 1))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: REDQParams(subset_size=0), r"REDQParams.subset_size must be an int >= 1, got 0"),
        (lambda: REDQParams(actor_delay=0), r"REDQParams.actor_delay must be an int >= 1, got 0"),
        (lambda: REDQParams(alpha=0.0), r"REDQParams.alpha must be a finite number > 0, got 0.0"),
        (lambda: REDQParams(target_mode="min"), r"REDQParams.target_mode must be a REDQTarget"),  # type: ignore[arg-type]
        (lambda: IQLParams(expectile=1.0), r"IQLParams.expectile must be in \(0, 1\), got 1.0"),
        (lambda: IQLParams(expectile=0.0), r"IQLParams.expectile must be a number in \(0, 1\], got 0.0"),
        (lambda: IQLParams(beta=0.0), r"IQLParams.beta must be a finite number > 0, got 0.0"),
        (lambda: IQLParams(max_weight=-1.0), r"IQLParams.max_weight must be a finite number > 0, got -1.0"),
    ],
)
def test_hyperparameter_validation(build: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()


@pytest.mark.parametrize("cls", [REDQParams, IQLParams])
def test_every_float_field_refuses_nan_and_inf_and_every_number_field_bools(cls: type) -> None:
    checks = field_checks(cls)
    floats = [check.name for check in checks if check.kind is float]
    assert floats
    for name in floats:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(
                ConfigurationError, match=rf"^{cls.__name__}\.{name} must be .*, got {bad}\.$"
            ):
                cls(**{name: bad})
    for check in checks:
        if check.kind is not bool:
            with pytest.raises(ConfigurationError, match=rf"^{cls.__name__}\.{check.name} must be "):
                cls(**{check.name: True})


def test_iql_update_wires_its_three_losses_as_the_paper() -> None:
    # one repeated transition; value_lr tiny, so V is the same before and after the value step
    algorithm = _iql(value_lr=1e-20, beta=2.0, expectile=0.8)
    obs, act, obs_next = np.array([[0.1, -0.2, 0.3]]), np.array([[0.4]]), np.array([[-0.5, 0.6, 0.7]])
    buffer = VectorReplayBuffer(8, 1, seed=0)
    for _ in range(4):
        buffer.add(
            obs=obs.astype(np.float32),
            act=act.astype(np.float32),
            rew=np.array([1.5], dtype=np.float32),
            terminated=np.zeros(1, dtype=bool),
            truncated=np.zeros(1, dtype=bool),
            obs_next=obs_next.astype(np.float32),
        )
    o, a, o2 = (torch.as_tensor(x, dtype=torch.float32) for x in (obs, act, obs_next))
    with torch.no_grad():
        q_i = algorithm.nets.critic(o, a)[:, 0]
        q_target = algorithm.nets.target_critic.net(o, a).min(dim=0).values[0]
        v, v_next = algorithm.value(o)[0, 0], algorithm.value(o2)[0, 0]
        mu, log_std = algorithm.policy.mean_log_std(o)
        log_prob = tanh_gaussian_log_prob(mu, log_std, a)[0]
    stats = algorithm.update(buffer, 4)
    diff = float(q_target - v)
    assert stats.value_loss == pytest.approx((0.8 if diff >= 0 else 0.2) * diff**2, rel=1e-5)
    weight = min(math.exp(2.0 * diff), 100.0)
    assert stats.weight_mean == pytest.approx(weight, rel=1e-5)
    assert stats.actor_loss == pytest.approx(-weight * float(log_prob), rel=1e-5)
    expected_critic = float(((q_i - (1.5 + 0.99 * v_next)) ** 2).sum())
    assert stats.critic_loss == pytest.approx(expected_critic, rel=1e-5)
