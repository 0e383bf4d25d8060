"""Contract tests of the trainer parameter objects: Tianshou 2.x defaults, frozen, keyword-only,
validation messages that name the field and the value, a readable ``str``."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

import numpy as np
import pytest

from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.logger import MemoryLogger
from tshtrain.trainer import (
    OfflineTrainerParams,
    OffPolicyTrainerParams,
    OnlineTrainerParams,
    OnPolicyTrainerParams,
    TrainerParams,
)


@pytest.fixture
def collector(kit: Any) -> Collector:
    """A 2-env CartPole training collector whose buffer holds 4096 transitions (2048 per env)."""
    env = make_vector_env("CartPole-v1", 2)
    return Collector(kit.FixedPolicy(env.single_action_space), env, VectorReplayBuffer(4096, 2), seed=0)


@pytest.fixture
def test_collector(kit: Any) -> Collector:
    env = make_vector_env("CartPole-v1", 1)
    return Collector(kit.FixedPolicy(env.single_action_space), env, None, seed=1)


def _stop(score: float) -> bool:
    return score > 100


# ====================================================================== defaults


TIANSHOU_COMMON_DEFAULTS: dict[str, Any] = {
    "max_epochs": 100,
    "epoch_num_steps": 30000,
    "test_collector": None,
    "test_step_num_episodes": 1,
    "training_fn": None,
    "test_fn": None,
    "stop_fn": None,
    "compute_score_fn": None,
    "save_best_fn": None,
    "save_checkpoint_fn": None,
    "resume_from_log": False,
    "multi_agent_return_reduction": None,
    "logger": None,
    "verbose": True,
}


def test_common_defaults_equal_tianshou(collector: Collector, kit: Any) -> None:
    for params in (
        OnPolicyTrainerParams(training_collector=collector),
        OffPolicyTrainerParams(training_collector=collector),
        OfflineTrainerParams(buffer=kit.filled_buffer()),
    ):
        for name, expected in TIANSHOU_COMMON_DEFAULTS.items():
            assert getattr(params, name) == expected, (type(params).__name__, name)


def test_online_defaults_equal_tianshou(collector: Collector) -> None:
    on = OnPolicyTrainerParams(training_collector=collector)
    off = OffPolicyTrainerParams(training_collector=collector)
    for params in (on, off):
        assert params.collection_step_num_env_steps == 2048
        assert params.collection_step_num_episodes is None
        assert params.test_in_training is False
        assert params.batch_size == 64
    assert on.update_step_num_repetitions == 1
    assert off.update_step_num_gradient_steps_per_sample == 1.0


def test_offline_defaults_equal_tianshou(kit: Any) -> None:
    params = OfflineTrainerParams(buffer=kit.filled_buffer())
    assert params.batch_size == 64


def test_on_policy_batch_size_none_means_whole_rollout(collector: Collector) -> None:
    assert OnPolicyTrainerParams(training_collector=collector, batch_size=None).batch_size is None


def test_hierarchy() -> None:
    assert issubclass(OnPolicyTrainerParams, OnlineTrainerParams)
    assert issubclass(OffPolicyTrainerParams, OnlineTrainerParams)
    assert issubclass(OnlineTrainerParams, TrainerParams)
    assert issubclass(OfflineTrainerParams, TrainerParams)
    assert not issubclass(OfflineTrainerParams, OnlineTrainerParams)


# ====================================================================== frozen, keyword-only


def test_params_are_frozen(collector: Collector) -> None:
    params = OnPolicyTrainerParams(training_collector=collector)
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.max_epochs = 3  # type: ignore[misc]  # frozen on purpose
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.batch_size = 3  # type: ignore[misc]  # frozen on purpose
    assert params.max_epochs == 100


@pytest.mark.parametrize("cls", [OnPolicyTrainerParams, OffPolicyTrainerParams])
def test_online_params_are_keyword_only(cls: Any, collector: Collector) -> None:
    with pytest.raises(TypeError):
        cls(collector)


def test_offline_params_are_keyword_only(kit: Any) -> None:
    with pytest.raises(TypeError):
        OfflineTrainerParams(kit.filled_buffer())  # type: ignore[call-arg]  # positional on purpose


def test_every_params_class_is_a_frozen_kw_only_dataclass() -> None:
    for cls in (TrainerParams, OnlineTrainerParams, OnPolicyTrainerParams, OffPolicyTrainerParams):
        params = getattr(cls, "__dataclass_params__")  # noqa: B009
        assert params.frozen, cls
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls


def test_replace_revalidates(collector: Collector) -> None:
    params = OnPolicyTrainerParams(training_collector=collector)
    assert dataclasses.replace(params, max_epochs=5).max_epochs == 5
    with pytest.raises(ConfigurationError, match=r"max_epochs.*got 0"):
        dataclasses.replace(params, max_epochs=0)


# ====================================================================== validation


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_epochs", 0),
        ("max_epochs", -3),
        ("max_epochs", 2.5),
        ("max_epochs", True),
        ("epoch_num_steps", 0),
        ("epoch_num_steps", -1),
        ("test_step_num_episodes", 0),
        ("collection_step_num_env_steps", 0),
        ("collection_step_num_env_steps", -10),
        ("collection_step_num_episodes", 0),
        ("batch_size", 0),
        ("batch_size", -64),
        ("batch_size", False),
        ("update_step_num_repetitions", 0),
    ],
)
def test_on_policy_non_positive_counts_are_rejected(name: str, value: Any, collector: Collector) -> None:
    pattern = rf"OnPolicyTrainerParams\.{name} must be an int >= 1.*got {re.escape(repr(value))}"
    with pytest.raises(ConfigurationError, match=pattern):
        OnPolicyTrainerParams(training_collector=collector, **{name: value})


@pytest.mark.parametrize(("name", "value"), [("batch_size", 0), ("batch_size", None), ("max_epochs", 0)])
def test_off_policy_non_positive_counts_are_rejected(name: str, value: Any, collector: Collector) -> None:
    pattern = rf"OffPolicyTrainerParams\.{name} must be an int >= 1.*got {re.escape(repr(value))}"
    with pytest.raises(ConfigurationError, match=pattern):
        OffPolicyTrainerParams(training_collector=collector, **{name: value})


@pytest.mark.parametrize(("name", "value"), [("batch_size", 0), ("epoch_num_steps", 0)])
def test_offline_non_positive_counts_are_rejected(name: str, value: Any, kit: Any) -> None:
    pattern = rf"OfflineTrainerParams\.{name} must be an int >= 1.*got {value}"
    with pytest.raises(ConfigurationError, match=pattern):
        OfflineTrainerParams(buffer=kit.filled_buffer(), **{name: value})


def test_configuration_error_is_a_value_error(collector: Collector) -> None:
    with pytest.raises(ValueError, match="max_epochs"):
        OnPolicyTrainerParams(training_collector=collector, max_epochs=0)


@pytest.mark.parametrize("value", [0, 0.0, -1.0, True, "1"])
def test_off_policy_ratio_must_be_a_positive_number(value: Any, collector: Collector) -> None:
    got = re.escape(repr(value))
    pattern = rf"update_step_num_gradient_steps_per_sample must be a finite number > 0, got {got}"
    with pytest.raises(ConfigurationError, match=pattern):
        OffPolicyTrainerParams(training_collector=collector, update_step_num_gradient_steps_per_sample=value)


def test_both_collection_sizes_set_is_rejected(collector: Collector) -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"collection_step_num_env_steps=100 and collection_step_num_episodes=3 are both set",
    ):
        OnPolicyTrainerParams(
            training_collector=collector, collection_step_num_env_steps=100, collection_step_num_episodes=3
        )


def test_neither_collection_size_set_is_rejected(collector: Collector) -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"neither collection_step_num_env_steps nor collection_step_num_episodes is set",
    ):
        OffPolicyTrainerParams(training_collector=collector, collection_step_num_env_steps=None)


@pytest.mark.parametrize("cls", [OnPolicyTrainerParams, OffPolicyTrainerParams])
def test_episodes_alone_switch_to_episode_collection(cls: Any, collector: Collector) -> None:
    params = cls(training_collector=collector, collection_step_num_episodes=4)
    assert params.collection_step_num_episodes == 4
    assert params.collection_step_num_env_steps is None


def test_episodes_with_explicit_none_env_steps_work(collector: Collector) -> None:
    params = OnPolicyTrainerParams(
        training_collector=collector, collection_step_num_env_steps=None, collection_step_num_episodes=2
    )
    assert params.collection_step_num_env_steps is None


@pytest.mark.parametrize("name", ["stop_fn", "test_fn", "save_best_fn", "compute_score_fn"])
def test_test_callbacks_need_a_test_collector(name: str, collector: Collector, kit: Any) -> None:
    callbacks: dict[str, Any] = {
        "stop_fn": _stop,
        "test_fn": lambda epoch, env_step: None,
        "save_best_fn": lambda algorithm: None,
        "compute_score_fn": lambda stat: 0.0,
    }
    pattern = rf"{name} is set but test_collector is None"
    with pytest.raises(ConfigurationError, match=pattern):
        OnPolicyTrainerParams(training_collector=collector, **{name: callbacks[name]})
    with pytest.raises(ConfigurationError, match=pattern):
        OfflineTrainerParams(buffer=kit.filled_buffer(), **{name: callbacks[name]})


def test_test_callbacks_with_test_collector_are_accepted(
    collector: Collector, test_collector: Collector
) -> None:
    params = OnPolicyTrainerParams(
        training_collector=collector,
        test_collector=test_collector,
        stop_fn=_stop,
        test_fn=lambda epoch, env_step: None,
        save_best_fn=lambda algorithm: None,
        compute_score_fn=lambda stat: 0.0,
        test_in_training=True,
    )
    assert params.test_in_training


def test_test_in_training_needs_stop_fn(collector: Collector, test_collector: Collector) -> None:
    with pytest.raises(ConfigurationError, match=r"test_in_training=True needs a stop_fn"):
        OnPolicyTrainerParams(
            training_collector=collector, test_collector=test_collector, test_in_training=True
        )


def test_resume_from_log_needs_logger(collector: Collector, kit: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"resume_from_log=True needs a logger"):
        OnPolicyTrainerParams(training_collector=collector, resume_from_log=True)
    with pytest.raises(
        ConfigurationError, match=r"OfflineTrainerParams\.resume_from_log=True needs a logger"
    ):
        OfflineTrainerParams(buffer=kit.filled_buffer(), resume_from_log=True)
    params = OnPolicyTrainerParams(training_collector=collector, resume_from_log=True, logger=MemoryLogger())
    assert params.resume_from_log


def test_wrong_object_types_are_rejected(collector: Collector, kit: Any) -> None:
    with pytest.raises(
        ConfigurationError, match=r"training_collector must be a tshtrain.data.Collector, got str"
    ):
        OnPolicyTrainerParams(training_collector="collector")  # type: ignore[arg-type]  # on purpose
    with pytest.raises(ConfigurationError, match=r"test_collector must be .*, got int"):
        OnPolicyTrainerParams(training_collector=collector, test_collector=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"logger must implement .*, got object"):
        OnPolicyTrainerParams(training_collector=collector, logger=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"buffer must be a tshtrain replay buffer, got list"):
        OfflineTrainerParams(buffer=[])  # type: ignore[arg-type]  # on purpose


def test_collector_without_buffer_is_rejected_for_training(test_collector: Collector) -> None:
    with pytest.raises(ConfigurationError, match=r"training_collector has no buffer"):
        OnPolicyTrainerParams(training_collector=test_collector, collection_step_num_env_steps=10)


def test_off_policy_ratio_giving_zero_gradient_steps_is_rejected(collector: Collector) -> None:
    # 2 envs, 10 env steps per collection step: round(0.01 * 10) = 0
    with pytest.raises(
        ConfigurationError,
        match=r"update_step_num_gradient_steps_per_sample=0\.01 gives round\(0\.01 \* 10\) = 0",
    ) as info:
        OffPolicyTrainerParams(
            training_collector=collector,
            collection_step_num_env_steps=10,
            update_step_num_gradient_steps_per_sample=0.01,
        )
    # the suggested minimum really works
    suggested = float(re.search(r"raise it to at least ([0-9.e-]+)", str(info.value)).group(1))  # type: ignore[union-attr]
    params = OffPolicyTrainerParams(
        training_collector=collector,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=suggested,
    )
    assert round(params.update_step_num_gradient_steps_per_sample * 10) >= 1


def test_off_policy_ratio_check_uses_the_env_steps_actually_collected(kit: Any) -> None:
    # 4 envs and n = 1 collect c = 4 env steps per collection step: round(0.25 * 4) = 1 gradient step
    env = make_vector_env("CartPole-v1", 4)
    collector = Collector(kit.FixedPolicy(env.single_action_space), env, VectorReplayBuffer(64, 4), seed=0)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        collection_step_num_env_steps=1,
        update_step_num_gradient_steps_per_sample=0.25,
    )
    assert params.update_step_num_gradient_steps_per_sample == 0.25


def test_off_policy_small_ratio_with_episode_collection_is_accepted(collector: Collector) -> None:
    params = OffPolicyTrainerParams(
        training_collector=collector,
        collection_step_num_episodes=1,
        update_step_num_gradient_steps_per_sample=1e-6,
    )
    assert params.collection_step_num_env_steps is None


def test_buffer_too_small_for_one_collection_step_is_rejected(kit: Any) -> None:
    env = make_vector_env("CartPole-v1", 2)
    collector = Collector(kit.FixedPolicy(env.single_action_space), env, VectorReplayBuffer(20, 2), seed=0)
    with pytest.raises(
        ConfigurationError, match=r"collection_step_num_env_steps=100 needs 50 rows per env .* holds 10"
    ):
        OnPolicyTrainerParams(training_collector=collector, collection_step_num_env_steps=100)
    # exactly one collection step's worth fits
    params = OffPolicyTrainerParams(training_collector=collector, collection_step_num_env_steps=20)
    assert params.collection_step_num_env_steps == 20
    # default 2048 env steps do not fit
    with pytest.raises(ConfigurationError, match=r"collection_step_num_env_steps=2048 needs 1024 rows"):
        OffPolicyTrainerParams(training_collector=collector)


def test_offline_empty_buffer_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match=r"OfflineTrainerParams\.buffer is empty"):
        OfflineTrainerParams(buffer=VectorReplayBuffer(100, 2))


# ====================================================================== str


def test_str_names_non_default_fields_only(collector: Collector, test_collector: Collector) -> None:
    def my_stop(score: float) -> bool:
        return score > 1

    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=test_collector,
        max_epochs=7,
        batch_size=32,
        stop_fn=my_stop,
        logger=MemoryLogger(),
        multi_agent_return_reduction=functools.partial(np.max, axis=1),
        save_best_fn=_SaveBest(),
        compute_score_fn=lambda stat: stat.returns_stat.mean,
    )
    text = str(params)
    assert text.startswith("OffPolicyTrainerParams(")
    assert "max_epochs=7" in text
    assert "batch_size=32" in text
    assert "my_stop" in text
    assert "stop_fn=" in text
    assert "logger=" in text
    assert "multi_agent_return_reduction=" in text
    assert "save_best_fn=" in text
    assert "compute_score_fn=" in text
    assert "training_collector=Collector(num_envs=2)" in text
    assert "test_collector=Collector(num_envs=1)" in text
    assert "epoch_num_steps" not in text  # default
    assert "update_step_num_gradient_steps_per_sample" not in text  # default
    assert "verbose" not in text  # default
    assert "0x" not in text, text  # no memory addresses


class _SaveBest:
    def __call__(self, algorithm: Any) -> None:
        del algorithm


def test_str_of_offline_params_describes_the_buffer(kit: Any) -> None:
    text = str(OfflineTrainerParams(buffer=kit.filled_buffer(num_env_steps=200), epoch_num_steps=5))
    assert "epoch_num_steps=5" in text
    assert "VectorReplayBuffer(len=200, capacity=200)" in text
    assert "0x" not in text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_off_policy_ratio_refuses_nan_and_infinity(value: float, collector: Collector) -> None:
    pattern = (
        rf"^OffPolicyTrainerParams\.update_step_num_gradient_steps_per_sample must be a finite number > 0, "
        rf"got {re.escape(repr(value))}\.$"
    )
    with pytest.raises(ConfigurationError, match=pattern):
        OffPolicyTrainerParams(training_collector=collector, update_step_num_gradient_steps_per_sample=value)


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("max_epochs", 3.0, "an int >= 1"),
        ("epoch_num_steps", float("inf"), "an int >= 1"),
        ("collection_step_num_env_steps", True, "an int >= 1 or None"),
        ("batch_size", float("nan"), "an int >= 1 or None"),
        ("verbose", 1, "a bool"),
        ("show_progress", "yes", "a bool or None"),
        ("test_in_training", None, "a bool"),
    ],
)
def test_number_and_bool_fields_refuse_other_types(
    name: str, value: Any, allowed: str, collector: Collector
) -> None:
    pattern = rf"^OnPolicyTrainerParams\.{name} must be {re.escape(allowed)}, got {re.escape(repr(value))}\.$"
    with pytest.raises(ConfigurationError, match=pattern):
        OnPolicyTrainerParams(training_collector=collector, **{name: value})
