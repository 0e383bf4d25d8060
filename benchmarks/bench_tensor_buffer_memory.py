"""Memory of a TensorReplayBuffer: the bytes of its tensors (``nbytes``) against the growth of the
process's resident memory (RSS) when it is allocated and filled, for 1M transitions of a few
observation kinds. The buffer should cost its arrays and nothing more (ratio ~1.0).

Run: PYTHONPATH=. python benchmarks/bench_tensor_buffer_memory.py [--size 1000000] [--num-envs 64]
(CPU; on a GPU machine pass --device cuda to see the device side in torch.cuda.memory_allocated).
"""

from __future__ import annotations

import argparse
import gc

import torch

from tshtrain.data import TensorReplayBuffer


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * 4096


def measure_rss(
    name: str, obs_shape: tuple[int, ...], obs_dtype: torch.dtype, *, size: int, num_envs: int, device: str
) -> None:
    """One table row: a buffer of ``size`` transitions of ``obs_shape`` filled, its bytes vs RSS growth."""
    gc.collect()
    before = rss_bytes()
    cuda_before = torch.cuda.memory_allocated() if device.startswith("cuda") else 0
    buffer = TensorReplayBuffer(size, num_envs, device=torch.device(device), seed=0)
    dev = torch.device(device)
    obs = torch.zeros((num_envs, *obs_shape), dtype=obs_dtype, device=dev)
    act = torch.zeros(num_envs, dtype=torch.int64, device=dev)
    rew = torch.ones(num_envs, dtype=torch.float32, device=dev)
    flag = torch.zeros(num_envs, dtype=torch.bool, device=dev)
    for _ in range(buffer.column_capacity):  # touch every row: RSS counts written pages only
        buffer.add(obs=obs, act=act, rew=rew, terminated=flag, truncated=flag, obs_next=obs)
    gc.collect()
    grown = rss_bytes() - before
    device_bytes = (torch.cuda.memory_allocated() - cuda_before) if device.startswith("cuda") else grown
    print(
        f"| {name:<22} | {len(buffer):>9,} | {buffer.nbytes / 2**20:>10.1f} | {grown / 2**20:>13.1f} | "
        f"{device_bytes / max(buffer.nbytes, 1):>6.3f} |"
    )
    del buffer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(
        f"TensorReplayBuffer memory, {args.size:,} transitions, {args.num_envs} columns, device {args.device}"
    )
    print("| observations           | stored    | nbytes MiB | RSS grown MiB | ratio  |")
    print("|------------------------|-----------|------------|---------------|--------|")
    for name, shape, dtype, size in (
        ("CartPole (4,) float32", (4,), torch.float32, args.size),
        ("vector (64,) float32", (64,), torch.float32, args.size),
        ("image (3,32,32) uint8", (3, 32, 32), torch.uint8, args.size // 4),
    ):
        measure_rss(name, shape, dtype, size=size, num_envs=args.num_envs, device=args.device)


if __name__ == "__main__":
    main()
