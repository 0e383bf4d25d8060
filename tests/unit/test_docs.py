"""The docs do not rot: the generated params page is current, README's code compiles, links resolve."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OWN_PAGES = tuple(sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")))
"""the docs pages whose links and code blocks this module checks: all of them"""

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _load_generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_params_doc.py"
    spec = importlib.util.spec_from_file_location("gen_params_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _python_blocks(path: Path) -> list[str]:
    return _PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))


def _local_links(path: Path) -> list[str]:
    """Link targets that are paths in this repository, anchors included (no URLs)."""
    return [
        target
        for target in _LINK.findall(path.read_text(encoding="utf-8"))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)
    ]


def _anchors(path: Path) -> set[str]:
    """Anchors of a Markdown file's headings: an explicit ``{#id}`` (attr_list), else GitHub-style."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^#{1,6} (.*)$", line)
        explicit = re.search(r"\{#([\w-]+)\}\s*$", line)
        if match and explicit:
            anchors.add(explicit.group(1))
        elif match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def _broken(path: Path, target: str) -> bool:
    file_part, _, anchor = target.partition("#")
    linked = path if not file_part else path.parent / file_part
    if not linked.exists():
        return True
    return bool(anchor) and linked.suffix == ".md" and anchor not in _anchors(linked)


def test_params_doc_is_up_to_date() -> None:
    generator = _load_generator()
    current = (ROOT / "docs" / "params.md").read_text(encoding="utf-8")
    assert current == generator.render(), (
        "docs/params.md is stale (a params class changed); run: python scripts/gen_params_doc.py"
    )


def test_params_doc_check_flag_detects_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _load_generator()
    page = tmp_path / "params.md"
    page.write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(generator, "OUTPUT", page)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
    assert page.read_text(encoding="utf-8") == generator.render()


def test_params_doc_documents_every_field() -> None:
    import dataclasses

    from tshtrain.algorithm import BCParams, DQNParams, EpsilonSchedule, ReinforceParams
    from tshtrain.trainer import (
        OfflineTrainerParams,
        OffPolicyTrainerParams,
        OnlineTrainerParams,
        OnPolicyTrainerParams,
        TrainerParams,
    )

    text = (ROOT / "docs" / "params.md").read_text(encoding="utf-8")
    classes = [
        TrainerParams,
        OnlineTrainerParams,
        OnPolicyTrainerParams,
        OffPolicyTrainerParams,
        OfflineTrainerParams,
        ReinforceParams,
        DQNParams,
        EpsilonSchedule,
        BCParams,
    ]
    for cls in classes:
        assert f"### `{cls.__name__}`" in text
        for field in dataclasses.fields(cls):
            assert f"| `{field.name}` |" in text, f"{cls.__name__}.{field.name} missing from docs/params.md"


def test_readme_python_blocks_compile() -> None:
    blocks = _python_blocks(README)
    assert blocks, "README.md has no ```python block"
    for i, block in enumerate(blocks):
        compile(block, f"README.md[python block {i}]", "exec")


@pytest.mark.parametrize("page", OWN_PAGES)
def test_docs_python_blocks_compile(page: str) -> None:
    path = ROOT / "docs" / page
    for i, block in enumerate(_python_blocks(path)):
        compile(block, f"docs/{page}[python block {i}]", "exec")


def test_readme_docs_links_point_to_existing_files() -> None:
    links = [t for t in _local_links(README) if t.startswith("docs/")]
    assert links, "README.md links no docs/ page"
    missing = [t for t in links if _broken(README, t)]
    assert not missing, f"README.md links to missing files: {missing}"


@pytest.mark.parametrize("page", OWN_PAGES)
def test_docs_local_links_point_to_existing_files(page: str) -> None:
    path = ROOT / "docs" / page
    missing = [t for t in _local_links(path) if _broken(path, t)]
    assert not missing, f"docs/{page} links to missing files: {missing}"
