"""Save and load time and peak memory of a large replay buffer (1M CartPole-like transitions).

Run: python benchmarks/bench_buffer_io.py [--transitions 1000000] [--repeats 3]

Each measurement runs in a fresh subprocess so that its peak resident memory (ru_maxrss) is its own.
The buffer's arrays take B bytes; a streaming save/load needs about 1x B (the buffer itself), a naive
one that builds a second copy needs about 2x B. Prints medians and the peak memory as a multiple of B.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from harness import Clock, median_min_max


def _fill(transitions: int) -> object:
    from tshtrain.data import VectorReplayBuffer

    envs = 8
    buffer = VectorReplayBuffer(transitions, envs, seed=0)
    rng = np.random.default_rng(0)
    obs = rng.random((transitions // envs, envs, 4), dtype=np.float32)
    zeros = np.zeros(envs, dtype=bool)
    act = np.zeros(envs, dtype=np.int64)
    rew = np.ones(envs, dtype=np.float32)
    for row in obs:
        buffer.add(obs=row, act=act, rew=rew, terminated=zeros, truncated=zeros, obs_next=row)
    return buffer


def _child(mode: str, transitions: int, path: str) -> None:
    from tshtrain.data import load_buffer, save_buffer

    if mode == "save":
        buffer = _fill(transitions)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        clock = Clock()
        save_buffer(buffer, path)  # type: ignore[arg-type]
        nbytes = buffer.nbytes  # type: ignore[attr-defined]
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        clock = Clock()
        buffer = load_buffer(path)
        nbytes = buffer.nbytes
    seconds, cpu_seconds = clock.wall(), clock.cpu()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "extra_peak_bytes": (peak - base) * 1024,
                "nbytes": nbytes,
                "peak_bytes": peak * 1024,
            }
        )
    )


def _run(mode: str, transitions: int, path: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--transitions", str(transitions), "--path", path],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=["save", "load"])
    parser.add_argument("--path")
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.transitions, args.path)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "buffer")
        saves, loads = [], []
        for _ in range(args.repeats):  # interleaved: save, load, save, load ...
            saves.append(_run("save", args.transitions, path))
            loads.append(_run("load", args.transitions, path))
    nbytes = saves[0]["nbytes"]
    arrays_mib = nbytes / 2**20
    print(
        f"buffer of {args.transitions:,} transitions, arrays {arrays_mib:.1f} MiB, {args.repeats} runs each"
    )
    for name, runs in (("save", saves), ("load", loads)):
        median, low, high = median_min_max([r["seconds"] for r in runs])
        cpu = statistics.median(r["cpu_seconds"] for r in runs)
        extra = statistics.median(r["extra_peak_bytes"] / nbytes for r in runs)
        print(
            f"  {name}: median {median:.3f} s (min {low:.3f}, max {high:.3f}; CPU {cpu:.3f} s); "
            f"extra peak memory during {name}: median {extra:.2f}x the arrays"
        )


if __name__ == "__main__":
    main()
