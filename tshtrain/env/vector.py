"""Building and seeding Gymnasium vector environments.

tshtrain always runs vector envs in Gymnasium's **same-step** autoreset mode: when a sub-env ends an
episode, ``step()`` returns the *reset* observation in ``obs`` and the true final observation in
``info["final_obs"]``. The collector stores the final observation as ``obs_next`` of the last
transition, so a truncated episode bootstraps from its real last state, and no stored transition ever
spans two episodes. Gymnasium's default (next-step) mode instead returns the final observation and
performs the reset on the *following* step, which a naive loop records as a bogus transition; the
collector rejects envs in that mode with an error that says how to build them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeAlias

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState

from tshtrain.errors import ConfigurationError, require_positive

log = logging.getLogger(__name__)

EnvFactory: TypeAlias = Callable[[], gym.Env[Any, Any]]
"""A zero-argument callable that builds one (unwrapped or wrapped) Gymnasium env."""

WrapperFactory: TypeAlias = Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]
"""A callable that wraps one env, e.g. ``gymnasium.wrappers.TimeAwareObservation``."""


class VectorMode(Enum):
    """How sub-envs run."""

    SYNC = "sync"
    """in this process, one after the other (fastest for cheap envs such as CartPole)"""
    ASYNC = "async"
    """each in its own subprocess (for envs whose step costs more than inter-process messaging)"""


def make_vector_env(
    env: str | EnvFactory,
    num_envs: int,
    *,
    mode: VectorMode | str = VectorMode.SYNC,
    env_kwargs: Mapping[str, Any] | None = None,
    wrappers: Sequence[WrapperFactory] = (),
) -> gym.vector.VectorEnv[Any, Any, Any]:
    """Build a vector env in same-step autoreset mode.

    Args:
        env: a registered Gymnasium id such as ``"CartPole-v1"``, or a factory building one env.
        num_envs: number of sub-envs, > 0.
        mode: ``VectorMode.SYNC`` (in-process) or ``VectorMode.ASYNC`` (subprocesses), or their values.
        env_kwargs: keyword arguments for ``gymnasium.make`` (only with an id).
        wrappers: applied to every sub-env, in order.

    Returns:
        The vector env, not yet reset. Seed it with ``env.reset(seed=s)`` (sub-env ``i`` gets seed
        ``s + i``) or through ``Collector(..., seed=s)``, which does the same.
    """
    require_positive("make_vector_env", "num_envs", num_envs)
    try:
        mode = VectorMode(mode)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in VectorMode)
        raise ConfigurationError(f"make_vector_env: mode {mode!r} is not one of {allowed}.") from None
    factories = env_factories(env, num_envs, env_kwargs=env_kwargs, wrappers=wrappers)
    if mode is VectorMode.SYNC:
        return gym.vector.SyncVectorEnv(factories, autoreset_mode=AutoresetMode.SAME_STEP)
    return WorkerNamingAsyncVectorEnv(factories, autoreset_mode=AutoresetMode.SAME_STEP)


def env_factories(
    env: str | EnvFactory,
    num_envs: int,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    wrappers: Sequence[WrapperFactory] = (),
) -> list[EnvFactory]:
    """``num_envs`` factories of one env each, as :func:`make_vector_env` builds its sub-envs with (and
    :class:`tshtrain.env.ray_env.RayVectorEnv` in its workers); checked here, before any env is built.

    The factories pickle (with ``cloudpickle`` when ``env`` or a wrapper is a lambda or a closure) so that
    another process can build the envs; a Gymnasium id is looked up by name where the env is built.
    """
    require_positive("make_vector_env", "num_envs", num_envs)
    if env_kwargs and not isinstance(env, str):
        raise ConfigurationError("make_vector_env: env_kwargs can only be used with a Gymnasium id.")
    # "module:Env-v0" ids register their env when gymnasium.make imports the module: let make check them
    if isinstance(env, str) and ":" not in env:
        _require_registered(env)
    return [_EnvBuilder(env, dict(env_kwargs or {}), tuple(wrappers))] * num_envs


@dataclass(frozen=True)
class _EnvBuilder:
    """Builds one sub-env: ``gymnasium.make(env, **kwargs)`` (or ``env()``), then the wrappers."""

    env: str | EnvFactory
    kwargs: Mapping[str, Any]
    wrappers: tuple[WrapperFactory, ...]

    def __call__(self) -> gym.Env[Any, Any]:
        try:
            single = gym.make(self.env, **self.kwargs) if isinstance(self.env, str) else self.env()
        except (gym.error.DependencyNotInstalled, ImportError) as error:
            error.add_note(_missing_package_note(self.env, error))  # the CLI prints notes on its one line
            raise
        for wrap in self.wrappers:
            single = wrap(single)
        return single


def _require_registered(env_id: str) -> None:
    """Raise :class:`ConfigurationError` with Gymnasium's own explanation (``Did you mean: `CartPole`?``,
    the versions there are, ``Have you installed the proper package for ALE?``) unless ``env_id`` is
    registered; before any env is built, so the error is the first thing that goes wrong."""
    try:
        gym.spec(env_id)
    except gym.error.Error as error:
        raise ConfigurationError(f"make_vector_env: unknown Gymnasium id {env_id!r}: {error}") from None


def _missing_package_note(env: str | EnvFactory, error: BaseException) -> str:
    """The note added to an error that says a package is missing: which env needed it."""
    what = repr(env) if isinstance(env, str) else f"the env of {getattr(env, '__name__', repr(env))}"
    missing = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    package = f" (module {missing!r}; install the package that provides it)" if missing else ""
    return f"make_vector_env could not build {what} without it{package}"


class WorkerNamingAsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """Gymnasium's ``AsyncVectorEnv`` whose errors say which sub-env raised them.

    Gymnasium logs a failing worker's index and traceback at error level and re-raises a bare copy of the
    exception; this subclass raises the same copy with ``sub_env_index`` and ``worker_traceback``
    attributes set (what :func:`failing_sub_env` reads) and logs the traceback at debug level only, so
    that a command-line failure stays one line. Everything else is Gymnasium's own behaviour.
    """

    def _raise_if_errors(self, successes: Iterable[bool]) -> None:
        if all(successes):
            return
        num_errors = self.num_envs - sum(successes)
        for i in range(num_errors):
            index, exctype, value, trace = self.error_queue.get()
            log.debug("sub-env %d (async worker) failed and was shut down:\n%s", index, trace)
            self.parent_pipes[index].close()
            self.parent_pipes[index] = None  # type: ignore[call-overload]  # as Gymnasium does: a closed worker
            if i == num_errors - 1:
                self._state = AsyncState.DEFAULT
                error = exctype(value)
                error.sub_env_index = index
                error.worker_traceback = trace
                raise error


def failing_sub_env(env: gym.vector.VectorEnv[Any, Any, Any], error: BaseException) -> int | None:
    """The index of the sub-env whose ``step`` raised ``error`` inside ``env.step``, or None if it
    cannot be told (subprocess vector envs report the worker in their own log message).

    Only Gymnasium's ``SyncVectorEnv`` is understood: its ``step`` loops over the sub-envs with the
    index ``i``, which the traceback still holds. Costs nothing unless an error is being reported.
    """
    index = getattr(error, "sub_env_index", None)
    if isinstance(env, WorkerNamingAsyncVectorEnv) and isinstance(index, int):
        return index
    if not isinstance(env, gym.vector.SyncVectorEnv):
        return None
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code is _SYNC_STEP_CODE:
            below = tb.tb_next  # the call that raised must be the sub-env's step, not the batching after it
            index = frame.f_locals.get("i")
            if below is not None and below.tb_frame.f_code.co_name == "step" and isinstance(index, int):
                return index
            return None
        tb = tb.tb_next
    return None


_SYNC_STEP_CODE = gym.vector.SyncVectorEnv.step.__code__


def autoreset_mode(env: gym.vector.VectorEnv[Any, Any, Any]) -> AutoresetMode | None:
    """The autoreset mode a vector env declares in its metadata (None if it declares none)."""
    mode = env.metadata.get("autoreset_mode")
    return mode if isinstance(mode, AutoresetMode) else None


def require_same_step_autoreset(env: gym.vector.VectorEnv[Any, Any, Any]) -> None:
    """Raise a clear error unless ``env`` autoresets in the same step (see the module docstring)."""
    mode = autoreset_mode(env)
    if mode is not AutoresetMode.SAME_STEP:
        raise ConfigurationError(
            f"The vector env {type(env).__name__} autoresets in mode {mode}; tshtrain needs "
            f"AutoresetMode.SAME_STEP so that the final observation of an episode is stored correctly. "
            f"Build it with tshtrain.env.make_vector_env(...) or pass "
            f"autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP to the vector env."
        )
