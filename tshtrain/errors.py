"""The few exception classes of tshtrain.

User input errors are ``ValueError`` / ``TypeError`` subclasses so that code catching the built-in
exceptions keeps working; their messages say what was given, what is allowed and how to fix it.
"""

from __future__ import annotations


class ConfigurationError(ValueError):
    """A parameter, or a combination of parameters, is not allowed."""


class UnsupportedSpaceError(TypeError):
    """A Gymnasium space that tshtrain cannot store or act in."""


class BufferFormatError(ValueError):
    """A buffer or checkpoint file that cannot be read: wrong format version, truncated or corrupt."""


class PolicyOutputError(ValueError):
    """A policy returned actions of the wrong shape, or outside the action space."""


def require_positive(owner: str, field: str, value: int | float) -> None:
    """Raise ``ConfigurationError`` unless ``value`` > 0.

    Args:
        owner: the class or function the field belongs to, e.g. ``"TrainerParams"``.
        field: the field name.
        value: the given value.
    """
    if isinstance(value, bool) or not value > 0:
        raise ConfigurationError(f"{owner}.{field} must be a positive number, got {value!r}.")
