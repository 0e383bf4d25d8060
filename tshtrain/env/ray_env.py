"""A Gymnasium vector env whose sub-envs live in Ray actors (the ``ray`` extra).

:class:`RayVectorEnv` splits its sub-envs into ``num_workers`` contiguous groups; each group lives in one
Ray actor (a *worker*) that builds its envs from picklable factories
(:func:`tshtrain.env.vector.env_factories`: a Gymnasium id is looked up by name in the worker, nothing is
imported from a path). A vector step is
one remote call per worker, gathered with a timeout. The results are what Gymnasium's ``SyncVectorEnv``
in same-step autoreset mode gives for the same seeds: the reset observation in ``obs``, the episode's
true last observation and info in ``info["final_obs"]`` / ``info["final_info"]``, the info of every
sub-env merged with the same masks, and ``reset(seed=s)`` seeding sub-env ``i`` with ``s + i``.

Where Ray runs: if Ray is initialised in this process, that instance is used as it is; otherwise
``address`` connects to an existing cluster (``ray.init(address=...)``, e.g. ``"auto"`` or
``"ray://head:10001"``), and without one tshtrain starts a local instance with ``ray.init(num_cpus=...,
include_dashboard=False)``, listening on 127.0.0.1 only (see :data:`LOOPBACK_ONLY`). Usage statistics
are switched off (``RAY_USAGE_STATS_ENABLED=0`` unless the environment says otherwise). Closing the env
kills its actors; an instance tshtrain started stays up until the process ends (other envs may use it)
or until ``ray.shutdown()``.

A dead or silent worker (its actor died, or a call took longer than ``timeout_s``) either fails the run
with :class:`~tshtrain.errors.EnvWorkerError` naming the worker, its sub-envs and the env
(``on_worker_failure="raise"``, the default: data never changes silently), or is replaced
(``"restart"``): a new actor builds the worker's envs again and resets them (unseeded); in the vector step
that saw the failure, each of the worker's sub-envs reports a truncated episode with reward 0, its last
known observation as ``final_obs`` and ``final_info["worker_restarted"] = True``, and the reset
observation in ``obs``. An exception raised by an env's own code is not a worker failure: it is
re-raised as itself, with the sub-env's index (``sub_env_index``), a note and the worker's traceback
(``worker_traceback``), as the subprocess vector env does.

Checkpoints: the sub-envs live in other processes and are not snapshotted; a resumed run resets them
(unseeded), and the episodes that were running end in the buffer marked truncated, as with
``env.vector: async`` (see ``Collector.restore_env_snapshot``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Literal, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from tshtrain.env.vector import EnvFactory
from tshtrain.errors import ConfigurationError, EnvWorkerError, require_positive

log = logging.getLogger(__name__)

OnWorkerFailure = Literal["raise", "restart"]
"""what :class:`RayVectorEnv` does when a worker dies or does not answer in time"""

RAY_EXTRA_HINT = "install it with: pip install 'tshtrain[ray]'"


LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (read once, when ``ray`` is imported) between a single-machine instance on 127.0.0.1
("0") and one on the machine's network address, reachable by other nodes (Linux's default). Ray has no
authentication, so the local instance tshtrain starts listens on loopback only, unless the environment
sets this variable or ``ray`` was imported before (then Ray's own default holds)."""


def require_ray(where: str) -> ModuleType:
    """The ``ray`` module, or :class:`ConfigurationError` naming ``where`` and the extra to install."""
    try:
        import ray
    except ImportError:
        raise ConfigurationError(f"{where} needs Ray, which is not installed; {RAY_EXTRA_HINT}") from None
    return ray


def connect_ray(*, address: str | None = None, num_cpus: int | None = None) -> None:
    """Make sure this process is connected to Ray (see the module docstring).

    Args:
        address: an existing cluster (``ray.init(address=address)``); None: start a local instance.
        num_cpus: the local instance's logical CPUs (None: Ray counts them); ignored with ``address``.
    """
    if address is None and "ray" not in sys.modules:
        os.environ.setdefault(LOOPBACK_ONLY, "0")  # read when ray is imported: see LOOPBACK_ONLY
    ray = require_ray("RayVectorEnv")
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no report to Ray's servers
    if address is not None:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING)


class WorkerStep(NamedTuple):
    """What a worker returns for one vector step of its sub-envs."""

    obs: list[Any]
    """the next observation of every sub-env (the reset one where an episode ended)"""
    rew: list[float]
    terminated: list[bool]
    truncated: list[bool]
    infos: list[dict[str, Any]]
    """each sub-env's info (of its reset where an episode ended)"""
    finals: list[tuple[Any, dict[str, Any]] | None]
    """``(final_obs, final_info)`` where an episode ended, else None"""


class EnvWorker:
    """The sub-envs ``first_index, first_index + 1, ...`` of a :class:`RayVectorEnv`, in one process
    (the class that becomes a Ray actor; usable directly for tests)."""

    def __init__(self, env_fns: Sequence[EnvFactory], first_index: int):
        self.first_index = first_index
        self.envs = [fn() for fn in env_fns]

    def describe(self) -> tuple[gym.Space[Any], gym.Space[Any], dict[str, Any], str | None, Any]:
        """(observation space, action space, metadata, render mode, spec) of the first sub-env, after
        checking that every other sub-env has the same spaces."""
        first = self.envs[0]
        for k, env in enumerate(self.envs[1:], start=1):
            if env.observation_space != first.observation_space or env.action_space != first.action_space:
                raise ConfigurationError(
                    f"RayVectorEnv: sub-env {self.first_index + k} has other spaces than sub-env "
                    f"{self.first_index} ({env.observation_space} / {env.action_space} vs "
                    f"{first.observation_space} / {first.action_space}); every sub-env needs the same"
                )
        return (
            first.observation_space,
            first.action_space,
            dict(first.metadata),
            first.render_mode,
            first.spec,
        )

    def reset(
        self, seeds: Sequence[int | None], options: dict[str, Any] | None, mask: Sequence[bool]
    ) -> tuple[list[Any], list[dict[str, Any] | None]]:
        """Reset the sub-envs where ``mask`` is True; (observations, infos) of those, None elsewhere."""
        obs: list[Any] = []
        infos: list[dict[str, Any] | None] = []
        for k, (env, seed, chosen) in enumerate(zip(self.envs, seeds, mask, strict=True)):
            if not chosen:
                obs.append(None)
                infos.append(None)
                continue
            try:
                o, info = env.reset(seed=seed, options=options)
            except Exception as error:
                raise self._named(error, k, "reset") from None
            obs.append(o)
            infos.append(info)
        return obs, infos

    def step(self, actions: Sequence[Any]) -> WorkerStep:
        """One step of every sub-env; an ended episode resets in the same step."""
        result = WorkerStep([], [], [], [], [], [])
        for k, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            try:
                obs, rew, terminated, truncated, info = env.step(action)
                final = None
                if terminated or truncated:
                    final = (obs, info)
                    obs, info = env.reset()
            except Exception as error:
                raise self._named(error, k, "step") from None
            result.obs.append(obs)
            result.rew.append(float(rew))
            result.terminated.append(bool(terminated))
            result.truncated.append(bool(truncated))
            result.infos.append(info)
            result.finals.append(final)
        return result

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """``env.get_wrapper_attr(name)(*args, **kwargs)`` (or the attribute's value) for every sub-env."""
        found = [env.get_wrapper_attr(name) for env in self.envs]
        return [value(*args, **kwargs) if callable(value) else value for value in found]

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        """``env.set_wrapper_attr(name, value)`` for every sub-env and its value."""
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close(self) -> None:
        """Close every sub-env."""
        for env in self.envs:
            env.close()

    def _named(self, error: Exception, k: int, what: str) -> Exception:
        index = self.first_index + k
        error.add_note(
            f"raised by the {what} of sub-env {index} in a RayVectorEnv worker (pid {os.getpid()})"
        )
        error.sub_env_index = index  # type: ignore[attr-defined]  # read as WorkerNamingAsyncVectorEnv's
        return error


def worker_slices(num_envs: int, num_workers: int) -> list[range]:
    """The sub-envs of each worker: contiguous, sizes differing by at most one, larger ones first."""
    base, extra = divmod(num_envs, num_workers)
    slices, start = [], 0
    for w in range(num_workers):
        size = base + (1 if w < extra else 0)
        slices.append(range(start, start + size))
        start += size
    return slices


class RayVectorEnv(gym.vector.VectorEnv[Any, Any, Any]):
    """A same-step-autoreset vector env whose sub-envs live in Ray actors (see the module docstring).

    Build it with the factories of :func:`tshtrain.env.vector.env_factories` (or any picklable
    zero-argument callables) and hand it to a :class:`~tshtrain.data.Collector` like a ``SyncVectorEnv``.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFactory],
        *,
        num_workers: int | None = None,
        address: str | None = None,
        num_cpus: int | None = None,
        num_cpus_per_worker: float | None = None,
        on_worker_failure: OnWorkerFailure = "raise",
        timeout_s: float = 60.0,
    ):
        """Args:
        env_fns: one picklable factory per sub-env.
        num_workers: Ray actors, each holding a contiguous group of sub-envs (1 to ``len(env_fns)``);
            None: one per sub-env, at most the instance's CPUs.
        address: connect to this existing cluster unless Ray is initialised already; None: start a local
            instance (see :func:`connect_ray`).
        num_cpus: the logical CPUs of a local instance tshtrain starts (None: all).
        num_cpus_per_worker: CPUs each actor reserves. None: Ray's actor default (needs a node with a CPU
            to be placed, holds none while running: any number of workers fit, e.g. the training and
            test envs of a run on a 2-CPU instance). A number reserves them, which spreads workers over a
            cluster's nodes; then the instance must have them free, or this raises.
        on_worker_failure: ``"raise"`` (default) or ``"restart"``; see the module docstring.
        timeout_s: how long a reset, step or call may take in a worker before it counts as failed.
        """
        if not env_fns:
            raise ConfigurationError("RayVectorEnv: env_fns is empty; give one factory per sub-env")
        if on_worker_failure not in ("raise", "restart"):
            raise ConfigurationError(
                f"RayVectorEnv: on_worker_failure {on_worker_failure!r} is not one of 'raise', 'restart'"
            )
        require_positive("RayVectorEnv", "timeout_s", timeout_s)
        self._ray = ray = require_ray("RayVectorEnv")
        connect_ray(address=address, num_cpus=num_cpus)
        if num_workers is None:
            num_workers = max(1, min(len(env_fns), int(ray.cluster_resources().get("CPU", 1))))
        if not 1 <= num_workers <= len(env_fns):
            raise ConfigurationError(
                f"RayVectorEnv: num_workers {num_workers} is not between 1 and the number of sub-envs "
                f"({len(env_fns)})"
            )
        self.env_fns = list(env_fns)
        self.num_envs = len(env_fns)
        self.slices = worker_slices(self.num_envs, num_workers)
        """the sub-envs of each worker"""
        self.on_worker_failure: OnWorkerFailure = on_worker_failure
        self.timeout_s = timeout_s
        self.num_restarts = 0
        """workers replaced so far (``on_worker_failure="restart"``)"""
        self._actor_cls = ray.remote(EnvWorker)  # once: every worker (and restart) reuses it
        self._actor_options: dict[str, Any] = {"scheduling_strategy": "SPREAD", "max_restarts": 0}
        if num_cpus_per_worker is not None:
            self._require_cpus(num_cpus_per_worker * num_workers)
            self._actor_options["num_cpus"] = num_cpus_per_worker
        self.env_name = "the env"
        self.workers: list[Any] = []
        """the Ray actor handles, one per worker (``ray.kill(env.workers[w])`` simulates a crash)"""
        try:
            self.workers = [self._start_worker(w) for w in range(num_workers)]
            described = self._gather([worker.describe.remote() for worker in self.workers], "describe")
        except BaseException:
            self.close_extras()
            raise
        self._setup_spaces(described)
        self._env_obs: list[Any] = [None] * self.num_envs

    # ------------------------------------------------------------------ building
    def _require_cpus(self, needed: float) -> None:
        free = float(self._ray.available_resources().get("CPU", 0.0))
        if needed > free:
            raise ConfigurationError(
                f"RayVectorEnv: {needed:g} CPUs needed (num_workers x num_cpus_per_worker) but the Ray "
                f"instance has {free:g} free; use fewer workers, num_cpus_per_worker None or smaller, or a "
                f"larger instance"
            )

    def _start_worker(self, w: int) -> Any:
        actor_cls = self._actor_cls.options(**self._actor_options)
        part = self.slices[w]
        return actor_cls.remote([self.env_fns[i] for i in part], part.start)

    def _setup_spaces(self, described: list[Any]) -> None:
        obs_space, act_space, metadata, render_mode, spec = described[0]
        for w, (other_obs, other_act, *_) in enumerate(described[1:], start=1):
            if other_obs != obs_space or other_act != act_space:
                raise ConfigurationError(
                    f"RayVectorEnv: worker {w}'s sub-envs have other spaces ({other_obs} / {other_act}) "
                    f"than worker 0's ({obs_space} / {act_space}); every sub-env needs the same"
                )
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = render_mode
        self.spec = spec
        self.env_name = repr(spec.id) if spec is not None else "the env"

    # ------------------------------------------------------------------ the vector env API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-envs; ``seed=s`` seeds sub-env ``i`` with ``s + i`` (a list: one seed per
        sub-env), ``options["reset_mask"]`` resets only the sub-envs where it is True (as Gymnasium's
        vector envs do)."""
        seeds = _seed_list(seed, self.num_envs)
        options = dict(options) if options is not None else None
        mask = np.ones(self.num_envs, dtype=bool)
        if options is not None and "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"), dtype=bool)
            if mask.shape != (self.num_envs,):
                raise ValueError(
                    f"options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}"
                )
        calls = {
            w: (part, [seeds[i] for i in part], [bool(mask[i]) for i in part])
            for w, part in enumerate(self.slices)
            if mask[part.start : part.stop].any()
        }
        refs = [self.workers[w].reset.remote(s, options, m) for w, (_, s, m) in calls.items()]
        results = self._gather(refs, "reset", list(calls))
        infos: dict[str, Any] = {}
        for (w, (part, s, m)), result in zip(calls.items(), results, strict=True):
            # a restarted worker: reset again, with the seeds asked for
            done = (
                result
                if result is not None
                else self._get(self.workers[w].reset.remote(s, options, m), w, "reset")
            )
            for i, obs, info in zip(part, *done, strict=True):
                if info is not None:
                    self._env_obs[i] = obs
                    infos = self._add_info(infos, info, i)
        return self._batched_obs(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every sub-env: one remote call per worker (see the module docstring)."""
        per_env = list(iterate(self.action_space, actions))
        refs = [
            worker.step.remote(per_env[part.start : part.stop])
            for worker, part in zip(self.workers, self.slices, strict=True)
        ]
        results = self._gather(refs, "step", list(range(len(self.workers))))
        rew = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for w, (part, gathered) in enumerate(zip(self.slices, results, strict=True)):
            result: WorkerStep = gathered if gathered is not None else self._restarted_step(w)
            rew[part.start : part.stop] = result.rew
            terminated[part.start : part.stop] = result.terminated
            truncated[part.start : part.stop] = result.truncated
            for i, obs, info, final in zip(part, result.obs, result.infos, result.finals, strict=True):
                if final is not None:
                    infos = self._add_info(infos, {"final_obs": final[0], "final_info": final[1]}, i)
                infos = self._add_info(infos, info, i)
                self._env_obs[i] = obs
        return self._batched_obs(), rew, terminated, truncated, infos

    def render(self) -> tuple[Any, ...]:
        """The frames of the sub-envs' ``render()``."""
        return self.call("render")

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """A method's results (or an attribute's values) of every sub-env, in order."""
        refs = [worker.call.remote(name, args, kwargs) for worker in self.workers]
        results = self._gather(refs, f"call of {name!r}", list(range(len(self.workers))))
        return tuple(value for worker_values in results for value in worker_values)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """An attribute of every sub-env."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set an attribute of every sub-env (a list or tuple: one value per sub-env)."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr: {len(values)} values for {self.num_envs} sub-envs")
        refs = [
            worker.set_attr.remote(name, list(values[p.start : p.stop]))
            for worker, p in zip(self.workers, self.slices, strict=True)
        ]
        self._gather(refs, f"set_attr of {name!r}", list(range(len(self.workers))))

    def close_extras(self, **kwargs: Any) -> None:
        """Close the sub-envs (briefly waited for) and kill the actors."""
        ray = self._ray
        if not ray.is_initialized():  # Ray shut down first: the actors are gone with it
            self.workers = []
            return
        refs = [worker.close.remote() for worker in self.workers]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=min(self.timeout_s, 5.0))
        for worker in self.workers:
            ray.kill(worker, no_restart=True)
        self.workers = []

    # ------------------------------------------------------------------ gathering and failures
    def _batched_obs(self) -> Any:
        out: Any = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, self._env_obs, out)

    def _gather(self, refs: list[Any], what: str, workers: list[int] | None = None) -> list[Any]:
        """The results of ``refs`` (one per worker of ``workers``, default all); None for a worker that
        failed and was restarted. An env's own exception is re-raised as itself."""
        workers = list(range(len(refs))) if workers is None else workers
        if not refs:
            return []
        _, pending = self._ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
        results: list[Any] = []
        for w, ref in zip(workers, refs, strict=True):
            if ref in pending:
                self._worker_failed(w, what, f"did not answer within timeout_s={self.timeout_s:g} s")
                results.append(None)
                continue
            try:
                results.append(self._ray.get(ref))
            except self._ray.exceptions.RayActorError as error:
                self._worker_failed(w, what, f"died ({type(error).__name__})")
                results.append(None)
            except self._ray.exceptions.RayTaskError as error:
                raise _env_error(error) from None
        return results

    def _get(self, ref: Any, w: int, what: str) -> Any:
        """One call's result after a restart: a second failure raises whatever the option."""
        try:
            return self._ray.get(ref, timeout=self.timeout_s)
        except self._ray.exceptions.RayTaskError as error:
            raise _env_error(error) from None
        except (self._ray.exceptions.RayActorError, self._ray.exceptions.GetTimeoutError) as error:
            raise EnvWorkerError(
                f"{self._who(w)} failed again in its {what} right after a restart"
            ) from error

    def _who(self, w: int) -> str:
        part = self.slices[w]
        return f"RayVectorEnv worker {w} (sub-envs {part.start}-{part.stop - 1} of {self.env_name})"

    def _worker_failed(self, w: int, what: str, how: str) -> None:
        """Raise :class:`EnvWorkerError`, or (``restart``) replace the worker's actor."""
        if self.on_worker_failure == "raise":
            raise EnvWorkerError(
                f"{self._who(w)} {how} in a {what}; the run stops (on_worker_failure='raise'). With "
                f"on_worker_failure='restart' the worker is replaced and its episodes end truncated."
            )
        log.warning("%s %s in a %s; restarting it (its episodes end truncated)", self._who(w), how, what)
        self._ray.kill(self.workers[w], no_restart=True)
        self.workers[w] = self._start_worker(w)
        self.num_restarts += 1

    def _restarted_step(self, w: int) -> WorkerStep:
        """The step of a restarted worker's sub-envs: truncated episodes, the new envs reset."""
        part = self.slices[w]
        size = len(part)
        obs, infos = self._get(self.workers[w].reset.remote([None] * size, None, [True] * size), w, "reset")
        finals: list[tuple[Any, dict[str, Any]] | None] = [
            (self._env_obs[i], {"worker_restarted": True}) for i in part
        ]
        return WorkerStep(obs, [0.0] * size, [False] * size, [True] * size, infos, finals)


def _seed_list(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, int | np.integer):
        return [int(seed) + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"reset: {len(seeds)} seeds for {num_envs} sub-envs; give one per sub-env or an int")
    return seeds


def _env_error(error: Any) -> BaseException:
    """The exception an env raised in a worker (with ``worker_traceback``), out of Ray's wrapper."""
    cause = getattr(error, "cause", None)
    if not isinstance(cause, BaseException):
        return error if isinstance(error, BaseException) else RuntimeError(str(error))
    log.debug("a RayVectorEnv worker raised:\n%s", error)
    cause.worker_traceback = str(error)  # type: ignore[attr-defined]  # as WorkerNamingAsyncVectorEnv
    return cause
