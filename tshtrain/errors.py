"""The few exception classes of tshtrain.

User input errors are ``ValueError`` / ``TypeError`` subclasses so that code catching the built-in
exceptions keeps working; their messages say what was given, what is allowed and how to fix it.
"""

from __future__ import annotations

import math


class ConfigurationError(ValueError):
    """A parameter, or a combination of parameters, is not allowed."""


class UnsupportedSpaceError(TypeError):
    """A Gymnasium space that tshtrain cannot store or act in."""


class BufferFormatError(ValueError):
    """A buffer or checkpoint file that cannot be read: wrong format version, truncated or corrupt."""


class PolicyOutputError(ValueError):
    """A policy returned actions of the wrong shape, or outside the action space."""


def require_positive(owner: str, field: str, value: int | float) -> None:
    """Raise ``ConfigurationError`` unless ``value`` is a finite number > 0 (not a bool).

    For function arguments; dataclass fields declare ``PositiveInt`` / ``PositiveFloat`` from
    :mod:`tshtrain.constraints` instead and are checked by ``validate_fields``.

    Args:
        owner: the class or function the field belongs to, e.g. ``"TrainerParams"``.
        field: the field name.
        value: the given value.
    """
    try:
        allowed = not isinstance(value, bool) and value > 0 and math.isfinite(value)
    except TypeError:  # not a number at all
        allowed = False
    if not allowed:
        text = repr(value)
        text = text if len(text) <= 80 else text[:77] + "..."
        raise ConfigurationError(f"{owner}.{field} must be a positive number, got {text}.")
