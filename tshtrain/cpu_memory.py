"""Freed CPU memory kept in the process for the next batch, instead of given back to the kernel.

torch allocates every CPU tensor with ``malloc``. glibc serves a large request (over 128 KiB at first,
adapting upwards) with a fresh ``mmap`` and gives it back with ``munmap`` when the tensor dies, and it
trims the top of its heap back to the kernel once 128 KiB (adapting) lie free there. A PPO update on a
batched simulator allocates the same batch-sized tensors in every mini-batch (activations, their
gradients, gathered rows: 8 MiB each for 32,768 rows of 64 floats), so each one is page-faulted and
zeroed by the kernel again: on the VMAS benchmark that is about a tenth of the update's CPU time
(docs/gpu.md, "Freed memory kept for reuse"). CUDA tensors never pay this (torch's caching allocator
keeps their blocks); this module gives CPU tensors the same reuse through glibc's own knobs.

:func:`keep_freed_memory` sets, once per process, ``M_MMAP_THRESHOLD`` to 32 MiB (glibc's largest:
allocations up to that size come from the heap) and ``M_TRIM_THRESHOLD`` to 256 MiB (up to that much
free heap stays mapped). It is what ``TrainerOptions.retain_freed_memory`` (default on) does when a run
starts. The setting lasts for the rest of the process: glibc cannot go back to its adaptive defaults.
It does nothing (and says why) where it does not apply or the user has chosen: not glibc, ``MALLOC_*``
variables or ``glibc.malloc`` tunables in the environment, or jemalloc, tcmalloc or mimalloc preloaded.

Layer 0: the standard library only.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""allocations up to this size come from the heap (glibc refuses more than 32 MiB on 64-bit systems)"""
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
"""free heap kept mapped before glibc trims it back to the kernel"""
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""``mallopt`` parameter numbers (glibc's malloc.h)"""

_ALLOCATOR_VARIABLES = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
)
_OTHER_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")


@dataclass(frozen=True)
class MemorySetting:
    """What :func:`keep_freed_memory` did: ``applied`` (now or earlier in this process), or why not."""

    applied: bool
    reason: str


_lock = threading.Lock()
_decided: list[MemorySetting] = []
"""the decision of this process (at most one entry)"""


def _user_choice(environ: Mapping[str, str]) -> str | None:
    """The allocator setting the user made in the environment, if any (then this module stays out)."""
    for name in _ALLOCATOR_VARIABLES:
        if name in environ:
            return f"{name} is set"
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES sets glibc.malloc tunables"
    preload = environ.get("LD_PRELOAD", "")
    for allocator in _OTHER_ALLOCATORS:
        if allocator in preload:
            return f"LD_PRELOAD loads {allocator}"
    return None


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def keep_freed_memory(
    *,
    environ: Mapping[str, str] | None = None,
    mallopt: Callable[[int, int], int] | None = None,
) -> MemorySetting:
    """Keep freed CPU memory in this process for reuse (see the module's docstring); idempotent.

    Args:
        environ: the environment to read the user's own allocator settings from (default ``os.environ``).
        mallopt: glibc's ``mallopt`` (default: looked up in the C library; for tests).

    Returns:
        whether the setting is in force, and why (or why not).
    """
    with _lock:
        if not _decided:
            _decided.append(_decide(os.environ if environ is None else environ, mallopt))
        return _decided[0]


def _decide(environ: Mapping[str, str], mallopt: Callable[[int, int], int] | None) -> MemorySetting:
    choice = _user_choice(environ)
    if choice is not None:
        return MemorySetting(False, f"left alone: {choice}")
    call = mallopt if mallopt is not None else _glibc_mallopt()
    if call is None:
        return MemorySetting(False, "not applicable: the C library is not glibc")
    ok = call(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    ok = call(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 and ok
    if not ok:
        return MemorySetting(False, "glibc refused mallopt")
    return MemorySetting(
        True, "glibc keeps tensors up to 32 MiB on the heap and up to 256 MiB free heap mapped"
    )


def _forget() -> None:
    """Tests only: let the next :func:`keep_freed_memory` call decide again (the C library's setting,
    once made, stays)."""
    with _lock:
        _decided.clear()
