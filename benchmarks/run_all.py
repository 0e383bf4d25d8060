"""Run the whole benchmark suite, one script after the other, in fresh processes.

Run from the repository root, in the benchmark venv (``pip install -e '.[bench]'``)::

    python benchmarks/run_all.py            # full suite: JSON in benchmarks/results/, docs/benchmarks.md
    python benchmarks/run_all.py --quick    # smoke run of every script (JSON only, docs untouched)

Each script pins torch to one thread and interleaves its contestants; see ``docs/benchmarks.md``.
A full run takes hours on a 2-CPU machine (the end-to-end part dominates).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "bench_foundation.py",  # 1, 2: collector and buffer; buffer-size scaling
    "bench_scaling.py",  # 6: envs 1..64 sync/async, trainer overhead by epochs, import / start-up
    "bench_e2e.py",  # 3, 4, 5: PPO, DQN, SAC end to end
)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run of every script")
    parser.add_argument("--skip", nargs="*", default=[], help="script names to leave out")
    args = parser.parse_args()
    failures = []
    for script in SCRIPTS:
        if script in args.skip:
            continue
        cmd = [sys.executable, str(HERE / script), *(["--quick"] if args.quick else [])]
        print(f"\n######## {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        code = subprocess.run(cmd, cwd=HERE.parent, check=False).returncode
        print(f"######## {script}: exit {code}, {time.perf_counter() - start:.0f} s", flush=True)
        if code != 0:
            failures.append(script)
    if failures:
        print(f"failed: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
