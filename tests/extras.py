"""Optional dependencies in tests: one way to skip a test whose extra is not installed.

The README's test command installs only the ``test`` extra; CI's integration tier then installs the
optional envs, loggers and Ray (``.ci/run``) and runs the tests marked ``integration``. A test that needs
an optional module calls :func:`need` (or ``pytest.importorskip``) and carries the ``integration`` mark
(``pytestmark = pytest.mark.integration`` for a whole module). ``tests/conftest.py`` enforces both halves:
a skip for a missing module in a test not marked ``integration`` fails, and with
``TSHTRAIN_REQUIRE_EXTRAS=1`` (the integration tier) every such skip fails, so that no optional test goes
quietly unrun.
"""

from __future__ import annotations

from types import ModuleType

import pytest

MISSING_MARKERS = ("pip install 'tshtrain[", "could not import")
"""text of a skip reason that says an optional module is missing (ours, and pytest.importorskip's)"""


def reason(module: str, extra: str) -> str:
    return f"needs {module}: pip install 'tshtrain[{extra}]'"


def need(module: str, extra: str) -> ModuleType:
    """Import ``module`` or skip, naming the extra that installs it."""
    return pytest.importorskip(module, reason=reason(module, extra))
