"""Parallel update mode of multi-agent on-policy algorithms: each trainable learner's update runs in its
own worker process (skrl's Parallel trainer, for the updates only).

:class:`ParallelUpdater` keeps one persistent worker process per trainable learner, started at the
first update and stopped by :meth:`ParallelUpdater.close` (``MultiAgentOnPolicy.close``; a
``weakref.finalize`` stops the workers when the updater is collected or the interpreter exits). Env
stepping, acting, the buffer, logging and the trainer stay in the main process; a training step sends
every worker its learner's columns of the rollout, the workers update at the same time, and the step
joins them.

Who owns what while the workers run:

================================  ============================================================
weights and buffers of the        shared memory (``share_memory_()``): the worker's optimizer
algorithm's modules (policy,      steps write them in place, so the main process acts with the
critic, normaliser, ...)          new weights right after the join, without a copy
optimizer, schedules, update      the worker; the main process's copies are stale until
counter, the algorithm's          :meth:`ParallelUpdater.close` loads the workers' states back
generators and extra state        (``state_dict()`` asks the workers, ``load_state_dict()``
                                  pushes to them)
the policy's generators           handed over: sent to the worker with each update and returned
                                  with its stats, so acting and updating draw one stream, as in
                                  the sequential mode
================================  ============================================================

Rollouts are copied once per training step into shared CPU staging tensors (reused while the
rollout's shape stays the same); each worker selects its columns (views) and rebuilds the rollout in
the type it was given (numpy arrays or tensors), so a learner's update sees the same values as in the
sequential mode and, learners sharing nothing, computes the same weights bit for bit.

Limits, each checked with a :class:`~tshtrain.errors.ConfigurationError`: CPU learners only (CUDA
tensors could travel by CUDA IPC, but nothing here is tested on a GPU); learners must not share
parameters (two processes would write them at the same time); the trainer's update hooks
(``on_sampled_batch``, ``on_loss``, ``on_optimizer_step`` callbacks) cannot reach into worker processes.

Start method (:attr:`ParallelParams.start_method`): ``forkserver`` by default. ``fork`` starts fastest
and needs nothing picklable, but forking a process whose OpenMP thread pool has run can deadlock the
child's first parallel region, and forking a multi-threaded process is unsafe in general; ``spawn``
and ``forkserver`` start clean processes and pickle the learner's algorithm (``torch.Generator`` is
picklable since torch 2.x). ``forkserver`` forks each worker from a server process that imported
torch and tshtrain once, so workers after the first start in milliseconds instead of seconds. Scripts
using ``spawn`` / ``forkserver`` need the usual ``if __name__ == "__main__":`` guard.
Each worker runs ``torch.set_num_threads(ParallelParams.num_threads)`` (1: one core per learner, no
oversubscription), ignores SIGINT (the main process handles Ctrl-C and stops the workers) and mirrors
the main process's ``torch.set_flush_denormal`` setting at every update.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import multiprocessing
import multiprocessing.connection
import pickle
import signal
import time
import traceback
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any, Literal, NamedTuple, NoReturn, Protocol, TypeAlias, final

import numpy as np
import torch
import torch.multiprocessing  # registers the reductions that send tensors by shared memory
from torch import nn

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    Algorithm,
    OnPolicyAlgorithm,
    Policy,
    TrainingStats,
    UpdateHooks,
    generator_states,
    load_generator_states,
)
from tshtrain.constraints import PositiveFloat, PositiveInt, validate_fields
from tshtrain.data.batch import AnyRolloutBatch, RolloutBatch, TensorRolloutBatch
from tshtrain.errors import ConfigurationError, ParallelWorkerError

StartMethod: TypeAlias = Literal["forkserver", "spawn", "fork"]
"""how worker processes start (see the module docstring)"""


class ParallelLearner(Protocol):
    """What :class:`ParallelUpdater` needs of a learner (``tshtrain.algorithm.multi_agent.Learner``)."""

    @property
    def name(self) -> str:
        """the learner's name (its worker's, its stats' and its state's key)"""

    @property
    def algorithm(self) -> Algorithm[Any, Any] | None:
        """the learner's algorithm (on-policy, for a worker)"""

    @property
    def policy(self) -> Policy:
        """the learner's policy (``algorithm.policy``)"""

    def columns(self, scale: int) -> slice:
        """the learner's columns in a rollout with ``scale`` columns per unit"""


@final
@dataclasses.dataclass(frozen=True, kw_only=True)
class ParallelParams:
    """How the worker processes of ``update_mode="parallel"`` run."""

    start_method: StartMethod = "forkserver"
    """``forkserver`` (default), ``spawn`` or ``fork``; see the module docstring"""
    num_threads: PositiveInt = 1
    """``torch.set_num_threads`` in each worker: 1 gives each learner one core"""
    shutdown_timeout_s: PositiveFloat = 10.0
    """how long :meth:`ParallelUpdater.close` waits for a worker to exit before terminating it"""
    reply_timeout_s: PositiveFloat | None = None
    """how long the main process waits for a worker's reply (an update, a state) before it stops every
    worker and raises :class:`~tshtrain.errors.ParallelWorkerError`; None: as long as the worker lives (a
    worker that dies is always reported at once)"""

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.start_method not in ("forkserver", "spawn", "fork"):
            raise ConfigurationError(
                f"ParallelParams.start_method must be 'forkserver', 'spawn' or 'fork', got "
                f"{self.start_method!r}."
            )


# ---------------------------------------------------------------------- messages
_FIELDS = ("obs", "act", "rew", "terminated", "truncated", "obs_next", "boundary", "valid")


class _Rollout(NamedTuple):
    """A rollout's fields as shared CPU tensors (Dict observations as ``obs/KEY``); None: the tensors
    the worker received last (same staging version)."""

    version: int
    tensors: dict[str, torch.Tensor] | None
    numpy: bool
    num_valid: int


class _Update(NamedTuple):
    rollout: _Rollout
    columns: slice
    batch_size: int | None
    num_repetitions: int
    policy_generators: dict[str, Any]
    flush_denormal: bool


class _GetState(NamedTuple):
    policy_generators: dict[str, Any]


class _LoadState(NamedTuple):
    state: Mapping[str, Any]


class _Close(NamedTuple):
    pass


_Request: TypeAlias = _Update | _GetState | _LoadState | _Close


class _Reply(NamedTuple):
    value: Any
    error: BaseException | None = None
    traceback: str = ""


class _RemoteTracebackError(Exception):
    """Carries a worker's traceback as the ``__cause__`` of the error re-raised in the main process."""

    def __str__(self) -> str:
        return str(self.args[0])


def _rebuild_generator(device: str, state: bytes) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))
    return generator


def _reduce_generator(generator: torch.Generator) -> tuple[Any, tuple[str, bytes]]:
    return _rebuild_generator, (str(generator.device), generator.get_state().numpy().tobytes())


class _Pickler(ForkingPickler):
    """torch.multiprocessing's pickler (tensors travel through shared memory) that sends generators
    by value: their default reduction makes a temporary state tensor whose shared-memory file would
    close before a spawned worker opens it."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.dispatch_table[torch.Generator] = _reduce_generator


def _dumps(obj: object) -> memoryview:
    buffer = io.BytesIO()
    _Pickler(buffer).dump(obj)
    return buffer.getbuffer()


def _send(conn: multiprocessing.connection.Connection, obj: object, *, shared: bool = False) -> None:
    """Send ``obj``: its tensors through shared memory (``shared``: the algorithm's weights, the
    rollout) or by value (stats, states: a state is a snapshot, as in the sequential mode)."""
    conn.send_bytes(_dumps(obj) if shared else pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


def _recv(conn: multiprocessing.connection.Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


def _portable(states: Mapping[str, Any]) -> dict[str, Any]:
    """Generator states with torch state tensors as numpy arrays (sent by value, not shared memory)."""
    return {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in states.items()}


def _from_portable(states: Mapping[str, Any]) -> dict[str, Any]:
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in states.items()}


def _flush_denormal_is_on() -> bool:
    """Whether ``torch.set_flush_denormal(True)`` is in effect on this thread (torch has no getter; the
    CPU flag also makes Python's float arithmetic flush the smallest denormal to zero)."""
    return float("5e-324") * 1.0 == 0.0


def _shared_modules(algorithm: Algorithm[Any, Any]) -> list[nn.Module]:
    return [c for c in algorithm.components().values() if isinstance(c, nn.Module)]


def _unshared_tensors(modules: Sequence[nn.Module]) -> list[str]:
    return [
        f"{type(module).__name__}.{name}"
        for module in modules
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]
        if not tensor.untyped_storage().is_shared()
    ]


# ---------------------------------------------------------------------- the worker side
def _rebuild_rollout(tensors: Mapping[str, torch.Tensor], numpy: bool, num_valid: int) -> AnyRolloutBatch:
    def field(name: str) -> Any:
        if name in tensors:
            return tensors[name].numpy() if numpy else tensors[name]
        prefix = f"{name}/"
        keyed = {key[len(prefix) :]: t for key, t in tensors.items() if key.startswith(prefix)}
        return {key: t.numpy() if numpy else t for key, t in keyed.items()}

    values = {name: field(name) for name in _FIELDS}
    if numpy:
        return RolloutBatch(**values)
    return TensorRolloutBatch(**values, num_valid=num_valid)


def _serve(algorithm: OnPolicyAlgorithm[Any, Any], request: _Request, cache: dict[str, Any]) -> Any:
    if isinstance(request, _Update):
        if request.rollout.tensors is not None:
            cache["rollout"] = request.rollout.tensors
        rollout = _rebuild_rollout(cache["rollout"], request.rollout.numpy, request.rollout.num_valid)
        load_generator_states(algorithm.policy, _from_portable(request.policy_generators))
        torch.set_flush_denormal(request.flush_denormal)
        stats = algorithm.update(
            rollout.select_columns(request.columns),
            batch_size=request.batch_size,
            num_repetitions=request.num_repetitions,
        )
        unshared = _unshared_tensors(_shared_modules(algorithm))
        if unshared:
            raise ConfigurationError(
                f"{type(algorithm).__name__}: the update replaced the tensors {unshared} instead of "
                f"writing them in place, so the main process would not see them; parallel mode needs "
                f"in-place updates (optimizer steps, copy_). Use update_mode='sequential'."
            )
        return stats, _portable(generator_states(algorithm.policy))
    if isinstance(request, _GetState):
        load_generator_states(algorithm.policy, _from_portable(request.policy_generators))
        return algorithm.state_dict()
    if isinstance(request, _LoadState):
        algorithm.load_state_dict(request.state)
        return None
    raise AssertionError(f"unknown request {request!r}")


_WARM_IMPORTS = ("torch._dynamo",)
"""imported by torch on first use of an optimizer's ``state_dict`` / ``step`` (seconds on a cold
process)"""


def _error_reply(exc: BaseException) -> _Reply:
    try:
        pickle.dumps(exc)
    except Exception:
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    return _Reply(None, exc, traceback.format_exc())


def _worker_main(
    algorithm: OnPolicyAlgorithm[Any, Any] | None,
    conn: multiprocessing.connection.Connection,
    num_threads: int,
) -> None:
    """A worker's loop: receive the algorithm (unless forked with it), reply ready, then serve requests
    until :class:`_Close` or until the main process goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(num_threads)
    try:
        for module in _WARM_IMPORTS:  # at startup, not inside the first update or state request
            importlib.import_module(module)
        if algorithm is None:
            algorithm = _recv(conn)
        _send(conn, _Reply("ready"))
    except BaseException as exc:  # reported to the main process, which raises it
        _send(conn, _error_reply(exc))
        return
    assert algorithm is not None
    cache: dict[str, Any] = {}
    while True:
        try:
            request = _recv(conn)
        except (EOFError, OSError):  # the main process is gone
            return
        if isinstance(request, _Close):
            _send(conn, _Reply(None))
            return
        try:
            reply = _Reply(_serve(algorithm, request, cache))
        except BaseException as exc:  # reported to the main process, which raises it
            reply = _error_reply(exc)
        _send(conn, reply)


# ---------------------------------------------------------------------- the main side
def _context(method: StartMethod) -> ForkServerContext | SpawnContext | ForkContext:
    if method == "forkserver":
        return multiprocessing.get_context("forkserver")
    if method == "spawn":
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("fork")


def _shared_empty(shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor in shared memory (staging is CPU only: workers run on the CPU)."""
    tensor = torch.empty(shape, dtype=dtype, device="cpu")
    tensor.share_memory_()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    return tensor


@final
class _Worker:
    def __init__(self, name: str, process: BaseProcess, conn: multiprocessing.connection.Connection):
        self.name = name
        self.process = process
        self.conn = conn
        self.rollout_version = -1
        """the staging version this worker has received"""


def _stop_workers(workers: Sequence[_Worker], timeout_s: float) -> None:
    """Ask every worker to exit, wait, then terminate (and kill) stragglers; reaps every process."""
    for worker in workers:
        if worker.process.is_alive():
            with contextlib.suppress(OSError, ValueError):  # the worker is exiting already
                _send(worker.conn, _Close())
    for worker in workers:
        worker.process.join(timeout_s)
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join(1.0)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


@final
class ParallelUpdater:
    """The worker processes of a multi-agent on-policy algorithm in ``update_mode="parallel"``, one per
    trainable learner (see the module docstring)."""

    def __init__(self, learners: Sequence[ParallelLearner], params: ParallelParams, owner: str):
        """Start one worker per learner of ``learners`` (trainable, on-policy) with ``params``; the
        learners' modules are moved to shared memory first.

        Raises:
            ConfigurationError: a learner is fixed, not on-policy or not on the CPU, or two learners
                share parameters.
        """
        self.owner = owner
        self.params = params
        self.learners = list(learners)
        self._algorithms = self._check(self.learners)
        for algorithm in self._algorithms.values():
            for module in _shared_modules(algorithm):
                module.share_memory()
        self._staging: dict[str, torch.Tensor] = {}
        self._staging_version = 0
        context = _context(params.start_method)
        if isinstance(context, ForkServerContext):  # only takes effect if the server has not started yet
            context.set_forkserver_preload([__name__, *_WARM_IMPORTS])
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _stop_workers, self._workers, params.shutdown_timeout_s)
        forked = params.start_method == "fork"  # inherits the algorithm; else it is sent pickled
        for learner in self.learners:
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_worker_main,
                args=(self._algorithms[learner.name] if forked else None, theirs, params.num_threads),
                name=f"tshtrain-learner-{learner.name}",
                daemon=True,
            )
            process.start()
            theirs.close()
            self._workers.append(_Worker(learner.name, process, ours))
            if not forked:
                _send(ours, self._algorithms[learner.name], shared=True)
        self._gather(self._workers, "start")

    def _check(self, learners: Sequence[ParallelLearner]) -> dict[str, OnPolicyAlgorithm[Any, Any]]:
        """Each learner's algorithm by name, checked (see :meth:`__init__`)."""
        owners: dict[int, str] = {}
        algorithms: dict[str, OnPolicyAlgorithm[Any, Any]] = {}
        for learner in learners:
            algorithm = learner.algorithm
            if not isinstance(algorithm, OnPolicyAlgorithm):
                raise ConfigurationError(
                    f"{self.owner}: update_mode='parallel' runs the updates of on-policy learners; learner "
                    f"{learner.name!r} has {type(algorithm).__name__}."
                )
            if algorithm.device.type != "cpu":
                raise ConfigurationError(
                    f"{self.owner}: update_mode='parallel' runs learners on the CPU only; learner "
                    f"{learner.name!r} is on {algorithm.device}. Use update_mode='sequential'."
                )
            algorithms[learner.name] = algorithm
            for module in _shared_modules(algorithm):
                for tensor in [*module.parameters(), *module.buffers()]:
                    other = owners.setdefault(id(tensor), learner.name)
                    if other != learner.name:
                        raise ConfigurationError(
                            f"{self.owner}: learners {other!r} and {learner.name!r} share parameters; "
                            f"update_mode='parallel' needs learners that share nothing (their processes "
                            f"would write them at once). Use update_mode='sequential'."
                        )
        return algorithms

    @property
    def running(self) -> bool:
        """False once closed."""
        return self._finalizer.alive

    def pids(self) -> dict[str, int]:
        """Each learner's worker process id."""
        return {w.name: int(w.process.pid or 0) for w in self._workers}

    # ------------------------------------------------------------------ requests
    def _stage(self, rollout: AnyRolloutBatch) -> _Rollout:
        """Copy the rollout into the shared staging tensors (reallocated when its layout changes)."""
        flat: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(rollout, name)
            if isinstance(value, Mapping):
                flat.update({f"{name}/{key}": v for key, v in value.items()})
            else:
                flat[name] = value
        sources = {
            key: torch.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v
            for key, v in flat.items()
        }
        layout = {key: (t.shape, t.dtype) for key, t in sources.items()}
        if layout != {key: (t.shape, t.dtype) for key, t in self._staging.items()}:
            self._staging = {key: _shared_empty(s, d) for key, (s, d) in layout.items()}
            self._staging_version += 1
        for key, source in sources.items():
            self._staging[key].copy_(source)
        numpy = isinstance(rollout, RolloutBatch)
        num_valid = 0 if numpy else rollout.num_steps
        return _Rollout(self._staging_version, None, numpy, num_valid)

    def _ask(self, requests: Mapping[str, _Request], what: str) -> dict[str, Any]:
        """Send each worker its request, wait for every reply; re-raise the first worker error."""
        if not self.running:
            raise ParallelWorkerError(
                f"{self.owner}: the parallel workers were closed after a worker failure; cannot {what}. "
                f"Load a checkpoint (load_state_dict) to start fresh workers from it."
            )
        workers = [w for w in self._workers if w.name in requests]
        for worker in workers:
            try:
                _send(worker.conn, requests[worker.name], shared=isinstance(requests[worker.name], _Update))
            except (OSError, ValueError):
                self._died(worker, what)
        return self._gather(workers, what)

    def _gather(self, workers: Sequence[_Worker], what: str) -> dict[str, Any]:
        """Wait for a reply from each of ``workers``; re-raise the first worker error."""
        replies: dict[str, _Reply] = {}
        pending = {worker.name: worker for worker in workers}
        timeout_s = self.params.reply_timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while pending:
            by_conn: dict[object, _Worker] = {worker.conn: worker for worker in pending.values()}
            by_sentinel: dict[object, _Worker] = {w.process.sentinel: w for w in pending.values()}
            left_s = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait([*by_conn, *by_sentinel], left_s)  # type: ignore[list-item]
            if not ready:
                self._timed_out(list(pending.values()), what)
            for handle in ready:
                if handle in by_conn:
                    worker = by_conn[handle]
                    try:
                        replies[worker.name] = _recv(worker.conn)
                    except (EOFError, OSError):
                        self._died(worker, what)
                    del pending[worker.name]
                elif by_sentinel[handle].name in pending and not by_sentinel[handle].conn.poll():
                    self._died(by_sentinel[handle], what)  # exited without a reply
        for worker in workers:
            reply = replies[worker.name]
            if reply.error is not None:
                raise reply.error from _RemoteTracebackError(
                    f"in the worker of learner {worker.name!r} (pid {worker.process.pid}):\n{reply.traceback}"
                )
        return {name: reply.value for name, reply in replies.items()}

    def _timed_out(self, workers: Sequence[_Worker], what: str) -> NoReturn:
        names = ", ".join(f"{w.name!r} (pid {w.process.pid})" for w in workers)
        self.close_without_sync()
        raise ParallelWorkerError(
            f"{self.owner}: the worker process of learner {names} did not answer within "
            f"ParallelParams.reply_timeout_s={self.params.reply_timeout_s} s while asked to {what}; every "
            f"worker was stopped. Raise reply_timeout_s if updates take that long, else resume from a "
            f"checkpoint."
        )

    def _died(self, worker: _Worker, what: str) -> NoReturn:
        worker.process.join(1.0)
        code = worker.process.exitcode
        self.close_without_sync()
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        raise ParallelWorkerError(
            f"{self.owner}: the worker process of learner {worker.name!r} (pid {worker.process.pid}) {how} "
            f"while asked to {what}; every worker was stopped. Its optimizer state since the last "
            f"checkpoint is lost; resume from a checkpoint."
        )

    def update(
        self,
        rollout: AnyRolloutBatch,
        scale: int,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks,
    ) -> dict[str, TrainingStats]:
        """Every learner's update on its columns (``scale`` per unit) of ``rollout``, at the same
        time; returns their stats by learner name (learners without data in the rollout are left out)."""
        if hooks is not NO_UPDATE_HOOKS:
            raise ConfigurationError(
                f"{self.owner}: update_mode='parallel' cannot run the trainer's update hooks "
                f"(on_sampled_batch / on_loss / on_optimizer_step callbacks) in worker processes; remove "
                f"those callbacks or use update_mode='sequential'."
            )
        staged = self._stage(rollout)
        flush = _flush_denormal_is_on()
        requests: dict[str, _Request] = {}
        for learner, worker in zip(self.learners, self._workers, strict=True):
            columns = learner.columns(scale)
            if rollout.select_columns(columns).num_steps == 0:
                continue
            fresh = worker.rollout_version != staged.version
            tensors = self._staging if fresh else None
            requests[learner.name] = _Update(
                staged._replace(tensors=tensors),
                columns,
                batch_size,
                num_repetitions,
                _portable(generator_states(learner.policy)),
                flush,
            )
        replies = self._ask(requests, "update")
        for worker in self._workers:
            if worker.name in requests:
                worker.rollout_version = staged.version
        stats: dict[str, TrainingStats] = {}
        for learner in self.learners:
            if learner.name in replies:
                stats[learner.name], policy_generators = replies[learner.name]
                load_generator_states(learner.policy, _from_portable(policy_generators))
        return stats

    def state_dicts(self) -> dict[str, Any]:
        """Each learner's full algorithm state, from its worker (with the main process's policy
        generators, which the main process owns between updates)."""
        return self._ask(
            {
                learner.name: _GetState(_portable(generator_states(learner.policy)))
                for learner in self.learners
            },
            "return its state",
        )

    def load_state_dicts(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Load each learner's algorithm state into its worker."""
        self._ask({name: _LoadState(state) for name, state in states.items()}, "load a state")

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        """Load the workers' states into the main process's algorithms (optimizers, generators,
        counters: what only the workers had), then stop the workers. Idempotent."""
        if not self.running:
            return
        states = self.state_dicts()
        self.close_without_sync()
        for name, algorithm in self._algorithms.items():
            algorithm.load_state_dict(states[name])

    def close_without_sync(self) -> None:
        """Stop the workers without fetching their states. Idempotent."""
        self._finalizer()
