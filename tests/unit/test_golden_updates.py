"""Golden one-step tests: one update of every algorithm on a tiny hand-built batch with tiny networks
whose weights are set by hand. Every expected loss and target is computed here, in plain arithmetic
(or plain torch on the numbers written out below), never with the library's own functions.

Off-policy and offline algorithms sample from a one-transition buffer; the update hooks replace the
sample by the hand-built batch (``on_sampled_batch``) and record every loss (``on_loss``), so the
values can be compared before any optimizer step changes the networks.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    A2C,
    CQL,
    DDPG,
    DQN,
    PPO,
    SAC,
    TD3,
    TD3BC,
    A2CParams,
    BCParams,
    BehaviorCloning,
    CategoricalPolicy,
    CQLParams,
    DDPGParams,
    DeterministicActorPolicy,
    DiscreteCQL,
    DiscreteCQLParams,
    DiscreteQEnsemble,
    DiscreteSAC,
    DiscreteSACParams,
    DQNParams,
    PPOParams,
    QEnsemble,
    QValuePolicy,
    Reinforce,
    ReinforceParams,
    SACParams,
    TanhGaussianPolicy,
    TD3BCParams,
    TD3Params,
)
from tshtrain.algorithm.blocks.onpolicy import RolloutTensors
from tshtrain.data import ReplayBuffer, RolloutBatch, TransitionBatch

LOG2 = math.log(2.0)
BOX = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
DISCRETE = gym.spaces.Discrete(2)
TINY_LR = 1e-9
"""learning rate of the networks stepped before the loss under test, so that they stay put"""


# ---------------------------------------------------------------------------------------- helpers
def linear(weight: list[list[float]], bias: list[float]) -> nn.Linear:
    layer = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return layer


def set_ensemble(
    critic: QEnsemble | DiscreteQEnsemble, weight: list[list[list[float]]], bias: list[list[float]]
) -> None:
    """Set the single EnsembleLinear layer of a critic built with ``hidden_sizes=()``:
    weight[m][i][o], bias[m][o]."""
    (layer,) = critic.net
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias).unsqueeze(1))


class Recorder:
    """Update hooks: hand the update ``batch`` instead of the buffer's sample; record the losses."""

    def __init__(self, batch: TransitionBatch | None = None):
        self.batch = batch
        self.losses: dict[str, float] = {}
        self.optimizer_steps: list[str] = []

    def on_sampled_batch(self, batch: TransitionBatch, /) -> TransitionBatch:
        return batch if self.batch is None else self.batch

    def on_loss(self, losses: Any, /) -> None:
        for name, loss in losses.items():
            self.losses.setdefault(name, float(loss.detach()))  # the first value of each loss

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        self.optimizer_steps.append(name)


def transitions(
    obs: list[list[float]],
    act: list[Any],
    rew: list[float],
    terminated: list[bool],
    obs_next: list[list[float]],
    *,
    act_dtype: Any = np.float32,
) -> TransitionBatch:
    n = len(obs)
    return TransitionBatch(
        obs=np.array(obs, dtype=np.float32),
        act=np.array(act, dtype=act_dtype),
        rew=np.array(rew, dtype=np.float32),
        terminated=np.array(terminated),
        truncated=np.zeros(n, dtype=bool),
        obs_next=np.array(obs_next, dtype=np.float32),
        indices=np.zeros(n, dtype=np.int64),
    )


def one_transition_buffer(batch: TransitionBatch) -> ReplayBuffer:
    """A buffer holding the first transition of ``batch`` (sampling needs data; the hooks replace it)."""
    buffer = ReplayBuffer(4, seed=0)
    buffer.add(
        obs=batch.obs[:1], act=batch.act[:1], rew=batch.rew[:1], terminated=batch.terminated[:1],
        truncated=batch.truncated[:1], obs_next=batch.obs_next[:1],
    )  # fmt: skip
    return buffer


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


def close(actual: float, expected: float, tol: float = 1e-5) -> None:
    assert actual == pytest.approx(expected, rel=tol, abs=tol)


def cloned(generator: torch.Generator) -> torch.Generator:
    copy = torch.Generator()
    copy.set_state(generator.get_state())
    return copy


# ---------------------------------------------------------------------------------------- on-policy
def test_reinforce_loss_is_minus_the_mean_of_log_pi_times_the_discounted_return() -> None:
    policy = CategoricalPolicy(linear([[0.0], [0.0]], [0.0, 0.0]), DISCRETE, seed=0)  # pi = (1/2, 1/2)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(gamma=0.5, return_standardization=False))
    hooks = Recorder()
    stats = algorithm.update(
        rollout([1.0, 2.0], [0, 1], [1.0, 3.0], [False, True]),
        batch_size=None,
        num_repetitions=1,
        hooks=hooks,
    )
    # returns: G_1 = 3, G_0 = 1 + 0.5 * 3 = 2.5; loss = -mean(log(1/2) * G) = log 2 * 2.75
    close(hooks.losses["policy loss"], LOG2 * 2.75)
    close(stats.loss, LOG2 * 2.75)
    assert hooks.optimizer_steps == ["optim"]


def _actor_critic_parts() -> tuple[CategoricalPolicy, nn.Linear]:
    policy = CategoricalPolicy(linear([[0.0], [0.0]], [0.0, 0.0]), DISCRETE, seed=0)  # pi = (1/2, 1/2)
    critic = linear([[0.5]], [0.0])  # V(o) = o / 2
    return policy, critic


def test_a2c_gae_returns_value_loss_and_policy_loss_of_one_step() -> None:
    policy, critic = _actor_critic_parts()
    params = A2CParams(gamma=0.9, gae_lambda=0.8, vf_coef=0.5, ent_coef=0.01, advantage_normalization=False)
    algorithm = A2C(policy=policy, critic=critic, params=params, seed=0)
    hooks = Recorder()
    stats = algorithm.update(
        rollout([1.0, 2.0], [0, 1], [1.0, 2.0], [False, True]),
        batch_size=None,
        num_repetitions=1,
        hooks=hooks,
    )
    # V = (0.5, 1.0); delta_1 = 2 - 1 = 1 (terminal); delta_0 = 1 + 0.9 * 1 - 0.5 = 1.4
    # A_1 = 1; A_0 = 1.4 + 0.9 * 0.8 * 1 = 2.12; returns = A + V = (2.62, 2.0)
    policy_loss = LOG2 * (2.12 + 1.0) / 2  # -mean(A * log(1/2))
    value_loss = ((0.5 - 2.62) ** 2 + (1.0 - 2.0) ** 2) / 2
    loss = policy_loss + 0.5 * value_loss - 0.01 * LOG2
    close(hooks.losses["policy loss"], policy_loss)
    close(hooks.losses["value loss"], value_loss)
    close(hooks.losses["loss"], loss)
    close(stats.loss, loss)
    close(stats.entropy, LOG2)
    close(stats.approx_kl, 0.0)
    var_adv, var_ret = ((2.12 - 1.0) / 2) ** 2, ((2.62 - 2.0) / 2) ** 2  # population variances
    close(stats.explained_variance, 1.0 - var_adv / var_ret)


def test_ppo_clipped_surrogate_clipped_value_loss_and_entropy() -> None:
    policy, critic = _actor_critic_parts()
    params = PPOParams(
        vf_coef=0.5, ent_coef=0.01, advantage_normalization=False, value_clip_range=0.05, clip_range=0.2
    )
    algorithm = PPO(policy=policy, critic=critic, params=params, seed=0)
    batch = RolloutTensors(
        obs=torch.tensor([[1.0], [2.0]]),
        act=torch.tensor([0, 1]),
        logp_old=torch.log(torch.tensor([0.4, 0.6])),
        value_old=torch.tensor([0.4, 1.5]),
        advantages=torch.tensor([1.0, -1.0]),
        returns=torch.tensor([1.0, 1.0]),
    )
    terms = algorithm.minibatch_loss(batch, 0.2)
    ratio = [0.5 / 0.4, 0.5 / 0.6]  # 1.25 (clipped to 1.2), 0.833 (inside [0.8, 1.2])
    policy_loss = (max(-1.0 * ratio[0], -1.0 * 1.2) + max(1.0 * ratio[1], 1.0 * ratio[1])) / 2
    # V = (0.5, 1.0); clipped: (0.4 + 0.05, 1.5 - 0.05); the larger squared error of each
    value_loss = (max((0.5 - 1.0) ** 2, (0.45 - 1.0) ** 2) + max((1.0 - 1.0) ** 2, (1.45 - 1.0) ** 2)) / 2
    close(float(terms.policy_loss.detach()), policy_loss)
    close(float(terms.value_loss.detach()), value_loss)
    close(float(terms.entropy.detach()), LOG2)
    close(float(terms.loss.detach()), policy_loss + 0.5 * value_loss - 0.01 * LOG2)
    kl = sum((r - 1.0) - math.log(r) for r in ratio) / 2
    close(float(terms.approx_kl.detach()), kl)
    assert terms.clip_fraction is not None
    close(float(terms.clip_fraction.detach()), 0.5)


def test_ppo_update_on_a_fresh_rollout_has_ratio_one_and_the_gae_value_loss() -> None:
    policy, critic = _actor_critic_parts()
    params = PPOParams(gamma=0.9, gae_lambda=0.8, vf_coef=0.5, ent_coef=0.0, advantage_normalization=False)
    algorithm = PPO(policy=policy, critic=critic, params=params, seed=0)
    hooks = Recorder()
    stats = algorithm.update(
        rollout([1.0, 2.0], [0, 1], [1.0, 2.0], [False, True]),
        batch_size=None,
        num_repetitions=1,
        hooks=hooks,
    )
    close(hooks.losses["policy loss"], -(2.12 + 1.0) / 2)  # ratio 1: -mean(A)
    close(hooks.losses["value loss"], ((0.5 - 2.62) ** 2 + (1.0 - 2.0) ** 2) / 2)
    close(stats.clip_fraction, 0.0)


# ---------------------------------------------------------------------------------------- DQN family
def _dqn_batch() -> TransitionBatch:
    return transitions(
        obs=[[1.0, 2.0], [2.0, 0.0]], act=[0, 1], rew=[1.0, -1.0], terminated=[False, True],
        obs_next=[[3.0, 1.0], [0.0, 4.0]], act_dtype=np.int64,
    )  # fmt: skip


@pytest.mark.parametrize("huber", [True, False])
def test_dqn_td_target_and_loss(huber: bool) -> None:
    policy = QValuePolicy(linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), DISCRETE, seed=0)  # Q(o) = o
    algorithm = DQN(policy=policy, params=DQNParams(gamma=0.9, huber_loss=huber))
    batch = _dqn_batch()
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    # Q(o, a) = (1, 0); targets: 1 + 0.9 * max(3, 1) = 3.7 and -1 (terminal); TD errors -2.7, 1
    huber_loss = ((2.7 - 0.5) + (1.0 - 0.5)) / 2  # smooth L1 with beta 1: |x| - 1/2 for |x| >= 1
    expected = huber_loss if huber else (2.7**2 + 1.0**2) / 2
    close(hooks.losses["TD loss"], expected)
    close(stats.loss, expected)
    close(stats.q_mean, 0.5)


def test_discrete_cql_adds_the_weighted_logsumexp_penalty() -> None:
    policy = QValuePolicy(linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), DISCRETE, seed=0)
    algorithm = DiscreteCQL(
        policy=policy, params=DiscreteCQLParams(gamma=0.9, huber_loss=False, cql_weight=2.0)
    )
    batch = _dqn_batch()
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    td = (2.7**2 + 1.0**2) / 2
    # Q(o1, .) = (1, 2), a = 0; Q(o2, .) = (2, 0), a = 1
    penalty = (math.log(math.exp(1) + math.exp(2)) - 1.0 + math.log(math.exp(2) + math.exp(0)) - 0.0) / 2
    close(stats.td_loss, td)
    close(stats.cql_penalty, penalty)
    close(hooks.losses["loss"], td + 2.0 * penalty)


# ---------------------------------------------------------------------------------------- DDPG / TD3
def _box_batch() -> TransitionBatch:
    return transitions(
        obs=[[1.0], [2.0]], act=[[0.5], [-0.5]], rew=[1.0, 0.0], terminated=[False, True],
        obs_next=[[1.0], [0.0]],
    )  # fmt: skip


def _q(w_obs: float, w_act: float, b: float, obs: float, act: float) -> float:
    return w_obs * obs + w_act * act + b


def test_ddpg_critic_target_and_actor_loss() -> None:
    policy = DeterministicActorPolicy(linear([[0.5]], [0.0]), BOX, seed=0)  # pi(o) = tanh(o / 2)
    critic = QEnsemble(1, 1, (), num_critics=1)
    set_ensemble(critic, [[[1.0], [2.0]]], [[0.0]])  # Q(o, a) = o + 2 a
    algorithm = DDPG(policy=policy, critic=critic, params=DDPGParams(gamma=0.9, critic_lr=TINY_LR))
    batch = _box_batch()
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    target = [1.0 + 0.9 * _q(1, 2, 0, 1.0, math.tanh(0.5)), 0.0]
    q = [_q(1, 2, 0, 1.0, 0.5), _q(1, 2, 0, 2.0, -0.5)]  # (2, 1)
    critic_loss = ((q[0] - target[0]) ** 2 + (q[1] - target[1]) ** 2) / 2
    actor_loss = -(_q(1, 2, 0, 1.0, math.tanh(0.5)) + _q(1, 2, 0, 2.0, math.tanh(1.0))) / 2
    close(hooks.losses["critic loss"], critic_loss)
    close(hooks.losses["actor loss"], actor_loss)
    close(stats.q_mean, 1.5)
    assert hooks.optimizer_steps == ["critic_optim", "actor_optim"]


TWIN_WEIGHTS = [[[1.0], [2.0]], [[1.0], [-1.0]]]  # Q_1 = o + 2 a; Q_2 = o - a + 0.5
TWIN_BIAS = [[0.0], [0.5]]


def _twin(obs: float, act: float) -> tuple[float, float]:
    return _q(1, 2, 0, obs, act), _q(1, -1, 0.5, obs, act)


def test_td3_critic_target_takes_the_min_of_the_twin_targets_without_noise() -> None:
    policy = DeterministicActorPolicy(linear([[0.5]], [0.0]), BOX, seed=0)
    critic = QEnsemble(1, 1, ())
    set_ensemble(critic, TWIN_WEIGHTS, TWIN_BIAS)
    params = TD3Params(gamma=0.9, policy_noise=0.0, policy_delay=1, critic_lr=TINY_LR)
    algorithm = TD3(policy=policy, critic=critic, params=params, seed=0)
    batch = _box_batch()
    hooks = Recorder(batch)
    algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    a_next = math.tanh(0.5)
    target = [1.0 + 0.9 * min(_twin(1.0, a_next)), 0.0]  # min(1.924, 1.038)
    q1 = [_twin(1.0, 0.5), _twin(2.0, -0.5)]
    critic_loss = sum(((q1[0][m] - target[0]) ** 2 + (q1[1][m] - target[1]) ** 2) / 2 for m in range(2))
    actor_loss = -(_twin(1.0, math.tanh(0.5))[0] + _twin(2.0, math.tanh(1.0))[0]) / 2  # Q_1 only
    close(hooks.losses["critic loss"], critic_loss)
    close(hooks.losses["actor loss"], actor_loss)


def test_td3_target_policy_smoothing_with_a_fixed_noise_draw() -> None:
    policy = DeterministicActorPolicy(linear([[0.5]], [0.0]), BOX, seed=0)
    critic = QEnsemble(1, 1, ())
    set_ensemble(critic, TWIN_WEIGHTS, TWIN_BIAS)
    algorithm = TD3(
        policy=policy, critic=critic, params=TD3Params(gamma=0.9, policy_noise=0.3, noise_clip=0.2), seed=5
    )
    noise = torch.randn((2, 1), generator=cloned(algorithm.generator)).flatten().tolist()  # the update's draw
    batch = _box_batch()
    hooks = Recorder(batch)
    algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    a_next = [
        min(1.0, max(-1.0, math.tanh(0.5 * o) + min(0.2, max(-0.2, 0.3 * n))))
        for o, n in zip([1.0, 0.0], noise, strict=True)
    ]
    target = [1.0 + 0.9 * min(_twin(1.0, a_next[0])), 0.0]
    q = [_twin(1.0, 0.5), _twin(2.0, -0.5)]
    critic_loss = sum(((q[0][m] - target[0]) ** 2 + (q[1][m] - target[1]) ** 2) / 2 for m in range(2))
    close(hooks.losses["critic loss"], critic_loss)


def test_td3_bc_actor_loss_is_lambda_weighted_q_plus_behaviour_cloning() -> None:
    policy = DeterministicActorPolicy(linear([[0.5]], [0.0]), BOX, seed=0)
    critic = QEnsemble(1, 1, ())
    set_ensemble(critic, TWIN_WEIGHTS, TWIN_BIAS)
    params = TD3BCParams(gamma=0.9, policy_delay=1, alpha=2.5, critic_lr=TINY_LR)  # no obs_normalizer
    algorithm = TD3BC(policy=policy, critic=critic, params=params, seed=0)
    batch = _box_batch()
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    pi = [math.tanh(0.5), math.tanh(1.0)]
    q = [_twin(1.0, pi[0])[0], _twin(2.0, pi[1])[0]]  # Q_1(s, pi(s)) = (1.924, 3.523)
    lmbda = 2.5 / ((abs(q[0]) + abs(q[1])) / 2)
    bc = ((pi[0] - 0.5) ** 2 + (pi[1] + 0.5) ** 2) / 2
    close(hooks.losses["actor loss"], -lmbda * (q[0] + q[1]) / 2 + bc)
    close(stats.bc_loss, bc)


# ---------------------------------------------------------------------------------------- SAC family
def _tanh_gaussian(seed: int) -> TanhGaussianPolicy:
    # actor(o) = (mu, log_std) = (o / 2, -1)
    return TanhGaussianPolicy(linear([[0.5], [0.0]], [0.0, -1.0]), BOX, seed=seed)


def _sample(obs: list[float], eps: list[float]) -> tuple[list[float], list[float]]:
    """Hand-written squashed Gaussian: actions tanh(mu + sigma eps) and their log-densities."""
    sigma = math.exp(-1.0)
    acts, logps = [], []
    for o, e in zip(obs, eps, strict=True):
        u = 0.5 * o + sigma * e
        acts.append(math.tanh(u))
        logps.append(-0.5 * e * e + 1.0 - 0.5 * math.log(2 * math.pi) - math.log(1.0 - math.tanh(u) ** 2))
    return acts, logps


def test_sac_critic_target_has_the_entropy_term_and_alpha_loss_the_target_entropy() -> None:
    policy = _tanh_gaussian(3)
    critic = QEnsemble(1, 1, ())
    set_ensemble(critic, TWIN_WEIGHTS, TWIN_BIAS)
    params = SACParams(gamma=0.9, alpha=0.5, critic_lr=TINY_LR, actor_lr=TINY_LR, target_entropy=-1.0)
    algorithm = SAC(policy=policy, critic=critic, params=params)
    draws = cloned(policy.generator)
    eps_next = torch.randn((2, 1), generator=draws).flatten().tolist()  # target actions
    eps_new = torch.randn((2, 1), generator=draws).flatten().tolist()  # actor step actions
    batch = _box_batch()
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)
    a_next, logp_next = _sample([1.0, 0.0], eps_next)
    target = [1.0 + 0.9 * (min(_twin(1.0, a_next[0])) - 0.5 * logp_next[0]), 0.0]
    q = [_twin(1.0, 0.5), _twin(2.0, -0.5)]
    critic_loss = sum(((q[0][m] - target[0]) ** 2 + (q[1][m] - target[1]) ** 2) / 2 for m in range(2))
    a_new, logp_new = _sample([1.0, 2.0], eps_new)
    actor_loss = (
        sum(0.5 * lp - min(_twin(o, a)) for o, a, lp in zip([1.0, 2.0], a_new, logp_new, strict=True)) / 2
    )
    alpha_loss = -math.log(0.5) * sum(lp - 1.0 for lp in logp_new) / 2
    close(hooks.losses["critic loss"], critic_loss, 1e-4)
    close(hooks.losses["actor loss"], actor_loss, 1e-4)
    close(hooks.losses["alpha loss"], alpha_loss, 1e-4)
    close(stats.alpha, 0.5)
    close(stats.entropy, -sum(logp_new) / 2, 1e-4)


def test_discrete_sac_exact_expectations_over_the_actions() -> None:
    policy = CategoricalPolicy(linear([[1.0], [0.0]], [0.0, 0.0]), DISCRETE, seed=0)  # logits (o, 0)
    critic = DiscreteQEnsemble(1, 2, ())
    set_ensemble(
        critic, [[[1.0, 2.0]], [[0.5, 1.0]]], [[0.0, 0.0], [1.0, 0.0]]
    )  # Q_1 = (o, 2o), Q_2 = (o/2 + 1, o)
    params = DiscreteSACParams(gamma=0.9, alpha=0.5, target_entropy_ratio=0.5, critic_lr=TINY_LR)
    algorithm = DiscreteSAC(policy=policy, critic=critic, params=params)
    batch = transitions(
        obs=[[1.0], [2.0]], act=[0, 1], rew=[1.0, 0.0], terminated=[False, True], obs_next=[[2.0], [0.0]],
        act_dtype=np.int64,
    )  # fmt: skip
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)

    def pi(o: float) -> list[float]:
        z = math.exp(o) + 1.0
        return [math.exp(o) / z, 1.0 / z]

    def q_min(o: float) -> list[float]:
        return [min(o, o / 2 + 1), min(2 * o, o)]

    p_next = pi(2.0)
    v_next = sum(p * (q - 0.5 * math.log(p)) for p, q in zip(p_next, q_min(2.0), strict=True))
    target = [1.0 + 0.9 * v_next, 0.0]
    q_data = [[1.0, 1.5], [4.0, 2.0]]  # (Q_1, Q_2) at (o=1, a=0) and (o=2, a=1)
    critic_loss = sum(
        ((q_data[0][m] - target[0]) ** 2 + (q_data[1][m] - target[1]) ** 2) / 2 for m in range(2)
    )
    actor_loss = (
        sum(
            sum(p * (0.5 * math.log(p) - q) for p, q in zip(pi(o), q_min(o), strict=True)) for o in (1.0, 2.0)
        )
        / 2
    )
    entropy = sum(-sum(p * math.log(p) for p in pi(o)) for o in (1.0, 2.0)) / 2
    alpha_loss = math.log(0.5) * (entropy - 0.5 * math.log(2))
    close(hooks.losses["critic loss"], critic_loss)
    close(hooks.losses["actor loss"], actor_loss)
    close(hooks.losses["alpha loss"], alpha_loss)
    close(stats.entropy, entropy)


def test_cql_conservative_term_over_uniform_and_policy_actions() -> None:
    policy = _tanh_gaussian(4)
    critic = QEnsemble(1, 1, ())
    set_ensemble(critic, TWIN_WEIGHTS, TWIN_BIAS)
    k = 2
    params = CQLParams(
        gamma=0.9, alpha=0.5, auto_alpha=False, cql_weight=3.0, temperature=2.0, num_sampled_actions=k
    )
    algorithm = CQL(policy=policy, critic=critic, params=params)
    draws = cloned(policy.generator)
    eps_target = torch.randn((2, 1), generator=draws).flatten().tolist()
    eps_cur = torch.randn((2 * k, 1), generator=draws).flatten().tolist()
    eps_next = torch.randn((2 * k, 1), generator=draws).flatten().tolist()
    uniform = (torch.rand((2 * k, 1), generator=draws) * 2.0 - 1.0).flatten().tolist()
    batch = _box_batch()
    hooks = Recorder(batch)
    stats = algorithm.update(one_transition_buffer(batch), 2, hooks=hooks)

    obs, obs_next = [1.0, 2.0], [1.0, 0.0]
    a_t, logp_t = _sample(obs_next, eps_target)
    target = [1.0 + 0.9 * (min(_twin(1.0, a_t[0])) - 0.5 * logp_t[0]), 0.0]
    q_data = [_twin(1.0, 0.5), _twin(2.0, -0.5)]
    td = sum(((q_data[0][m] - target[0]) ** 2 + (q_data[1][m] - target[1]) ** 2) / 2 for m in range(2))
    rep, rep_next = [o for o in obs for _ in range(k)], [o for o in obs_next for _ in range(k)]
    a_cur, logp_cur = _sample(rep, eps_cur)
    a_nxt, logp_nxt = _sample(rep_next, eps_next)
    log_uniform = math.log(0.5)  # density 1/2 on [-1, 1]
    penalty = 0.0
    for m in range(2):
        per_transition = []
        for i in range(2):
            rows = range(i * k, (i + 1) * k)
            sampled = (
                [_twin(rep[j], uniform[j])[m] - log_uniform for j in rows]
                + [_twin(rep[j], a_cur[j])[m] - logp_cur[j] for j in rows]
                + [_twin(rep[j], a_nxt[j])[m] - logp_nxt[j] for j in rows]
            )
            lse = 2.0 * math.log(sum(math.exp(v / 2.0) for v in sampled))
            per_transition.append(lse - q_data[i][m])
        penalty += sum(per_transition) / 2
    close(stats.td_loss, td, 1e-4)
    close(stats.cql_penalty, penalty, 1e-4)
    close(hooks.losses["critic loss"], td + 3.0 * penalty, 1e-4)


# ---------------------------------------------------------------------------------------- BC
def test_behaviour_cloning_cross_entropy_and_squared_error() -> None:
    discrete = CategoricalPolicy(linear([[1.0], [0.0]], [0.0, 0.0]), DISCRETE, seed=0)  # logits (o, 0)
    batch = transitions(
        [[1.0], [2.0]], [0, 1], [0.0, 0.0], [False, False], [[0.0], [0.0]], act_dtype=np.int64
    )
    hooks = Recorder(batch)
    stats = BehaviorCloning(policy=discrete, params=BCParams()).update(
        one_transition_buffer(batch), 2, hooks=hooks
    )
    cross_entropy = (-(1.0 - math.log(math.e + 1)) - (0.0 - math.log(math.exp(2) + 1))) / 2
    close(hooks.losses["imitation loss"], cross_entropy)
    close(stats.loss, cross_entropy)

    box = DeterministicActorPolicy(linear([[0.5]], [0.0]), BOX, seed=0)  # tanh(o / 2)
    batch = _box_batch()
    hooks = Recorder(batch)
    BehaviorCloning(policy=box, params=BCParams()).update(one_transition_buffer(batch), 2, hooks=hooks)
    close(hooks.losses["imitation loss"], ((math.tanh(0.5) - 0.5) ** 2 + (math.tanh(1.0) + 0.5) ** 2) / 2)
