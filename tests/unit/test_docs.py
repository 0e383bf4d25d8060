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


# ---------------------------------------------------------------------------- the site's nav, API pages
API_PACKAGES = (
    "trainer", "algorithm", "data", "env", "logger",
    "checkpoint", "adapters", "callbacks", "parallel", "config",
)  # fmt: skip
"""the public packages (and the module ``parallel``) that the API reference has a page of"""


def _mkdocs() -> dict[str, object]:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml names Python objects (!!python/name:...) for the mermaid fences: read them as None
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    data: dict[str, object] = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    return data


def _nav_entries(items: object) -> list[tuple[str | None, str | None]]:
    """(title, page) of every nav entry, sections included (page None), recursively."""
    entries: list[tuple[str | None, str | None]] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            entries.append((None, item))
        elif isinstance(item, dict):
            for title, value in item.items():
                entries.append((title, value if isinstance(value, str) else None))
                entries.extend(_nav_entries(value))
    return entries


def test_the_nav_names_each_title_once() -> None:
    titles = [title for title, _ in _nav_entries(_mkdocs()["nav"]) if title is not None]
    assert titles.count("Command line") == 1
    assert sorted({t for t in titles if titles.count(t) > 1}) == []


def test_the_api_reference_has_a_page_per_public_package_built_by_mkdocstrings() -> None:
    import tomllib

    config = _mkdocs()
    pages = {page for _, page in _nav_entries(config["nav"]) if page is not None}
    for package in API_PACKAGES:
        page = ROOT / "docs" / "api" / f"{package}.md"
        assert f"\n::: tshtrain.{package}\n" in page.read_text(encoding="utf-8"), page
        assert f"api/{package}.md" in pages, package
    assert "api/index.md" in pages
    plugins = config["plugins"]
    assert isinstance(plugins, list) and any(isinstance(p, dict) and "mkdocstrings" in p for p in plugins)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(r.startswith("mkdocstrings[python]>=") for r in extras["optional-dependencies"]["docs"])
    assert "mkdocs build --strict" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_layout_lists_every_algorithm_of_the_registry() -> None:
    from tshtrain.config import SPECS

    text = README.read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :].split("```")[1]
    for spec in SPECS.values():
        name = spec.summary.split(":")[0]  # the algorithm's own name: "QR-DQN", "Discrete SAC", ...
        assert re.search(rf"(?<![\w+-]){re.escape(name)}(?![\w+-])", layout), name
    for python_only in ("GAIL", "ICM", "online imitation"):
        assert python_only in layout


def test_the_cli_page_documents_every_option_of_train_and_eval() -> None:
    import argparse

    from tshtrain.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    cli_page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    plot_page = (ROOT / "docs" / "logging.md").read_text(encoding="utf-8")
    for name, parser in commands.choices.items():
        page = plot_page if name == "plot" else cli_page
        for option in parser._option_string_actions:
            if option.startswith("--") and option not in ("--help", "--debug", "--output", "--format"):
                assert option in page, f"tshtrain {name} {option}"
    assert "`tshtrain train [CONFIG] --nproc N`" in cli_page
    assert re.search(r"## `tshtrain eval CHECKPOINT [^`]*--allow-module MODULE", cli_page)
