"""Shared pytest setup: keep torch single-threaded so tests are fast and deterministic."""

from __future__ import annotations

try:
    import torch
except ImportError:  # pragma: no cover - torch is a dependency, but the data tests do not need it
    torch = None  # type: ignore[assignment]

if torch is not None:
    torch.set_num_threads(1)

    import pytest

    @pytest.fixture(autouse=True)
    def _denormals_as_usual() -> object:
        """A trainer driven step by step and never closed leaves ``torch.set_flush_denormal(True)`` on
        its thread (TrainerOptions.flush_denormal); that also makes Python's own float arithmetic treat
        denormals (e.g. 5e-324) as zero, so no test may inherit it from another."""
        yield
        torch.set_flush_denormal(False)
