"""Overlapped collection (``OffPolicyTrainerParams.overlap_collection``, docs/overlap.md).

* the policy lag is exactly bounded: 0 for the first collection step, then exactly 1 (weights pushed
  after every update step), or 1..max_policy_lag;
* counters (env_step, gradient steps, epochs, training steps) equal the non-overlapped run's;
* with actions that do not depend on the weights (epsilon = 1), an overlapped run *is* the
  non-overlapped run, bit for bit: same buffer, same learner weights, same episode callbacks (so the
  staging buffer replays exactly what the collector wrote);
* an error in the collection thread reaches the caller with its type and message;
* checkpoints: saving does not change the run; a resumed run continues;
* the combinations that cannot work are refused with the field's name;
* learning: DQN CartPole with overlap reaches the threshold of tests/learning/test_off_policy_learning.py
  (475 within 100k env steps; five seeds in the slow tier, seed 4 in CI).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import Callback, OffPolicyTrainer, OffPolicyTrainerParams, StopReason
from tshtrain.adapters.skrl import EnvStepDriver
from tshtrain.trainer import EpisodesEnded, RunContext

NUM_ENVS = 2
STEPS_PER_COLLECTION = 64


class _Failing(gym.Wrapper[Any, Any, Any, Any]):
    """Raises on its ``fail_at``-th step (counted over the env's life)."""

    def __init__(self, env: gym.Env[Any, Any], fail_at: int):
        super().__init__(env)
        self.fail_at, self.steps = fail_at, 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError(f"the env broke at its step {self.steps}")
        return self.env.step(action)


def _build(
    seed: int = 0,
    *,
    overlap: bool,
    eps: float | None = None,
    epochs: int = 2,
    fail_at: int | None = None,
    **trainer_kwargs: Any,
) -> OffPolicyTrainer:
    """A small DQN on CartPole (2 envs, 64 env steps per collection step, 32 gradient steps each)."""
    torch.manual_seed(seed)
    if fail_at is None:
        envs = make_vector_env("CartPole-v1", NUM_ENVS)
    else:
        envs = gym.vector.SyncVectorEnv(
            [lambda: _Failing(gym.make("CartPole-v1"), fail_at) for _ in range(NUM_ENVS)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
    schedule = (
        EpsilonSchedule(start=1.0, end=0.05, num_env_steps=500)
        if eps is None
        else EpsilonSchedule(start=eps, end=eps, num_env_steps=0)
    )
    policy = QValuePolicy(
        mlp(4, 2, (32,), nn.ReLU), envs.single_action_space, eps_schedule=schedule, seed=seed
    )
    algorithm = DQN(policy=policy, params=DQNParams(lr=1e-3, target_update_freq=20))
    buffer = VectorReplayBuffer(4000, NUM_ENVS, seed=seed)
    collector = Collector(policy, envs, buffer, exploration_noise=True, seed=seed)
    test = Collector(policy, make_vector_env("CartPole-v1", 2), seed=seed + 100)
    options: dict[str, Any] = {
        "collection_step_num_env_steps": STEPS_PER_COLLECTION,
        "update_step_num_gradient_steps_per_sample": 0.5,
        "batch_size": 32,
    }
    options.update(trainer_kwargs)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=test,
        max_epochs=epochs,
        epoch_num_steps=256,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
        overlap_collection=overlap,
        **options,
    )
    return OffPolicyTrainer(algorithm, params)


def _weights(trainer: OffPolicyTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.algorithm.policy.parameters()]


def _buffer(trainer: OffPolicyTrainer) -> dict[str, np.ndarray]:
    buffer = trainer.params.training_collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    return {name: arr.copy() for name, arr in buffer.field_arrays().items()}


# ====================================================================== the lag


def test_without_overlap_there_is_no_background_collection() -> None:
    trainer = _build(overlap=False)
    trainer.run()
    assert trainer.overlap is None


def test_the_lag_is_exactly_one_with_weights_pushed_after_every_update_step() -> None:
    trainer = _build(overlap=True, epochs=3)
    trainer.run()
    overlap = trainer.overlap
    assert overlap is not None
    lags = overlap.lags
    assert len(lags) == trainer.counters.training_step == 12
    assert [rec.training_step for rec in lags] == list(range(1, 13))
    # the first collection step runs in the foreground with the initial weights
    assert (lags[0].lag, lags[0].background, lags[0].actor_version) == (0, False, 0)
    for rec in lags[1:]:  # collected during update k - 1 with the weights after update k - 2
        assert rec.background
        assert rec.learner_version == rec.training_step - 1
        assert rec.actor_version == rec.training_step - 2
        assert rec.lag == 1
    # after the last update the actor holds the learner's weights again
    assert overlap.actor_version == overlap.learner_version == 12
    for mine, theirs in zip(overlap.actor.parameters(), trainer.algorithm.policy.parameters(), strict=True):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("max_lag", [2, 3])
def test_max_policy_lag_bounds_the_lag_exactly(max_lag: int) -> None:
    trainer = _build(overlap=True, epochs=3, max_policy_lag=max_lag)
    trainer.run()
    assert trainer.overlap is not None
    lags = [rec.lag for rec in trainer.overlap.lags]
    assert lags[0] == 0
    assert set(lags[1:]) == set(range(1, max_lag + 1))  # every lag up to the bound occurs, none above
    # weights pushed every max_lag update steps: the lag cycles 1, 2, ..., max_lag
    assert lags[1:] == [1 + (k % max_lag) for k in range(len(lags) - 1)]


# ====================================================================== same run, same counters


def test_counters_equal_the_non_overlapped_run() -> None:
    plain, overlapped = _build(overlap=False, epochs=3), _build(overlap=True, epochs=3)
    a, b = plain.run(), overlapped.run()
    assert plain.counters == overlapped.counters
    assert (a.train_step, a.gradient_step, a.update_step) == (b.train_step, b.gradient_step, b.update_step)
    assert a.train_step == 3 * 256


def test_episode_based_collection_counts_like_the_non_overlapped_run() -> None:
    kwargs: dict[str, Any] = {"collection_step_num_episodes": 2, "collection_step_num_env_steps": None}
    plain = _build(overlap=False, eps=1.0, epochs=2, **kwargs)
    overlapped = _build(overlap=True, eps=1.0, epochs=2, **kwargs)
    plain.run()
    overlapped.run()
    assert plain.counters == overlapped.counters
    assert _buffer(plain).keys() == _buffer(overlapped).keys()
    for name, arr in _buffer(plain).items():
        np.testing.assert_array_equal(arr, _buffer(overlapped)[name], err_msg=name)


class _EpisodeEnds(Callback):
    def __init__(self) -> None:
        self.ends: list[list[int]] = []
        self.threads: set[str] = set()

    def on_episodes_end(self, ctx: RunContext, ended: EpisodesEnded) -> None:
        if not ended.test:
            self.ends.append(ended.env_ids.tolist())
            self.threads.add(threading.current_thread().name)


def test_with_weight_free_actions_the_overlapped_run_is_the_plain_run_bit_for_bit() -> None:
    """epsilon = 1: every action is drawn from the collector's generator, so the weights that acted do
    not matter and both runs must write the same buffer, take the same gradient steps and report the
    same episodes (delivered in the main thread)."""
    plain, overlapped = _build(overlap=False, eps=1.0, epochs=3), _build(overlap=True, eps=1.0, epochs=3)
    seen_plain, seen_overlapped = _EpisodeEnds(), _EpisodeEnds()
    plain.add_callback(seen_plain)
    overlapped.add_callback(seen_overlapped)
    a, b = plain.run(), overlapped.run()
    assert plain.counters == overlapped.counters
    assert b.best_reward == a.best_reward
    for name, arr in _buffer(plain).items():
        np.testing.assert_array_equal(arr, _buffer(overlapped)[name], err_msg=name)
    for x, y in zip(_weights(plain), _weights(overlapped), strict=True):
        assert torch.equal(x, y)
    assert seen_overlapped.ends == seen_plain.ends and len(seen_plain.ends) > 5
    assert seen_overlapped.threads == {threading.main_thread().name}
    # the env steps the epsilon schedule counts reached the learner (plus the step still staged)
    assert trainer_explored(overlapped) == trainer_explored(plain) + STEPS_PER_COLLECTION


def trainer_explored(trainer: OffPolicyTrainer) -> int:
    policy = trainer.algorithm.policy
    assert isinstance(policy, QValuePolicy)
    return int(policy.explored_env_steps)


def test_an_overlapped_run_is_reproducible() -> None:
    first, second = _build(3, overlap=True), _build(3, overlap=True)
    first.run()
    second.run()
    for x, y in zip(_weights(first), _weights(second), strict=True):
        assert torch.equal(x, y)


# ====================================================================== errors


def test_an_error_in_the_collection_thread_reaches_the_caller_with_its_message() -> None:
    # 32 vector steps per collection step: step 50 of the envs falls in the second one, which is
    # collected in the background during the first update
    trainer = _build(overlap=True, fail_at=50)
    with pytest.raises(RuntimeError, match="the env broke at its step 50") as caught:
        trainer.run()
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "overlapped collection thread" in notes and "training step 2" in notes
    assert not any(t.name == "tshtrain-overlapped-collection" for t in threading.enumerate())
    assert trainer.overlap is not None and not trainer.overlap.running


def test_an_error_in_the_update_wins_and_the_thread_is_joined() -> None:
    trainer = _build(overlap=True)

    class Boom(Callback):
        def on_sampled_batch(self, ctx: RunContext, batch: Any) -> Any:
            # the second update: the collection of training step 3 runs in the background now
            if trainer.counters.training_step >= 1:
                raise ValueError("stop in the update")
            return None

    trainer.add_callback(Boom())
    with pytest.raises(ValueError, match="stop in the update"):
        trainer.run()
    assert trainer.overlap is not None and not trainer.overlap.running
    assert not any(t.name == "tshtrain-overlapped-collection" for t in threading.enumerate())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"overlap": False, "max_policy_lag": 2}, r"max_policy_lag=2 has no effect without overlapped"),
        ({"overlap": True, "max_policy_lag": 0}, r"max_policy_lag must be"),
    ],
)
def test_params_refuse_what_cannot_work(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _build(**kwargs)


def test_a_test_collector_sharing_the_envs_is_refused() -> None:
    trainer = _build(overlap=False)
    collector = trainer.params.training_collector
    assert isinstance(collector, Collector)
    shared = Collector(collector.policy, collector.env)
    with pytest.raises(ConfigurationError, match="shares the training collector's envs"):
        OffPolicyTrainerParams(training_collector=collector, test_collector=shared, overlap_collection=True)


def test_a_collector_with_another_policy_is_refused() -> None:
    trainer = _build(overlap=False)
    collector = trainer.params.training_collector
    assert isinstance(collector, Collector)
    other = QValuePolicy(mlp(4, 2, (8,)), collector.env.single_action_space)
    params = OffPolicyTrainerParams(
        training_collector=collector, collection_step_num_env_steps=64, overlap_collection=True
    )
    with pytest.raises(ConfigurationError, match="is not the algorithm's policy"):
        OffPolicyTrainer(DQN(policy=other, params=DQNParams()), params)


def test_env_step_driving_is_refused() -> None:
    trainer = _build(overlap=True)
    with pytest.raises(ConfigurationError, match="cannot be driven env step by env step"):
        EnvStepDriver(trainer)


# ====================================================================== checkpoints


def test_saving_checkpoints_does_not_change_the_run(tmp_path: Path) -> None:
    plain, saved = _build(overlap=True, epochs=2), _build(overlap=True, epochs=2)
    plain.run()
    saved.reset()
    k = 0
    while not saved.done:
        saved.execute_training_step()
        k += 1
        if k % 3 == 0:
            saved.save_checkpoint(tmp_path / f"step{k}")
    saved.close()
    for x, y in zip(_weights(plain), _weights(saved), strict=True):
        assert torch.equal(x, y)
    assert plain.counters == saved.counters


def test_a_resumed_overlapped_run_continues(tmp_path: Path) -> None:
    first = _build(overlap=True, epochs=2)
    first.reset()
    for _ in range(5):
        first.execute_training_step()
    first.save_checkpoint(tmp_path / "ckpt")
    counters = first.counters
    # the checkpoint holds the staged collection step's transitions (not yet counted)
    buffer = first.params.training_collector.buffer
    assert buffer is not None and len(buffer) == counters.env_step + STEPS_PER_COLLECTION
    first.close()

    resumed = _build(overlap=True, epochs=2)
    resumed.load_checkpoint(tmp_path / "ckpt", trusted=True)
    assert resumed.counters == counters
    assert resumed.overlap is not None  # the actor collects with the restored weights, not the initial ones
    for mine, theirs in zip(resumed.overlap.actor.parameters(), _weights(first), strict=True):
        assert torch.equal(mine, theirs)
    info = resumed.run()
    assert info.stop_reason is StopReason.MAX_EPOCHS
    assert resumed.counters.env_step == 2 * 256
    assert resumed.overlap is not None
    assert [rec.lag for rec in resumed.overlap.lags] == [0, 1, 1]  # foreground first, then lag 1


# ====================================================================== learning

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _dqn_example() -> Any:
    if str(_EXAMPLES) not in sys.path:
        sys.path.insert(0, str(_EXAMPLES))
    spec = importlib.util.spec_from_file_location("dqn_cartpole_475", _EXAMPLES / "dqn_cartpole_475.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dqn_cartpole_475"] = module
    spec.loader.exec_module(module)
    return module


def _solve_with_overlap(seed: int) -> tuple[bool, int, float]:
    """The example's DQN (rl-zoo hyperparameters) with overlap on: (solved within 100k env steps,
    env steps with the prefill, best test return)."""
    ex = _dqn_example()
    algorithm, training_collector, test_collector = ex.build(seed)
    t = ex.TRAINER
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=t["max_epochs"],
        epoch_num_steps=t["epoch_num_steps"],
        collection_step_num_env_steps=t["collection_step_num_env_steps"],
        update_step_num_gradient_steps_per_sample=t["update_step_num_gradient_steps_per_sample"],
        batch_size=t["batch_size"],
        test_step_num_episodes=t["test_step_num_episodes"],
        stop_fn=lambda score: score >= 475.0,
        verbose=False,
        show_progress=False,
        overlap_collection=True,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    training_collector.env.close()
    test_collector.env.close()
    env_steps = info.train_step + ex.PREFILL_ENV_STEPS
    solved = info.stop_reason is StopReason.STOP_FN and env_steps <= 100_000
    print(
        f"RESULT dqn475-overlap seed={seed} solved={solved} env_steps={env_steps} best={info.best_reward:.1f}"
    )
    return solved, env_steps, float(info.best_reward)


@pytest.mark.learning
def test_dqn_with_overlap_seed_4_reaches_475_on_cartpole() -> None:
    solved, env_steps, best = _solve_with_overlap(4)
    assert solved, (env_steps, best)


@pytest.mark.learning
@pytest.mark.slow
def test_dqn_with_overlap_reaches_475_on_cartpole() -> None:
    outcomes = [_solve_with_overlap(seed) for seed in range(5)]
    assert sum(solved for solved, _, _ in outcomes) >= 3, outcomes
