"""The experiment-file schema of a params dataclass, derived from the dataclass itself.

An experiment file sets the *value* fields of the algorithm's and the trainer's params classes: fields
whose type is a number, bool or str (possibly constrained by :mod:`tshtrain.constraints`, possibly
``| None``), schedules, which a file names as ``"constant"`` or ``"linear"``, and enum fields, which a
file names by the member's value (``target_mode: mean``). The types come from
``typing.get_type_hints(cls, include_extras=True)`` (resolved once per class), and each is validated by
a pydantic ``TypeAdapter`` built from it (once per type) that applies the same rules as
:func:`tshtrain.constraints.validate_fields`: ints are ints (not bools, not 2.0), floats are finite (not
NaN, not ±inf, not bools), and a ``Constraint``'s bounds hold.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, TypeAdapter
from pydantic_core import PydanticCustomError

from tshtrain.algorithm.blocks.schedules import Schedule
from tshtrain.constraints import FieldCheck, describe_type

SCHEDULE_TYPE: Any = Literal["constant", "linear"] | None
"""what a file gives for a ``Schedule | None`` field"""

_SCALARS: tuple[type, ...] = (int, float, bool, str, types.NoneType)
_NOT_FROM_FILES = frozenset({"resume_from_log"})  # `tshtrain train --resume` covers resuming


@functools.cache
def _value_fields(cls: type) -> tuple[tuple[str, Any, Any], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    found: list[tuple[str, Any, Any]] = []
    for field in dataclasses.fields(cls):
        if field.name in _NOT_FROM_FILES or field.default is dataclasses.MISSING:
            continue
        hint = hints[field.name]
        if _is_schedule(hint):
            found.append((field.name, SCHEDULE_TYPE, None))
        elif isinstance(hint, type) and issubclass(hint, enum.Enum):
            found.append((field.name, Literal[tuple(m.value for m in hint)], field.default.value))
        elif describe_type(hint) is not None or all(leaf in _SCALARS for leaf in _leaves(hint)):
            found.append((field.name, hint, field.default))
    return tuple(found)


@functools.cache
def enum_fields(cls: type) -> dict[str, type[enum.Enum]]:
    """The enum-typed fields of a params dataclass: name -> enum class (a file gives the value)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(cls)
        if isinstance(hints[f.name], type) and issubclass(hints[f.name], enum.Enum)
    }


def value_fields(cls: type) -> dict[str, tuple[Any, Any]]:
    """The fields of a params dataclass that an experiment file can set: name -> (type, default).

    The type is the field's resolved type hint (``Annotated`` constraints kept); schedule fields get
    :data:`SCHEDULE_TYPE` and the default None (constant)."""
    return {name: (hint, default) for name, hint, default in _value_fields(cls)}


@functools.cache
def adapter(hint: Any) -> TypeAdapter[Any]:
    """The pydantic validator of a value-field type (see the module docstring)."""
    check = describe_type(hint)
    return TypeAdapter(hint if check is None else _number_type(check))


@functools.cache
def expected(hint: Any) -> str:
    """What a value-field type allows, for error messages: ``"an int >= 1 or None"``, ``"float"``."""
    check = describe_type(hint)
    if check is not None and check.constraint is not None:
        return check.allowed
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _number_type(check: FieldCheck) -> Any:
    kind: Any
    if check.kind is bool:
        kind = bool
    else:
        constraint = check.constraint
        bounds = (
            {}
            if constraint is None
            else {k: v for k in ("ge", "gt", "le") if (v := getattr(constraint, k)) is not None}
        )
        if check.kind is int:
            kind = Annotated[int, Field(strict=True, **bounds)]
        else:
            kind = Annotated[float, BeforeValidator(_finite_number), Field(allow_inf_nan=False, **bounds)]
    return kind | None if check.optional else kind


def _finite_number(value: Any) -> Any:
    """Refuse bools (which pydantic would take as 0 / 1) and NaN / ±inf before the bounds are checked
    (pydantic would report NaN as "not greater than 0")."""
    if isinstance(value, bool):
        raise PydanticCustomError("bool_number", "Input should be a number, not a bool")
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("finite_number", "Input should be a finite number")
    return value


def _leaves(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(leaf for arg in typing.get_args(hint) for leaf in _leaves(arg))
    return (hint,)


def _is_schedule(hint: Any) -> bool:
    return any(isinstance(leaf, type) and issubclass(leaf, Schedule) for leaf in _leaves(hint))
