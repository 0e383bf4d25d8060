"""The CUDA tier: ``pytest -m cuda``. Every test here is marked ``cuda`` and skipped when
``torch.cuda.is_available()`` is False (CI and CPU-only machines collect and skip them)."""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this directory ``cuda`` and skip it without a CUDA device."""
    del config
    skip = pytest.mark.skip(reason="torch.cuda.is_available() is False")
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.cuda)
            if not torch.cuda.is_available():
                item.add_marker(skip)
