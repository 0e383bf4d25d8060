"""docs/logging.md does not rot: its Python example runs and writes the logs it promises, the plot
command it shows works on them, and its links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.extras import need

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "logging.md"


def _anchors(path: Path) -> set[str]:
    return {
        re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        for m in re.finditer(r"^#{1,6} (.*)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    }


@pytest.mark.integration
def test_logging_page_example_runs_and_its_plot_command_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("matplotlib", "plot")
    from tshtrain.cli import main
    from tshtrain.logger import LogScope, read_csv_log, read_tensorboard_log

    (block,) = re.findall(
        r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL
    )
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/logging.md[python]", "exec"), {"__name__": "docs_logging"})
    run_dir = tmp_path / "runs" / "cartpole" / "seed0"
    csv, tb = read_csv_log(run_dir), read_tensorboard_log(run_dir)
    assert [step for step, _ in csv[LogScope.TEST]] == [0, 400, 800, 1200]
    assert [step for step, _ in csv[LogScope.INFO]] == [1, 2, 3]
    for scope in LogScope:
        assert [s for s, _ in csv[scope]] == [s for s, _ in tb[scope]]

    (command,) = re.findall(r"^tshtrain (plot .*)$", PAGE.read_text(encoding="utf-8"), re.MULTILINE)
    assert main(command.split()) == 0
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_logging_page_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", PAGE.read_text(encoding="utf-8")):
        file_part, _, anchor = target.partition("#")
        linked = PAGE if not file_part else PAGE.parent / file_part
        assert linked.exists(), target
        if anchor:
            assert anchor in _anchors(linked), target
