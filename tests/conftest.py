"""Shared pytest setup: keep torch single-threaded so tests are fast and deterministic."""

from __future__ import annotations

try:
    import torch
except ImportError:  # pragma: no cover - torch is a dependency, but the data tests do not need it
    torch = None  # type: ignore[assignment]

if torch is not None:
    torch.set_num_threads(1)
