"""The constrained number types and ``validate_fields``: every kind of field against good and bad values,
the messages users see, and the params classes that use them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pytest

from tshtrain.constraints import (
    FiniteFloat,
    NonNegativeFloat,
    NonNegativeInt,
    OpenUnitFloat,
    PositiveFloat,
    PositiveInt,
    UnitFloat,
    describe_type,
    field_checks,
    validate_fields,
)
from tshtrain.errors import ConfigurationError, require_positive, short_repr
from tshtrain.logger import LogIntervals
from tshtrain.trainer import TrainerOptions


@dataclass(frozen=True, kw_only=True)
class Sample:
    count: PositiveInt = 1
    offset: NonNegativeInt = 0
    optional_count: PositiveInt | None = None
    lr: PositiveFloat = 1e-3
    coef: NonNegativeFloat = 0.0
    gamma: UnitFloat = 0.99
    tau: OpenUnitFloat = 0.005
    score: FiniteFloat = 0.0
    threshold: float | None = None
    plain: int = 0
    flag: bool = False
    maybe: bool | None = None
    name: str = "x"
    """not a number: not checked here"""

    def __post_init__(self) -> None:
        validate_fields(self)


GOOD: list[tuple[str, Any]] = [
    ("count", 1),
    ("count", 10**20),
    ("offset", 0),
    ("optional_count", None),
    ("optional_count", 3),
    ("lr", 1),
    ("lr", 5e-324),
    ("coef", 0),
    ("gamma", 0.0),
    ("gamma", 1),
    ("tau", 1.0),
    ("score", -1e300),
    ("threshold", None),
    ("threshold", -3),
    ("plain", -5),
    ("flag", True),
    ("maybe", None),
    ("name", 3),
]

BAD: list[tuple[str, Any, str]] = [
    ("count", 0, "an int >= 1"),
    ("count", True, "an int >= 1"),
    ("count", 2.0, "an int >= 1"),
    ("count", None, "an int >= 1"),
    ("count", "3", "an int >= 1"),
    ("offset", -1, "an int >= 0"),
    ("optional_count", 0, "an int >= 1 or None"),
    ("optional_count", False, "an int >= 1 or None"),
    ("lr", 0.0, "a finite number > 0"),
    ("lr", math.inf, "a finite number > 0"),
    ("lr", math.nan, "a finite number > 0"),
    ("lr", True, "a finite number > 0"),
    ("lr", "1e-3", "a finite number > 0"),
    ("coef", -0.1, "a finite number >= 0"),
    ("coef", math.inf, "a finite number >= 0"),
    ("gamma", 1.01, r"a number in \[0, 1\]"),
    ("gamma", math.nan, r"a number in \[0, 1\]"),
    ("tau", 0.0, r"a number in \(0, 1\]"),
    ("score", -math.inf, "a finite number"),
    ("threshold", math.nan, "a finite number or None"),
    ("threshold", math.inf, "a finite number or None"),
    ("threshold", False, "a finite number or None"),
    ("plain", 1.0, "an int"),
    ("plain", True, "an int"),
    ("flag", 1, "a bool"),
    ("flag", None, "a bool"),
    ("maybe", "yes", "a bool or None"),
]


@pytest.mark.parametrize(("name", "value"), GOOD)
def test_allowed_values_pass(name: str, value: Any) -> None:
    assert getattr(Sample(**{name: value}), name) == value


@pytest.mark.parametrize(("name", "value", "allowed"), BAD)
def test_refused_values_name_the_class_the_field_the_value_and_what_is_allowed(
    name: str, value: Any, allowed: str
) -> None:
    pattern = rf"^Sample\.{name} must be {allowed}, got {re.escape(repr(value))}\.$"
    with pytest.raises(ConfigurationError, match=pattern):
        Sample(**{name: value})


def test_long_values_are_cut_in_the_message() -> None:
    with pytest.raises(ConfigurationError) as info:
        Sample(count="x" * 500)  # type: ignore[arg-type]  # the wrong type is the point
    assert len(str(info.value)) < 150
    assert str(info.value).endswith("... (500 chars).")  # errors.short_repr names what was cut
    assert short_repr("abc") == "'abc'"
    assert len(short_repr(list(range(1000)))) <= 80


def test_checks_are_resolved_once_per_class_and_skip_non_numbers() -> None:
    checks = field_checks(Sample)
    assert field_checks(Sample) is checks
    assert [c.name for c in checks] == [
        "count", "offset", "optional_count", "lr", "coef", "gamma", "tau", "score", "threshold", "plain",
        "flag", "maybe",
    ]  # fmt: skip


def test_describe_type() -> None:
    check = describe_type(PositiveInt | None)
    assert (
        check is not None and check.optional and check.kind is int and check.allowed == "an int >= 1 or None"
    )
    assert describe_type(str) is None
    assert describe_type(int | str) is None
    assert describe_type(list[int]) is None
    plain = describe_type(float)
    assert plain is not None and plain.constraint is None and plain.allowed == "a finite number"


def test_subclasses_are_checked_with_their_own_name() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Child(Sample):
        extra: UnitFloat = 0.5

    with pytest.raises(ConfigurationError, match=r"^Child\.count must be an int >= 1, got 0\.$"):
        Child(count=0)
    with pytest.raises(ConfigurationError, match=r"^Child\.extra must be a number in \[0, 1\], got 2\.$"):
        Child(extra=2)


@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, True, "1"])
def test_require_positive_refuses_non_finite_and_non_numbers(value: Any) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"^f\.x must be a positive number, got {re.escape(repr(value))}"
    ):
        require_positive("f", "x", value)
    require_positive("f", "x", 3)
    require_positive("f", "x", 1e-9)


@pytest.mark.parametrize("name", ["training_interval", "test_interval", "update_interval", "info_interval"])
@pytest.mark.parametrize("value", [0, 1.5, True, None])
def test_log_intervals_are_positive_ints(name: str, value: Any) -> None:
    # training and update intervals may be None: the trainer family's default
    optional = name in ("training_interval", "update_interval")
    if optional and value is None:
        LogIntervals(**{name: value})
        return
    allowed = "an int >= 1 or None" if optional else "an int >= 1"
    with pytest.raises(ConfigurationError, match=rf"^LogIntervals\.{name} must be {allowed}, got"):
        LogIntervals(**{name: value})


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("render_every_num_env_steps", 2.0, "an int >= 1 or None"),
        ("render_every_num_env_steps", True, "an int >= 1 or None"),
        ("close_envs", 0, "a bool"),
        ("test_deterministic", "no", "a bool or None"),
    ],
)
def test_trainer_options_fields(name: str, value: Any, allowed: str) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"^TrainerOptions\.{name} must be {re.escape(allowed)}, got"
    ):
        TrainerOptions(**{name: value})
