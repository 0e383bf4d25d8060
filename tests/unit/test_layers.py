"""Imports point down only (DESIGN.md, "Layers"): a module may import its own layer or a lower one.

Every module under ``tshtrain/`` is parsed with ``ast``; all ``tshtrain`` imports count, including those
inside functions and ``if TYPE_CHECKING:`` blocks, and relative imports are resolved.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "tshtrain"

LAYER_RANKS: dict[str, int] = {
    "": 0,  # tshtrain/__init__.py
    "errors": 0,
    "atomic": 0,  # atomic file and directory writes, cleanup of interrupted ones (standard library only)
    "counters": 0,  # the run's counters: standard library only, read by the logger and the trainer
    "constraints": 0,  # tshtrain/constraints.py: constrained number types (stdlib + errors only)
    "rundir": 0,  # run directories: marker, lock, cleanup of interrupted writes (stdlib + errors only)
    "signing": 0,  # tshtrain/signing.py: the per-user key and HMAC signatures of manifests (stdlib only)
    "devices": 0,
    "cpu_memory": 0,  # tshtrain/cpu_memory.py: glibc's allocator thresholds (standard library only)
    "distributed": 0,  # tshtrain/distributed.py: the process group and its collectives (torch + errors only)  # tshtrain/devices.py: resolving the device setting, moving generators (torch + errors only)
    "functional": 1,
    "env": 1,
    "data": 2,
    "logger": 2,
    "algorithm": 3,
    "checkpoint": 4,  # checkpoint directories: write, verify, read back (the trainer decides when)
    "trainer": 5,
    "parallel": 6,  # tshtrain/parallel.py: data-parallel learners, a wrapper of the step strategy
    "adapters": 6,  # other libraries' vocabularies (TorchRL hook stages, EmbodiChain events) onto Callback
    "seeds": 6,  # tshtrain/seeds.py: seed batches, a driver of several trainers with stacked updates
    "callbacks": 6,  # ready-made callbacks (early stopping, reward normalisation, ...)
    "config": 7,
    "cli": 7,
}
"""Rank of each top-level part of tshtrain (a subpackage or module). Layers that do not exist yet are fine."""

ALLOWED_UPWARD_IMPORTS: frozenset[tuple[str, str]] = frozenset()
"""(importing module, imported module) pairs exempt from the rule; keep it empty unless DESIGN.md says so."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The top-level part of a ``tshtrain...`` module name ("" for the package itself)."""
    parts = module.split(".")
    assert parts[0] == "tshtrain", module
    return parts[1] if len(parts) > 1 else ""


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) of every tshtrain import in ``source``, the module ``module`` (absolute names)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.append((node.lineno, base))
            # "from tshtrain import data" imports the subpackage tshtrain.data
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names if base == "tshtrain")
    return [(line, name) for line, name in found if name == "tshtrain" or name.startswith("tshtrain.")]


def violations_in(source: str, module: str, is_package: bool) -> list[str]:
    own = layer_of(module)
    if own not in LAYER_RANKS:
        return [f"{module}: top-level part {own!r} has no layer; add it to LAYER_RANKS (and DESIGN.md)"]
    found = []
    for line, imported in imported_modules(source, module, is_package):
        target = layer_of(imported)
        if target not in LAYER_RANKS:
            # a name such as tshtrain.__version__; a module without a layer is reported on its own
            continue
        if LAYER_RANKS[target] > LAYER_RANKS[own] and (module, imported) not in ALLOWED_UPWARD_IMPORTS:
            found.append(
                f"{module}:{line} imports {imported}: layer {own or 'tshtrain'} (rank {LAYER_RANKS[own]}) "
                f"must not import layer {target} (rank {LAYER_RANKS[target]})"
            )
    return found


def all_modules() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def test_there_are_modules_to_check() -> None:
    names = {module_name(p) for p in all_modules()}
    assert {"tshtrain", "tshtrain.errors", "tshtrain.data.buffer", "tshtrain.env.vector"} <= names


def test_imports_point_down_only() -> None:
    problems: list[str] = []
    for path in all_modules():
        problems += violations_in(path.read_text(), module_name(path), path.name == "__init__.py")
    assert not problems, "layering violations:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------- the checker itself


@pytest.mark.parametrize(
    "source",
    [
        "import tshtrain.trainer.base\n",
        "from tshtrain.trainer import Trainer\n",
        "from tshtrain import trainer\n",
        "def run():\n    from tshtrain.trainer.base import Trainer\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tshtrain.trainer import Trainer\n",
        "from ..trainer import base\n",
        "from .. import trainer\n",
    ],
)
def test_checker_finds_upward_imports(source: str) -> None:
    problems = violations_in(source, "tshtrain.algorithm.dqn", is_package=False)
    assert len(problems) == 1
    assert "layer algorithm (rank 3) must not import layer trainer (rank 5)" in problems[0]


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\nfrom tshtrain.data.buffer import ReplayBuffer\n",
        "from tshtrain.errors import ConfigurationError\nimport tshtrain\n",
        "from tshtrain import __version__\n",
        "from . import policies\nfrom .base import Policy\n",
        "from ..functional import returns\n",
    ],
)
def test_checker_accepts_own_and_lower_layers(source: str) -> None:
    assert violations_in(source, "tshtrain.algorithm.dqn", is_package=False) == []


def test_checker_resolves_relative_imports_in_packages() -> None:
    # in tshtrain/data/__init__.py, "from .collector import X" is tshtrain.data.collector
    assert imported_modules("from .collector import X\n", "tshtrain.data", is_package=True) == [
        (1, "tshtrain.data.collector")
    ]
    problems = violations_in("from ..logger import base\n", "tshtrain.env", is_package=True)
    assert problems and "layer env (rank 1) must not import layer logger (rank 2)" in problems[0]


def test_checker_flags_modules_without_a_layer() -> None:
    assert violations_in("", "tshtrain.utils", is_package=False) == [
        "tshtrain.utils: top-level part 'utils' has no layer; add it to LAYER_RANKS (and DESIGN.md)"
    ]


def _module_graph() -> dict[str, set[str]]:
    """Module -> the tshtrain modules it imports (TYPE_CHECKING and function-level imports included;
    imports of a package's ``__init__`` are not edges: they are the public re-exports)."""
    paths = {module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for module, path in paths.items():
        for _, imported in imported_modules(path.read_text(), module, path.name == "__init__.py"):
            target = imported
            while target and target not in paths:  # "from tshtrain.x import name": the module tshtrain.x
                target = target.rpartition(".")[0]
            if target and target != module and paths[target].name != "__init__.py":
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (iterative, so deep graphs are fine)."""
    order: list[str] = []
    seen: set[str] = set()
    for start, targets in graph.items():  # first pass: finishing order
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(sorted(targets)))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                order.append(node)
                stack.pop()
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(sorted(graph[child]))))
    reverse: dict[str, set[str]] = {m: set() for m in graph}
    for module, targets in graph.items():
        for target in targets:
            reverse[target].add(module)
    components: list[list[str]] = []
    assigned: set[str] = set()
    for start in reversed(order):  # second pass on the reversed graph
        if start in assigned:
            continue
        component, pending = [], [start]
        assigned.add(start)
        while pending:
            node = pending.pop()
            component.append(node)
            for parent in reverse[node] - assigned:
                assigned.add(parent)
                pending.append(parent)
        if len(component) > 1:
            components.append(sorted(component))
    return components


def test_no_import_cycles() -> None:
    """No two files of tshtrain import each other, directly or around a loop (DESIGN.md)."""
    assert _cycles(_module_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
