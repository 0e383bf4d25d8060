"""PPO's options for batched-simulator users: ``adam_eps``, ``desired_kl`` (KL-adaptive learning rate
per mini-batch), ``advantage_normalization_scope``, ``grad_clip_scope`` and ``timeout_bootstrap``.

Each option is checked against numbers computed here by hand on a tiny rollout (a categorical policy
with logits ``W o + b`` starting at 0, so pi = (1/2, 1/2), and a critic ``V(o) = 0.5 o``), plus the
one-line validation errors and that experiment files can set them.
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
from tshtrain.algorithm.algos.ppo import AdvantageScope, GradClipScope
from tshtrain.algorithm.blocks.onpolicy import RolloutTensors, TimeoutBootstrap
from tshtrain.algorithm.blocks.onpolicy_update import KLRule, kl_adapted_lr
from tshtrain.algorithm.blocks.schedules import LinearSchedule
from tshtrain.config.registry import get_spec
from tshtrain.config.resolve import build_params, default_experiment_data, resolve_experiment
from tshtrain.config.schema import enum_fields, value_fields
from tshtrain.data import RolloutBatch
from tshtrain.errors import ConfigurationError

DISCRETE = gym.spaces.Discrete(2)
PLAIN = {"advantage_normalization": False, "max_grad_norm": None, "vf_coef": 1.0, "ent_coef": 0.0}
"""no standardisation, no clipping: the hand-computed gradients are the applied ones"""


def linear(weight: list[list[float]], bias: list[float]) -> nn.Linear:
    layer = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return layer


def make_ppo(params: PPOParams) -> PPO:
    policy = CategoricalPolicy(linear([[0.0], [0.0]], [0.0, 0.0]), DISCRETE, seed=0)  # pi = (1/2, 1/2)
    return PPO(policy=policy, critic=linear([[0.5]], [0.0]), params=params, seed=0)  # V(o) = o / 2


def column(
    obs: list[float],
    rew: list[float],
    *,
    terminated: list[bool],
    truncated: list[bool] | None = None,
    obs_next: list[float] | None = None,
    act: list[int] | None = None,
) -> RolloutBatch:
    """One env column of T steps with 1-dim observations; the last step ends the column."""
    t = len(obs)
    term = np.array(terminated).reshape(t, 1)
    trunc = np.zeros((t, 1), dtype=bool) if truncated is None else np.array(truncated).reshape(t, 1)
    boundary = term | trunc
    boundary[-1] = True
    obs_T = np.array(obs, dtype=np.float32).reshape(t, 1, 1)
    next_T = (
        np.roll(obs_T, -1, axis=0) if obs_next is None else np.array(obs_next, np.float32).reshape(t, 1, 1)
    )
    return RolloutBatch(
        obs=obs_T,
        act=np.array([0] * t if act is None else act, dtype=np.int64).reshape(t, 1),
        rew=np.array(rew, dtype=np.float32).reshape(t, 1),
        terminated=term,
        truncated=trunc,
        obs_next=next_T,
        boundary=boundary,
        valid=np.ones((t, 1), dtype=bool),
    )


def spy_batches(algorithm: PPO) -> list[RolloutTensors]:
    """Record every mini-batch the loss receives."""
    seen: list[RolloutTensors] = []
    original = algorithm.minibatch_loss

    def spy(batch: RolloutTensors, clip: Any) -> Any:
        seen.append(batch)
        return original(batch, clip)

    algorithm.minibatch_loss = spy  # type: ignore[method-assign]
    return seen


def by_obs(batch: RolloutTensors, field: str) -> list[float]:
    """``batch.<field>`` ordered by the (distinct) 1-dim observations."""
    order = torch.argsort(batch.obs[:, 0])  # type: ignore[index]  # array observations here
    values: list[float] = getattr(batch, field)[order].tolist()
    return values


def close(actual: float, expected: float, tol: float = 1e-5) -> None:
    assert actual == pytest.approx(expected, rel=tol, abs=tol)


# ------------------------------------------------------------------------------------------ adam_eps
@pytest.mark.parametrize(("eps", "step"), [(1e-8, 0.1 / (1 + 1e-8)), (1.0, 0.1 / 2.0)])
def test_adam_eps_is_the_denominator_term_of_the_first_step(eps: float, step: float) -> None:
    # one step, terminal: V = 0.5, return 1; value loss (V - 1)^2 has gradient -1 for the critic's
    # weight (o = 1) and bias. Adam's first step is -lr * g / (|g| + eps) = lr / (1 + eps) each
    algorithm = make_ppo(PPOParams(lr=0.1, adam_eps=eps, **PLAIN))
    algorithm.update(column([1.0], [1.0], terminated=[True]), batch_size=None, num_repetitions=1)
    critic = algorithm.critic
    close(float(critic.weight.detach()), 0.5 + step, 1e-6)
    close(float(critic.bias.detach()), step, 1e-6)


def test_adam_eps_default_is_torchs() -> None:
    assert PPOParams().adam_eps == 1e-8
    assert make_ppo(PPOParams()).ac.optim.param_groups[0]["eps"] == 1e-8


# ------------------------------------------------------------------------------------------ grad clipping
@pytest.mark.parametrize("scope", list(GradClipScope))
def test_grad_clip_scope_together_or_per_network(scope: GradClipScope) -> None:
    # one terminal step, o = 1, A = 1 - 0.5 = 0.5 (no standardisation), ratio 1:
    # actor: d(-A r)/dl0 = -A * r * (1 - p0) = -0.25, d/dl1 = +0.25 -> grads W = b = (-0.25, 0.25), norm 0.5
    # critic: d(V - 1)^2/dV = -1 -> grads w = b = -1, norm sqrt(2); over both: sqrt(0.25 + 2) = 1.5
    params = PPOParams(lr=1e-9, **{**PLAIN, "max_grad_norm": 0.4}, grad_clip_scope=scope)
    algorithm = make_ppo(params)
    stats = algorithm.update(column([1.0], [1.0], terminated=[True]), batch_size=None, num_repetitions=1)
    close(stats.grad_norm, 1.5)
    if scope is GradClipScope.TOGETHER:
        actor_scale = critic_scale = 0.4 / 1.5
    else:
        actor_scale, critic_scale = 0.4 / 0.5, 0.4 / math.sqrt(2.0)
    policy_net = algorithm.policy.actor
    assert isinstance(policy_net, nn.Linear)
    for grad, expected in [
        (policy_net.weight.grad, [[-0.25 * actor_scale], [0.25 * actor_scale]]),
        (policy_net.bias.grad, [-0.25 * actor_scale, 0.25 * actor_scale]),
        (algorithm.critic.weight.grad, [[-critic_scale]]),
        (algorithm.critic.bias.grad, [-critic_scale]),
    ]:
        assert grad is not None
        torch.testing.assert_close(grad, torch.tensor(expected), rtol=1e-5, atol=1e-6)


def test_per_network_clipping_refuses_shared_parameters() -> None:
    trunk = nn.Linear(1, 2)
    policy = CategoricalPolicy(trunk, DISCRETE, seed=0)
    critic = nn.Sequential(trunk, nn.Linear(2, 1))
    with pytest.raises(ConfigurationError, match=r"^PPO: grad_clip_scope=per_network .* share 2 tensor"):
        PPO(policy=policy, critic=critic, params=PPOParams(grad_clip_scope=GradClipScope.PER_NETWORK))


# ------------------------------------------------------------------------------------------ KL-adaptive lr
RULE = KLRule(target_kl=0.01, factor=1.5, min_lr=1e-5, max_lr=1e-2)


@pytest.mark.parametrize(
    ("lr", "kl", "expected"),
    [
        (1e-3, 0.03, 1e-3 / 1.5),  # above 2 * target: divided
        (1.2e-5, 0.03, 1e-5),  # ... but not below min_lr
        (1e-3, 0.004, 1.5e-3),  # below target / 2: multiplied
        (8e-3, 0.004, 1e-2),  # ... but not above max_lr
        (1e-3, 0.0, 1e-3),  # KL 0 (the first mini-batch): unchanged
        (1e-3, 0.005, 1e-3),  # inside [target / 2, 2 target]: unchanged
        (1e-3, 0.02, 1e-3),
    ],
)
def test_kl_adapted_lr_rule(lr: float, kl: float, expected: float) -> None:
    close(kl_adapted_lr(lr, kl, RULE), expected, 1e-12)


class LrAtLoss:
    """Update hooks recording the optimizer's learning rate at each mini-batch's loss."""

    def __init__(self, algorithm: PPO):
        self.optim = algorithm.ac.optim
        self.lrs: list[float] = []

    def on_sampled_batch(self, batch: Any, /) -> Any:
        return batch

    def on_loss(self, losses: Any, /) -> None:
        self.lrs.append(float(self.optim.param_groups[0]["lr"]))

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        del name, optimizer


def _kl_update(desired_kl: float, kl_lr_max: float = 1.0) -> tuple[PPO, float]:
    params = PPOParams(lr=0.1, desired_kl=desired_kl, kl_lr_max=kl_lr_max, **PLAIN)
    algorithm = make_ppo(params)
    data = column([1.0, 1.0], [1.0, 1.0], terminated=[True, True])  # two one-step episodes, A = 0.5
    stats = algorithm.update(data, batch_size=1, num_repetitions=1)
    return algorithm, stats.lr


# The first mini-batch has ratio 1 (KL 0: lr stays 0.1); its Adam step moves each actor parameter by
# lr * sign(-grad): W0, b0 up by 0.1 and W1, b1 down, so the logits at o = 1 are (0.2, -0.2). The
# second mini-batch then has ratio r = 2 sigmoid(0.4) and KL estimate (r - 1) - log r:
RATIO = 2.0 / (1.0 + math.exp(-0.4))
KL = (RATIO - 1.0) - math.log(RATIO)  # 0.01725


@pytest.mark.parametrize(
    ("desired_kl", "kl_lr_max", "expected_lr"),
    [
        (0.005, 1.0, 0.1 / 1.5),  # KL > 2 * 0.005
        (0.02, 1.0, 0.1),  # 0.01 <= KL <= 0.04
        (0.05, 1.0, 0.15),  # 0 < KL < 0.025
        (0.05, 0.12, 0.12),  # ... up to kl_lr_max
    ],
)
def test_kl_adaptive_lr_changes_the_rate_per_minibatch(
    desired_kl: float, kl_lr_max: float, expected_lr: float
) -> None:
    assert 0.01 < KL < 0.025
    algorithm, lr = _kl_update(desired_kl, kl_lr_max)
    close(lr, expected_lr, 1e-6)
    close(algorithm.ac.optim.param_groups[0]["lr"], expected_lr, 1e-6)


def test_kl_adaptive_lr_carries_over_and_is_saved_with_the_optimizer() -> None:
    algorithm, lr = _kl_update(0.005)
    data = column([1.0, 1.0], [1.0, 1.0], terminated=[True, True])
    hooks = LrAtLoss(algorithm)
    second = algorithm.update(data, batch_size=1, num_repetitions=1, hooks=hooks)
    assert hooks.lrs[0] == lr == pytest.approx(0.1 / 1.5)  # the next update starts where this one ended
    restored = make_ppo(algorithm.params)
    restored.load_state_dict(algorithm.state_dict())
    assert restored.ac.optim.param_groups[0]["lr"] == second.lr


# ------------------------------------------------------------------------------------------ advantages
def test_advantage_normalization_over_the_rollout() -> None:
    # four one-step episodes: A = r - V(o) = (1, 2, 3, 4) - (0.5, 1, 1.5, 2) = (0.5, 1, 1.5, 2)
    # mean 1.25, unbiased std sqrt(1.25 / 3): standardised over the rollout, not per mini-batch of 2
    std = math.sqrt(1.25 / 3)
    expected = [(a - 1.25) / std for a in (0.5, 1.0, 1.5, 2.0)]
    data = column([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], terminated=[True] * 4)
    base = {**PLAIN, "advantage_normalization": True, "lr": 1e-9}
    algorithm = make_ppo(PPOParams(**base, advantage_normalization_scope=AdvantageScope.ROLLOUT))
    seen = spy_batches(algorithm)
    stats = algorithm.update(data, batch_size=2, num_repetitions=1)
    got = sorted(a for batch in seen for a in batch.advantages.tolist())
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # the loss does not standardise again: at ratio 1 its policy loss is -mean(A) of each mini-batch
    close(stats.policy_loss, -sum(expected) / 4)
    # per mini-batch (the default) the loss receives the raw advantages and standardises each pair
    minibatch = make_ppo(PPOParams(**base))
    seen = spy_batches(minibatch)
    stats = minibatch.update(data, batch_size=2, num_repetitions=1)
    assert sorted(a for batch in seen for a in batch.advantages.tolist()) == [0.5, 1.0, 1.5, 2.0]
    close(stats.policy_loss, 0.0)


# ------------------------------------------------------------------------------------------ time-outs
# three steps, gamma 0.9, lambda 0.8, V = o / 2 = (0.5, 1, 1.5); step 1 times out (final obs 5,
# V = 2.5); step 2 ends the collected column (obs_next 4, V = 2: bootstrapped in every mode):
#   A2 = 3 + 0.9 * 2 - 1.5 = 3.3
#   A1 = 2 + 0.9 * next - 1 with next = V(final obs) 2.5 | V(o_1) 1 | 0  -> 3.25 | 1.9 | 1.0
#   A0 = 1 + 0.9 * 1 - 0.5 + 0.72 * A1                                   -> 3.74 | 2.768 | 2.12
@pytest.mark.parametrize(
    ("mode", "a0", "a1"),
    [
        (TimeoutBootstrap.FINAL_OBS, 3.74, 3.25),
        (TimeoutBootstrap.STEP_OBS, 2.768, 1.9),
        (TimeoutBootstrap.OFF, 2.12, 1.0),
    ],
)
def test_timeout_bootstrap(mode: TimeoutBootstrap, a0: float, a1: float) -> None:
    data = column(
        [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], terminated=[False] * 3, truncated=[False, True, False],
        obs_next=[2.0, 5.0, 4.0],
    )  # fmt: skip
    params = PPOParams(gamma=0.9, gae_lambda=0.8, lr=1e-9, timeout_bootstrap=mode, **PLAIN)
    algorithm = make_ppo(params)
    seen = spy_batches(algorithm)
    algorithm.update(data, batch_size=None, num_repetitions=1)
    np.testing.assert_allclose(by_obs(seen[0], "advantages"), [a0, a1, 3.3], rtol=1e-5)
    np.testing.assert_allclose(by_obs(seen[0], "returns"), [a0 + 0.5, a1 + 1.0, 4.8], rtol=1e-5)


# ------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"desired_kl": 0.0}, r"^PPOParams\.desired_kl"),
        ({"kl_lr_factor": 1.0}, r"^PPOParams\.kl_lr_factor.*> 1"),
        ({"kl_lr_min": 1e-2, "kl_lr_max": 1e-3}, r"^PPOParams\.kl_lr_min=0\.01 is above kl_lr_max=0\.001"),
        (
            {"desired_kl": 0.01, "lr_schedule": LinearSchedule(num_update_steps=10)},
            r"^PPOParams\.desired_kl=0\.01 adapts .* allowed: one of them",
        ),
        ({"adam_eps": 0.0}, r"^PPOParams\.adam_eps"),
        (
            {"advantage_normalization": False, "advantage_normalization_scope": AdvantageScope.ROLLOUT},
            r"^PPOParams\.advantage_normalization_scope=rollout needs advantage_normalization=True",
        ),
        (
            {"max_grad_norm": None, "grad_clip_scope": GradClipScope.PER_NETWORK},
            r"^PPOParams\.grad_clip_scope=per_network needs max_grad_norm",
        ),
        (
            {"timeout_bootstrap": "step_obs"},
            r"^PPOParams\.timeout_bootstrap must be a TimeoutBootstrap \(TimeoutBootstrap\.FINAL_OBS, "
            r".*got 'step_obs'",
        ),
    ],
)
def test_invalid_options_are_one_line_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as info:
        PPOParams(**kwargs)
    assert "\n" not in str(info.value)


def test_defaults_keep_the_update_as_it_was() -> None:
    params = PPOParams()
    assert params.desired_kl is None
    assert params.advantage_normalization_scope is AdvantageScope.MINIBATCH
    assert params.grad_clip_scope is GradClipScope.TOGETHER
    assert params.timeout_bootstrap is TimeoutBootstrap.FINAL_OBS
    assert params.compile_loss is False
    assert params.kl_rule() is None


def test_experiment_files_can_set_the_options() -> None:
    fields = value_fields(PPOParams)
    for name in (
        "adam_eps", "desired_kl", "kl_lr_factor", "kl_lr_min", "kl_lr_max", "advantage_normalization_scope",
        "grad_clip_scope", "timeout_bootstrap", "compile_loss",
    ):  # fmt: skip
        assert name in fields
    assert enum_fields(PPOParams)["timeout_bootstrap"] is TimeoutBootstrap
    assert fields["advantage_normalization_scope"][1] == "minibatch"
    data = default_experiment_data("ppo")
    data["algorithm"]["params"].update(
        desired_kl=0.01, lr_schedule="constant", advantage_normalization_scope="rollout",
        grad_clip_scope="per_network", timeout_bootstrap="step_obs", adam_eps=1e-5,
    )  # fmt: skip
    experiment = resolve_experiment(data)
    params = build_params(get_spec("ppo"), experiment.algorithm.params)
    assert isinstance(params, PPOParams)
    assert params.kl_rule() == KLRule(target_kl=0.01, factor=1.5, min_lr=1e-5, max_lr=1e-2)
    assert params.advantage_normalization_scope is AdvantageScope.ROLLOUT
    assert params.grad_clip_scope is GradClipScope.PER_NETWORK
    assert params.timeout_bootstrap is TimeoutBootstrap.STEP_OBS
    assert params.adam_eps == 1e-5


# ------------------------------------------------------------------------------------------ reproducibility
@pytest.mark.parametrize(
    "options",
    [
        {"desired_kl": 0.001},
        {"advantage_normalization_scope": AdvantageScope.ROLLOUT},
        {"grad_clip_scope": GradClipScope.PER_NETWORK, "max_grad_norm": 0.05},
        {"timeout_bootstrap": TimeoutBootstrap.STEP_OBS},
        {"adam_eps": 1e-3},
    ],
    ids=["desired_kl", "rollout_advantages", "per_network_clip", "step_obs_timeouts", "adam_eps"],
)
def test_same_seed_same_result_and_the_option_changes_it(options: dict[str, Any]) -> None:
    def run(**extra: Any) -> list[float]:
        torch.manual_seed(0)  # the initial weights of the two-layer nets below
        policy = CategoricalPolicy(
            nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 2)), DISCRETE, seed=3
        )
        critic = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
        params = PPOParams(lr=0.05, clip_range=0.1, **{"max_grad_norm": 0.5, **extra})
        algorithm = PPO(policy=policy, critic=critic, params=params, seed=3)
        data = column(
            [0.1, 0.5, -0.3, 0.9, 1.2, -1.0], [1.0, -2.0, 3.0, 0.5, -1.0, 4.0],
            terminated=[False, False, True, False, False, False], truncated=[False] * 4 + [True, False],
            obs_next=[0.5, -0.3, 0.0, 1.2, 2.0, 0.3], act=[0, 1, 1, 0, 1, 0],
        )  # fmt: skip
        losses: list[float] = []
        for _ in range(3):
            stats = algorithm.update(data, batch_size=2, num_repetitions=4)
            losses += [stats.loss, stats.policy_loss, stats.value_loss, stats.lr]
        return losses + [float(p.detach().sum()) for p in policy.parameters()]

    first, second = run(**options), run(**options)
    assert first == second
    assert first != run()
