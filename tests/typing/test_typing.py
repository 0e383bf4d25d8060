"""Typing tests: mypy accepts correct use of the public API and rejects misuse, line by line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SNIPPETS = Path(__file__).parent / "snippets"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], list[str]]:
    api = pytest.importorskip("mypy.api")
    cache = tmp_path_factory.mktemp("mypy_cache")
    files = sorted(str(p) for p in SNIPPETS.glob("*.py"))
    stdout, _, _ = api.run(
        ["--config-file", str(ROOT / "mypy.ini"), "--cache-dir", str(cache), "--no-error-summary", *files]
    )
    errors: dict[tuple[str, int], list[str]] = {}
    for line in stdout.splitlines():
        match = re.match(r"(.+?\.py):(\d+): error: (.*)", line)
        if match:
            errors.setdefault((Path(match[1]).name, int(match[2])), []).append(match[3])
    return errors


def test_correct_use_type_checks(mypy_errors: dict[tuple[str, int], list[str]]) -> None:
    found = {k: v for k, v in mypy_errors.items() if k[0].startswith("pass_")}
    assert not found, found


@pytest.mark.parametrize("snippet", sorted(p.name for p in SNIPPETS.glob("fail_*.py")))
def test_misuse_is_rejected_on_each_marked_line(
    snippet: str, mypy_errors: dict[tuple[str, int], list[str]]
) -> None:
    lines = (SNIPPETS / snippet).read_text().splitlines()
    expected = {i + 1 for i, text in enumerate(lines) if text.rstrip().endswith("# expect-error")}
    got = {line for (name, line) in mypy_errors if name == snippet}
    assert expected, "no expect-error markers"
    assert expected - got == set(), f"mypy accepted lines {sorted(expected - got)} of {snippet}"
    assert got - expected == set(), (
        f"unexpected errors: { {k: v for k, v in mypy_errors.items() if k[0] == snippet} }"
    )
