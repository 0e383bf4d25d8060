"""The exception classes of tshtrain, all of them in this module (standard library only).

User input errors are ``ValueError`` / ``TypeError`` subclasses so that code catching the built-in
exceptions keeps working; their messages say what was given, what is allowed and how to fix it.

* :class:`ConfigurationError` (``ValueError``): a parameter, or a combination of parameters, is not
  allowed; raised when params classes, components and functions are built or called.
* :class:`ExperimentError` (a ``ConfigurationError``): an experiment file, a ``--set`` override or the
  experiment they make is not valid (:mod:`tshtrain.config`, ``tshtrain train``).
* :class:`RunDirectoryError` (a ``ConfigurationError``): an output directory a run may not use: foreign
  content, no run marker, or locked by a running process (:mod:`tshtrain.rundir`).
* :class:`UnsupportedSpaceError` (``TypeError``): a Gymnasium space tshtrain cannot store or act in
  (building buffers, collectors, policies).
* :class:`BufferFormatError` (``ValueError``): a saved buffer or dataset that cannot be read: wrong
  format version, truncated, corrupt or hostile (``load_buffer``, ``load_buffer_into``, Minari import).
* :class:`CheckpointError` (``ValueError``): a checkpoint that cannot be read (missing, truncated,
  corrupted, another format version, hostile) or does not fit the trainer (``load_checkpoint``).
* :class:`PolicyOutputError` (``ValueError``): a policy returned actions of the wrong shape or outside
  the action space (``Collector(check_actions=True)``).
* :class:`EnvStepError` (``FloatingPointError``): a sub-env returned a NaN / inf observation or reward
  (``Collector(check_finite=True)``).
* :class:`EpisodeLimitError` (``RuntimeError``): episode collection (a test step) took its bound of env
  steps without finishing its episodes (``Collector.collect(max_env_steps=...)``).
* :class:`NonFiniteLossError` (``FloatingPointError``): a loss became NaN or infinite in an algorithm's
  ``update``.
* :class:`LoggerError` (``RuntimeError``): a logger failed while training ran.
* :class:`ParallelWorkerError` (``RuntimeError``): a worker process of a multi-agent algorithm's
  parallel update mode died, or was used after it was closed.
* :class:`EnvWorkerError` (``RuntimeError``): a Ray actor holding sub-envs
  (:class:`tshtrain.env.ray_env.RayVectorEnv`) died or did not answer in time.
* :class:`DistributedRunError` (``RuntimeError``): another rank of a data-parallel run failed (its
  error is in the message), or a collective timed out (:mod:`tshtrain.distributed`).

Not here: :class:`tshtrain.trainer.StopTraining`, which callbacks raise to end training cleanly, is a
control-flow signal, not an error.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any


class ConfigurationError(ValueError):
    """A parameter, or a combination of parameters, is not allowed."""


class ExperimentError(ConfigurationError):
    """An experiment file, a ``--set`` override or the experiment they make is not valid."""


class RunDirectoryError(ConfigurationError):
    """An output directory that a run may not use: foreign content, no marker, or locked by a run."""


class UnsupportedSpaceError(TypeError):
    """A Gymnasium space that tshtrain cannot store or act in."""


class BufferFormatError(ValueError):
    """A buffer or checkpoint file that cannot be read: wrong format version, truncated or corrupt."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: missing, truncated, corrupted, or of another format version."""


class PolicyOutputError(ValueError):
    """A policy returned actions of the wrong shape, or outside the action space."""


class EpisodeLimitError(RuntimeError):
    """Episode collection took ``max_env_steps`` env steps without finishing its episodes (e.g. an env
    that never terminates or truncates); raised by ``Collector.collect(n_episode=..., max_env_steps=...)``
    and so by test steps (``TrainerParams.test_step_max_env_steps``)."""


class EnvStepError(FloatingPointError):
    """A sub-env returned a NaN / inf observation or reward (checked by ``Collector(check_finite=True)``).

    The message names the sub-env, the collector's env step and the field. (An exception raised by a
    sub-env's ``step`` keeps its type; the collector adds a note naming the sub-env.)"""

    def __init__(self, message: str, *, env_index: int, env_step: int, field: str):
        super().__init__(message)
        self.env_index = env_index
        """the sub-env that returned the value"""
        self.env_step = env_step
        """env steps the collector had taken (since its stats reset) before that vector step"""
        self.field = field
        """``"obs"``, ``"obs/KEY"`` (dict observations) or ``"rew"``"""


class NonFiniteLossError(FloatingPointError):
    """A loss became NaN or infinite; the message names the algorithm and the loss."""


class ParallelWorkerError(RuntimeError):
    """A worker process of ``update_mode="parallel"`` died (named with its learner and exit code), or
    the workers were used after they were closed."""


class EnvWorkerError(RuntimeError):
    """A Ray actor holding sub-envs (``tshtrain.env.ray_env.RayVectorEnv``) died or did not answer
    within its timeout; the message names the worker, its sub-envs and the env."""


class DistributedRunError(RuntimeError):
    """Another rank of a data-parallel run failed (its rank and error are in the message), or a
    collective did not complete within the process group's timeout."""


class LoggerError(RuntimeError):
    """A logger failed while training ran (disk full, a closed file, a writer's own error).

    The trainer stops with this error after closing the logger; checkpoints written so far are intact,
    and the run can be resumed with ``resume_from_log=True``.
    """


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
        raise ConfigurationError(f"{owner}.{field} must be a positive number, got {short_repr(value)}.")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 200
_REPR.maxlevel = 3


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to at most ``limit`` characters, for error messages about user input.

    Huge strings, lists and deeply nested values give a short prefix ending in ``...`` and the length
    that was cut (``'aaaa...' (1000000 chars)``); a value whose ``repr`` raises gives its type name.
    Never raises, never recurses without bound.
    """
    if isinstance(value, int) and value.bit_length() > 256:
        return f"<int of {value.bit_length()} bits>"  # repr of a huge int is slow or refused
    try:
        text = _REPR.repr(value)
    except Exception:  # a broken __repr__ must not hide the error being reported
        text = f"<{type(value).__name__} object>"
    if len(text) <= limit:
        return text
    size = _size_hint(value)
    suffix = f"... ({size})" if size else "..."
    return text[: max(limit - len(suffix), 1)] + suffix


def _size_hint(value: Any) -> str:
    if isinstance(value, str | bytes):
        return f"{len(value)} chars" if isinstance(value, str) else f"{len(value)} bytes"
    if isinstance(value, list | tuple | dict | set | frozenset):
        return f"{len(value)} items"
    return ""
