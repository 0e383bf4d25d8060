"""Each built-in callback (and hook) does what its docstring says, inside a real run, and keeps its state."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from torch import nn

from tests.adapter_helpers import hooks_of
from tests.contract._hook_setups import (
    LinearOffPolicy,
    bc_trainer,
    off_policy_trainer,
    recording_on_policy_trainer,
    reinforce_trainer,
)
from tshtrain.adapters import HookContext, HookStage
from tshtrain.algorithm import CategoricalPolicy, NonFiniteLossError, RunningObsNormalizer
from tshtrain.callbacks import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    EarlyStopping,
    GradientNormLog,
    RewardNormalizer,
)
from tshtrain.data import TransitionBatch
from tshtrain.errors import ConfigurationError
from tshtrain.logger import LogScope, MemoryLogger
from tshtrain.trainer import (
    Callback,
    Counters,
    OfflineTrainer,
    OnPolicyTrainer,
    OptimizerStep,
    RunContext,
    StopReason,
)

ZERO = Counters(
    epoch=0,
    env_step=0,
    env_episode=0,
    update_step=0,
    gradient_step=0,
    test_env_step=0,
    test_episode=0,
    training_step=0,
)


class _Sink:
    def add(self, scalars: Any, progress: Any, source: str) -> None:
        raise AssertionError(f"{source} logged {scalars}")


def _ctx(stops: list[str] | None = None) -> RunContext:
    return RunContext(
        counters=ZERO,
        algorithm=cast(Any, None),
        name="test",
        stop=(stops if stops is not None else []).append,
        sink=_Sink(),
    )


def _transitions(rew: np.ndarray) -> TransitionBatch:
    n = len(rew)
    return TransitionBatch(
        obs=np.arange(n, dtype=np.float32)[:, None],
        act=np.zeros(n, dtype=np.int64),
        rew=rew.astype(np.float32),
        terminated=np.zeros(n, dtype=bool),
        truncated=np.zeros(n, dtype=bool),
        obs_next=np.arange(n, dtype=np.float32)[:, None] + 1,
        indices=np.arange(n),
    )


def _weights_only_round_trip(state: Any, tmp_path: Path) -> Any:
    torch.save(state, tmp_path / "state.pt")
    return torch.load(tmp_path / "state.pt", weights_only=True)


# ====================================================================== RewardNormalizer


def test_reward_normalizer_statistics_are_those_of_all_rewards_seen() -> None:
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=n) for n in (1, 7, 50, 3)]
    normalizer = RewardNormalizer(center=True)
    for chunk in chunks:
        normalizer.update(chunk)
    everything = np.concatenate(chunks)
    assert normalizer.mean == pytest.approx(everything.mean()) and normalizer.var == pytest.approx(
        everything.var()
    )
    batch = normalizer.on_sampled_batch(_ctx(), _transitions(everything))
    assert batch is not None
    np.testing.assert_allclose(batch.rew, (everything - everything.mean()) / everything.std(), rtol=1e-5)


def test_reward_normalizer_on_policy_hands_the_update_normalised_rewards(kit: Any) -> None:
    setup = kit.make_on_policy(env=lambda: kit.counting_vector_env([3, 3], ramp=True), test_env=None)
    trainer = setup.trainer()
    normalizer = RewardNormalizer()
    trainer.add_callback(normalizer)
    trainer.run()
    raw = np.array([1.0, 2.0, 3.0, 1.0, 2.0] * 2)  # the first rollout: 5 vector steps of rewards 1, 2, 3, ...
    np.testing.assert_allclose(setup.algorithm.calls[0].rew.T.ravel(), raw / raw.std(), rtol=1e-5)
    assert normalizer.count == 40  # 2 epochs of 20 env steps


def test_reward_normalizer_off_policy_normalises_every_sample(kit: Any) -> None:
    trainer = off_policy_trainer(env_factory=lambda: kit.counting_vector_env([3, 4], ramp=True))
    normalizer = RewardNormalizer()
    trainer.add_callback(normalizer)
    trainer.run()
    assert normalizer.count == 40
    algorithm: LinearOffPolicy = trainer.algorithm  # type: ignore[assignment]
    buffer = trainer.params.training_collector.buffer
    assert buffer is not None
    last = algorithm.batches[-1]
    raw = buffer.get(last.indices).rew
    np.testing.assert_allclose(last.rew, raw / math.sqrt(normalizer.var + 1e-8), rtol=1e-5)


def test_reward_normalizer_offline_uses_the_dataset_statistics() -> None:
    trainer = bc_trainer()
    normalizer = RewardNormalizer()
    trainer.add_callback(normalizer)
    trainer.reset()
    assert normalizer.count == 200 and normalizer.mean == 1.0  # CartPole: every reward is 1


def test_reward_normalizer_state(tmp_path: Path) -> None:
    normalizer = RewardNormalizer()
    normalizer.update(np.array([1.0, 2.0, 4.0]))
    restored = RewardNormalizer()
    restored.load_state_dict(_weights_only_round_trip(normalizer.state_dict(), tmp_path))
    assert restored.state_dict() == normalizer.state_dict()


# ====================================================================== obs_normalizer (the one way)


def _normalised_reinforce() -> tuple[Any, RunningObsNormalizer]:
    from tshtrain.algorithm import Reinforce, ReinforceParams

    trainer = reinforce_trainer()
    normalizer = RunningObsNormalizer(4)
    policy: CategoricalPolicy = trainer.algorithm.policy
    policy.actor = nn.Sequential(normalizer, policy.actor)  # the first layer of the policy's network
    algorithm = Reinforce(policy=policy, params=ReinforceParams(lr=1e-2), obs_normalizer=normalizer, seed=0)
    return OnPolicyTrainer(algorithm, trainer.params), normalizer


class _Counts(Callback):
    def __init__(self, normalizer: RunningObsNormalizer):
        self.normalizer, self.before, self.after = normalizer, list[int](), list[int]()

    def before_update(self, ctx: RunContext, batch: Any) -> None:
        self.before.append(int(self.normalizer.count))

    def after_update(self, ctx: RunContext, stats: Any) -> None:
        self.after.append(int(self.normalizer.count))


def test_an_online_algorithm_updates_its_obs_normalizer_after_each_update_step() -> None:
    trainer, normalizer = _normalised_reinforce()
    counts = _Counts(normalizer)
    trainer.add_callback(counts)
    trainer.run()
    assert counts.before == [0, 32, 64, 96]  # an update sees the statistics the acting policy used
    assert counts.after == [32, 64, 96, 128]
    assert not torch.allclose(normalizer.mean, torch.zeros(4, dtype=torch.float64))


def test_the_obs_normalizer_must_sit_in_the_policy() -> None:
    from tshtrain.algorithm import Reinforce

    policy = reinforce_trainer().algorithm.policy
    with pytest.raises(ConfigurationError, match=r"^Reinforce: obs_normalizer is not a layer of the policy"):
        Reinforce(policy=policy, obs_normalizer=RunningObsNormalizer(4))


def test_an_offline_algorithm_fits_its_obs_normalizer_to_the_dataset() -> None:
    from tshtrain.algorithm import BCParams, BehaviorCloning

    trainer = bc_trainer()
    normalizer = RunningObsNormalizer(4)
    policy: CategoricalPolicy = trainer.algorithm.policy
    policy.actor = nn.Sequential(normalizer, policy.actor)
    bc = BehaviorCloning(policy=policy, params=BCParams(lr=1e-2), obs_normalizer=normalizer)
    OfflineTrainer(bc, trainer.params).reset()
    assert int(normalizer.count) == 200


# ====================================================================== EarlyStopping


def _scripted(scores: list[float]) -> Any:
    pending = list(scores)
    return lambda stat: pending.pop(0)


def test_early_stopping_on_a_test_metric_with_patience(kit: Any) -> None:
    setup = kit.make_off_policy(
        max_epochs=10, compute_score_fn=_scripted([0, 1, 2, 2, 1.5, 9, 9, 9, 9, 9, 9])
    )
    trainer = setup.trainer()
    trainer.add_callback(EarlyStopping("test/score", patience=2))
    info = trainer.run()
    assert info.stop_reason == StopReason.HOOK
    assert info.stop_detail == (
        "callback 'EarlyStopping': test/score did not improve on its best value 2.0 for 2 checks (last 1.5)"
    )
    assert info.best_epoch == 2 and trainer.counters.epoch == 4


def test_early_stopping_min_mode_on_an_update_metric(kit: Any) -> None:
    trainer = kit.make_off_policy(max_epochs=10, test_env=None).trainer()  # FakeOffPolicy: the loss grows
    trainer.add_callback(EarlyStopping("update/loss", mode="min", patience=3))
    info = trainer.run()
    assert info.stop_reason == StopReason.HOOK and info.update_step == 4


def test_a_nan_loss_ends_the_run_with_the_algorithms_non_finite_loss_error() -> None:
    trainer = off_policy_trainer(max_epochs=5, nan_at=3)  # the one way: NonFiniteLossError, always on
    trainer.add_callback(EarlyStopping("test/score"))  # no loss checks of its own
    with pytest.raises(NonFiniteLossError, match=r"^LinearOffPolicy: the regression loss is nan"):
        trainer.run()
    assert trainer.counters.gradient_step == 2  # the failed update step is not counted


def test_early_stopping_state_and_bad_input(tmp_path: Path) -> None:
    hook = EarlyStopping("training/returns/mean")
    hook.best, hook.num_bad_checks = 3.5, 2
    restored = EarlyStopping("training/returns/mean")
    restored.load_state_dict(_weights_only_round_trip(hook.state_dict(), tmp_path))
    assert (restored.best, restored.num_bad_checks) == (3.5, 2)
    with pytest.raises(ConfigurationError, match=r"EarlyStopping\.metric must be '<scope>/<name>'"):
        EarlyStopping("score")
    with pytest.raises(ConfigurationError, match="mode must be 'max' or 'min'"):
        EarlyStopping("test/score", mode="up")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^EarlyStopping\.patience must be an int >= 1, got 0\.$"):
        EarlyStopping("test/score", patience=0)


# ====================================================================== GradientNormLog, ClearCudaCache


def test_gradient_norm_log_logs_the_applied_gradients_norm() -> None:
    logger = MemoryLogger()
    trainer = off_policy_trainer(max_epochs=1, logger=logger)
    expected: list[float] = []

    def norm(ctx: HookContext[OptimizerStep]) -> None:
        grads = [
            p.grad for group in ctx.data.optimizer.param_groups for p in group["params"] if p.grad is not None
        ]
        expected.append(float(torch.sqrt(sum((g**2).sum() for g in grads))))  # type: ignore[arg-type]

    hooks_of(trainer).register(HookStage.POST_OPTIM, norm)
    trainer.add_callback(GradientNormLog())
    trainer.run()
    logged = [d["grad_norm/optim"] for _, d in logger.records[LogScope.UPDATE]]
    np.testing.assert_allclose(logged, expected, rtol=1e-5)


def test_clear_cuda_cache_every_n_update_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    trainer = off_policy_trainer()  # 4 update steps
    hook = ClearCudaCache(every_num_update_steps=2)
    trainer.add_callback(hook)
    trainer.run()
    assert len(calls) == 2 and hook.state_dict() == {"num_update_steps": 4}


# ====================================================================== CountFramesLog


def test_count_frames_log(tmp_path: Path) -> None:
    logger = MemoryLogger()
    trainer = off_policy_trainer(logger=logger)
    trainer.add_callback(CountFramesLog(frame_skip=4))
    trainer.run()
    assert [(s, d["frames"]) for s, d in logger.records[LogScope.TRAINING]] == [
        (10, 40.0),
        (20, 80.0),
        (30, 120.0),
        (40, 160.0),
    ]
    state = _weights_only_round_trip(trainer.callbacks.state_dict(), tmp_path)
    assert state["CountFramesLog"] == {"frames": 160}


# ====================================================================== BatchSubSampler


def test_batch_sub_sampler_on_policy_keeps_windows_of_the_rollout() -> None:
    trainer = recording_on_policy_trainer()
    trainer.add_callback(BatchSubSampler(16, sub_traj_len=4, seed=1))
    trainer.run()
    for rollout in trainer.algorithm.rollouts:
        assert 4 <= int(rollout.valid.sum()) <= 16
        for column in rollout.valid.T:  # runs of kept steps are whole windows (of 4, or merged)
            runs = np.diff(np.flatnonzero(np.diff(np.concatenate([[0], column.astype(int), [0]]))))[::2]
            assert all(run >= 4 for run in runs)
        assert rollout.boundary[-1].all()  # the boundaries of the whole rollout are kept


def test_batch_sub_sampler_off_policy_cuts_every_sample_and_is_reproducible() -> None:
    def run(seed: int) -> list[np.ndarray]:
        trainer = off_policy_trainer(max_epochs=1)
        trainer.add_callback(BatchSubSampler(3, seed=seed))
        trainer.run()
        algorithm: LinearOffPolicy = trainer.algorithm  # type: ignore[assignment]
        assert all(len(b) == 3 for b in algorithm.batches)
        return [b.indices for b in algorithm.batches]

    first, again = run(seed=7), run(seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_batch_sub_sampler_leaves_small_data_alone_and_keeps_its_state(tmp_path: Path) -> None:
    sampler = BatchSubSampler(10, seed=0)
    small = _transitions(np.ones(5))
    assert sampler.on_sampled_batch(_ctx(), small) is None
    state = _weights_only_round_trip(sampler.state_dict(), tmp_path)
    other = BatchSubSampler(10, seed=99)
    other.load_state_dict(state)
    big = _transitions(np.ones(50))
    a = sampler.on_sampled_batch(_ctx(), big)
    b = other.on_sampled_batch(_ctx(), big)
    assert a is not None and b is not None and np.array_equal(a.indices, b.indices)
    with pytest.raises(
        ConfigurationError, match=r"^BatchSubSampler\.batch_size must be an int >= 1, got 0\.$"
    ):
        BatchSubSampler(0)


def test_builtin_callbacks_together_in_one_run() -> None:
    trainer = off_policy_trainer()
    for callback in (
        RewardNormalizer(),
        BatchSubSampler(4),
        CountFramesLog(),
        EarlyStopping("training/returns/mean"),
        GradientNormLog(),
        ClearCudaCache(),
    ):
        trainer.add_callback(callback)
    trainer.run()
    assert trainer.callbacks.names()[-6:] == [
        "RewardNormalizer",
        "BatchSubSampler",
        "CountFramesLog",
        "EarlyStopping",
        "GradientNormLog",
        "ClearCudaCache",
    ]


def test_builtin_callbacks_refuse_bad_numbers() -> None:
    for build, match in (
        (
            lambda: RewardNormalizer(eps=0.0),
            r"^RewardNormalizer\.eps must be a finite number > 0, got 0\.0\.$",
        ),
        (
            lambda: CountFramesLog(frame_skip=True),
            r"^CountFramesLog\.frame_skip must be an int >= 1, got True\.$",
        ),
        (
            lambda: GradientNormLog(norm_type=math.nan),
            r"^GradientNormLog\.norm_type must be a finite number > 0",
        ),
        (
            lambda: ClearCudaCache(every_num_update_steps=0),
            r"^ClearCudaCache\.every_num_update_steps must be",
        ),
        (
            lambda: EarlyStopping("test/score", min_delta=-1.0),
            r"^EarlyStopping\.min_delta must be a finite number >= 0",
        ),
        (lambda: BatchSubSampler(4, sub_traj_len=2.0), r"^BatchSubSampler\.sub_traj_len must be an int >= 1"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigurationError, match=match):
            build()


def test_hooks_with_a_real_dqn(tmp_path: Path) -> None:
    from tshtrain.algorithm import DQN, DQNParams, QValuePolicy, mlp

    def dqn(policy: Any) -> DQN:
        torch.manual_seed(0)
        q_policy = QValuePolicy(mlp(4, 2, (16,)), policy.action_space, seed=0)
        return DQN(policy=q_policy, params=DQNParams(lr=1e-3, target_update_freq=4))

    logger = MemoryLogger()
    trainer = off_policy_trainer(algorithm_factory=dqn, logger=logger)
    # the collectors act with the builder's random policy; the DQN learns from what they collect
    trainer.add_callback(GradientNormLog())
    trainer.add_callback(BatchSubSampler(4, seed=0))
    seen: list[int] = []

    class Sizes(Callback):  # added after the sampler: sees its batches
        def on_sampled_batch(self, ctx: RunContext, batch: TransitionBatch) -> None:
            seen.append(len(batch))

    trainer.add_callback(Sizes())
    trainer.add_callback(EarlyStopping("update/loss", mode="min", patience=100))
    info = trainer.run()
    assert info.gradient_step == 8 and seen == [4] * 8
    assert all("grad_norm/optim" in d and "loss" in d for _, d in logger.records[LogScope.UPDATE])
