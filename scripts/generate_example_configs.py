"""Write examples/configs/*.yaml from the default experiments of tshtrain/config/defaults.py.

tshtrain/config/defaults.py is the one place where the example runs' hyperparameters are written down;
these files are generated from it (see tshtrain/config/example_files.py), and tests/unit/test_config.py
checks that the committed files equal what this script writes.

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
        description="Generate examples/configs/*.yaml from tshtrain/config/defaults.py."
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
