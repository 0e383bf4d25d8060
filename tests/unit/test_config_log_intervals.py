"""The ``log_intervals`` section of experiment files: family defaults resolved into numbers, values
validated against ``LogIntervals`` with errors naming key, value and what is allowed."""

from __future__ import annotations

import pytest

from tshtrain.config import default_experiment, load_experiment
from tshtrain.errors import ExperimentError
from tshtrain.logger import OFF_POLICY_LOG_INTERVAL, LogIntervals, LogScope, family_log_intervals


@pytest.mark.parametrize(
    ("algorithm", "every"),
    [("ppo", 1), ("a2c", 1), ("reinforce", 1), ("dqn", 10), ("sac", 10), ("discrete_sac", 10), ("cql", 10)],
)
def test_default_intervals_follow_the_family(algorithm: str, every: int) -> None:
    intervals = default_experiment(algorithm).log_intervals
    assert intervals == {
        "training_interval": every, "test_interval": 1, "update_interval": every, "info_interval": 1,
    }  # fmt: skip


def test_off_policy_default_is_the_documented_constant() -> None:
    assert OFF_POLICY_LOG_INTERVAL == 10
    assert family_log_intervals(on_policy=False) == LogIntervals(training_interval=10, update_interval=10)
    assert family_log_intervals(on_policy=True) == LogIntervals(training_interval=1, update_interval=1)


def test_a_file_sets_intervals_and_null_means_the_default() -> None:
    experiment = load_experiment(
        None,
        ["algorithm.name=sac", "log_intervals.update_interval=100", "log_intervals.training_interval=null"],
    )
    assert experiment.log_intervals["update_interval"] == 100
    assert experiment.log_intervals["training_interval"] == 10


def test_logger_intervals_left_none_take_the_defaults() -> None:
    resolved = LogIntervals(update_interval=7).resolved(family_log_intervals(on_policy=False))
    assert resolved == {LogScope.TRAINING: 10, LogScope.TEST: 1, LogScope.UPDATE: 7, LogScope.INFO: 1}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("log_intervals.update_interval=0", r"log_intervals\.update_interval: 0 is not allowed .*an int >= 1"),
        ("log_intervals.test_interval=null", r"log_intervals\.test_interval: None is not allowed"),
        ("log_intervals.update_intervall=5", r"log_intervals\.update_intervall: unknown key.*update_interval"),
    ],
)
def test_bad_intervals_are_named(override: str, message: str) -> None:
    with pytest.raises(ExperimentError, match=message):
        load_experiment(None, [override])
