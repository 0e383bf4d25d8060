"""Every core dependency in pyproject.toml is imported by tshtrain (sensai-utils was declared and never
used: an install cost with nothing in return)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> set[str]:
    """The normalised distribution names of ``[project] dependencies``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_normalise(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in project["dependencies"]}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_modules() -> set[str]:
    """Top-level module names that tshtrain's source imports (at module level or inside functions)."""
    found: set[str] = set()
    for path in (ROOT / "tshtrain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_core_dependency_is_imported() -> None:
    providers = importlib.metadata.packages_distributions()  # module name -> distributions
    used = {_normalise(dist) for module in _imported_modules() for dist in providers.get(module, [])}
    unused = _declared() - used
    assert not unused, f"declared in pyproject.toml but imported nowhere in tshtrain/: {sorted(unused)}"
