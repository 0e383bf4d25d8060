"""constraints.txt (the lock of what CI installs) admits pyproject.toml's ranges, and CI and the README's
test command install through it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _lock_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tshtrain_lock_script", ROOT / "scripts" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_the_lock_pins_every_ci_requirement_inside_its_range() -> None:
    lock = _lock_script()
    requirements = lock.ci_requirements()
    names = {r.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower() for r in requirements}
    assert {"torch", "pytest", "hypothesis", "mypy", "ruff", "mkdocs-material", "vmas", "ray"} <= names
    assert lock.problems(lock.pins(), requirements) == []


def test_torch_is_pinned_to_the_cpu_wheel_on_disk_without_a_local_label() -> None:
    assert _lock_script().pins()["torch"] == "2.13.0"


def test_a_pin_outside_a_range_and_a_missing_pin_are_reported() -> None:
    lock = _lock_script()
    found = lock.problems({"numpy": "1.20.0"}, ["numpy>=1.26", "gymnasium>=1.1"])
    assert found == [
        "numpy: constraints.txt pins 1.20.0, outside pyproject.toml's 'numpy>=1.26'",
        "gymnasium: required by pyproject.toml ('gymnasium>=1.1') but not pinned in constraints.txt",
    ]


def test_ci_and_the_readme_install_through_the_lock() -> None:
    command = 'pip install -c constraints.txt -e ".[test]"'
    assert command in (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci
    assert 'pip install -c constraints.txt -e ".[integration,docs]"' in ci
    installs = [line for line in ci.splitlines() if "pip install" in line and not line.startswith("#")]
    for line in installs:  # torch first, from the wheel on disk; everything else through the lock
        assert all("-c constraints.txt" in part for part in line.split("&&") if "pip install -" in part), line
