"""Contract of every off-policy algorithm: a tiny epoch on OffPolicyTrainer, state_dict round trips,
same seed -> same run, NaN losses raise, prioritized replay end to end, and pinned validation errors."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    C51,
    DDPG,
    DQN,
    IQN,
    QRDQN,
    REDQ,
    SAC,
    TD3,
    C51Params,
    CategoricalPolicy,
    DDPGParams,
    DeterministicActorPolicy,
    DiscreteQEnsemble,
    DiscreteSAC,
    DiscreteSACParams,
    DQNParams,
    EpsilonSchedule,
    NoisyQPolicy,
    NonFiniteLossError,
    OffPolicyAlgorithm,
    QEnsemble,
    QuantileParams,
    QValuePolicy,
    Rainbow,
    REDQParams,
    REDQTarget,
    SACParams,
    TanhGaussianPolicy,
    TD3Params,
    categorical_mlp,
    dueling_mlp,
    iqn_mlp,
    mlp,
    quantile_mlp,
)
from tshtrain.data import Collector, PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams

HIDDEN = (16, 16)


def _dqn(seed: int, **kw: Any) -> DQN:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    net = dueling_mlp(4, 2, HIDDEN) if kw.pop("dueling", False) else mlp(4, 2, HIDDEN, nn.ReLU)
    policy = QValuePolicy(net, space, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed)
    return DQN(policy=policy, params=DQNParams(target_update_freq=3, **kw))


def _discrete_sac(seed: int, **kw: Any) -> DiscreteSAC:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN, nn.ReLU), space, seed=seed)
    return DiscreteSAC(policy=policy, critic=DiscreteQEnsemble(4, 2, HIDDEN), params=DiscreteSACParams(**kw))


def _pendulum_space() -> Any:
    return make_vector_env("Pendulum-v1", 1).single_action_space


def _ddpg(seed: int, **kw: Any) -> DDPG:
    torch.manual_seed(seed)
    policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN, nn.ReLU), _pendulum_space(), noise_std=0.1, seed=seed)
    return DDPG(policy=policy, critic=QEnsemble(3, 1, HIDDEN, num_critics=1), params=DDPGParams(**kw))


def _td3(seed: int, **kw: Any) -> TD3:
    torch.manual_seed(seed)
    policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN, nn.ReLU), _pendulum_space(), noise_std=0.1, seed=seed)
    return TD3(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=TD3Params(**kw), seed=seed)


def _sac(seed: int, **kw: Any) -> SAC:
    torch.manual_seed(seed)
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN, nn.ReLU), _pendulum_space(), seed=seed)
    return SAC(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=SACParams(**kw))


def _c51(seed: int, **kw: Any) -> C51:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    net = categorical_mlp(4, 2, HIDDEN, num_atoms=11, dueling=kw.pop("dueling", False))
    policy = QValuePolicy(net, space, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed)
    return C51(policy=policy, params=C51Params(target_update_freq=3, **kw))


def _rainbow(seed: int, **kw: Any) -> Rainbow:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    net = categorical_mlp(4, 2, HIDDEN, num_atoms=11, dueling=True, noisy_sigma0=0.5)
    q_policy = QValuePolicy(net, space, eps_schedule=EpsilonSchedule(start=0.0, end=0.0), seed=seed)
    return Rainbow(
        policy=NoisyQPolicy(q_policy, seed=seed), params=C51Params(target_update_freq=3, **kw), seed=seed
    )


def _qrdqn(seed: int, **kw: Any) -> QRDQN:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    net = quantile_mlp(4, 2, HIDDEN, num_quantiles=8)
    policy = QValuePolicy(net, space, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed)
    return QRDQN(policy=policy, params=QuantileParams(target_update_freq=3, **kw))


def _iqn(seed: int, **kw: Any) -> IQN:
    torch.manual_seed(seed)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    net = iqn_mlp(4, 2, HIDDEN, num_cosines=8, num_policy_quantiles=4)
    policy = QValuePolicy(net, space, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed)
    return IQN(policy=policy, params=QuantileParams(target_update_freq=3, **kw), seed=seed)


def _redq(seed: int, **kw: Any) -> REDQ:
    torch.manual_seed(seed)
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN, nn.ReLU), _pendulum_space(), seed=seed)
    critic = QEnsemble(3, 1, HIDDEN, num_critics=4)
    return REDQ(policy=policy, critic=critic, params=REDQParams(actor_delay=2, **kw), seed=seed)


@dataclass(frozen=True)
class Spec:
    name: str
    env_id: str
    make: Callable[..., OffPolicyAlgorithm[Any]]
    kwargs: tuple[tuple[str, Any], ...] = ()
    loss_name: str = "critic loss"

    def build(self, seed: int) -> OffPolicyAlgorithm[Any]:
        return self.make(seed, **dict(self.kwargs))


SPECS = [
    Spec("DQN", "CartPole-v1", _dqn, loss_name="TD loss"),
    Spec("DQN-nstep-dueling", "CartPole-v1", _dqn, (("n_step", 3), ("dueling", True)), "TD loss"),
    Spec("DDPG", "Pendulum-v1", _ddpg),
    Spec("TD3", "Pendulum-v1", _td3),
    Spec("TD3-nstep", "Pendulum-v1", _td3, (("n_step", 2),)),
    Spec("SAC", "Pendulum-v1", _sac),
    Spec("SAC-fixed-alpha", "Pendulum-v1", _sac, (("auto_alpha", False), ("alpha", 0.2))),
    Spec("DiscreteSAC", "CartPole-v1", _discrete_sac),
    Spec("DiscreteSAC-nstep", "CartPole-v1", _discrete_sac, (("n_step", 3),)),
    Spec("C51", "CartPole-v1", _c51, loss_name="loss"),
    Spec("C51-nstep-dueling", "CartPole-v1", _c51, (("n_step", 3), ("dueling", True)), "loss"),
    Spec("Rainbow", "CartPole-v1", _rainbow, (("n_step", 3),), "loss"),
    Spec("QRDQN", "CartPole-v1", _qrdqn, loss_name="loss"),
    Spec("QRDQN-nstep", "CartPole-v1", _qrdqn, (("n_step", 3),), "loss"),
    Spec("IQN", "CartPole-v1", _iqn, loss_name="loss"),
    Spec("IQN-nstep", "CartPole-v1", _iqn, (("n_step", 3),), "loss"),
    Spec("REDQ", "Pendulum-v1", _redq),
    Spec(
        "REDQ-mean-auto-alpha-nstep",
        "Pendulum-v1",
        _redq,
        (("target_mode", REDQTarget.MEAN), ("auto_alpha", True), ("n_step", 2), ("subset_size", 3)),
    ),
]
IDS = [s.name for s in SPECS]


def _buffer(
    env_id: str, seed: int, *, prioritized: bool = False, num_env_steps: int = 120
) -> BaseReplayBuffer:
    """A buffer of random transitions; the same seed gives the same contents and the same samples."""
    buffer: BaseReplayBuffer = (
        PrioritizedVectorReplayBuffer(400, 2, seed=seed)
        if prioritized
        else VectorReplayBuffer(400, 2, seed=seed)
    )
    env = make_vector_env(env_id, 2)
    policy = (_dqn if env_id == "CartPole-v1" else _sac)(0).policy  # random=True only maps actions
    Collector(policy, env, buffer, seed=seed).collect(n_step=num_env_steps, random=True)
    env.close()
    return buffer


def _obs(env_id: str) -> torch.Tensor:
    dim = 4 if env_id == "CartPole-v1" else 3
    return torch.linspace(-1.0, 1.0, 5 * dim).reshape(5, dim)


def _params_of(algorithm: OffPolicyAlgorithm[Any]) -> list[torch.Tensor]:
    tensors: list[torch.Tensor] = []
    for comp in algorithm.components().values():
        state = comp.state_dict()
        if isinstance(comp, nn.Module) or "state" not in state:
            tensors.extend(v.detach().clone() for v in state.values() if isinstance(v, torch.Tensor))
    return tensors


def _assert_same_tensors(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def _updates(algorithm: OffPolicyAlgorithm[Any], buffer: BaseReplayBuffer, n: int) -> list[Any]:
    return [algorithm.update(buffer, 16) for _ in range(n)]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_one_tiny_epoch_on_the_off_policy_trainer(spec: Spec) -> None:
    algorithm = spec.build(0)
    train_env, test_env = make_vector_env(spec.env_id, 2), make_vector_env(spec.env_id, 2)
    collector = Collector(
        algorithm.policy, train_env, VectorReplayBuffer(200, 2, seed=0), exploration_noise=True, seed=0
    )
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=Collector(algorithm.policy, test_env, seed=1),
        max_epochs=1,
        epoch_num_steps=20,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=8,
        test_step_num_episodes=2,
        show_progress=False,
        verbose=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    assert info.train_step == 20 and info.gradient_step == 10 and info.update_step == 2
    assert info.test_episode == 4


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_state_dict_round_trip_gives_the_same_actions_and_the_same_next_update(spec: Spec) -> None:
    trained = spec.build(0)
    _updates(trained, _buffer(spec.env_id, 1), 5)
    blob = io.BytesIO()
    torch.save(trained.state_dict(), blob)
    blob.seek(0)
    fresh = spec.build(99)  # other initial weights, reloaded
    fresh.load_state_dict(torch.load(blob))  # weights_only=True: plain tensors and numbers
    obs = _obs(spec.env_id)
    with torch.inference_mode():
        torch.testing.assert_close(
            fresh.policy.actions(obs, deterministic=True), trained.policy.actions(obs, deterministic=True)
        )
    _assert_same_tensors(_params_of(fresh), _params_of(trained))
    stats_a = _updates(trained, _buffer(spec.env_id, 2), 3)
    stats_b = _updates(fresh, _buffer(spec.env_id, 2), 3)
    assert stats_a == stats_b
    _assert_same_tensors(_params_of(fresh), _params_of(trained))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_same_seed_gives_the_same_run(spec: Spec) -> None:
    runs = []
    for _ in range(2):
        algorithm = spec.build(3)
        stats = _updates(algorithm, _buffer(spec.env_id, 4), 6)
        runs.append((stats, _params_of(algorithm)))
    assert runs[0][0] == runs[1][0]
    _assert_same_tensors(runs[0][1], runs[1][1])


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_a_nan_loss_raises_naming_the_algorithm_and_the_loss(spec: Spec) -> None:
    algorithm = spec.build(0)
    buffer = _buffer(spec.env_id, 0)
    buffer.field_arrays()["rew"][:] = np.nan
    algorithm_name = spec.name.split("-")[0]
    with pytest.raises(NonFiniteLossError, match=f"^{algorithm_name}: the {spec.loss_name} is nan"):
        algorithm.update(buffer, 8)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_prioritized_replay_end_to_end(spec: Spec) -> None:
    algorithm = spec.build(0)
    buffer = _buffer(spec.env_id, 0, prioritized=True)
    assert isinstance(buffer, PrioritizedVectorReplayBuffer)
    before = buffer.priorities().copy()
    np.testing.assert_allclose(before[buffer.chronological_indices()], 1.0)  # max priority 1 ** alpha
    algorithm.update(buffer, 32)
    after = buffer.priorities()
    changed = np.flatnonzero(after != before)
    assert len(changed) > 0 and set(changed) <= set(buffer.chronological_indices())
    # the new priorities are |TD error| ** alpha: positive, and in general no longer all equal
    assert (after[changed] > 0).all() and len(np.unique(after[changed])) > 1
    stats = _updates(algorithm, buffer, 3)
    assert all(np.isfinite(list(s.as_scalars().values())).all() for s in stats)


def test_dqn_importance_weights_scale_the_loss() -> None:
    """With all importance weights equal to w, the weighted TD loss is w times the unweighted one."""
    losses = []
    for weight in (1.0, 0.25):
        algorithm = _dqn(0, huber_loss=False)
        buffer = _buffer("CartPole-v1", 5, prioritized=True)
        assert isinstance(buffer, PrioritizedVectorReplayBuffer)
        buffer.weights = lambda idx, w=weight: np.full(len(idx), w, dtype=np.float32)  # type: ignore[method-assign]
        losses.append(algorithm.update(buffer, 16).as_scalars()["loss"])
    assert losses[1] == pytest.approx(0.25 * losses[0], rel=1e-5)


def test_sac_state_includes_log_alpha_and_the_policy_generator() -> None:
    algorithm = _sac(0)
    _updates(algorithm, _buffer("Pendulum-v1", 0), 5)
    state = algorithm.state_dict()
    assert state["_extra"]["log_alpha"].item() != 0.0  # moved from log(1.0) by auto_alpha
    assert set(state) >= {"critic", "target_critic", "actor_optim", "critic_optim", "alpha_optim"}


@pytest.mark.parametrize(
    "build", [_sac, _discrete_sac, _td3, _redq], ids=["SAC", "DiscreteSAC", "TD3", "REDQ"]
)
def test_generators_are_saved_once_by_the_base_and_restored(build: Callable[[int], Any]) -> None:
    """The generators of the algorithm and its policy are saved by ``Algorithm.state_dict`` under
    ``_generators`` (not a second time in the extra state) and restored exactly."""
    algorithm, restored = build(0), build(1)
    candidates = [(algorithm, restored), (algorithm.policy, restored.policy)]
    pairs = [(a, b) for a, b in candidates if isinstance(vars(a).get("generator"), torch.Generator)]
    assert pairs
    for ours, _ in pairs:
        torch.rand(7, generator=ours.generator)  # move the streams away from their seeds
    state = algorithm.state_dict()
    assert not {"generator", "subset_generator"} & set(state["_extra"])
    restored.load_state_dict(state)
    for ours, theirs in pairs:
        assert torch.equal(torch.rand(3, generator=ours.generator), torch.rand(3, generator=theirs.generator))


def test_td3_delays_the_actor_and_the_targets() -> None:
    algorithm = _td3(0, policy_delay=3)
    buffer = _buffer("Pendulum-v1", 0)
    actor_before = [p.clone() for p in algorithm.policy.actor.parameters()]
    target_before = [p.clone() for p in algorithm.nets.target_critic.net.parameters()]
    _updates(algorithm, buffer, 2)
    _assert_same_tensors([p.detach() for p in algorithm.policy.actor.parameters()], actor_before)
    _assert_same_tensors([p.detach() for p in algorithm.nets.target_critic.net.parameters()], target_before)
    _updates(algorithm, buffer, 1)
    assert any(
        not torch.equal(a, b) for a, b in zip(algorithm.policy.actor.parameters(), actor_before, strict=True)
    )


def test_dqn_copies_its_target_every_target_update_freq_gradient_steps() -> None:
    algorithm = _dqn(0)  # target_update_freq=3: the one way to refresh its target network
    buffer = _buffer("CartPole-v1", 0)
    synced = []
    for _ in range(6):
        algorithm.update(buffer, 16)
        online, target = algorithm.policy.q_net.state_dict(), algorithm.target_q_net.net.state_dict()
        synced.append(all(torch.equal(online[k], target[k]) for k in online))
    assert synced == [False, False, True] * 2


def test_ddpg_polyak_averages_its_targets_by_tau() -> None:
    algorithm = _ddpg(0, tau=0.25)  # tau: the one way to set the target networks' rate
    buffer = _buffer("Pendulum-v1", 0)
    _updates(algorithm, buffer, 1)
    before = [p.detach().clone() for p in algorithm.nets.target_critic.net.parameters()]
    _updates(algorithm, buffer, 1)
    online = [p.detach() for p in algorithm.nets.critic.parameters()]
    expected = [0.75 * b + 0.25 * o for b, o in zip(before, online, strict=True)]
    for got, want in zip(algorithm.nets.target_critic.net.parameters(), expected, strict=True):
        torch.testing.assert_close(got.detach(), want)


def test_off_policy_obs_normalizer_merges_every_sampled_batch() -> None:
    from tshtrain.algorithm import RunningObsNormalizer

    normalizer = RunningObsNormalizer(4)
    space = make_vector_env("CartPole-v1", 1).single_action_space
    policy = QValuePolicy(nn.Sequential(normalizer, mlp(4, 2, HIDDEN)), space, seed=0)
    algorithm = DQN(policy=policy, obs_normalizer=normalizer)
    _updates(algorithm, _buffer("CartPole-v1", 0), 2)
    assert int(normalizer.count) == 32  # two batches of 16, merged after their gradient steps
    with pytest.raises(ConfigurationError, match=r"^DDPG: obs_normalizer is not a layer of the policy"):
        DDPG(policy=_ddpg(0).policy, critic=QEnsemble(3, 1, HIDDEN), obs_normalizer=normalizer)


def test_tanh_gaussian_log_prob_matches_the_change_of_variables() -> None:
    torch.manual_seed(0)
    box = gym.spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)
    policy = TanhGaussianPolicy(mlp(3, 4, (8,)), box, seed=0)
    obs = torch.randn(1000, 3)
    act, log_prob = policy.sample(obs)
    mu, log_std = policy.mean_log_std(obs)
    u = torch.atanh(act.double().clamp(-1 + 1e-12, 1 - 1e-12))
    normal = torch.distributions.Normal(mu.double(), log_std.double().exp())
    expected = (normal.log_prob(u) - torch.log1p(-torch.tanh(u).pow(2))).sum(-1)
    torch.testing.assert_close(log_prob.double(), expected, rtol=1e-3, atol=1e-3)
    assert act.abs().max() <= 1.0


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: DQNParams(n_step=0), r"DQNParams.n_step must be an int >= 1, got 0"),
        (lambda: DQNParams(gamma=1.5), r"DQNParams.gamma must be a number in \[0, 1\], got 1.5"),
        (lambda: DQNParams(target_update_freq=0), r"DQNParams.target_update_freq must be an int >= 1, got 0"),
        (lambda: DDPGParams(tau=0.0), r"DDPGParams.tau must be a number in \(0, 1\], got 0.0"),
        (lambda: DDPGParams(critic_lr=-1.0), r"DDPGParams.critic_lr must be a finite number > 0, got -1.0"),
        (lambda: TD3Params(policy_delay=0), r"TD3Params.policy_delay must be an int >= 1, got 0"),
        (lambda: TD3Params(noise_clip=-0.1), r"TD3Params.noise_clip must be a finite number >= 0, got -0.1"),
        (lambda: TD3Params(n_step=2.5), r"TD3Params.n_step must be an int >= 1, got 2.5"),
        (lambda: SACParams(alpha=0.0), r"SACParams.alpha must be a finite number > 0, got 0.0"),
        (lambda: SACParams(target_entropy=float("nan")), r"SACParams.target_entropy must be a finite number"),
        (lambda: SACParams(gamma=-0.1), r"SACParams.gamma must be a number in \[0, 1\], got -0.1"),
        (
            lambda: DiscreteSACParams(target_entropy_ratio=0.0),
            r"DiscreteSACParams.target_entropy_ratio must be a number in \(0, 1\], got 0.0",
        ),
    ],
)
def test_hyperparameter_validation(build: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()


class _RecordingHooks:
    """Update hooks that record what the algorithm hands them and zero the rewards of every sample."""

    def __init__(self) -> None:
        self.batches = 0
        self.losses: list[str] = []
        self.optimizer_steps: list[str] = []
        self.components: dict[str, Any] = {}

    def on_sampled_batch(self, batch: Any, /) -> Any:
        self.batches += 1
        return dataclasses.replace(batch, rew=np.zeros_like(batch.rew))

    def on_loss(self, losses: Any, /) -> None:
        self.losses.extend(losses)

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        assert optimizer is self.components[name]
        self.optimizer_steps.append(name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_update_hooks_see_every_sample_and_every_loss(spec: Spec) -> None:
    algorithm = spec.build(0)
    hooks = _RecordingHooks()
    hooks.components = algorithm.components()
    for _ in range(2):
        algorithm.update(_buffer(spec.env_id, 0), 16, hooks=hooks)
    assert hooks.optimizer_steps  # on_optimizer_step checked each name against components()
    assert hooks.batches == 2
    assert hooks.losses[0] == spec.loss_name and set(hooks.losses) >= {spec.loss_name}
    _updates(algorithm, _buffer(spec.env_id, 0), 1)  # default: no hooks
    assert hooks.batches == 2
