"""Write examples/configs/*.yaml from the algorithms' default experiments and the task examples.

Each algorithm's default experiment is written down once, in its ``AlgorithmSpec`` in its family's module
of tshtrain/config/algos/ (``tshtrain config ALGO`` prints it); the task examples beyond them are
``TASK_EXAMPLES`` in tshtrain/config/defaults.py. These files are generated from both (see
tshtrain/config/example_files.py; each file's last comment line names its source), and
tests/unit/test_config.py checks that the committed files equal what this script writes.

Usage::

    python scripts/generate_example_configs.py           # (re)write examples/configs/*.yaml
    python scripts/generate_example_configs.py --check   # exit 1 if a file is stale or missing
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tshtrain.config.example_files import example_files  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Generate examples/configs/*.yaml from the algorithms' default experiments (their "
        "AlgorithmSpec in tshtrain/config/algos/<family>.py) and the task examples (TASK_EXAMPLES in "
        "tshtrain/config/defaults.py)."
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale or missing")
    args = parser.parse_args(argv)
    stale = []
    for relative, text in example_files().items():
        path = ROOT / relative
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(relative)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {relative}")
    if args.check and stale:
        print(f"stale: {', '.join(stale)}; run: python scripts/generate_example_configs.py", file=sys.stderr)
        return 1
    if not stale:
        print("examples/configs is up to date.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
