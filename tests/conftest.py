"""Shared pytest setup: keep torch single-threaded so tests are fast and deterministic; Ray on loopback."""

from __future__ import annotations

import os

# only loopback addresses in tests: a local Ray instance listens on 127.0.0.1 (read when ray is imported;
# tshtrain.env.ray_env.LOOPBACK_ONLY), not on the machine's network address
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

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


# --- optional dependencies: the integration tier (tests/extras.py) ---------------------------------------
import os

import pytest

from tests.extras import MISSING_MARKERS

REQUIRE_EXTRAS = os.environ.get("TSHTRAIN_REQUIRE_EXTRAS") == "1"
"""set by .ci/run's integration tier, after installing the extras: no test may skip for a missing module"""


def _missing_module_problem(reason: str, marked: bool) -> str | None:
    if not any(text in reason for text in MISSING_MARKERS):
        return None
    if not marked:
        return f"skipped for a missing optional module but not marked integration ({reason})"
    if REQUIRE_EXTRAS:
        return f"TSHTRAIN_REQUIRE_EXTRAS=1, but an optional module is missing ({reason})"
    return None


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped:
        marked = item.get_closest_marker("integration") is not None
        problem = _missing_module_problem(_skip_reason(report), marked)
        if problem is not None:
            report.outcome = "failed"
            report.longrepr = f"{item.nodeid}: {problem}"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    """A module skipped as a whole (a module-level importorskip) is checked like a test: its source
    must carry the integration mark."""
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if report.skipped and isinstance(collector, pytest.Module):
        marked = "pytest.mark.integration" in collector.path.read_text(encoding="utf-8")
        problem = _missing_module_problem(_skip_reason(report), marked)
        if problem is not None:
            report.outcome = "failed"
            report.longrepr = f"{collector.nodeid}: {problem}"
    return None


# --- the signing key (tshtrain/signing.py): never the real one in ~/.config -----------------------------
@pytest.fixture(scope="session", autouse=True)
def _own_signing_key(tmp_path_factory: pytest.TempPathFactory) -> object:
    """Every test (and every process a test starts, which inherits the environment) signs and verifies
    checkpoints with a key made for this session under a temporary XDG_CONFIG_HOME; a test that needs
    another key (a stranger's) sets XDG_CONFIG_HOME or TSHTRAIN_SIGNING_KEY itself with monkeypatch."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
        patch.delenv("TSHTRAIN_SIGNING_KEY", raising=False)
        yield
