"""Foundation benchmark: the Collector and the replay buffers against their limits and against peers.

Run from the repository root, in the benchmark venv (tshtrain[bench]: Tianshou 2.0.1, Stable-Baselines3)::

    python benchmarks/bench_foundation.py            # full run: writes JSON and docs/benchmarks.md
    python benchmarks/bench_foundation.py --quick    # smoke run: small sizes, JSON only
    python benchmarks/bench_foundation.py --profile  # also cProfile tshtrain's collect and sample

Workloads:

1. Collector throughput (env steps/s): CartPole-v1, 8 sync envs, a 2x64 tanh MLP taking the argmax
   of its logits, 100k env steps into a 100k-transition vector buffer. tshtrain's Collector (default
   settings, and with ``check_actions=False`` for information) vs a hand-written loop doing the same
   work (the limit) vs Tianshou 2.0.1's Collector.
2. Buffer (vector step of 8 transitions) add and ``sample(256)`` from 100k CartPole transitions:
   tshtrain's VectorReplayBuffer vs raw numpy vs Tianshou's VectorReplayBuffer vs SB3's ReplayBuffer.
3. Buffer memory (tracemalloc and ``nbytes`` vs the bytes of the fields) and add / sample cost at
   10k, 100k and 1M transitions.

Every workload runs its contestants interleaved over several repetitions with torch on one thread.
This is a script: it prints and records numbers, it never asserts a timing.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tracemalloc
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    Contestant,
    Goal,
    Run,
    TableResult,
    markdown_table,
    pin_torch_threads,
    print_table,
    run_interleaved,
)
from report import REPO_ROOT, RESULTS_DIR, environment_markdown, run_header, write_docs_section, write_json

from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env

ENV_ID = "CartPole-v1"
NUM_ENVS = 8
BATCH_SIZE = 256
SEED = 0
PACKAGES = ("tshtrain", "torch", "numpy", "gymnasium", "tianshou", "stable_baselines3")


@dataclass(frozen=True, kw_only=True)
class Config:
    collect_env_steps: int
    collect_reps: int
    buffer_transitions: int
    buffer_reps: int
    samples_per_rep: int
    memory_sizes: tuple[int, ...]
    memory_reps: int
    adds_per_rep: int


FULL = Config(
    collect_env_steps=100_000,
    collect_reps=9,
    buffer_transitions=100_000,
    buffer_reps=7,
    samples_per_rep=2_000,
    memory_sizes=(10_000, 100_000, 1_000_000),
    memory_reps=7,
    adds_per_rep=20_000,
)
QUICK = Config(
    collect_env_steps=4_000,
    collect_reps=2,
    buffer_transitions=8_000,
    buffer_reps=2,
    samples_per_rep=200,
    memory_sizes=(1_000, 10_000, 100_000),
    memory_reps=2,
    adds_per_rep=1_000,
)


# ============================================================================ policy (same MLP everywhere)
def make_mlp() -> nn.Module:
    """CartPole: 4 -> 64 -> 64 -> 2, tanh; fixed weights (seed 0) shared by all contestants."""
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)).eval()


def argmax_actions(mlp: nn.Module, obs: np.ndarray) -> np.ndarray:
    """The one piece of policy work every contestant does per vector step."""
    with torch.inference_mode():
        logits: torch.Tensor = mlp(torch.from_numpy(obs))
        return logits.argmax(-1).numpy()


class ArgmaxPolicy:
    """A minimal :class:`tshtrain.data.CollectorPolicy`: argmax of the MLP's logits, no noise."""

    def __init__(self, mlp: nn.Module):
        self.mlp = mlp

    def compute_actions(self, obs: np.ndarray, *, deterministic: bool) -> np.ndarray:
        del deterministic
        return argmax_actions(self.mlp, obs)

    def map_action(self, act: np.ndarray) -> np.ndarray:
        return act

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        return act

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        del rng
        return act


def make_tianshou_policy(mlp: nn.Module) -> Any:
    """The same policy as a Tianshou 2.x ``Policy`` (forward on a Batch, returns Batch(act=...))."""
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch

    class TianshouArgmaxPolicy(Policy):
        def __init__(self) -> None:
            space = gym.make(ENV_ID)
            super().__init__(
                action_space=space.action_space,
                observation_space=space.observation_space,
                action_bound_method=None,
            )
            self.mlp = mlp

        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Any:
            return Batch(act=argmax_actions(self.mlp, batch.obs), state=state)

    return TianshouArgmaxPolicy()


# ============================================================================ 1. collector throughput
@dataclass
class HandArrays:
    obs: np.ndarray
    act: np.ndarray
    rew: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    obs_next: np.ndarray

    @classmethod
    def empty(cls, num_vector_steps: int) -> HandArrays:
        t, e = num_vector_steps, NUM_ENVS
        return cls(
            obs=np.zeros((t, e, 4), np.float32),
            act=np.zeros((t, e), np.int64),
            rew=np.zeros((t, e), np.float32),
            terminated=np.zeros((t, e), bool),
            truncated=np.zeros((t, e), bool),
            obs_next=np.zeros((t, e, 4), np.float32),
        )


def hand_loop_setup(mlp: nn.Module, num_env_steps: int, out: list[HandArrays] | None = None) -> Run:
    """The limit: a plain loop over the same SyncVectorEnv writing into preallocated (T, E) arrays.

    It does what the collector does and nothing more: one batched forward, one env step, six row
    writes, the final-observation fix-up and the per-env episode return / length bookkeeping.
    """
    env = make_vector_env(ENV_ID, NUM_ENVS)
    first_obs, _ = env.reset(seed=SEED)
    num_vector_steps = -(-num_env_steps // NUM_ENVS)
    arrays = HandArrays.empty(num_vector_steps)
    if out is not None:
        out.append(arrays)

    def run() -> None:
        obs_T, act_T, rew_T = arrays.obs, arrays.act, arrays.rew
        term_T, trunc_T, obs_next_T = arrays.terminated, arrays.truncated, arrays.obs_next
        ep_return = np.zeros(NUM_ENVS)
        ep_len = np.zeros(NUM_ENVS, np.int64)
        returns: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        obs = first_obs
        for t in range(num_vector_steps):
            act = argmax_actions(mlp, obs)
            obs_next, rew, terminated, truncated, info = env.step(act)
            obs_T[t] = obs
            act_T[t] = act
            rew_T[t] = rew
            term_T[t] = terminated
            trunc_T[t] = truncated
            obs_next_T[t] = obs_next
            ep_return += rew
            ep_len += 1
            done = terminated | truncated
            if done.any():
                done_idx = np.flatnonzero(done)
                final = info["final_obs"]
                for i in done_idx:
                    obs_next_T[t, i] = final[i]
                returns.append(ep_return[done_idx])
                lens.append(ep_len[done_idx])
                ep_return[done_idx] = 0.0
                ep_len[done_idx] = 0
            obs = obs_next

    return run


def tshtrain_collector_setup(
    mlp: nn.Module, num_env_steps: int, *, check_actions: bool = True, out: list[Collector] | None = None
) -> Run:
    env = make_vector_env(ENV_ID, NUM_ENVS)
    buffer = VectorReplayBuffer(max(num_env_steps, 100_000), NUM_ENVS, seed=SEED)
    collector = Collector(ArgmaxPolicy(mlp), env, buffer, seed=SEED, check_actions=check_actions)
    if out is not None:
        out.append(collector)
    return lambda: collector.collect(n_step=num_env_steps) and None


def tianshou_collector_setup(mlp: nn.Module, num_env_steps: int) -> Run:
    from tianshou.data import Collector as TsCollector
    from tianshou.data import VectorReplayBuffer as TsVectorReplayBuffer
    from tianshou.env import DummyVectorEnv

    env = DummyVectorEnv([lambda: gym.make(ENV_ID) for _ in range(NUM_ENVS)])
    env.seed(SEED)
    buffer = TsVectorReplayBuffer(max(num_env_steps, 100_000), NUM_ENVS)
    collector = TsCollector(make_tianshou_policy(mlp), env, buffer)
    collector.reset()
    return lambda: collector.collect(n_step=num_env_steps) and None


def check_same_work(mlp: nn.Module) -> str:
    """tshtrain's collector and the hand loop must store identical transitions (else the ratio lies)."""
    num_env_steps = 4_000
    collectors: list[Collector] = []
    hands: list[HandArrays] = []
    tshtrain_collector_setup(mlp, num_env_steps, out=collectors)()
    hand_loop_setup(mlp, num_env_steps, out=hands)()
    arrays = collectors[0].buffer.field_arrays()  # type: ignore[union-attr]
    t = num_env_steps // NUM_ENVS
    for name in ("obs", "act", "rew", "terminated", "truncated", "obs_next"):
        if not np.array_equal(arrays[name][:t], getattr(hands[0], name)):
            raise RuntimeError(f"tshtrain's Collector and the hand loop stored different {name!r}")
    episodes = int(hands[0].terminated.sum() + hands[0].truncated.sum())
    return (
        f"tshtrain Collector and hand loop stored identical transitions "
        f"({num_env_steps} env steps, {episodes} episode ends)"
    )


def bench_collector(cfg: Config) -> TableResult:
    mlp = make_mlp()
    n = cfg.collect_env_steps
    warm = min(n, 2_000)
    note = check_same_work(mlp)
    print(f"  {note}")
    contestants = [
        Contestant(
            name="tshtrain Collector",
            setup=lambda: tshtrain_collector_setup(mlp, n),
            warmup_setup=lambda: tshtrain_collector_setup(mlp, warm),
            work=n,
        ),
        Contestant(
            name="hand loop",
            setup=lambda: hand_loop_setup(mlp, n),
            warmup_setup=lambda: hand_loop_setup(mlp, warm),
            work=n,
        ),
        Contestant(
            name="Tianshou Collector",
            setup=lambda: tianshou_collector_setup(mlp, n),
            warmup_setup=lambda: tianshou_collector_setup(mlp, warm),
            work=n,
        ),
        Contestant(
            name="tshtrain Collector, check_actions=False",
            setup=lambda: tshtrain_collector_setup(mlp, n, check_actions=False),
            warmup_setup=lambda: tshtrain_collector_setup(mlp, warm, check_actions=False),
            work=n,
            info_only=True,
        ),
    ]
    rows = run_interleaved(contestants, reps=cfg.collect_reps, unit="env steps/s", label="collect")
    return TableResult(
        title=f"Collector throughput: {ENV_ID}, {NUM_ENVS} sync envs, 2x64 tanh MLP argmax, {n:,} env steps",
        unit="env steps/s",
        rows=rows,
        goals=[
            Goal(numerator="tshtrain Collector", denominator="hand loop", target=0.9),
            Goal(numerator="tshtrain Collector", denominator="Tianshou Collector", target=3.0),
        ],
        notes=[f"Check: {note}."],
    )


# ============================================================================ 2. buffer add and sample
@dataclass
class Dataset:
    """(T, E) CartPole transitions recorded once by the hand loop; every buffer is filled from them."""

    arrays: HandArrays

    @property
    def num_rows(self) -> int:
        return len(self.arrays.rew)

    def row(self, t: int) -> dict[str, np.ndarray]:
        a = self.arrays
        t %= self.num_rows
        return {
            "obs": a.obs[t],
            "act": a.act[t],
            "rew": a.rew[t],
            "terminated": a.terminated[t],
            "truncated": a.truncated[t],
            "obs_next": a.obs_next[t],
        }


def record_dataset(num_transitions: int) -> Dataset:
    out: list[HandArrays] = []
    hand_loop_setup(make_mlp(), num_transitions, out=out)()
    return Dataset(out[0])


def fill_tshtrain(data: Dataset, size: int, num_adds: int | None = None) -> Callable[[], VectorReplayBuffer]:
    buf = VectorReplayBuffer(size, NUM_ENVS, seed=SEED)
    rows = [data.row(t) for t in range(num_adds if num_adds is not None else size // NUM_ENVS)]

    def run() -> VectorReplayBuffer:
        for row in rows:
            buf.add(**row)
        return buf

    return run


class RawNumpyBuffer:
    """The limit: preallocated flat arrays, one row write per field, rng.integers + fancy index."""

    def __init__(self, size: int):
        rows = size // NUM_ENVS
        self.capacity_rows = rows
        self.arrays = HandArrays.empty(rows)
        self.flat = {k: v.reshape(rows * NUM_ENVS, *v.shape[2:]) for k, v in vars(self.arrays).items()}
        self.ptr = 0
        self.filled_rows = 0
        self.rng = np.random.default_rng(SEED)

    def add(self, row: dict[str, np.ndarray]) -> None:
        a, p = self.arrays, self.ptr
        a.obs[p] = row["obs"]
        a.act[p] = row["act"]
        a.rew[p] = row["rew"]
        a.terminated[p] = row["terminated"]
        a.truncated[p] = row["truncated"]
        a.obs_next[p] = row["obs_next"]
        self.ptr = (p + 1) % self.capacity_rows
        self.filled_rows = min(self.filled_rows + 1, self.capacity_rows)

    def sample(self, batch_size: int) -> tuple[np.ndarray, ...]:
        idx = self.rng.integers(0, self.filled_rows * NUM_ENVS, size=batch_size)
        f = self.flat
        return (
            f["obs"][idx], f["act"][idx], f["rew"][idx], f["terminated"][idx], f["truncated"][idx],
            f["obs_next"][idx], idx,
        )  # fmt: skip


def tianshou_rows(data: Dataset, num_adds: int) -> list[Any]:
    from tianshou.data import Batch

    return [Batch(**data.row(t), info=Batch()) for t in range(num_adds)]


def sb3_rows(data: Dataset, num_adds: int) -> list[dict[str, Any]]:
    out = []
    for t in range(num_adds):
        r = data.row(t)
        done = r["terminated"] | r["truncated"]
        timeouts = r["truncated"] & ~r["terminated"]
        infos = [{"TimeLimit.truncated": bool(x)} for x in timeouts]
        out.append(
            {
                "obs": r["obs"],
                "next_obs": r["obs_next"],
                "action": r["act"],
                "reward": r["rew"],
                "done": done,
                "infos": infos,
            }
        )
    return out


def make_sb3_buffer(size: int) -> Any:
    from stable_baselines3.common.buffers import ReplayBuffer as Sb3ReplayBuffer

    env = gym.make(ENV_ID)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Sb3ReplayBuffer(size, env.observation_space, env.action_space, device="cpu", n_envs=NUM_ENVS)


def bench_buffer(cfg: Config, data: Dataset) -> tuple[TableResult, TableResult]:
    size = cfg.buffer_transitions
    num_adds = size // NUM_ENVS
    rows = [data.row(t) for t in range(num_adds)]
    ts_rows = tianshou_rows(data, num_adds)
    sb3_in = sb3_rows(data, num_adds)
    filled: dict[str, Any] = {}

    def tshtrain_fill() -> Run:
        buf = VectorReplayBuffer(size, NUM_ENVS, seed=SEED)
        filled["tshtrain"] = buf

        def run() -> None:
            for row in rows:
                buf.add(**row)

        return run

    def raw_fill() -> Run:
        buf = RawNumpyBuffer(size)
        filled["raw numpy"] = buf

        def run() -> None:
            for row in rows:
                buf.add(row)

        return run

    def tianshou_fill() -> Run:
        from tianshou.data import VectorReplayBuffer as TsVectorReplayBuffer

        buf = TsVectorReplayBuffer(size, NUM_ENVS)
        filled["Tianshou"] = buf
        ids = np.arange(NUM_ENVS)

        def run() -> None:
            for b in ts_rows:
                buf.add(b, buffer_ids=ids)

        return run

    def sb3_fill() -> Run:
        buf = make_sb3_buffer(size)
        filled["SB3"] = buf

        def run() -> None:
            for r in sb3_in:
                buf.add(**r)

        return run

    add_contestants = [
        Contestant(name="tshtrain VectorReplayBuffer", setup=tshtrain_fill, work=num_adds),
        Contestant(name="raw numpy", setup=raw_fill, work=num_adds),
        Contestant(name="Tianshou VectorReplayBuffer", setup=tianshou_fill, work=num_adds),
        Contestant(name="SB3 ReplayBuffer", setup=sb3_fill, work=num_adds),
    ]
    add_rows = run_interleaved(
        add_contestants, reps=cfg.buffer_reps, unit="adds/s", warmup=False, label="add"
    )
    add_table = TableResult(
        title=f"Buffer add: one vector step ({NUM_ENVS} CartPole transitions), filling {size:,} transitions",
        unit="adds/s",
        rows=add_rows,
        goals=[
            Goal(numerator="tshtrain VectorReplayBuffer", denominator="raw numpy", target=0.7),
            Goal(
                numerator="tshtrain VectorReplayBuffer", denominator="Tianshou VectorReplayBuffer", target=2.0
            ),
            Goal(numerator="tshtrain VectorReplayBuffer", denominator="SB3 ReplayBuffer", target=1.0),
        ],
        notes=["Goals for add are this script's own (the issue sets goals for sample only)."],
    )

    bufs = dict(filled)  # the buffers filled by the last repetition (all full: 100k transitions)
    k = cfg.samples_per_rep
    tsh, raw, ts, sb3 = bufs["tshtrain"], bufs["raw numpy"], bufs["Tianshou"], bufs["SB3"]
    np.random.seed(SEED)  # SB3 samples with the global numpy generator

    def loop(fn: Callable[[], Any]) -> Callable[[], Run]:
        def setup() -> Run:
            def run() -> None:
                for _ in range(k):
                    fn()

            return run

        return setup

    sample_contestants = [
        Contestant(name="tshtrain VectorReplayBuffer", setup=loop(lambda: tsh.sample(BATCH_SIZE)), work=k),
        Contestant(name="raw numpy", setup=loop(lambda: raw.sample(BATCH_SIZE)), work=k),
        Contestant(name="Tianshou VectorReplayBuffer", setup=loop(lambda: ts.sample(BATCH_SIZE)), work=k),
        Contestant(name="SB3 ReplayBuffer", setup=loop(lambda: sb3.sample(BATCH_SIZE)), work=k),
        Contestant(
            name="tshtrain sample(...).to_torch()",
            setup=loop(lambda: tsh.sample(BATCH_SIZE).to_torch()),
            work=k,
            info_only=True,
        ),
    ]
    sample_rows = run_interleaved(
        sample_contestants, reps=cfg.buffer_reps, unit="sample calls/s", label="sample"
    )
    sample_table = TableResult(
        title=f"Buffer sample({BATCH_SIZE}) from {size:,} CartPole transitions in an {NUM_ENVS}-env buffer, "
        f"{k:,} calls per repetition",
        unit="sample calls/s",
        rows=sample_rows,
        goals=[
            Goal(numerator="tshtrain VectorReplayBuffer", denominator="raw numpy", target=0.7),
            Goal(
                numerator="tshtrain VectorReplayBuffer", denominator="Tianshou VectorReplayBuffer", target=2.0
            ),
            Goal(numerator="tshtrain VectorReplayBuffer", denominator="SB3 ReplayBuffer", target=1.0),
            Goal(numerator="tshtrain sample(...).to_torch()", denominator="SB3 ReplayBuffer", target=1.0),
        ],
        notes=[
            "SB3's `sample` returns torch tensors (it copies each field into a new tensor); the *to_torch* "
            "row is tshtrain's like-for-like counterpart (`TransitionBatch.to_torch()`, zero-copy "
            "`torch.as_tensor`). Tianshou and tshtrain's `sample` return numpy arrays."
        ],
    )
    return add_table, sample_table


# ============================================================================ 3. memory and size scaling
FIELD_BYTES = {"obs": 16, "act": 8, "rew": 4, "terminated": 1, "truncated": 1, "obs_next": 16}
"""bytes per CartPole transition and field: obs 4 x float32, act int64, rew float32, 2 x bool, obs_next"""


def traced_bytes_of(build: Callable[[], Any]) -> tuple[Any, int, int]:
    """(result, bytes still allocated after build, peak extra bytes during build) per tracemalloc."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    result = build()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, current - before, peak - before


def bench_memory(cfg: Config, data: Dataset) -> tuple[dict[str, Any], TableResult, TableResult]:
    memory_rows: list[dict[str, Any]] = []
    buffers: dict[int, VectorReplayBuffer] = {}
    for size in cfg.memory_sizes:
        buf, traced, peak = traced_bytes_of(fill_tshtrain(data, size))
        buffers[size] = buf
        stored = (size // NUM_ENVS) * NUM_ENVS
        expected = stored * sum(FIELD_BYTES.values())
        memory_rows.append(
            {
                "library": "tshtrain",
                "transitions": stored,
                "expected_bytes": expected,
                "nbytes": buf.nbytes,
                "tracemalloc_bytes": traced,
                "tracemalloc_peak_bytes": peak,
                "tracemalloc_over_expected": traced / expected,
                "nbytes_over_expected": buf.nbytes / expected,
                "bytes_per_transition": traced / stored,
            }
        )
        print(
            f"  memory {stored:>9,} transitions: tracemalloc {traced:,} B, nbytes {buf.nbytes:,} B, "
            f"fields {expected:,} B -> x{traced / expected:.3f} / x{buf.nbytes / expected:.3f}",
            flush=True,
        )
    # peers at one size, for information: same data, each library's own storage choices
    mid = cfg.memory_sizes[len(cfg.memory_sizes) // 2]
    peer_builds = {"Tianshou": _tianshou_filled(data, mid), "SB3": _sb3_filled(data, mid)}
    for name, build in peer_builds.items():
        _, traced, peak = traced_bytes_of(build)
        memory_rows.append(
            {
                "library": name,
                "transitions": mid,
                "tracemalloc_bytes": traced,
                "tracemalloc_peak_bytes": peak,
                "bytes_per_transition": traced / mid,
            }
        )
        print(
            f"  memory {name} {mid:,} transitions: tracemalloc {traced:,} B = {traced / mid:.1f} B/transition"
        )

    k = cfg.adds_per_rep
    rows = [data.row(t) for t in range(k)]
    raw = RawNumpyBuffer(mid)

    def add_setup(buf: VectorReplayBuffer | RawNumpyBuffer) -> Callable[[], Run]:
        def setup() -> Run:
            if isinstance(buf, RawNumpyBuffer):
                return lambda: [buf.add(row) for row in rows] and None
            return lambda: [buf.add(**row) for row in rows] and None

        return setup

    def sample_setup(buf: VectorReplayBuffer | RawNumpyBuffer) -> Callable[[], Run]:
        return lambda: lambda: [buf.sample(BATCH_SIZE) for _ in range(k)] and None

    sizes = cfg.memory_sizes
    raws = {}
    for s in sizes:  # raw numpy twins of the tshtrain buffers, full, holding the same rows
        raws[s] = RawNumpyBuffer(s)
        for t in range(s // NUM_ENVS):
            raws[s].add(data.row(t))
    add_table = TableResult(
        title=f"tshtrain buffer add (one vector step of {NUM_ENVS}) into a full buffer, by size; "
        f"{k:,} adds per repetition",
        unit="adds/s",
        rows=run_interleaved(
            [Contestant(name=f"add @{s:,}", setup=add_setup(buffers[s]), work=k) for s in sizes]
            + [Contestant(name=f"raw numpy add @{mid:,}", setup=add_setup(raw), work=k, info_only=True)],
            reps=cfg.memory_reps,
            unit="adds/s",
            label="add by size",
        ),
        goals=[Goal(numerator=f"add @{sizes[-1]:,}", denominator=f"add @{sizes[0]:,}", target=0.8)],
        notes=[
            "Flat means: the largest buffer adds at >= 0.8x the rate of the smallest (this script's bar)."
        ],
    )
    by_size_rows = run_interleaved(
        [Contestant(name=f"sample @{s:,}", setup=sample_setup(buffers[s]), work=k) for s in sizes]
        + [
            Contestant(name=f"raw numpy sample @{s:,}", setup=sample_setup(raws[s]), work=k, info_only=True)
            for s in sizes
        ],
        reps=cfg.memory_reps,
        unit="sample calls/s",
        label="sample by size",
    )
    rate = {r.name: r.median() for r in by_size_rows}
    small, large = f"{sizes[0]:,}", f"{sizes[-1]:,}"
    sample_table = TableResult(
        title=f"tshtrain buffer sample({BATCH_SIZE}) from a full buffer, by size; {k:,} calls per repetition",
        unit="sample calls/s",
        rows=by_size_rows,
        goals=[
            Goal(numerator=f"sample @{s:,}", denominator=f"raw numpy sample @{s:,}", target=0.7)
            for s in sizes
        ],
        notes=[
            f"Random gathers slow down once the buffer outgrows the CPU caches, for raw numpy as much as for "
            f"tshtrain (wall-clock median @{large} / @{small}: tshtrain "
            f"{rate[f'sample @{large}'] / rate[f'sample @{small}']:.2f}, raw numpy "
            f"{rate[f'raw numpy sample @{large}'] / rate[f'raw numpy sample @{small}']:.2f}). That is the "
            f"memory system, not per-call overhead, so *flat* here means: tshtrain / raw numpy stays the "
            f"same at every size (the ratios above)."
        ],
    )
    return {"rows": memory_rows}, add_table, sample_table


def _tianshou_filled(data: Dataset, size: int) -> Callable[[], Any]:
    from tianshou.data import VectorReplayBuffer as TsVectorReplayBuffer

    ts_rows = tianshou_rows(data, size // NUM_ENVS)
    ids = np.arange(NUM_ENVS)

    def build() -> Any:
        buf = TsVectorReplayBuffer(size, NUM_ENVS)
        for b in ts_rows:
            buf.add(b, buffer_ids=ids)
        return buf

    return build


def _sb3_filled(data: Dataset, size: int) -> Callable[[], Any]:
    rows = sb3_rows(data, size // NUM_ENVS)

    def build() -> Any:
        buf = make_sb3_buffer(size)
        for r in rows:
            buf.add(**r)
        return buf

    return build


def memory_markdown(memory: dict[str, Any]) -> str:
    lines = [
        "**Buffer memory** (CartPole: 46 bytes of fields per transition)",
        "",
        "| library | transitions | fields (expected) | `nbytes` | tracemalloc | tracemalloc / expected "
        "| peak during fill |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in memory["rows"]:
        if r["library"] == "tshtrain":
            lines.append(
                f"| tshtrain | {r['transitions']:,} | {r['expected_bytes']:,} B | {r['nbytes']:,} B | "
                f"{r['tracemalloc_bytes']:,} B | {r['tracemalloc_over_expected']:.3f} | "
                f"{r['tracemalloc_peak_bytes']:,} B |"
            )
        else:
            lines.append(
                f"| {r['library']} *(info)* | {r['transitions']:,} | – | – | {r['tracemalloc_bytes']:,} B "
                f"({r['bytes_per_transition']:.1f} B/transition) | – | {r['tracemalloc_peak_bytes']:,} B |"
            )
    lines += ["", "Goal: tracemalloc and `nbytes` within 10% of the fields' bytes."]
    return "\n".join(lines)


# ============================================================================ profiling
def profile_hot_paths(cfg: Config, data: Dataset) -> str:
    mlp = make_mlp()
    out = io.StringIO()
    for label, setup in (
        ("tshtrain Collector.collect", lambda: tshtrain_collector_setup(mlp, cfg.collect_env_steps)),
        ("hand loop", lambda: hand_loop_setup(mlp, cfg.collect_env_steps)),
    ):
        run = setup()
        prof = cProfile.Profile()
        prof.runcall(run)
        out.write(f"\n==== cProfile: {label}, {cfg.collect_env_steps:,} env steps ====\n")
        out.write(_share_breakdown(pstats.Stats(prof)))
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(22)
    buf = fill_tshtrain(data, cfg.buffer_transitions)()
    rows = [data.row(t) for t in range(cfg.adds_per_rep)]
    prof = cProfile.Profile()
    prof.runcall(lambda: [buf.add(**row) for row in rows])
    out.write(f"\n==== cProfile: tshtrain add (vector step of {NUM_ENVS}) x {cfg.adds_per_rep:,} ====\n")
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
    prof = cProfile.Profile()
    prof.runcall(lambda: [buf.sample(BATCH_SIZE) for _ in range(cfg.samples_per_rep)])
    out.write(f"\n==== cProfile: tshtrain sample({BATCH_SIZE}) x {cfg.samples_per_rep:,} ====\n")
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
    return out.getvalue()


_BREAKDOWN_KEYS = (
    "tshtrain/",
    "benchmarks/bench_foundation.py",
    "sync_vector_env.py",
)


def _share_breakdown(stats: pstats.Stats) -> str:
    """Cumulative time of tshtrain's functions, the env step and the policy, as shares of the run."""
    entries = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table in .stats
    total = max(ct for (_, _, _, ct, _) in entries.values())
    lines = [f"cumulative time by function (share of the profiled run, {total:.3f} s):"]
    for (file, line, fn), (_, ncalls, tottime, cumtime, _) in sorted(
        entries.items(), key=lambda kv: -kv[1][3]
    ):
        if not any(k in file for k in _BREAKDOWN_KEYS) or cumtime < 0.001 * total:
            continue
        where = file.split("site-packages/")[-1].split(str(REPO_ROOT) + "/")[-1]
        lines.append(
            f"  {100 * cumtime / total:5.1f}%  cum {cumtime:7.3f} s  self {tottime:7.3f} s  "
            f"n={ncalls:<7d} {where}:{line}({fn})"
        )
    return "\n".join(lines) + "\n\n"


# ============================================================================ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke run)")
    parser.add_argument("--profile", action="store_true", help="also cProfile the collector and sample")
    parser.add_argument(
        "--docs", choices=("auto", "yes", "no"), default="auto",
        help="write docs/benchmarks.md (auto: full runs only)",
    )  # fmt: skip
    parser.add_argument("--only", choices=("collector", "buffer", "memory"), action="append")
    parser.add_argument("--render", type=Path, metavar="JSON", help="only rewrite the docs from a saved run")
    args = parser.parse_args()
    if args.render is not None:
        render(args.render)
        return
    cfg = QUICK if args.quick else FULL
    only = set(args.only or ("collector", "buffer", "memory"))
    pin_torch_threads()
    header = run_header(PACKAGES)
    print(f"run: {header}\nconfig: {cfg}")

    tables: list[TableResult] = []
    memory: dict[str, Any] | None = None
    if "collector" in only:
        print("\n[1] collector throughput")
        tables.append(bench_collector(cfg))
        print_table(tables[-1])
    data = None
    if only & {"buffer", "memory"}:
        data = record_dataset(max(cfg.buffer_transitions, cfg.adds_per_rep * NUM_ENVS))
    if "buffer" in only:
        assert data is not None
        print("\n[2] buffer add and sample")
        tables.extend(bench_buffer(cfg, data))
        for t in tables[-2:]:
            print_table(t)
    if "memory" in only:
        assert data is not None
        print("\n[3] buffer memory and size scaling")
        memory, add_by_size, sample_by_size = bench_memory(cfg, data)
        tables += [add_by_size, sample_by_size]
        print_table(add_by_size)
        print_table(sample_by_size)
    profile = None
    if args.profile:
        profile = profile_hot_paths(cfg, data if data is not None else record_dataset(cfg.buffer_transitions))
        print(profile)

    name = (
        "foundation"
        + ("" if len(only) == 3 else "_" + "_".join(sorted(only)))
        + ("_quick" if args.quick else "")
    )
    payload = {
        "benchmark": "foundation",
        "quick": args.quick,
        "config": asdict(cfg),
        **header,
        "tables": [t.to_json() for t in tables],
        "memory": memory,
    }
    print(f"\nwrote {write_json(name, payload)}")
    if profile is not None:
        (RESULTS_DIR / f"{name}_profile.txt").write_text(profile)
    write_docs = args.docs == "yes" or (args.docs == "auto" and not args.quick and len(only) == 3)
    if write_docs:
        print(f"wrote {write_docs_section('foundation', docs_section(payload, tables))}")


def docs_section(payload: dict[str, Any], tables: list[TableResult]) -> str:
    """The generated part of docs/benchmarks.md for one run (its JSON payload and tables)."""
    parts = [
        "## Foundation: collector and buffer",
        "",
        "Rerun (in a venv with `pip install -e '.[bench]'`, torch installed first):",
        "",
        "```",
        "python benchmarks/bench_foundation.py            # full run: results/foundation.json + this section",
        "python benchmarks/bench_foundation.py --quick    # smoke run, JSON only",
        "python benchmarks/bench_foundation.py --profile  # also cProfile (results/foundation_profile.txt)",
        "python benchmarks/bench_foundation.py --render benchmarks/results/foundation.json  # docs only",
        "```",
        "",
        environment_markdown(payload),
        "",
        "How to read the tables: rates are work units per second, higher is better. *wall* divides by "
        "wall-clock time, *CPU* by this process's CPU time (which leaves out time spent waiting for a CPU "
        "on a busy machine). A ratio is given as the ratio of the two medians, then in brackets the median "
        "and the range of the per-repetition ratios (each repetition runs the contestants back to back, so "
        "its ratio is the least disturbed by load that comes and goes). *(info)* rows are not judged.",
        "",
    ]
    for t in tables:
        parts += [markdown_table(t), ""]
    if payload.get("memory") is not None:
        parts += [memory_markdown(payload["memory"]), ""]
    return "\n".join(parts)


def render(path: Path) -> None:
    """Rewrite the docs section from a saved run (no benchmarking)."""
    payload = json.loads(path.read_text())
    tables = [TableResult.from_json(t) for t in payload["tables"]]
    for t in tables:
        print_table(t)
    print(f"wrote {write_docs_section('foundation', docs_section(payload, tables))}")


if __name__ == "__main__":
    main()
