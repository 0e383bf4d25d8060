"""What a ported Tianshou script relies on: test-time epsilon and ``set_eps_training`` on
``QValuePolicy`` (a test collector built with ``exploration_noise=True`` leaves the training schedule
alone), a single ``gymnasium.Env`` given to ``Collector``, and the trainer's Tianshou-compatible
options (``save_checkpoint_every_num_epochs``, ``stop_fn_on_best_score``) and labelled test steps of
``test_in_training``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, mlp
from tshtrain.data import Collector, CollectStats, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.logger import LogIntervals, LogScope, MemoryLogger
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams, StopReason

SCHEDULE = EpsilonSchedule(start=1.0, end=0.05, num_env_steps=1000)


def q_policy(*, eps_inference: float = 0.0, seed: int = 0) -> QValuePolicy:
    torch.manual_seed(seed)
    space = gym.spaces.Discrete(2)
    return QValuePolicy(
        mlp(4, 2, (16,), nn.ReLU), space, eps_schedule=SCHEDULE, eps_inference=eps_inference, seed=seed
    )


def dqn_setup(
    policy: QValuePolicy, *, test_noise: bool, **overrides: Any
) -> tuple[OffPolicyTrainer, Collector]:
    train = Collector(
        policy,
        make_vector_env("CartPole-v1", 2),
        VectorReplayBuffer(2000, 2, seed=0),
        exploration_noise=True,
        seed=0,
    )
    test = Collector(policy, make_vector_env("CartPole-v1", 2), exploration_noise=test_noise, seed=100)
    kwargs: dict[str, Any] = {
        "training_collector": train,
        "test_collector": test,
        "max_epochs": 2,
        "epoch_num_steps": 64,
        "collection_step_num_env_steps": 16,
        "batch_size": 16,
        "test_step_num_episodes": 5,
        "verbose": False,
        "show_progress": False,
        **overrides,
    }
    algorithm = DQN(policy=policy, params=DQNParams(target_update_freq=20))
    return OffPolicyTrainer(algorithm, OffPolicyTrainerParams(**kwargs)), test


# ====================================================================== epsilon-greedy


def test_test_collection_with_exploration_noise_leaves_the_training_schedule() -> None:
    policy = q_policy()
    test = Collector(policy, make_vector_env("CartPole-v1", 2), exploration_noise=True, seed=1)
    stat = test.collect(n_episode=10, deterministic=True)
    assert stat.n_collected_steps > 0
    assert int(policy.explored_env_steps) == 0
    assert policy.eps == 1.0


def test_training_collection_still_advances_the_schedule() -> None:
    policy = q_policy()
    train = Collector(policy, make_vector_env("CartPole-v1", 2), exploration_noise=True, seed=1)
    train.collect(n_step=100)
    assert int(policy.explored_env_steps) == 100
    assert policy.eps == pytest.approx(1.0 - 0.95 * 100 / 1000)


def test_trainer_test_steps_do_not_move_epsilon() -> None:
    """The issue's port: 10 test episodes per test step with ``exploration_noise=True`` on the test
    collector moved epsilon from 1.0 to 0.979. Now only training collection counts."""
    policy = q_policy()
    trainer, test = dqn_setup(policy, test_noise=True, test_step_num_episodes=10)
    info = trainer.run()
    assert test.num_collected_env_steps > 0 or info.test_step > 0
    assert info.test_step > 0
    assert int(policy.explored_env_steps) == info.train_step == 128


def _noise(
    policy: QValuePolicy, *, deterministic: bool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    obs = np.random.default_rng(5).normal(size=(400, 4)).astype(np.float32)
    greedy = policy.compute_actions(obs, deterministic=deterministic)
    return greedy, policy.add_exploration_noise(greedy, rng)


def test_eps_inference_applies_to_deterministic_collection() -> None:
    policy = q_policy(eps_inference=1.0)
    greedy, noisy = _noise(policy, deterministic=True, rng=np.random.default_rng(0))
    changed = int((greedy != noisy).sum())
    assert 120 < changed < 280  # uniform over 2 actions: about half differ from the greedy ones
    assert int(policy.explored_env_steps) == 0


def test_eps_inference_zero_is_greedy_and_draws_nothing() -> None:
    policy = q_policy()
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    greedy, noisy = _noise(policy, deterministic=True, rng=rng)
    assert np.array_equal(greedy, noisy)
    assert rng.bit_generator.state == before


def test_set_eps_inference_changes_test_epsilon() -> None:
    policy = q_policy()
    policy.set_eps_inference(1.0)
    greedy, noisy = _noise(policy, deterministic=True, rng=np.random.default_rng(0))
    assert not np.array_equal(greedy, noisy)


def test_set_eps_training_overrides_the_schedule_and_none_restores_it() -> None:
    policy = q_policy()
    policy.set_eps_training(0.0)
    assert policy.eps == 0.0
    greedy, noisy = _noise(policy, deterministic=False, rng=np.random.default_rng(0))
    assert np.array_equal(greedy, noisy)  # schedule says 1.0: every action would be random
    assert int(policy.explored_env_steps) == 400  # still counted, for when the schedule comes back
    policy.set_eps_training(None)
    assert policy.eps == pytest.approx(SCHEDULE.value(400))


def test_set_eps_training_on_the_torch_path() -> None:
    policy = q_policy()
    policy.set_eps_training(0.0)
    obs = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    greedy = policy.compute_actions_torch(obs, deterministic=False)
    noisy = policy.add_exploration_noise_torch(greedy, torch.Generator().manual_seed(1))
    assert torch.equal(greedy, noisy)
    assert int(policy.explored_env_steps) == 64
    greedy = policy.compute_actions_torch(obs, deterministic=True)
    policy.add_exploration_noise_torch(greedy, torch.Generator().manual_seed(1))
    assert int(policy.explored_env_steps) == 64  # deterministic: eps_inference, not counted


def test_ported_training_fn_sets_eps_training() -> None:
    """Tianshou's ``training_fn`` decays epsilon with ``set_eps_training``; the DQN statistics report it."""
    policy = q_policy()
    seen: list[float] = []

    def training_fn(epoch: int, env_step: int) -> None:
        policy.set_eps_training(0.1 if env_step >= 64 else 0.5)
        seen.append(policy.eps)

    trainer, _ = dqn_setup(policy, test_noise=True, training_fn=training_fn)
    epochs = list(trainer)
    assert seen[0] == 0.5 and seen[-1] == 0.1
    assert [e.training_stat.epsilon for e in epochs if e.training_stat is not None] == pytest.approx(
        [0.5, 0.1]
    )  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [1.5, -0.1, True, float("nan")])
def test_epsilon_values_are_checked(bad: float) -> None:
    with pytest.raises(
        ConfigurationError, match=r"QValuePolicy\.eps_inference must be a number in \[0, 1\], got"
    ):
        q_policy(eps_inference=bad)
    policy = q_policy()
    with pytest.raises(
        ConfigurationError, match=r"QValuePolicy\.set_eps_training: eps must be a number in \[0, 1\]"
    ):
        policy.set_eps_training(bad)
    with pytest.raises(ConfigurationError, match=r"QValuePolicy\.set_eps_inference: eps must be a number"):
        policy.set_eps_inference(bad)


# ====================================================================== a single env


def test_single_env_is_wrapped_like_a_one_env_vector_env() -> None:
    single = Collector(q_policy(), gym.make("CartPole-v1"), exploration_noise=True, seed=3)
    vector = Collector(q_policy(), make_vector_env("CartPole-v1", 1), exploration_noise=True, seed=3)
    assert single.num_envs == 1
    assert isinstance(single.env, gym.vector.SyncVectorEnv)
    a, b = single.collect(n_episode=3), vector.collect(n_episode=3)
    assert np.array_equal(a.returns, b.returns) and np.array_equal(a.lens, b.lens)


def test_single_env_training_collector_fills_its_buffer() -> None:
    buffer = VectorReplayBuffer(100, 1)
    collector = Collector(q_policy(), gym.make("CartPole-v1"), buffer, exploration_noise=True, seed=0)
    collector.collect(n_step=30)
    assert len(buffer) == 30


def test_single_env_test_collector_in_a_trainer() -> None:
    policy = q_policy()
    trainer, _ = dqn_setup(
        policy,
        test_noise=True,
        test_collector=Collector(policy, gym.make("CartPole-v1"), seed=7),
        max_epochs=1,
    )
    info = trainer.run()
    assert info.test_episode == 5 + 5  # the initial test step and the epoch's


@pytest.mark.parametrize(
    ("env", "given"),
    [("CartPole-v1", "builtins.str"), ([], "builtins.list"), (object(), "builtins.object")],
)
def test_not_an_env_is_a_clear_error(env: object, given: str) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"Collector: env must be a gymnasium\.vector\.VectorEnv .* got {given}\."
    ):
        Collector(q_policy(), env)  # type: ignore[arg-type]


# ====================================================================== trainer semantics


def test_save_checkpoint_fn_runs_after_every_training_step_by_default() -> None:
    calls: list[tuple[int, int, int]] = []
    trainer, _ = dqn_setup(q_policy(), test_noise=False, save_checkpoint_fn=lambda *a: calls.append(a) or "")
    trainer.run()
    assert len(calls) == 2 * 64 // 16
    assert [env_step for _, env_step, _ in calls] == list(range(16, 129, 16))


def test_save_checkpoint_every_num_epochs() -> None:
    calls: list[tuple[int, int, int]] = []
    trainer, _ = dqn_setup(
        q_policy(),
        test_noise=False,
        max_epochs=4,
        epoch_num_steps=32,
        save_checkpoint_fn=lambda *a: calls.append(a) or "",
        save_checkpoint_every_num_epochs=2,
    )
    trainer.run()
    assert [(epoch, env_step) for epoch, env_step, _ in calls] == [(2, 64), (4, 128)]


def test_save_checkpoint_interval_needs_the_function() -> None:
    policy = q_policy()
    train = Collector(policy, make_vector_env("CartPole-v1", 1), VectorReplayBuffer(100, 1))
    with pytest.raises(
        ConfigurationError, match=r"save_checkpoint_every_num_epochs=2 is set but save_checkpoint_fn is None"
    ):
        OffPolicyTrainerParams(training_collector=train, save_checkpoint_every_num_epochs=2)
    with pytest.raises(ConfigurationError, match=r"stop_fn_on_best_score=True is set but stop_fn is None"):
        OffPolicyTrainerParams(training_collector=train, stop_fn_on_best_score=True)


def _scores(values: list[float]) -> Callable[[CollectStats], float]:
    """compute_score_fn giving ``values`` to the successive test steps (the initial one first)."""
    it: Iterator[float] = iter(values)
    return lambda stat: next(it)


@pytest.mark.parametrize("on_best", [False, True])
def test_stop_fn_gets_the_current_or_the_best_score(on_best: bool) -> None:
    """The initial test step meets the threshold, later ones do not: Tianshou's code (the best score)
    stops after the first epoch, tshtrain's default (the current score) runs on."""
    got: list[float] = []

    def stop_fn(score: float) -> bool:
        got.append(score)
        return score >= 5

    trainer, _ = dqn_setup(
        q_policy(),
        test_noise=False,
        max_epochs=3,
        compute_score_fn=_scores([10.0, 0.0, 1.0, 2.0]),
        stop_fn=stop_fn,
        stop_fn_on_best_score=on_best,
    )
    info = trainer.run()
    if on_best:
        assert (got, info.stop_reason, info.best_score) == ([10.0], StopReason.STOP_FN, 10.0)
    else:
        assert (got, info.stop_reason, info.best_score) == ([0.0, 1.0, 2.0], StopReason.MAX_EPOCHS, 10.0)


def test_in_training_test_step_is_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    logger = MemoryLogger(
        LogIntervals(training_interval=1, test_interval=1, update_interval=1, info_interval=1)
    )
    trainer, _ = dqn_setup(
        q_policy(),
        test_noise=False,
        max_epochs=3,
        test_in_training=True,
        stop_fn=lambda score: score >= 9 and score < 1e9,  # random CartPole episodes reach 9 quickly
        logger=logger,
        verbose=True,
    )
    trainer.run()
    lines = [line for line in capsys.readouterr().out.splitlines() if "test_reward" in line]
    labelled = [line for line in lines if "(test in training, env_step " in line]
    assert labelled, lines
    assert lines[0].startswith("Epoch #0: test_reward")  # the initial test step is not labelled
    records = logger.records[LogScope.TEST]
    flagged = [step for step, data in records if data.get("in_training") == 1.0]
    assert len(flagged) == len(labelled)
    assert len(records) == len(lines)
    for line, step in zip(labelled, flagged, strict=True):
        assert f"env_step {step})" in line
