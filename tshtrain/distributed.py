"""Data-parallel training on ``torch.distributed``: the process group and the few collectives a run needs.

N processes (ranks), each with its own training envs, collector and replay buffer, train one set of
weights: every gradient is averaged over the ranks before the optimizer steps, so the replicated
weights stay identical. Modules are *not* wrapped in ``DistributedDataParallel``: the algorithm's
``state_dict`` keys and its checkpoints stay those of a single-process run.

* :class:`DistributedContext` -- rank, world size, backend; :meth:`DistributedContext.from_env` joins
  the process group that ``torchrun`` (``torch.distributed.run``) describes in the environment
  (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), with an explicit timeout.
* Collectives for plain values: :meth:`~DistributedContext.all_reduce_sum`,
  :meth:`~DistributedContext.all_reduce_mean` (ints, floats, numpy arrays),
  :meth:`~DistributedContext.all_gather_object`, :meth:`~DistributedContext.broadcast_object`.
* Gradients: :meth:`~DistributedContext.average_gradients` (one flattened all-reduce of the given
  parameters' gradients) and :meth:`~DistributedContext.install_gradient_averaging` (a hook on each
  parameter that averages its gradient as soon as backward has accumulated it, so that gradient
  clipping, which runs after backward and before the optimizer step, sees the averaged gradient).
* Failures: the failing rank writes its error to the rendezvous store (:meth:`report_failure`); every
  collective here turns a broken or timed-out collective into a :class:`DistributedRunError` that
  names the failing rank and its error. No rank hangs longer than the process group's timeout.
* A rank launched by torchrun stops with its launcher: :meth:`~DistributedContext.from_env` asks Linux
  to send the rank SIGTERM when its parent (the torchrun agent) dies (``prctl(PR_SET_PDEATHSIG)``,
  :func:`stop_with_parent`; a no-op elsewhere), so a killed torchrun leaves no rank training alone.
* Leaving: :meth:`~DistributedContext.close` (or ``with DistributedContext.from_env() as context:``;
  an ``atexit`` hook closes a context the script forgot) destroys the process group while the
  interpreter is fully alive, so that gloo's worker threads are joined before it finalizes.

Why leaving needs care (the abort at exit, docs/scaling.md): a gloo worker thread drops its reference to
a finished collective after the waiting rank has already been woken; the collective holds the tensors
of a Python call that has returned, so dropping it decrefs their Python objects and needs the GIL. If
the interpreter is finalizing by then, ``take_gil`` ends the thread with ``pthread_exit``, whose unwind
through the collective's ``noexcept`` destructor calls ``std::terminate``: SIGABRT ("terminate called
without an active exception") after the run finished. ``destroy_process_group()`` prevents it only if
it really frees the process group (its destructor joins the worker threads, the GIL released). It
did not in a trainer run: the first ``torch.optim`` optimizer imports ``torch._dynamo``, which imports
``torch.distributed.nn.functional``, whose functions take ``group=group.WORLD`` as a default argument,
evaluated at import: imported after ``init_process_group``, ten defaults keep the process group (and
its threads) alive until the interpreter tears the module down. :meth:`DistributedContext.init`
therefore imports that module *before* joining (its defaults stay None), and :meth:`close` warns if
something else still holds the group.

Seeds: rank ``r`` seeds its ``num_envs`` training envs from ``seed + r * num_envs``
(:meth:`~DistributedContext.env_seed`), so that sub-env ``i`` of rank ``r`` gets the seed sub-env
``r * num_envs + i`` gets in one process with ``world_size * num_envs`` envs.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import datetime
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final, TypeVar, final

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.rendezvous import rendezvous

from tshtrain.errors import ConfigurationError, DistributedRunError

DEFAULT_TIMEOUT_SECONDS: Final = 300.0
"""how long a collective (and the rendezvous) waits for the other ranks before the run fails"""

_ENV_VARS: Final = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_CAPTURE_THE_DEFAULT_GROUP: Final = ("torch.distributed.nn.functional",)
"""torch modules whose default arguments are ``group.WORLD`` at import time (imported lazily by
``torch._dynamo``, which the first optimizer imports); imported before the process group exists"""
_FAILED_KEY = "tshtrain/failed/"
_Number = TypeVar("_Number", int, float, np.ndarray)


def launched_by_torchrun() -> bool:
    """True when the environment describes a process group (``WORLD_SIZE`` is set)."""
    return "WORLD_SIZE" in os.environ


_PR_SET_PDEATHSIG: Final = 1
"""``prctl`` option (linux/prctl.h): the signal this process gets when its parent thread dies"""


def stop_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Ask Linux to send this process ``signum`` when its parent dies; True if that was arranged.

    A no-op (False) on other systems or when ``prctl`` is unavailable. If the parent is already gone
    (this process was re-parented to init), the signal is sent at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    path = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(path, use_errno=True)
        arranged: bool = libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if arranged and (parent == 1 or os.getppid() != parent):
        os.kill(os.getpid(), signum)  # the parent died before the request: act as if it had been in place
    return arranged


@final
class DistributedContext:
    """One rank's membership of a data-parallel run (see the module docstring)."""

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        local_rank: int,
        backend: str,
        store: Any,
        timeout_seconds: float,
    ):
        """Use :meth:`from_env` or :meth:`init`; this wraps a process group that is already initialised."""
        self.rank = rank
        """this process's rank, 0 .. world_size - 1"""
        self.world_size = world_size
        """the number of ranks"""
        self.local_rank = local_rank
        """the rank on this machine (which GPU it uses with ``nccl``)"""
        self.backend = backend
        """``gloo`` (CPU) or ``nccl`` (GPU)"""
        self.timeout_seconds = timeout_seconds
        """the process group's timeout for every collective"""
        self._store = store

    # ------------------------------------------------------------------ joining and leaving
    @classmethod
    def from_env(
        cls, *, backend: str | None = None, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    ) -> DistributedContext:
        """Join the process group described by ``torchrun``'s environment variables.

        Args:
            backend: ``gloo`` or ``nccl``; None: ``nccl`` when CUDA is available, else ``gloo``.
            timeout_seconds: how long the rendezvous and every collective wait for the other ranks.

        Raises:
            ConfigurationError: a variable is missing or not a number (start the run with
                ``torchrun --nproc_per_node N ...`` or ``tshtrain train --nproc N``).
        """
        missing = [name for name in _ENV_VARS if name not in os.environ]
        if not missing:  # first: a launcher killed from here on takes this rank with it
            stop_with_parent()
        if missing:
            raise ConfigurationError(
                f"DistributedContext.from_env: the environment variables {missing} are not set; start "
                f"the run with `torchrun --nproc_per_node N -m tshtrain.cli train ...` or "
                f"`tshtrain train --nproc N`."
            )
        values = {}
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            text = os.environ.get(name, "0")
            if not text.isdigit():
                raise ConfigurationError(
                    f"DistributedContext.from_env: {name}={text!r} is not a non-negative integer."
                )
            values[name] = int(text)
        return cls.init(
            rank=values["RANK"],
            world_size=values["WORLD_SIZE"],
            local_rank=values["LOCAL_RANK"],
            backend=backend,
            timeout_seconds=timeout_seconds,
        )

    @classmethod
    def init(
        cls,
        *,
        rank: int,
        world_size: int,
        local_rank: int = 0,
        backend: str | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> DistributedContext:
        """Join a process group through the ``env://`` rendezvous (``MASTER_ADDR`` / ``MASTER_PORT``).

        Raises:
            ConfigurationError: ``rank`` outside ``[0, world_size)``, a non-positive timeout, or an
                unknown backend.
        """
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigurationError(
                f"DistributedContext: rank {rank} and world_size {world_size}; need 0 <= rank < world_size."
            )
        if not timeout_seconds > 0:
            raise ConfigurationError(f"DistributedContext: timeout_seconds={timeout_seconds}; need > 0.")
        chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if chosen not in ("gloo", "nccl"):
            raise ConfigurationError(f"DistributedContext: backend={chosen!r}; allowed: 'gloo', 'nccl'.")
        timeout = datetime.timedelta(seconds=timeout_seconds)
        # the rendezvous gives the store (torchrun's agent store under torchrun); failures are written there
        store, rank, world_size = next(rendezvous("env://", rank, world_size, timeout=timeout))
        store.set_timeout(timeout)
        for module in _CAPTURE_THE_DEFAULT_GROUP:  # before the group exists: their defaults stay None
            importlib.import_module(module)
        dist.init_process_group(chosen, store=store, rank=rank, world_size=world_size, timeout=timeout)
        context = cls(
            rank=rank,
            world_size=world_size,
            local_rank=local_rank,
            backend=chosen,
            store=store,
            timeout_seconds=timeout_seconds,
        )
        atexit.register(context.close)  # a script that forgot close(): still before finalization
        return context

    def close(self) -> None:
        """Leave the process group: destroy it, which joins gloo's worker threads (idempotent).

        Call it (or use the context as a ``with`` block) when the rank is done, before the interpreter
        exits; an ``atexit`` hook calls it otherwise. Warns (RuntimeWarning) if the process group is
        still referenced afterwards: its worker threads then live until the interpreter finalizes and
        may abort the process there (see the module docstring).
        """
        atexit.unregister(self.close)
        if not dist.is_initialized():
            return
        group = dist.group.WORLD
        dist.destroy_process_group()
        # ours (`group`) and getrefcount's argument: anything more keeps the group's threads alive
        others = sys.getrefcount(group) - 2
        if others > 0:
            warnings.warn(
                f"DistributedContext.close (rank {self.rank}): the process group is still referenced "
                f"{others} time(s) after destroy_process_group(), so gloo's worker threads stay alive and "
                f"may abort this process at interpreter exit (SIGABRT). A module imported after the group "
                f"was created probably holds it as a default argument (e.g. "
                f"torch.distributed.optim.zero_redundancy_optimizer): import it before "
                f"DistributedContext.from_env(), or end the script with os._exit(code) after flushing.",
                RuntimeWarning,
                stacklevel=2,
            )

    def __enter__(self) -> DistributedContext:
        """``with DistributedContext.from_env() as context:`` -- closed at the end of the block."""
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        """Report an error leaving the block to the other ranks (:meth:`report_failure`), then close."""
        if error is not None:
            self.report_failure(error)
        self.close()

    # ------------------------------------------------------------------ who does what
    @property
    def is_main(self) -> bool:
        """True on rank 0, the rank that tests, logs, shows progress and writes ``best`` checkpoints."""
        return self.rank == 0

    def env_seed(self, seed: int, num_envs: int) -> int:
        """The seed of this rank's ``num_envs`` training envs: ``seed + rank * num_envs`` (sub-env ``i``
        gets ``seed + rank * num_envs + i``, as sub-env ``rank * num_envs + i`` of one process would)."""
        return seed + self.rank * num_envs

    # ------------------------------------------------------------------ failures
    def report_failure(self, error: BaseException) -> None:
        """Tell the other ranks that this rank failed with ``error`` (best effort, never raises)."""
        # the store may be gone already; the launcher still sees this process's exit code
        with suppress(Exception):
            self._store.set(f"{_FAILED_KEY}{self.rank}", f"{type(error).__name__}: {error}"[:4000])

    def failed_peer(self) -> str | None:
        """``"rank R failed: ERROR"`` for the first other rank that reported a failure, else None."""
        for rank in range(self.world_size):
            key = f"{_FAILED_KEY}{rank}"
            try:
                if rank != self.rank and self._store.check([key]):
                    return f"rank {rank} failed: {self._store.get(key).decode(errors='replace')}"
            except Exception:  # the store's host is gone: its rank died
                return f"rank {rank}: the rendezvous store is unreachable (a rank died)"
        return None

    def raise_if_peer_failed(self) -> None:
        """Raise :class:`DistributedRunError` if another rank reported a failure."""
        peer = self.failed_peer()
        if peer is not None:
            raise DistributedRunError(f"rank {self.rank} stops: {peer}")

    @contextmanager
    def _collective(self, what: str) -> Iterator[None]:
        try:
            yield
        except DistributedRunError:
            raise
        except RuntimeError as error:  # gloo / nccl: a peer closed its connection, or the timeout passed
            peer = self.failed_peer()
            cause = peer if peer is not None else f"{type(error).__name__}: {error}"
            raise DistributedRunError(
                f"rank {self.rank} stops: {cause} (during {what}; collectives wait at most "
                f"{self.timeout_seconds:g} s)"
            ) from error

    # ------------------------------------------------------------------ collectives
    def all_reduce_sum(self, value: _Number) -> _Number:
        """The sum of ``value`` over the ranks (an int, a float or a numpy array; float64 on the wire)."""
        result: _Number = self._all_reduce(value, mean=False)
        return result

    def all_reduce_mean(self, value: _Number) -> _Number:
        """The mean of ``value`` over the ranks (ints become floats)."""
        result: _Number = self._all_reduce(value, mean=True)
        return result

    def _all_reduce(self, value: Any, *, mean: bool) -> Any:
        array = np.asarray(value)
        wide = torch.from_numpy(array.astype(np.int64 if array.dtype.kind in "iub" else np.float64))
        with self._collective("all_reduce"):
            dist.all_reduce(wide)
        result: np.ndarray = wide.numpy()
        if mean:
            result = result / self.world_size
        if isinstance(value, np.ndarray):
            return result if mean else result.astype(array.dtype)
        return float(result) if mean or isinstance(value, float) else int(result)

    def all_gather_object(self, obj: object) -> list[Any]:
        """``obj`` of every rank, by rank (pickled: use for small records, once per training step)."""
        gathered: list[Any] = [None] * self.world_size
        with self._collective("all_gather_object"):
            dist.all_gather_object(gathered, obj)
        return gathered

    def broadcast_object(self, obj: object) -> Any:
        """Rank 0's ``obj`` on every rank (what other ranks pass is ignored)."""
        box = [obj if self.is_main else None]
        with self._collective("broadcast_object"):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def broadcast_tensors(self, tensors: Iterable[torch.Tensor]) -> None:
        """Overwrite ``tensors`` with rank 0's values, in place (e.g. the parameters at the start)."""
        with self._collective("broadcast"), torch.no_grad():
            for tensor in tensors:
                dist.broadcast(tensor.data, src=0)

    def average_gradients(self, params: Iterable[torch.Tensor]) -> None:
        """Average the gradients of ``params`` over the ranks in one flattened all-reduce (parameters
        without a gradient are skipped; every rank must have gradients for the same parameters)."""
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        with self._collective("gradient all_reduce"):
            dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()

    def install_gradient_averaging(self, params: Iterable[torch.Tensor]) -> Callable[[], None]:
        """Average the gradients of ``params`` over the ranks at the end of every backward pass, in one
        flattened all-reduce (:meth:`average_gradients`) of the parameters that pass gave a gradient.

        Each parameter's post-accumulate-grad hook marks it; the first mark of a backward pass queues a
        callback that the autograd engine runs when that pass ends (before ``backward()`` returns, so
        clipping and the optimizer step see the averaged gradient). The marked parameters are reduced
        in the order of ``params``, the same on every rank. A gradient is averaged as a whole (earlier
        accumulation included: that part is already the same on every rank, so averaging it again
        changes nothing). Every rank must run the same backward passes over the same parameters, as
        data-parallel training does.

        Returns:
            A function that removes the hooks.
        """
        ordered = list(dict.fromkeys(params))  # once per parameter, in order
        position = {id(param): i for i, param in enumerate(ordered)}
        marked: dict[int, torch.Tensor] = {}

        def reduce_marked() -> None:
            found = [marked[i] for i in sorted(marked)]
            marked.clear()
            self.average_gradients(found)

        def mark(param: torch.Tensor) -> None:
            if not marked:  # the first parameter of this backward pass
                torch.autograd.Variable._execution_engine.queue_callback(reduce_marked)
            marked[position[id(param)]] = param

        handles = [
            param.register_post_accumulate_grad_hook(mark)  # type: ignore[no-untyped-call]  # untyped in torch
            for param in ordered
        ]

        def remove() -> None:
            for handle in handles:
                handle.remove()

        return remove

    def __repr__(self) -> str:
        return f"DistributedContext(rank={self.rank}, world_size={self.world_size}, backend={self.backend!r})"


__all__ = ["DEFAULT_TIMEOUT_SECONDS", "DistributedContext", "launched_by_torchrun", "stop_with_parent"]
