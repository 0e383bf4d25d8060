"""Constrained number types, declared once, and the one function that checks a dataclass against them.

A params dataclass annotates its fields with these types and calls :func:`validate_fields` first thing
in ``__post_init__``; cross-field rules stay hand-written after it::

    @dataclass(frozen=True, kw_only=True)
    class MyParams:
        lr: PositiveFloat = 1e-3
        batch_size: PositiveInt | None = 64

        def __post_init__(self) -> None:
            validate_fields(self)

What :func:`validate_fields` checks, field by field (from the class's resolved type hints):

- ``int`` fields (constrained or not) take ints only: ``True`` and ``2.0`` are refused;
- ``float`` fields (constrained or not) take ints and floats, but not bools, not NaN and not ±inf;
- ``bool`` fields take ``True`` / ``False`` only;
- a constrained type adds its bounds (``PositiveInt``: >= 1, ``UnitFloat``: in [0, 1], ...);
- ``Callable[...]`` fields take callables only (a string where a function belongs fails at construction,
  not at its first call);
- ``T | None`` also takes None; fields of any other type (objects) are not checked here.

The experiment-file layer (:mod:`tshtrain.config`) reads the same :class:`Constraint` objects to build
its schema, so a bound is stated once and holds for Python users and experiment files alike.
"""

from __future__ import annotations

import collections.abc
import math
import types
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Any

from tshtrain.errors import ConfigurationError, short_repr

__all__ = [
    "Constraint",
    "FieldCheck",
    "FiniteFloat",
    "NonNegativeFloat",
    "NonNegativeInt",
    "OpenUnitFloat",
    "PositiveFloat",
    "PositiveInt",
    "UnitFloat",
    "describe_type",
    "field_checks",
    "validate_fields",
]


@dataclass(frozen=True, kw_only=True)
class Constraint:
    """Bounds on a number, placed in an ``Annotated`` type: ``Annotated[int, Constraint(ge=1, ...)]``."""

    ge: float | None = None
    """the value must be >= this; None: no lower bound (or see ``gt``)"""
    gt: float | None = None
    """the value must be > this; None: no strict lower bound"""
    le: float | None = None
    """the value must be <= this; None: no upper bound"""
    description: str
    """what is allowed, as it reads in an error message after "must be": ``"an int >= 1"``"""

    def holds(self, value: float) -> bool:
        """Whether ``value`` (a number already of the right kind) lies within the bounds."""
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
        )


PositiveInt = Annotated[int, Constraint(ge=1, description="an int >= 1")]
"""an int >= 1 (counts of steps, episodes, envs, sizes)"""
NonNegativeInt = Annotated[int, Constraint(ge=0, description="an int >= 0")]
"""an int >= 0"""
PositiveFloat = Annotated[float, Constraint(gt=0.0, description="a finite number > 0")]
"""a finite number > 0 (learning rates, ratios)"""
NonNegativeFloat = Annotated[float, Constraint(ge=0.0, description="a finite number >= 0")]
"""a finite number >= 0 (coefficients, noise scales)"""
UnitFloat = Annotated[float, Constraint(ge=0.0, le=1.0, description="a number in [0, 1]")]
"""a number in [0, 1] (discount factors, GAE lambda, probabilities)"""
OpenUnitFloat = Annotated[float, Constraint(gt=0.0, le=1.0, description="a number in (0, 1]")]
"""a number in (0, 1] (Polyak tau, fractions that must not vanish)"""
FiniteFloat = Annotated[float, Constraint(description="a finite number")]
"""any finite number (scores, thresholds); a plain ``float`` field is checked the same way"""


@dataclass(frozen=True, kw_only=True)
class FieldCheck:
    """How one field of a dataclass is checked: its kind, its bounds, whether it may be None."""

    name: str
    """the field name"""
    kind: type
    """``int``, ``float`` or ``bool``"""
    constraint: Constraint | None
    """the bounds of a constrained type; None: a plain ``int`` / ``float`` / ``bool``"""
    optional: bool
    """the annotation is ``T | None``"""
    function: bool = False
    """the annotation is ``Callable[...]`` (``kind`` is then ``object``): any callable is allowed"""

    @property
    def allowed(self) -> str:
        """What the field takes, as it reads after "must be"."""
        if self.function:
            text = "a function"
        elif self.constraint is not None:
            text = self.constraint.description
        else:
            text = {int: "an int", float: "a finite number", bool: "a bool"}[self.kind]
        return text + (" or None" if self.optional else "")

    def accepts(self, value: object) -> bool:
        """Whether ``value`` is allowed in this field."""
        if value is None:
            return self.optional
        if self.function:
            return callable(value)
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        if self.kind is int:
            if not isinstance(value, int):
                return False
        elif isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif not isinstance(value, int):
            return False
        return self.constraint is None or self.constraint.holds(value)


def describe_type(hint: Any) -> FieldCheck | None:
    """The check of a field annotated ``hint`` (a resolved type hint), or None if it is not a number
    or bool type (possibly constrained, possibly ``| None``)."""
    check = _check_of("", hint)
    return None if check is None or check.function else check


def _check_of(name: str, hint: Any) -> FieldCheck | None:
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        rest = [arg for arg in args if arg is not types.NoneType]
        if len(rest) != 1 or len(rest) == len(args):
            return None
        hint, optional = rest[0], True
    if hint is collections.abc.Callable or typing.get_origin(hint) is collections.abc.Callable:
        return FieldCheck(name=name, kind=object, constraint=None, optional=optional, function=True)
    constraint: Constraint | None = None
    if typing.get_origin(hint) is Annotated:
        found = [meta for meta in hint.__metadata__ if isinstance(meta, Constraint)]
        if len(found) > 1:
            raise TypeError(f"{hint}: more than one Constraint")
        constraint = found[0] if found else None
        hint = typing.get_args(hint)[0]
    if hint not in (int, float, bool):
        return None
    if constraint is not None and hint is bool:
        raise TypeError("a bool field cannot carry a Constraint")
    return FieldCheck(name=name, kind=hint, constraint=constraint, optional=optional)


_CHECKS: dict[type, tuple[FieldCheck, ...]] = {}


def field_checks(cls: type) -> tuple[FieldCheck, ...]:
    """The checks of the number and bool fields of dataclass ``cls`` (resolved once per class)."""
    checks = _CHECKS.get(cls)
    if checks is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        found = (_check_of(field.name, hints[field.name]) for field in fields(cls))
        checks = _CHECKS[cls] = tuple(check for check in found if check is not None)
    return checks


def validate_fields(obj: object) -> None:
    """Check every number and bool field of the dataclass instance ``obj`` against its annotation.

    Raises:
        ConfigurationError: ``"<Class>.<field> must be <what is allowed>, got <value>."`` for the first
            field (in declaration order) whose value is not allowed.
    """
    for check in field_checks(type(obj)):
        value = getattr(obj, check.name)
        if not check.accepts(value):
            raise ConfigurationError(
                f"{type(obj).__name__}.{check.name} must be {check.allowed}, got {short_repr(value)}."
            )
