"""``tshtrain.cpu_memory.keep_freed_memory`` and ``TrainerOptions.retain_freed_memory``: glibc's
``mallopt`` called once per process with the documented numbers, never when the user chose an allocator
setting, and only by trainers that keep the option on. (Its speed is a benchmark's business:
``benchmarks/bench_vmas.py``.)"""

from __future__ import annotations

import platform
from collections.abc import Iterator

import pytest

from tests.contract._hook_setups import off_policy_trainer
from tshtrain import cpu_memory
from tshtrain.cpu_memory import (
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    keep_freed_memory,
)
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import TrainerOptions


class FakeMallopt:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture(autouse=True)
def undecided() -> Iterator[None]:
    cpu_memory._forget()
    yield
    cpu_memory._forget()


def test_sets_both_thresholds_once_per_process() -> None:
    mallopt = FakeMallopt()
    first = keep_freed_memory(environ={}, mallopt=mallopt)
    again = keep_freed_memory(environ={}, mallopt=mallopt)
    assert first.applied and again is first
    assert mallopt.calls == [
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
    ]
    assert MMAP_THRESHOLD_BYTES == 32 * 2**20 and TRIM_THRESHOLD_BYTES == 256 * 2**20


@pytest.mark.parametrize(
    ("environ", "why"),
    [
        ({"MALLOC_ARENA_MAX": "2"}, "MALLOC_ARENA_MAX is set"),
        ({"MALLOC_TRIM_THRESHOLD_": "0"}, "MALLOC_TRIM_THRESHOLD_ is set"),
        ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1"}, "glibc.malloc tunables"),
        ({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, "jemalloc"),
        ({"LD_PRELOAD": "libtcmalloc_minimal.so"}, "tcmalloc"),
    ],
)
def test_leaves_the_users_allocator_settings_alone(environ: dict[str, str], why: str) -> None:
    mallopt = FakeMallopt()
    result = keep_freed_memory(environ=environ, mallopt=mallopt)
    assert not result.applied and why in result.reason and mallopt.calls == []


def test_unrelated_tunables_do_not_count_as_a_choice() -> None:
    result = keep_freed_memory(environ={"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}, mallopt=FakeMallopt())
    assert result.applied


def test_a_refusal_is_reported() -> None:
    result = keep_freed_memory(environ={}, mallopt=FakeMallopt(answer=0))
    assert not result.applied and "refused" in result.reason


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)
def test_glibc_accepts_the_numbers() -> None:
    result = keep_freed_memory(environ={})
    assert result.applied, result.reason


@pytest.mark.parametrize("retain", [True, False])
def test_the_trainer_applies_it_only_when_asked(retain: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(
        "tshtrain.trainer.base.keep_freed_memory", lambda: calls.append(1) or keep_freed_memory(environ={})
    )
    off_policy_trainer(options=TrainerOptions(retain_freed_memory=retain)).run()
    assert bool(calls) is retain


def test_the_option_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="retain_freed_memory must be a bool"):
        TrainerOptions(retain_freed_memory="yes")  # type: ignore[arg-type]
