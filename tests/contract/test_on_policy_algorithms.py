"""Contract tests of the on-policy actor-critic algorithms (A2C, PPO), Discrete and Box actions:
a tiny epoch on the OnPolicyTrainer, state_dict round trips, determinism, NaN losses, validation,
and the pieces they are built from (log-prob formulas, GAE bootstrapping, normaliser, schedules)."""

from __future__ import annotations

import dataclasses
import io
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    A2C,
    PPO,
    A2CParams,
    A2CTrainingStats,
    CategoricalPolicy,
    GaussianPolicy,
    LinearSchedule,
    NonFiniteLossError,
    PPOParams,
    PPOTrainingStats,
    RunningObsNormalizer,
    mlp,
    num_update_steps_for,
)
from tshtrain.algorithm.blocks.gaussian import gaussian_entropy, gaussian_log_prob
from tshtrain.algorithm.blocks.onpolicy import ActorCritic, log_prob_entropy, prepare_rollout
from tshtrain.data import Collector, RolloutBatch, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError
from tshtrain.functional import gae_advantages
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

ALGOS = ["ppo", "a2c"]
SPACES = ["discrete", "continuous"]
CASES = [(algo, space) for algo in ALGOS for space in SPACES]
NAMES = {"ppo": "PPO", "a2c": "A2C"}
STATS = {"ppo": PPOTrainingStats, "a2c": A2CTrainingStats}


@dataclass
class Setup:
    algorithm: PPO | A2C
    training_collector: Collector
    test_collector: Collector
    normalizer: RunningObsNormalizer | None


def build(algo: str, space: str, seed: int = 0) -> Setup:
    """Small nets on CartPole (Discrete) or Pendulum (Box, with observation normalisation), 2 envs."""
    torch.manual_seed(seed)
    env_id = "CartPole-v1" if space == "discrete" else "Pendulum-v1"
    train_envs, test_envs = make_vector_env(env_id, 2), make_vector_env(env_id, 2)
    normalizer: RunningObsNormalizer | None = None
    policy: CategoricalPolicy | GaussianPolicy
    if space == "discrete":
        policy = CategoricalPolicy(mlp(4, 2, (16, 16)), train_envs.single_action_space, seed=seed)
        critic: nn.Module = mlp(4, 1, (16, 16))
    else:
        normalizer = RunningObsNormalizer(3)
        actor = nn.Sequential(normalizer, mlp(3, 1, (16, 16)))
        policy = GaussianPolicy(actor, train_envs.single_action_space, init_log_std=-0.5, seed=seed)
        critic = nn.Sequential(normalizer, mlp(3, 1, (16, 16)))
    schedule = LinearSchedule(num_update_steps=10)
    algorithm: PPO | A2C
    if algo == "ppo":
        params = PPOParams(
            lr=1e-3, lr_schedule=schedule, clip_schedule=schedule, value_clip_range=1.0, ent_coef=0.01
        )
        algorithm = PPO(policy=policy, critic=critic, params=params, obs_normalizer=normalizer, seed=seed)
    else:
        a2c_params = A2CParams(lr=1e-3, lr_schedule=schedule, ent_coef=0.01)
        algorithm = A2C(policy=policy, critic=critic, params=a2c_params, obs_normalizer=normalizer, seed=seed)
    return Setup(
        algorithm=algorithm,
        training_collector=Collector(policy, train_envs, VectorReplayBuffer(64, 2), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        normalizer=normalizer,
    )


def trainer(setup: Setup, max_epochs: int = 1) -> OnPolicyTrainer:
    params = OnPolicyTrainerParams(
        training_collector=setup.training_collector,
        test_collector=setup.test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=32,
        collection_step_num_env_steps=16,
        batch_size=8,
        update_step_num_repetitions=2,
        test_step_num_episodes=1,
        show_progress=False,
        verbose=False,
    )
    return OnPolicyTrainer(setup.algorithm, params)


def rollout_of(setup: Setup, num_env_steps: int = 16) -> RolloutBatch:
    """A fresh rollout from the training collector, copied out of the buffer."""
    buffer = setup.training_collector.buffer
    assert buffer is not None
    buffer.reset()
    setup.training_collector.collect(n_step=num_env_steps)
    rollout = buffer.rollout()
    copied = {f.name: np.array(getattr(rollout, f.name), copy=True) for f in dataclasses.fields(rollout)}
    buffer.reset()
    return RolloutBatch(**copied)


def tensors(algorithm: PPO | A2C) -> dict[str, torch.Tensor]:
    """Every tensor of the algorithm's state_dict (optimizer state included), by a flat key."""
    flat: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            flat[prefix] = value
        elif isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}/{key}", sub)
        elif isinstance(value, list | tuple):
            for i, sub in enumerate(value):
                walk(f"{prefix}/{i}", sub)

    walk("", algorithm.state_dict())
    return flat


def assert_same_tensors(a: PPO | A2C, b: PPO | A2C) -> None:
    # the policies' sampling generators differ legitimately: only the original collected with its policy
    ta = {k: v for k, v in tensors(a).items() if not k.startswith("/_generators/policy")}
    tb = {k: v for k, v in tensors(b).items() if not k.startswith("/_generators/policy")}
    assert ta.keys() == tb.keys()
    for key, value in ta.items():
        torch.testing.assert_close(value, tb[key], rtol=0, atol=0, msg=key)


def stats_key(stats: Any) -> dict[str, Any]:
    """Stats as a dict in which NaN compares equal to NaN."""
    return {
        k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
        for k, v in dataclasses.asdict(stats).items()
    }


def probe_obs(setup: Setup) -> np.ndarray:
    space = setup.training_collector.env.single_observation_space
    assert isinstance(space, gym.spaces.Box)
    rng = np.random.default_rng(5)
    return rng.uniform(-1.0, 1.0, size=(16, *space.shape)).astype(np.float32)


# ====================================================================== on the trainer


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_one_tiny_epoch_on_the_trainer(algo: str, space: str) -> None:
    setup = build(algo, space)
    epochs = list(trainer(setup))
    assert len(epochs) == 1
    stat = epochs[0].training_stat
    assert isinstance(stat, PPOTrainingStats | A2CTrainingStats)
    assert type(stat) is STATS[algo]
    # 2 training steps of 16 env steps; each update: 2 passes x 2 mini-batches of 8
    info = epochs[0].info_stat
    assert (info.train_step, info.update_step, info.gradient_step) == (32, 2, 8)
    assert stat.num_gradient_steps == 8
    scalars = stat.as_scalars()
    for name in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm", "lr"):
        assert math.isfinite(scalars[name]), (name, scalars)
    assert stat.lr == pytest.approx(1e-3 * (1 - 0.5 / 10))  # mean of the lr of updates 0 and 1
    assert setup.algorithm.ac.num_update_steps == 2
    if setup.normalizer is not None:
        assert int(setup.normalizer.count) == 32  # the observations of both rollouts


# ====================================================================== save / load


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_state_dict_round_trip_gives_the_same_actions_and_the_same_next_update(algo: str, space: str) -> None:
    original = build(algo, space, seed=0)
    trainer(original).run()
    saved = io.BytesIO()
    torch.save(original.algorithm.state_dict(), saved)
    saved.seek(0)
    restored = build(algo, space, seed=1)  # other weights, generator and statistics until loaded
    restored.algorithm.load_state_dict(torch.load(saved, weights_only=True))

    obs = probe_obs(original)
    np.testing.assert_array_equal(
        original.algorithm.policy.compute_actions(obs, deterministic=True),
        restored.algorithm.policy.compute_actions(obs, deterministic=True),
    )
    rollout = rollout_of(original)
    stats_a = original.algorithm.update(rollout, batch_size=8, num_repetitions=2)
    stats_b = restored.algorithm.update(rollout, batch_size=8, num_repetitions=2)
    assert stats_key(stats_a) == stats_key(stats_b)
    assert_same_tensors(original.algorithm, restored.algorithm)
    assert restored.algorithm.ac.num_update_steps == 3


@pytest.mark.parametrize("algo", ALGOS)
def test_state_dict_names_every_component(algo: str) -> None:
    state = build(algo, "continuous").algorithm.state_dict()
    assert set(state) == {"policy", "critic", "optim", "obs_normalizer", "_extra", "_generators"}
    assert set(state["_extra"]) == {"num_update_steps", "rng_state"}
    assert set(build(algo, "discrete").algorithm.state_dict()) == {
        "policy",
        "critic",
        "optim",
        "_extra",
        "_generators",
    }


# ====================================================================== determinism


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_same_seed_same_run(algo: str, space: str) -> None:
    first, second, other = build(algo, space, seed=3), build(algo, space, seed=3), build(algo, space, seed=4)
    info_first, info_second = trainer(first).run(), trainer(second).run()
    trainer(other).run()
    assert info_first.best_reward == info_second.best_reward
    assert_same_tensors(first.algorithm, second.algorithm)
    with pytest.raises(AssertionError):
        assert_same_tensors(first.algorithm, other.algorithm)


# ====================================================================== non-finite losses


@pytest.mark.parametrize(("algo", "space"), CASES)
def test_nan_reward_raises_naming_the_algorithm_and_the_loss(algo: str, space: str) -> None:
    setup = build(algo, space)
    rollout = rollout_of(setup)
    rew = rollout.rew.copy()
    rew[3, 1] = np.nan
    with pytest.raises(
        NonFiniteLossError, match=rf"^{NAMES[algo]}: the policy loss is nan; training stopped"
    ):
        setup.algorithm.update(dataclasses.replace(rollout, rew=rew), batch_size=8, num_repetitions=1)


# ====================================================================== update hooks


class _RecordingHooks:
    """Update hooks that record the losses of every gradient step, before its backward pass."""

    def __init__(self) -> None:
        self.losses: list[dict[str, bool]] = []
        self.optimizer_steps: list[str] = []

    def on_sampled_batch(self, batch: Any, /) -> Any:
        raise AssertionError("on-policy algorithms sample no replay batches")

    def on_loss(self, losses: Any, /) -> None:
        # before backward: the loss still has its graph and no gradient has been computed yet
        self.losses.append({name: loss.requires_grad for name, loss in losses.items()})

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        self.optimizer_steps.append(name)


@pytest.mark.parametrize("algo", ALGOS)
def test_update_hooks_see_the_losses_of_every_gradient_step(algo: str) -> None:
    setup = build(algo, "discrete")
    hooks = _RecordingHooks()
    stats = setup.algorithm.update(rollout_of(setup), batch_size=8, num_repetitions=2, hooks=hooks)
    assert len(hooks.losses) == stats.num_gradient_steps == 4
    assert hooks.losses[0] == {"loss": True, "policy loss": True, "value loss": True}
    assert hooks.optimizer_steps == ["optim"] * 4
    setup.algorithm.update(rollout_of(setup), batch_size=8, num_repetitions=2)  # default: no hooks
    assert len(hooks.losses) == 4


# ====================================================================== schedules


def test_lr_and_clip_range_follow_the_update_counter() -> None:
    setup = build("ppo", "discrete")
    seen = []
    for _ in range(12):
        stats = setup.algorithm.update(rollout_of(setup), batch_size=None, num_repetitions=1)
        assert isinstance(stats, PPOTrainingStats)
        seen.append((stats.lr, stats.clip_range))
    factors = [max(0.0, 1 - k / 10) for k in range(12)]
    np.testing.assert_allclose([lr for lr, _ in seen], [1e-3 * f for f in factors], rtol=1e-6)
    np.testing.assert_allclose([clip for _, clip in seen], [0.2 * f for f in factors], rtol=1e-6)
    assert setup.algorithm.ac.optim.param_groups[0]["lr"] == pytest.approx(0.0)


def test_linear_schedule_and_update_step_count() -> None:
    schedule = LinearSchedule(num_update_steps=4, start_factor=1.0, end_factor=0.2)
    assert [schedule.factor(k) for k in range(6)] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.2])
    # 8 envs, 100 env steps per collection step -> 104 collected; 1000 env steps -> 10 update steps
    assert num_update_steps_for(num_env_steps=1000, collection_step_num_env_steps=100, num_envs=8) == 10


# ====================================================================== log-probabilities


def test_gaussian_formulas_match_torch_distributions() -> None:
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(7, 3, generator=gen)
    log_std = torch.randn(3, generator=gen)
    act = torch.randn(7, 3, generator=gen) * 2
    dist = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(gaussian_log_prob(mean, log_std, act), dist.log_prob(act).sum(-1))
    torch.testing.assert_close(gaussian_entropy(log_std), dist.entropy().sum(-1)[0])


def test_categorical_log_prob_and_entropy_match_torch_distributions() -> None:
    torch.manual_seed(0)
    policy = CategoricalPolicy(mlp(4, 3, (8,)), gym.spaces.Discrete(3), seed=0)
    obs, act = torch.randn(9, 4), torch.randint(0, 3, (9,))
    logp, entropy = log_prob_entropy(policy, obs, act)
    dist = torch.distributions.Categorical(logits=policy.logits(obs))
    torch.testing.assert_close(logp, dist.log_prob(act))
    torch.testing.assert_close(entropy, dist.entropy())


def test_gaussian_policy_stores_unclipped_samples_and_clips_env_actions() -> None:
    envs = make_vector_env("Pendulum-v1", 2)
    policy = GaussianPolicy(mlp(3, 1, (8,)), envs.single_action_space, init_log_std=math.log(3.0), seed=0)
    buffer = VectorReplayBuffer(64, 2)
    Collector(policy, envs, buffer, seed=0).collect(n_step=64)
    act = buffer.rollout().act
    assert act.dtype == np.float32 and act.shape == (32, 2, 1)
    assert np.abs(act).max() > 1.5  # samples leave [-1, 1] and are stored as drawn
    env_act = policy.map_action(act)
    assert env_act.min() >= -2.0 and env_act.max() <= 2.0
    np.testing.assert_allclose(policy.map_action(np.array([[-5.0], [0.5], [5.0]])), [[-2.0], [1.0], [2.0]])
    obs = torch.zeros(4, 3)
    deterministic = policy.actions(obs, deterministic=True)
    torch.testing.assert_close(deterministic, policy.mean_actions(obs))


def test_gaussian_policy_needs_a_flat_box() -> None:
    with pytest.raises(
        UnsupportedSpaceError, match="GaussianPolicy needs a one-dimensional Box action space"
    ):
        GaussianPolicy(mlp(3, 1), gym.spaces.Discrete(2))


# ====================================================================== GAE on the rollout


class FirstCoordinate(nn.Module):
    """V(o) = o[0]."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[:, 0]


def test_bootstrapping_uses_v_of_obs_next_at_truncation_and_rollout_end() -> None:
    policy = CategoricalPolicy(mlp(1, 2, (4,)), gym.spaces.Discrete(2), seed=0)
    ac = ActorCritic(
        owner="PPO",
        policy=policy,
        critic=FirstCoordinate(),
        lr=1e-3,
        lr_schedule=None,
        obs_normalizer=None,
        seed=0,
    )
    # one column: t=0 continues, t=1 is truncated (its true final obs is 7), t=2 terminates,
    # t=3 is the last collected step (bootstraps from its obs_next, 9)
    obs = np.array([[0.0], [1.0], [2.0], [3.0]], dtype=np.float32)[:, None, :]
    obs_next = np.array([[1.0], [7.0], [3.0], [9.0]], dtype=np.float32)[:, None, :]
    terminated = np.array([[False], [False], [True], [False]])
    truncated = np.array([[False], [True], [False], [False]])
    rollout = RolloutBatch(
        obs=obs,
        act=np.zeros((4, 1), dtype=np.int64),
        rew=np.ones((4, 1), dtype=np.float32),
        terminated=terminated,
        truncated=truncated,
        obs_next=obs_next,
        boundary=np.array([[False], [True], [True], [True]]),
        valid=np.ones((4, 1), dtype=bool),
    )
    data = prepare_rollout(ac, rollout, gamma=0.9, gae_lambda=0.5)
    value = np.array([[0.0], [1.0], [2.0], [3.0]], dtype=np.float32)
    next_value = np.array([[1.0], [7.0], [0.0], [9.0]], dtype=np.float32)  # t=2: terminal, unused
    want = gae_advantages(
        rollout.rew, value, next_value, terminated, rollout.boundary, gamma=0.9, gae_lambda=0.5
    )
    np.testing.assert_allclose(data.advantages.numpy(), want[:, 0], rtol=1e-6)
    np.testing.assert_allclose(data.returns.numpy(), want[:, 0] + value[:, 0], rtol=1e-6)
    np.testing.assert_allclose(data.advantages.numpy()[1], 1.0 + 0.9 * 7.0 - 1.0, rtol=1e-6)


def test_padding_is_excluded_from_the_update_data() -> None:
    policy = CategoricalPolicy(mlp(1, 2, (4,)), gym.spaces.Discrete(2), seed=0)
    ac = ActorCritic(
        owner="PPO",
        policy=policy,
        critic=FirstCoordinate(),
        lr=1e-3,
        lr_schedule=None,
        obs_normalizer=None,
        seed=0,
    )
    valid = np.array([[True, True], [True, False], [True, False]])
    obs = np.arange(6, dtype=np.float32).reshape(3, 2, 1)
    rollout = RolloutBatch(
        obs=obs,
        act=np.zeros((3, 2), dtype=np.int64),
        rew=np.where(valid, 1.0, 0.0).astype(np.float32),
        terminated=np.array([[False, True], [False, False], [True, False]]),
        truncated=np.zeros((3, 2), dtype=bool),
        obs_next=obs + 2,
        boundary=np.array([[False, True], [False, True], [True, True]]),
        valid=valid,
    )
    data = prepare_rollout(ac, rollout, gamma=1.0, gae_lambda=1.0)
    assert len(data) == 4
    np.testing.assert_array_equal(data.obs.numpy()[:, 0], [0.0, 1.0, 2.0, 4.0])  # row-major valid entries
    np.testing.assert_allclose(data.returns.numpy(), [3.0, 1.0, 2.0, 1.0])


# ====================================================================== observation normaliser


def test_normalizer_statistics_equal_those_of_all_observations() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 2)) for n in (5, 1, 40)]
    normalizer = RunningObsNormalizer(2)
    for batch in batches:
        normalizer.update(torch.as_tensor(batch, dtype=torch.float32))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(normalizer.mean.numpy(), everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(normalizer.var.numpy(), everything.var(0), rtol=1e-5)
    out = normalizer(torch.as_tensor(everything, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(0), 1.0, atol=1e-4)
    loaded = RunningObsNormalizer(2)
    loaded.load_state_dict(normalizer.state_dict())
    torch.testing.assert_close(loaded(torch.ones(1, 2)), normalizer(torch.ones(1, 2)))


def test_test_steps_do_not_change_the_normalizer() -> None:
    setup = build("ppo", "continuous")
    trainer(setup).run()
    assert setup.normalizer is not None
    before = {k: v.clone() for k, v in setup.normalizer.state_dict().items()}
    setup.test_collector.collect(n_episode=1, deterministic=True)
    for key, value in setup.normalizer.state_dict().items():
        torch.testing.assert_close(value, before[key])


def test_normalizer_must_be_a_layer_of_both_networks() -> None:
    space = gym.spaces.Box(-2.0, 2.0, shape=(1,))
    normalizer = RunningObsNormalizer(3)
    policy = GaussianPolicy(nn.Sequential(normalizer, mlp(3, 1)), space, seed=0)
    with pytest.raises(ConfigurationError, match=r"^PPO: obs_normalizer is not a layer of the critic"):
        PPO(policy=policy, critic=mlp(3, 1), obs_normalizer=normalizer)
    with pytest.raises(
        ConfigurationError, match=r"^A2C: the policy contains a RunningObsNormalizer but obs_"
    ):
        A2C(policy=policy, critic=nn.Sequential(normalizer, mlp(3, 1)))


def test_critic_must_return_one_value_per_observation() -> None:
    policy = CategoricalPolicy(mlp(4, 2), gym.spaces.Discrete(2), seed=0)
    algorithm = PPO(policy=policy, critic=mlp(4, 2))
    with pytest.raises(ConfigurationError, match=r"the critic returned shape \(3, 2\) for 3 observations"):
        algorithm.ac.values(torch.zeros(3, 4))


# ====================================================================== hyperparameter validation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": 0.0}, r"^PPOParams\.lr must be a finite number > 0, got 0\.0\."),
        ({"gamma": 1.5}, r"^PPOParams\.gamma must be a number in \[0, 1\], got 1\.5\."),
        ({"gae_lambda": -0.1}, r"^PPOParams\.gae_lambda must be a number in \[0, 1\], got -0\.1\."),
        ({"vf_coef": -1.0}, r"^PPOParams\.vf_coef must be a finite number >= 0, got -1\.0\."),
        (
            {"ent_coef": -0.01},
            r"^PPOParams\.ent_coef must be a finite number >= 0, got -0\.01\.$",
        ),
        (
            {"max_grad_norm": 0.0},
            r"^PPOParams\.max_grad_norm must be a finite number > 0 or None, got 0\.0\.",
        ),
        (
            {"clip_range": 0.0},
            r"^PPOParams\.clip_range must be a finite number > 0, got 0\.0\.",
        ),
        (
            {"value_clip_range": -1.0},
            r"^PPOParams\.value_clip_range must be a finite number > 0 or None, got -1\.0\.",
        ),
        (
            {"lr_schedule": "linear"},
            r"^PPOParams\.lr_schedule must be a tshtrain\.algorithm\.Schedule .* got 'linear'",
        ),
        (
            {"clip_schedule": 0.5},
            r"^PPOParams\.clip_schedule must be a tshtrain\.algorithm\.Schedule .* got 0\.5\.",
        ),
    ],
)
def test_ppo_params_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        PPOParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": -1e-3}, r"^A2CParams\.lr must be a finite number > 0, got -0\.001\."),
        ({"gae_lambda": 2}, r"^A2CParams\.gae_lambda must be a number in \[0, 1\], got 2\."),
        ({"max_grad_norm": -0.5}, r"^A2CParams\.max_grad_norm must be a finite number > 0 or None"),
    ],
)
def test_a2c_params_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        A2CParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"num_update_steps": 0},
            r"^LinearSchedule\.num_update_steps must be an int >= 1, got 0\.$",
        ),
        (
            {"num_update_steps": 5, "end_factor": -0.1},
            r"^LinearSchedule\.end_factor must be a finite number >= 0",
        ),
    ],
)
def test_linear_schedule_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        LinearSchedule(**kwargs)


def test_params_are_frozen() -> None:
    params = PPOParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.clip_range = 0.3  # type: ignore[misc]
