"""Contract tests of the trainer's callback points, its logging (scopes, step axes, interval gating,
closing) and the multi-agent return reduction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from tshtrain.data import CollectStats
from tshtrain.logger import LogIntervals, LogScope, MemoryLogger
from tshtrain.trainer import StopReason

# ====================================================================== callback points


def _recording_callbacks(events: list[tuple[Any, ...]]) -> dict[str, Any]:
    def save_checkpoint(epoch: int, env_step: int, gradient_step: int) -> str:
        events.append(("checkpoint", epoch, env_step, gradient_step))
        return f"ckpt-{epoch}-{env_step}-{gradient_step}.pt"

    return {
        "training_fn": lambda epoch, env_step: events.append(("train", epoch, env_step)),
        "test_fn": lambda epoch, env_step: events.append(("test", epoch, env_step)),
        "save_checkpoint_fn": save_checkpoint,
    }


def test_on_policy_callback_sequence(kit: Any) -> None:
    # 2 envs, n = 4 (c = 4), s = 10: 3 training steps per epoch; 2 epochs
    events: list[tuple[Any, ...]] = []
    setup = kit.make_on_policy(
        num_envs=2,
        max_epochs=2,
        epoch_num_steps=10,
        collection_step_num_env_steps=4,
        batch_size=3,  # the fake reports ceil(4 / 3) = 2 gradient steps per update
        **_recording_callbacks(events),
    )
    assert setup.params.logger is None
    setup.trainer().run()

    assert events == [
        ("test", 0, 0),
        ("train", 1, 0), ("checkpoint", 1, 4, 2),
        ("train", 1, 4), ("checkpoint", 1, 8, 4),
        ("train", 1, 8), ("checkpoint", 1, 12, 6),
        ("test", 1, 12),
        ("train", 2, 12), ("checkpoint", 2, 16, 8),
        ("train", 2, 16), ("checkpoint", 2, 20, 10),
        ("train", 2, 20), ("checkpoint", 2, 24, 12),
        ("test", 2, 24),
    ]  # fmt: skip


def test_off_policy_callback_sequence_without_test_collector(kit: Any) -> None:
    events: list[tuple[Any, ...]] = []
    callbacks = _recording_callbacks(events)
    del callbacks["test_fn"]
    setup = kit.make_off_policy(
        num_envs=3,
        test_env=None,
        max_epochs=2,
        epoch_num_steps=12,
        collection_step_num_env_steps=5,  # c = 6: 2 training steps per epoch
        update_step_num_gradient_steps_per_sample=0.5,  # 3 gradient steps per training step
        **callbacks,
    )
    setup.trainer().run()
    assert events == [
        ("train", 1, 0), ("checkpoint", 1, 6, 3),
        ("train", 1, 6), ("checkpoint", 1, 12, 6),
        ("train", 2, 12), ("checkpoint", 2, 18, 9),
        ("train", 2, 18), ("checkpoint", 2, 24, 12),
    ]  # fmt: skip


def test_offline_callback_sequence(kit: Any) -> None:
    events: list[tuple[Any, ...]] = []
    setup = kit.make_offline(max_epochs=2, epoch_num_steps=2, batch_size=8, **_recording_callbacks(events))
    setup.trainer().run()
    # offline, env_step counts the sampled transitions (batch_size per training step)
    assert events == [
        ("test", 0, 0),
        ("train", 1, 0), ("checkpoint", 1, 8, 1),
        ("train", 1, 8), ("checkpoint", 1, 16, 2),
        ("test", 1, 16),
        ("train", 2, 16), ("checkpoint", 2, 24, 3),
        ("train", 2, 24), ("checkpoint", 2, 32, 4),
        ("test", 2, 32),
    ]  # fmt: skip


def test_callbacks_in_order_within_a_test_step(kit: Any) -> None:
    events: list[str] = []

    def score(stat: CollectStats) -> float:
        events.append("score")
        return float(len(events))  # increasing: every test step is a new best

    def stop(score: float) -> bool:
        events.append("stop")
        return False

    def checkpoint(epoch: int, env_step: int, gradient_step: int) -> str:
        events.append("checkpoint")
        return ""

    setup = kit.make_on_policy(
        max_epochs=1,
        epoch_num_steps=10,
        collection_step_num_env_steps=10,
        test_fn=lambda epoch, env_step: events.append("test_fn"),
        compute_score_fn=score,
        save_best_fn=lambda algorithm: events.append("save_best"),
        stop_fn=stop,
        training_fn=lambda epoch, env_step: events.append("training_fn"),
        save_checkpoint_fn=checkpoint,
    )
    setup.trainer().run()
    # the initial test step (epoch 0) calls every test-step callback except stop_fn
    assert events == [
        "test_fn", "score", "save_best",
        "training_fn", "checkpoint",
        "test_fn", "score", "save_best", "stop",
    ]  # fmt: skip


def test_save_checkpoint_fn_runs_after_the_update(kit: Any) -> None:
    seen: list[tuple[int, int]] = []
    holder: dict[str, Any] = {}

    def checkpoint(epoch: int, env_step: int, gradient_step: int) -> str:
        seen.append((len(holder["setup"].algorithm.calls), gradient_step))
        return ""

    setup = holder["setup"] = kit.make_on_policy(
        test_env=None, max_epochs=1, epoch_num_steps=30, collection_step_num_env_steps=10,
        batch_size=None, save_checkpoint_fn=checkpoint,
    )  # fmt: skip
    setup.trainer().run()
    assert seen == [(1, 1), (2, 2), (3, 3)]


def test_save_checkpoint_fn_with_a_logger_is_called_as_often(kit: Any) -> None:
    calls: list[int] = []

    def checkpoint(epoch: int, env_step: int, gradient_step: int) -> str:
        calls.append(env_step)
        return ""

    setup = kit.make_off_policy(
        test_env=None,
        max_epochs=2,
        epoch_num_steps=20,
        collection_step_num_env_steps=10,
        logger=MemoryLogger(LogIntervals()),
        save_checkpoint_fn=checkpoint,
    )
    setup.trainer().run()
    assert calls == [10, 20, 30, 40]


# ====================================================================== logging


def _steps(logger: MemoryLogger, scope: LogScope) -> list[int]:
    return [step for step, _ in logger.records[scope]]


def test_logger_scopes_use_their_step_axes(kit: Any) -> None:
    logger = MemoryLogger(
        LogIntervals(training_interval=1, test_interval=1, update_interval=1, info_interval=1)
    )
    setup = kit.make_on_policy(
        num_envs=2,
        max_epochs=2,
        epoch_num_steps=10,
        collection_step_num_env_steps=4,  # 3 training steps of 4 env steps per epoch
        batch_size=3,  # 2 gradient steps per update
        logger=logger,
    )
    info = setup.trainer().run()

    assert _steps(logger, LogScope.TRAINING) == [4, 8, 12, 16, 20, 24]  # env_step
    assert _steps(logger, LogScope.TEST) == [0, 12, 24]  # env_step
    assert _steps(logger, LogScope.UPDATE) == [2, 4, 6, 8, 10, 12]  # gradient_step
    assert _steps(logger, LogScope.INFO) == [1, 2]  # epoch
    assert logger.closed

    training = logger.records[LogScope.TRAINING][0][1]
    assert training["n_collected_steps"] == 4.0
    test = logger.records[LogScope.TEST][-1][1]
    assert "score" in test
    assert test["n_collected_episodes"] == 1.0
    update = logger.records[LogScope.UPDATE][0][1]
    # the env steps collected so far, TrainingStats.as_scalars() (the float field, not
    # num_gradient_steps) plus the update step's timing
    assert kit.untimed(update) == {"env_step": 4.0, "loss": 1.0}
    assert set(update) == {"env_step", "loss", "update_time", "gradient_speed"}
    assert [data["env_step"] for _, data in logger.records[LogScope.UPDATE]] == [4, 8, 12, 16, 20, 24]
    final_info = logger.records[LogScope.INFO][-1][1]
    assert final_info["env_step"] == info.train_step == 24
    assert final_info["gradient_step"] == info.gradient_step == 12
    assert final_info["update_step"] == 6
    assert final_info["best_epoch"] == info.best_epoch


def test_logger_interval_gating(kit: Any) -> None:
    logger = MemoryLogger(
        LogIntervals(training_interval=10, test_interval=30, update_interval=5, info_interval=2)
    )
    setup = kit.make_on_policy(
        num_envs=2,
        max_epochs=5,
        epoch_num_steps=12,
        collection_step_num_env_steps=4,  # 3 training steps of 4 env steps per epoch: env_step 4, 8, ...
        batch_size=3,  # 2 gradient steps per update: gradient_step 2, 4, ...
        logger=logger,
    )
    setup.trainer().run()

    def gated(steps: list[int], interval: int) -> list[int]:
        kept: list[int] = []
        for step in steps:
            if not kept or step - kept[-1] >= interval:
                kept.append(step)
        return kept

    env_steps = list(range(4, 61, 4))
    assert _steps(logger, LogScope.TRAINING) == gated(env_steps, 10) == [4, 16, 28, 40, 52]
    assert _steps(logger, LogScope.TEST) == gated([0, 12, 24, 36, 48, 60], 30) == [0, 36]
    assert _steps(logger, LogScope.UPDATE) == gated(list(range(2, 31, 2)), 5) == [2, 8, 14, 20, 26]
    assert _steps(logger, LogScope.INFO) == gated([1, 2, 3, 4, 5], 2) == [1, 3, 5]


def test_offline_test_steps_are_logged_every_epoch(kit: Any) -> None:
    logger = MemoryLogger(LogIntervals(test_interval=1))
    setup = kit.make_offline(max_epochs=3, epoch_num_steps=4, batch_size=8, logger=logger)
    setup.trainer().run()
    assert _steps(logger, LogScope.TEST) == [0, 32, 64, 96]
    assert _steps(logger, LogScope.UPDATE) == [1, 11]  # offline default: every 10 gradient steps
    assert _steps(logger, LogScope.TRAINING) == []
    assert _steps(logger, LogScope.INFO) == [1, 2, 3]


def test_logger_closed_at_the_end_of_run_even_on_error(kit: Any) -> None:
    logger = MemoryLogger()

    def failing(epoch: int, env_step: int) -> None:
        if env_step > 0:
            raise KeyError("boom")

    setup = kit.make_off_policy(test_env=None, max_epochs=3, logger=logger, training_fn=failing)
    with pytest.raises(KeyError, match="boom"):
        setup.trainer().run()
    assert logger.closed


def test_logger_closed_once_after_a_normal_run(kit: Any) -> None:
    closes: list[int] = []

    class CountingLogger:
        def __init__(self) -> None:
            self.inner = MemoryLogger()

        @property
        def intervals(self) -> LogIntervals:
            return self.inner.intervals

        def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
            self.inner.write(scope, step, data)

        def restore_counters(self) -> Any:
            return None

        def close(self) -> None:
            closes.append(1)

    setup = kit.make_on_policy(max_epochs=2, logger=CountingLogger())
    setup.trainer().run()
    assert closes == [1]


def test_resume_from_log_restores_the_counters(kit: Any) -> None:
    logger = MemoryLogger(LogIntervals(training_interval=1, update_interval=1))
    first = kit.make_off_policy(
        max_epochs=2, epoch_num_steps=10, collection_step_num_env_steps=10, logger=logger
    )
    first_info = first.trainer().run()
    assert first_info.train_step == 20

    events: list[tuple[int, int]] = []
    second = kit.make_off_policy(
        max_epochs=3,
        epoch_num_steps=10,
        collection_step_num_env_steps=10,
        logger=logger,
        resume_from_log=True,
        training_fn=lambda epoch, env_step: events.append((epoch, env_step)),
    )
    info = second.trainer().run()
    assert events == [(3, 20)]  # one more epoch, counting on from the logged counters
    assert info.train_step == 30
    assert info.gradient_step == first_info.gradient_step + 10
    assert info.stop_reason is StopReason.MAX_EPOCHS


# ====================================================================== multi-agent returns


def _multi_agent_setup(kit: Any, **overrides: Any) -> Any:
    """Two agents with rewards (1, 3) per step; episodes of 4 steps: returns (4, 12)."""
    return kit.make_off_policy(
        num_envs=2,
        env=lambda: kit.MultiAgentVectorEnv(2, length=4, agent_rewards=(1.0, 3.0)),
        test_env=lambda: kit.MultiAgentVectorEnv(1, length=4, agent_rewards=(1.0, 3.0)),
        max_epochs=2,
        epoch_num_steps=8,
        collection_step_num_env_steps=8,
        test_step_num_episodes=2,
        **overrides,
    )


def test_multi_agent_return_reduction_is_applied(kit: Any) -> None:
    shapes: list[tuple[int, ...]] = []

    def second_agent(returns: np.ndarray) -> np.ndarray:
        shapes.append(returns.shape)
        return np.asarray(returns[:, 1])

    logger = MemoryLogger(LogIntervals(training_interval=1, test_interval=1))
    setup = _multi_agent_setup(kit, multi_agent_return_reduction=second_agent, logger=logger)
    trainer = setup.trainer()
    epochs = list(trainer)
    info = trainer.info_stats()

    assert info.best_reward == 12.0
    assert info.best_score == 12.0
    for stats in epochs:
        assert stats.train_collect_stat is not None
        assert stats.train_collect_stat.returns.tolist() == [12.0] * 2  # 4 vector steps of 2 envs
        assert stats.test_collect_stat is not None
        assert stats.test_collect_stat.returns.tolist() == [12.0, 12.0]
    assert (2, 2) in shapes  # per-agent returns of 2 test episodes
    assert all(len(shape) == 2 and shape[1] == 2 for shape in shapes)
    assert logger.records[LogScope.TRAINING][0][1]["returns/mean"] == 12.0
    assert logger.records[LogScope.TEST][0][1]["returns/mean"] == 12.0


def test_multi_agent_returns_default_to_the_mean_over_agents(kit: Any) -> None:
    setup = _multi_agent_setup(kit)
    info = setup.trainer().run()
    assert info.best_reward == 8.0  # mean of (4, 12)


def test_multi_agent_reduction_feeds_the_score_and_stop_fn(kit: Any) -> None:
    scores: list[float] = []

    def stop(score: float) -> bool:
        scores.append(score)
        return False

    setup = _multi_agent_setup(kit, multi_agent_return_reduction=lambda r: r.min(axis=1), stop_fn=stop)
    info = setup.trainer().run()
    assert info.best_score == 4.0  # the reduction feeds the score, from the initial test step on
    assert scores == [4.0, 4.0]  # stop_fn: epochs 1 and 2 (the initial test step does not consult it)


def test_collect_stats_with_return_reduction() -> None:
    stat = CollectStats(
        n_collected_episodes=2, returns=np.array([[1.0, 5.0], [3.0, 7.0]]), lens=np.array([2, 2])
    )
    assert stat.returns_stat.mean == 4.0  # mean over agents, then episodes
    reduced = stat.with_return_reduction(lambda r: r.max(axis=1))
    assert reduced.returns.tolist() == [5.0, 7.0]
    assert reduced.returns_stat.mean == 6.0
    single = CollectStats(n_collected_episodes=1, returns=np.array([2.0]), lens=np.array([2]))
    assert single.with_return_reduction(lambda r: r * 0) is single  # 1-D returns are left alone
