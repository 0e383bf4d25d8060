"""Contract tests of what the trainer logs per scope, its interval gating (off-policy: one record per
gradient step), resuming from the logs of CSV and TensorBoard writers (no duplicated and no missing
points), the failure policy of loggers, and the final summary table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tshtrain.logger import (
    CompositeLogger,
    CsvLogger,
    LoggerError,
    LogIntervals,
    LogResumePoint,
    LogScope,
    MemoryLogger,
    TensorboardLogger,
    read_csv_log,
    read_tensorboard_log,
)

ALL = LogIntervals(training_interval=1, test_interval=1, update_interval=1, info_interval=1)


def _steps(records: Mapping[LogScope, list[tuple[int, Any]]], scope: LogScope) -> list[int]:
    return [step for step, _ in records[scope]]


def _gated(steps: list[int], interval: int) -> list[int]:
    kept: list[int] = []
    for step in steps:
        if not kept or step - kept[-1] >= interval:
            kept.append(step)
    return kept


# ====================================================================== what each scope logs


def test_each_scope_logs_its_statistics(kit: Any) -> None:
    logger = MemoryLogger(ALL)
    setup = kit.make_on_policy(
        num_envs=2,
        env=lambda: kit.counting_vector_env([3, 5]),  # returns 3 and 5
        test_env=lambda: kit.counting_vector_env([4]),
        max_epochs=2,
        epoch_num_steps=10,
        collection_step_num_env_steps=10,
        test_step_num_episodes=2,
        logger=logger,
    )
    trainer = setup.trainer()
    returns: list[float] = []
    trainer.reset()
    while not trainer.done:
        result = trainer.execute_training_step()
        returns.extend(result.collect_stat.returns.tolist())
    training = logger.records[LogScope.TRAINING][-1][1]
    assert {"n_collected_steps", "n_collected_episodes", "collect_time", "collect_speed"} <= set(training)
    for prefix in ("returns", "lens", "returns_window", "lens_window"):
        assert {f"{prefix}/{s}" for s in ("mean", "std", "min", "max")} <= set(training)
    assert training["returns_window/mean"] == pytest.approx(np.mean(returns))  # fewer than 100 episodes
    assert training["collect_speed"] == pytest.approx(10 / training["collect_time"])

    test = logger.records[LogScope.TEST][-1][1]
    assert test["score"] == test["returns/mean"] == 4.0
    assert test["returns_window/mean"] == 4.0 and test["lens_window/max"] == 4.0

    update = logger.records[LogScope.UPDATE][-1][1]
    assert set(update) == {"env_step", "loss", "update_time", "gradient_speed"}
    assert update["env_step"] == 20  # the env steps collected before this update: lines up with returns
    assert update["gradient_speed"] == pytest.approx(1 / update["update_time"])  # 1 gradient step

    info = logger.records[LogScope.INFO][-1][1]
    assert {f"timing/{k}" for k in ("total_time", "train_time", "train_time_collect", "train_time_update",
                                    "test_time", "env_speed", "epoch_env_speed")} <= set(info)  # fmt: skip
    assert info["env_step"] == 20 and info["update_step"] == 2
    assert info["timing/env_speed"] == pytest.approx(20 / info["timing/total_time"])
    assert info["timing/env_speed"] > 0 and info["timing/epoch_env_speed"] > 0


def test_the_rolling_window_holds_the_last_100_training_episodes(kit: Any) -> None:
    logger = MemoryLogger(ALL)
    setup = kit.make_off_policy(
        num_envs=2,
        env=lambda: kit.counting_vector_env([2, 3], ramp=True),  # returns 3 and 6
        test_env=None,
        max_epochs=1,
        epoch_num_steps=300,
        collection_step_num_env_steps=60,
        logger=logger,
    )
    trainer = setup.trainer()
    returns: list[float] = []
    trainer.reset()
    while not trainer.done:
        returns.extend(trainer.execute_training_step().collect_stat.returns.tolist())
    assert len(returns) > 100
    last = logger.records[LogScope.TRAINING][-1][1]
    assert last["returns_window/mean"] == pytest.approx(np.mean(returns[-100:]))
    assert last["returns_window/std"] == pytest.approx(np.std(returns[-100:]))


def test_env_info_scalars_reach_the_training_records(kit: Any) -> None:
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

    class InfoEnv(kit.CountingEnv):  # type: ignore[misc, name-defined]  # a class from the fixture
        def step(self, action: Any) -> Any:
            obs, rew, terminated, truncated, _ = super().step(action)
            return obs, rew, terminated, truncated, {"metrics": {"distance": 2.0 * self._t}}

    env = make_vector_env(lambda: InfoEnv(4), 2)
    policy = kit.FixedPolicy(env.single_action_space, fixed_action=0)
    collector = Collector(policy, env, VectorReplayBuffer(100, 2), seed=0, info_key="metrics")
    logger = MemoryLogger(ALL)
    params = OnPolicyTrainerParams(
        training_collector=collector, max_epochs=1, epoch_num_steps=8, collection_step_num_env_steps=8,
        logger=logger, verbose=False, show_progress=False,
    )  # fmt: skip
    OnPolicyTrainer(kit.FakeOnPolicy(policy=policy), params).run()
    (record,) = logger.records[LogScope.TRAINING]
    assert record[1]["env_info/distance"] == 5.0  # mean of 2, 4, 6, 8 (steps 1..4 of both envs)


# ====================================================================== update-scope gating


@pytest.mark.parametrize("interval", [1, 3, 7])
def test_off_policy_gradient_steps_each_get_their_own_record(kit: Any, interval: int) -> None:
    logger = MemoryLogger(LogIntervals(update_interval=interval))
    setup = kit.make_off_policy(
        test_env=None,
        max_epochs=2,
        epoch_num_steps=20,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.5,  # 5 gradient steps per training step
        logger=logger,
    )
    setup.trainer().run()
    losses = setup.algorithm.losses
    assert len(losses) == 20
    expected_steps = _gated(list(range(1, 21)), interval)
    assert _steps(logger.records, LogScope.UPDATE) == expected_steps
    # each record holds the statistics of the gradient step that ends on its gradient_step
    assert [data["loss"] for _, data in logger.records[LogScope.UPDATE]] == [
        losses[step - 1] for step in expected_steps
    ]


def test_gradient_steps_of_several_optimizer_steps_are_counted(kit: Any) -> None:
    logger = MemoryLogger(LogIntervals(update_interval=1))
    setup = kit.make_off_policy(
        test_env=None, max_epochs=1, epoch_num_steps=10, collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.3, gradient_steps_per_call=2, logger=logger,
    )  # fmt: skip
    setup.trainer().run()
    assert _steps(logger.records, LogScope.UPDATE) == [2, 4, 6]  # 3 updates of 2 optimizer steps each


# ====================================================================== resume from logs


FileLoggers: dict[str, tuple[Callable[..., Any], Callable[[Path], Any]]] = {
    "csv": (CsvLogger, read_csv_log),
    "tensorboard": (TensorboardLogger, read_tensorboard_log),
}
INTERVALS = LogIntervals(training_interval=15, test_interval=1, update_interval=7, info_interval=1)


def _resume_setup(kit: Any, logger: Any, **overrides: Any) -> Any:
    # c = 10 env steps per training step, 2 training steps (20 env steps, 20 gradient steps) per epoch
    kwargs: dict[str, Any] = {"max_epochs": 4, "epoch_num_steps": 20, "collection_step_num_env_steps": 10}
    return kit.make_off_policy(logger=logger, **{**kwargs, **overrides})


@pytest.mark.parametrize("kind", FileLoggers)
def test_a_resumed_run_continues_every_curve_without_duplicates_or_gaps(
    kit: Any, tmp_path: Path, kind: str
) -> None:
    make, read = FileLoggers[kind]
    _resume_setup(kit, make(tmp_path / "whole", intervals=INTERVALS)).trainer().run()
    whole = read(tmp_path / "whole")

    def crash(epoch: int, env_step: int) -> None:
        if env_step == 50:  # the second training step of epoch 3: its records are past the resume point
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _resume_setup(kit, make(tmp_path / "split", intervals=INTERVALS), training_fn=crash).trainer().run()
    crashed = read(tmp_path / "split")
    assert _steps(crashed, LogScope.INFO) == [1, 2]
    assert max(_steps(crashed, LogScope.TRAINING)) > 40  # records of the unfinished epoch 3

    checkpoints: list[tuple[int, int, int]] = []
    resumed = _resume_setup(
        kit, make(tmp_path / "split", intervals=INTERVALS), resume_from_log=True,
        save_checkpoint_fn=lambda *counters: checkpoints.append(counters) or "",
    ).trainer()  # fmt: skip
    info = resumed.run()
    assert checkpoints[0] == (3, 50, 50)  # the counters continue from the end of epoch 2
    split = read(tmp_path / "split")
    for scope in LogScope:
        assert _steps(split, scope) == _steps(whole, scope), scope
    assert _steps(whole, LogScope.TRAINING) == _gated(list(range(10, 81, 10)), 15)
    assert _steps(whole, LogScope.UPDATE) == _gated(list(range(1, 81)), 7)
    assert _steps(whole, LogScope.TEST) == [0, 20, 40, 60, 80]
    # the counters in the info records continue too (episode counts differ: resuming resets the envs)
    for (_, split_info), (_, whole_info) in zip(split[LogScope.INFO], whole[LogScope.INFO], strict=True):
        for name in ("env_step", "gradient_step", "update_step"):
            assert split_info[name] == whole_info[name], name
    episodes = [data["train_episode"] for _, data in split[LogScope.INFO]]
    assert episodes == sorted(episodes)  # counted on, not from 0
    assert info.train_step == 80 and info.gradient_step == 80 and info.update_step == 8


def test_resume_with_a_composite_of_csv_and_tensorboard(kit: Any, tmp_path: Path) -> None:
    def logger() -> CompositeLogger:
        return CompositeLogger(
            [
                CsvLogger(tmp_path / "csv", intervals=INTERVALS),
                TensorboardLogger(tmp_path / "tb", intervals=INTERVALS),
            ]
        )

    _resume_setup(kit, logger(), max_epochs=2).trainer().run()
    info = _resume_setup(kit, logger(), max_epochs=3, resume_from_log=True).trainer().run()
    assert info.train_step == 60
    csv, tb = read_csv_log(tmp_path / "csv"), read_tensorboard_log(tmp_path / "tb")
    for scope in LogScope:
        assert _steps(csv, scope) == _steps(tb, scope)
    assert _steps(csv, LogScope.INFO) == [1, 2, 3]


def test_resume_continues_the_gating_of_the_last_written_steps(kit: Any) -> None:
    logger = MemoryLogger(LogIntervals(training_interval=25, update_interval=1000))
    _resume_setup(kit, logger, max_epochs=2).trainer().run()
    assert _steps(logger.records, LogScope.TRAINING) == [10, 40]  # of 10, 20, 30, 40
    restored = logger.restore_counters()
    assert isinstance(restored, LogResumePoint)
    assert restored.last_logged[LogScope.TRAINING] == 40
    assert restored.last_logged[LogScope.UPDATE] == 1
    trainer = _resume_setup(kit, logger, max_epochs=4, resume_from_log=True).trainer()
    trainer.reset()
    last_info = logger.records[LogScope.INFO][-1][1]
    c = trainer.counters
    assert (c.epoch, c.env_step, c.gradient_step, c.update_step) == (2, 40, 40, 4)
    assert c.env_episode == last_info["train_episode"]
    assert c.test_episode == last_info["test_episode"] + 1  # + the resumed run's initial test step
    while not trainer.done:
        trainer.execute_training_step()
    assert _steps(logger.records, LogScope.TRAINING) == [10, 40, 70]
    assert _steps(logger.records, LogScope.UPDATE) == [1]


# ====================================================================== failures


class FailingLogger:
    """A logger whose ``fail_at``-th write raises OSError (like a full disk)."""

    def __init__(self, fail_at: int, *, fail_on_close: bool = False):
        self.fail_at = fail_at
        self.fail_on_close = fail_on_close
        self.writes = 0
        self.closed = 0

    @property
    def intervals(self) -> LogIntervals:
        return ALL

    def write(self, scope: LogScope, step: int, data: Mapping[str, float]) -> None:
        self.writes += 1
        if self.writes == self.fail_at:
            raise OSError(28, "No space left on device")

    def restore_counters(self) -> LogResumePoint | None:
        return None

    def close(self) -> None:
        self.closed += 1
        if self.fail_on_close:
            raise OSError(28, "No space left on device (close)")


def test_a_failing_writer_stops_training_with_a_clear_error(kit: Any, tmp_path: Path) -> None:
    import torch

    checkpoints: list[int] = []

    def save_checkpoint(epoch: int, env_step: int, gradient_step: int) -> str:
        path = tmp_path / f"ckpt-{env_step}.pt"
        torch.save({"env_step": env_step, "algorithm": setup.algorithm.state_dict()}, path)
        checkpoints.append(env_step)
        return str(path)

    # writes: test 0, update 10, training 10, update 20, training 20, test 20, ... (a training step's
    # training record is written at its end, with the scalars of log hooks)
    failing = FailingLogger(fail_at=6)
    setup = kit.make_off_policy(
        max_epochs=3, epoch_num_steps=20, collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.1, logger=failing, save_checkpoint_fn=save_checkpoint,
    )  # fmt: skip
    with pytest.raises(
        LoggerError, match=r"FailingLogger failed to write the test record at env_step 20: OSError"
    ) as info:
        setup.trainer().run()
    message = str(info.value)
    assert "No space left on device" in message and "resume_from_log=True" in message
    assert isinstance(info.value.__cause__, OSError)
    assert failing.closed == 1
    # the checkpoints written before the failure are whole
    assert checkpoints == [10, 20]
    for env_step in checkpoints:
        assert torch.load(tmp_path / f"ckpt-{env_step}.pt", weights_only=False)["env_step"] == env_step


def test_a_failing_writer_in_a_composite_leaves_the_other_writers_closed_and_complete(
    kit: Any, tmp_path: Path
) -> None:
    csv = CsvLogger(tmp_path, intervals=ALL)
    failing = FailingLogger(fail_at=5)  # test 0, update 10, training 10, update 20, training 20
    setup = kit.make_off_policy(
        max_epochs=3, epoch_num_steps=20, collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.1, logger=CompositeLogger([csv, failing]),
    )  # fmt: skip
    with pytest.raises(
        LoggerError, match=r"CompositeLogger: FailingLogger failed to write the training record"
    ):
        setup.trainer().run()
    assert failing.closed >= 1
    records = read_csv_log(tmp_path)
    assert _steps(records, LogScope.TRAINING) == [10, 20]  # the CSV writer wrote the failing record too
    assert all(path.read_text().endswith("\n") for path in tmp_path.glob("*.csv"))


def test_a_failing_close_after_a_failure_does_not_hide_the_first_error(kit: Any) -> None:
    failing = FailingLogger(fail_at=2, fail_on_close=True)
    setup = kit.make_off_policy(max_epochs=2, logger=failing)
    with pytest.raises(LoggerError, match="failed to write the update record"):
        setup.trainer().run()
    assert failing.closed == 1


def test_a_failing_close_after_a_normal_run_raises(kit: Any) -> None:
    failing = FailingLogger(fail_at=10**9, fail_on_close=True)
    setup = kit.make_off_policy(max_epochs=1, logger=failing)
    with pytest.raises(OSError, match="close"):
        setup.trainer().run()


# ====================================================================== console


def test_verbose_run_prints_a_summary_table(kit: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kit.make_on_policy(max_epochs=1, verbose=True).trainer().run()
    out = capsys.readouterr().out
    assert "Training finished" in out
    assert "stop reason        max_epochs" in out
    kit.make_on_policy(max_epochs=1, verbose=False).trainer().run()
    assert capsys.readouterr().out == ""
