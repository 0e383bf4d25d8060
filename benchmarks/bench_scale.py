"""Scale-out benchmark: env workers (subprocesses, Ray actors), data-parallel PPO on torch.distributed,
the communication costs behind them, and an extrapolation to 8 and 64 workers / ranks.

Run from the repository root (ray installed for the Ray rows)::

    python benchmarks/bench_scale.py            # everything: tables, JSON, benchmarks/results/scale.md
    python benchmarks/bench_scale.py --quick    # smoke run (fewer steps and repetitions), JSON only
    python benchmarks/bench_scale.py --only envs comm

Parts (``--only``):

* **envs** -- env steps/s of a bare vector-env loop (random actions, no policy) for a busy env whose step
  costs ~1 ms of CPU (``busy_env.py``) and for CartPole-v1: Gymnasium's sync vector env with 1 env (the
  reference), subprocess (async) vector envs with 1, 2 and 4 envs, and ``RayVectorEnv`` with 1 and 2
  workers (1 env each, and 4 envs split over the workers). Every vector env is built once and stepped in
  interleaved repetitions. *CPU* is the CPU time of this process and all its descendants (subprocess
  envs, the local Ray instance and its workers), read from ``/proc``.
* **comm** -- on 2 gloo ranks (``torch.distributed.run``, loopback): the time of one all-reduce by
  size (to fit latency + bytes / bandwidth), of ``DistributedContext.average_gradients`` for the PPO
  model's parameters, of the trainer's per-parameter gradient hooks (one all-reduce per parameter
  tensor), and of the per-collection-step statistics gather; and the Ray round trip per vector step
  (from the CartPole rows of **envs**).
* **ppo** -- PPO CartPole end to end, the same total env steps: one process with 8 envs against
  ``python -m torch.distributed.run --nproc_per_node 2`` with 4 envs per rank (half the collection step
  and mini-batch per rank); wall time of the whole command and of the training run, CPU of all
  processes; speed-up and efficiency (speed-up / ranks). The same pair again with the busy env (~1 ms of
  CPU per step) instead of CartPole: where collection dominates, which is where data-parallel ranks pay.
  tshtrain averages gradients with one flattened all-reduce per backward pass.
  Launches that exit non-zero after writing their result are counted in the table's notes.
* **overlap** -- DQN CartPole (``bench_overlap.py``'s ``cartpole`` workload) and SAC Pendulum
  (examples/sac_pendulum.py's settings), one epoch each, with ``overlap_collection`` off and on.

Nothing here asserts a timing. The load average before and after the run is recorded: compare rows of one
run only.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import busy_env  # noqa: E402
from harness import (  # noqa: E402
    Clock,
    Contestant,
    Goal,
    RowResult,
    TableResult,
    markdown_table,
    pin_torch_threads,
    print_table,
    run_interleaved,
)
from report import (  # noqa: E402
    REPO_ROOT,
    RESULTS_DIR,
    environment_markdown,
    package_versions,
    run_header,
    write_json,
)

PACKAGES = ("tshtrain", "torch", "gymnasium", "numpy", "ray")

CLK_TCK = os.sysconf("SC_CLK_TCK")
SUBPROCESS_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO_ROOT), str(BENCH_DIR), os.environ.get("PYTHONPATH")) if p
    ),
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
}


# ---------------------------------------------------------------------------- CPU of a process tree
def children_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's finished child processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_cpu_seconds(root: int | None = None) -> float:
    """User + system CPU seconds of ``root`` (default: this process) and every live descendant, from /proc
    (descendants that ended are not counted: build the workers before timing)."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
        parents[int(entry)] = int(fields[1])
        ticks[int(entry)] = int(fields[11]) + int(fields[12])  # utime, stime
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / CLK_TCK


# ---------------------------------------------------------------------------- (a) env workers
def _stepper(env: Any, num_vector_steps: int) -> Callable[[], None]:
    rng = np.random.default_rng(0)
    actions_SN = rng.integers(0, 2, size=(num_vector_steps, env.num_envs))
    env.reset(seed=0)

    def run() -> None:
        for actions_N in actions_SN:
            env.step(actions_N)

    return run


def env_tables(*, quick: bool, num_iterations: int) -> tuple[list[TableResult], dict[str, Any]]:
    """Env steps/s by vector env kind and number of workers, for the busy env and CartPole."""
    import ray

    from tshtrain.env import make_vector_env
    from tshtrain.env.ray_env import RayVectorEnv
    from tshtrain.env.vector import env_factories

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    tables, extra = [], {}
    try:
        for env_name, factory, num_vector_steps in (
            (f"busy env (~1 ms CPU per step, {num_iterations} iterations)",
             busy_env.busy_env_factory(num_iterations), 40 if quick else 150),
            ("CartPole-v1", "CartPole-v1", 300 if quick else 2000),
        ):  # fmt: skip
            layouts: list[tuple[str, int, Callable[[], Any]]] = [
                ("sync, 1 env", 1, lambda f=factory: make_vector_env(f, 1)),
                *[
                    (f"async, {n} env{'s' * (n > 1)}", n,
                     lambda f=factory, n=n: make_vector_env(f, n, mode="async"))
                    for n in (1, 2, 4)
                ],
                *[
                    (f"ray, {w} worker{'s' * (w > 1)} x {n // w} env{'s' * (n > w)}", n,
                     lambda f=factory, n=n, w=w: RayVectorEnv(env_factories(f, n), num_workers=w))
                    for w, n in ((1, 1), (2, 2), (1, 4), (2, 4))
                ],
            ]  # fmt: skip
            envs = [(name, n, build()) for name, n, build in layouts]
            try:
                steppers = [(name, n, _stepper(env, num_vector_steps)) for name, n, env in envs]
                contestants = [
                    Contestant(name=name, setup=lambda run=run: run, work=num_vector_steps * n)
                    for name, n, run in steppers
                ]
                rows = run_interleaved(
                    contestants,
                    reps=2 if quick else 5,
                    unit="env steps/s",
                    label=env_name,
                    cpu_clock=tree_cpu_seconds,
                )
            finally:
                for _, _, env in envs:
                    env.close()
            table = TableResult(
                title=f"Env steps/s, {env_name}",
                unit="env steps/s (random actions, no policy)",
                rows=rows,
                goals=[
                    Goal(numerator="async, 2 envs", denominator="async, 1 env", target=1.0),
                    Goal(numerator="async, 4 envs", denominator="async, 1 env", target=1.0),
                    Goal(numerator="ray, 2 workers x 1 env", denominator="ray, 1 worker x 1 env", target=1.0),
                    Goal(
                        numerator="ray, 2 workers x 2 envs", denominator="ray, 1 worker x 4 envs", target=1.0
                    ),
                ],
                notes=[
                    "CPU: this process and all its descendants (subprocess envs; the local Ray instance, its "
                    "raylet and workers), so a rate on the CPU basis is env steps per CPU second of the "
                    "whole tree. Goals of 1.0 only mark 'faster than one worker'."
                ],
            )
            tables.append(table)
            extra[env_name] = {
                r.name: {
                    "seconds_per_vector_step": statistics.median(r.seconds) / num_vector_steps,
                    "cpu_seconds_per_vector_step": statistics.median(r.cpu_seconds) / num_vector_steps,
                }
                for r in rows
            }
    finally:
        ray.shutdown()
    return tables, extra


# ---------------------------------------------------------------------------- comm: gloo on 2 ranks
ALLREDUCE_SIZES = (1, 1_000, 10_000, 100_000, 1_000_000)


def _ppo_modules() -> tuple[Any, Any]:
    from tshtrain.algorithm import mlp
    from tshtrain.config import default_experiment

    hidden = tuple(default_experiment("ppo").algorithm.network["hidden_sizes"])
    return mlp(4, 2, hidden), mlp(4, 1, hidden)


def comm_worker(out: Path, quick: bool) -> None:
    """On each rank of ``torch.distributed.run``: time the collectives a data-parallel step uses."""
    import torch
    import torch.distributed as dist

    from tshtrain.data.stats import CollectStats
    from tshtrain.distributed import DistributedContext

    pin_torch_threads()
    context = DistributedContext.from_env(backend="gloo", timeout_seconds=120)
    repeats = 50 if quick else 300

    def timed(fn: Callable[[], None]) -> float:
        for _ in range(5):
            fn()
        context.all_reduce_sum(0)  # line the ranks up
        times = []
        for _ in range(repeats):
            clock = Clock()
            fn()
            times.append(clock.wall())
        return statistics.median(times)

    result: dict[str, Any] = {"all_reduce_by_numel": {}}
    for numel in ALLREDUCE_SIZES:
        tensor = torch.ones(numel)
        result["all_reduce_by_numel"][numel] = timed(lambda t=tensor: dist.all_reduce(t))
    actor, critic = _ppo_modules()
    params = [*actor.parameters(), *critic.parameters()]
    for p in params:
        p.grad = torch.ones_like(p)
    result["ppo_num_params"] = sum(p.numel() for p in params)
    result["ppo_num_param_tensors"] = len(params)
    result["average_gradients"] = timed(lambda: context.average_gradients(params))

    def per_parameter() -> None:  # what the trainer's hooks do in one backward pass
        for p in params:
            assert p.grad is not None
            dist.all_reduce(p.grad)
            p.grad /= context.world_size

    result["per_parameter_hooks"] = timed(per_parameter)
    stat = CollectStats(  # a collection step's statistics: 256 env steps, 10 episodes ended
        n_collected_steps=256, n_collected_episodes=10, returns=np.arange(10.0), lens=np.arange(10)
    )
    result["all_gather_object_collect_stats"] = timed(lambda: context.all_gather_object(stat))
    result["broadcast_object"] = timed(lambda: context.broadcast_object((None, None, False, None, None)))
    if context.is_main:
        out.write_text(json.dumps(result))
    context.close()


def torchrun(nproc: int) -> list[str]:
    """The command that runs this script on ``nproc`` local ranks (loopback, a free port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return [
        sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--max-restarts=0",
        "--master_addr=127.0.0.1", f"--master_port={port}", __file__,
    ]  # fmt: skip


def measure_comm(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "comm.json"
        command = [*torchrun(2), "--worker", "comm", "--out", str(out), *(["--quick"] if quick else [])]
        subprocess.run(command, env=SUBPROCESS_ENV, check=True, timeout=600)
        result: dict[str, Any] = json.loads(out.read_text())
    sizes = np.array([int(k) for k in result["all_reduce_by_numel"]], dtype=float)
    secs = np.array(list(result["all_reduce_by_numel"].values()))
    slope, intercept = np.polyfit(sizes * 4, secs, 1)  # seconds = latency + bytes * slope
    result["fit_latency_s"] = float(intercept)  # for reference; the extrapolation uses the end points
    result["fit_seconds_per_byte"] = float(slope)
    return result


# ---------------------------------------------------------------------------- (b) PPO end to end
PPO_TOTAL_ENVS = 8


def ppo_worker(out: Path, env_steps: int, busy_iterations: int = 0) -> None:
    """Train PPO on CartPole (``busy_iterations`` 0) or on the busy env with that many iterations per step,
    on this rank (or in one process), for ``env_steps`` env steps over all ranks."""
    import torch

    from tshtrain.algorithm import (
        PPO,
        CategoricalPolicy,
        LinearSchedule,
        PPOParams,
        mlp,
        num_update_steps_for,
    )
    from tshtrain.config import default_experiment
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.distributed import DistributedContext, launched_by_torchrun
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams, TrainerOptions

    pin_torch_threads()
    setup_clock = Clock()
    context = (
        DistributedContext.from_env(backend="gloo", timeout_seconds=300) if launched_by_torchrun() else None
    )
    world = 1 if context is None else context.world_size
    experiment = default_experiment("ppo")
    hp, tr = experiment.algorithm.params, experiment.trainer
    num_envs, per_step = PPO_TOTAL_ENVS // world, tr["collection_step_num_env_steps"] // world
    epoch_num_steps = 2048
    max_epochs = env_steps // epoch_num_steps
    num_updates = num_update_steps_for(
        num_env_steps=max_epochs * epoch_num_steps,
        collection_step_num_env_steps=per_step * world,
        num_envs=PPO_TOTAL_ENVS,
    )
    torch.manual_seed(0)
    env: Any = busy_env.busy_env_factory(busy_iterations) if busy_iterations else "CartPole-v1"
    envs, test_envs = make_vector_env(env, num_envs), make_vector_env(env, 2)
    hidden = tuple(experiment.algorithm.network["hidden_sizes"])
    policy = CategoricalPolicy(mlp(4, 2, hidden), envs.single_action_space, seed=0)
    schedule = LinearSchedule(num_update_steps=num_updates)
    params = PPOParams(lr=hp["lr"], lr_schedule=schedule, clip_range=hp["clip_range"], clip_schedule=schedule,
                       gamma=hp["gamma"], gae_lambda=hp["gae_lambda"], ent_coef=hp["ent_coef"])  # fmt: skip
    algorithm = PPO(policy=policy, critic=mlp(4, 1, hidden), params=params, seed=0)
    env_seed = 0 if context is None else context.env_seed(0, num_envs)
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=Collector(policy, envs, VectorReplayBuffer(per_step, num_envs), seed=env_seed),
            test_collector=Collector(policy, test_envs, seed=1000),
            max_epochs=max_epochs,
            epoch_num_steps=epoch_num_steps,
            collection_step_num_env_steps=per_step,
            batch_size=tr["batch_size"] // world,
            update_step_num_repetitions=tr["update_step_num_repetitions"],
            test_step_num_episodes=2,
            verbose=False,
            show_progress=False,
        ),
        TrainerOptions(distributed=context),
    )
    setup_s = setup_clock.wall()
    clock = Clock()
    info = trainer.run()
    result = {
        "rank": 0 if context is None else context.rank,
        "setup_s": setup_s,
        "run_s": clock.wall(),
        "run_cpu_s": clock.cpu(),
        "collect_s": info.timing.train_time_collect,
        "update_s": info.timing.train_time_update,
        "test_s": info.timing.test_time,
        "env_steps": info.train_step,
        "gradient_steps": info.gradient_step,
    }
    gathered = [result] if context is None else context.all_gather_object(result)
    if context is None or context.is_main:
        out.write_text(json.dumps(gathered))
    envs.close()
    test_envs.close()
    if context is not None:
        context.close()


ONE, TWO = "1 process x 8 envs", "2 gloo ranks x 4 envs"
ONE_BUSY, TWO_BUSY = "1 process x 8 busy envs", "2 gloo ranks x 4 busy envs"


def ppo_table(*, quick: bool, busy_iterations: int) -> tuple[TableResult, dict[str, Any]]:
    """PPO end-to-end wall time, 1 process x 8 envs against 2 ranks x 4 envs, interleaved; on CartPole
    and on the busy env (``busy_iterations`` per step)."""
    env_steps = 4096 if quick else 16384
    busy = ["--busy-iterations", str(busy_iterations), "--env-steps", str(env_steps // 2)]
    contestants: dict[str, Callable[[], list[str]]] = {
        ONE: lambda: [sys.executable, __file__, "--env-steps", str(env_steps)],
        TWO: lambda: [*torchrun(2), "--env-steps", str(env_steps)],
        ONE_BUSY: lambda: [sys.executable, __file__, *busy],
        TWO_BUSY: lambda: [*torchrun(2), *busy],
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contestants}
    exit_codes: dict[str, list[int]] = {name: [] for name in contestants}
    rows = {
        name: RowResult(
            name=name, unit="env steps/s", work=env_steps // 2 if "busy" in name else env_steps,
            seconds=[], cpu_seconds=[],
        )
        for name in contestants
    }  # fmt: skip
    reps = 2 if quick else 4
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(reps + 1):  # the first round warms caches and is not counted
            for name, base in contestants.items():
                out = Path(tmp) / "ppo.json"
                command = [*base(), "--worker", "ppo", "--out", str(out)]
                clock = Clock(children_cpu_seconds)
                out.unlink(missing_ok=True)
                done = subprocess.run(command, env=SUBPROCESS_ENV, check=False, timeout=1800)
                seconds, cpu_seconds = clock.wall(), clock.cpu()
                if not out.exists():  # no result: the run itself failed
                    raise RuntimeError(f"{name}: {command} exited with {done.returncode} and no result")
                exit_codes[name].append(done.returncode)  # non-zero with a result: a failure at exit
                if rep == 0:
                    continue
                ranks = json.loads(out.read_text())
                ranks[0]["command_s"] = seconds
                ranks[0]["command_cpu_s"] = cpu_seconds
                runs[name].append(ranks)
                rows[name].seconds.append(max(r["run_s"] for r in ranks))
                rows[name].cpu_seconds.append(sum(r["run_cpu_s"] for r in ranks))
            print(
                f"  [ppo rep {rep}/{reps}] "
                + "  ".join(f"{n}: {r.seconds[-1]:.1f}s" for n, r in rows.items() if r.seconds)
            )
    table = TableResult(
        title=(
            f"PPO end to end: CartPole {env_steps} env steps, busy env ({busy_iterations} iterations, ~1 ms "
            f"per step) {env_steps // 2} env steps, over all ranks"
        ),
        unit="env steps/s of the training run (trainer.run(); the slowest rank)",
        rows=list(rows.values()),
        goals=[
            Goal(numerator=TWO, denominator=ONE, target=1.0),
            Goal(numerator=TWO_BUSY, denominator=ONE_BUSY, target=1.0),
        ],
        notes=[
            "Each rank: PPO's default experiment with half the envs, collection step and mini-batch; 20 "
            "repetitions of whole-batch updates per collection step, each gradient step followed by one "
            "flattened all-reduce of the gradients. CPU: the sum of the ranks' process CPU during the run. "
            "The busy env is CartPole-shaped (4 floats, 2 actions, 200-step episodes) but each step costs "
            "~1 ms of CPU, so collection dominates the run.",
        ],
    )
    for name, codes in exit_codes.items():
        failed = sum(code != 0 for code in codes)
        table.notes.append(
            f"{name}: {failed} of {len(codes)} launches exited non-zero after writing their result."
        )
    return table, runs


def _busy_extrapolation(
    ppo_runs: dict[str, Any], flat: float, allreduce_s: Callable[[int, float], float]
) -> list[str]:
    """Markdown lines: the busy-env PPO pair measured, and the (b) model at 8 and 64 ranks for it."""
    busy_singles = ppo_runs[ONE_BUSY]
    one_busy = statistics.median(r[0]["run_s"] for r in busy_singles)
    two_busy = statistics.median(max(x["run_s"] for x in r) for r in ppo_runs[TWO_BUSY])
    busy_collect = statistics.median(r[0]["collect_s"] for r in busy_singles)
    busy_rest = one_busy - busy_collect  # updates, test steps (rank 0 only) and the rest
    busy_grad_steps = busy_singles[0][0]["gradient_steps"]

    def busy_predicted_s(n: int, per_step_at_two: float) -> float:
        return busy_collect / n + busy_rest + busy_grad_steps * allreduce_s(n, per_step_at_two)

    busy_observed = max((two_busy - (busy_collect / 2 + busy_rest)) / busy_grad_steps, 0.0)
    lines = [
        "",
        f"Measured where collection dominates (the busy env, ~1 ms per step; collection is "
        f"{busy_collect / one_busy:.0%} of the one-process run, {busy_grad_steps} gradient steps): "
        f"{one_busy:.1f} s in one process, {two_busy:.1f} s on 2 ranks, a speed-up of "
        f"{one_busy / two_busy:.2f}x (efficiency {one_busy / two_busy / 2:.0%}). The same model "
        f"(collection / N + the rest of the one-process run + gradient steps * a(N)) with a(2) the "
        f"flattened all-reduce ({flat * 1e3:.2f} ms) or calibrated to this 2-rank run "
        f"({busy_observed * 1e3:.2f} ms per gradient step):",
        "",
        "| ranks N | speed-up, flattened | speed-up, calibrated | efficiency, calibrated |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for n in (1, 2, 8, 64):
        flat_x = one_busy / busy_predicted_s(n, flat)
        cal_x = one_busy / busy_predicted_s(n, busy_observed)
        lines.append(f"| {n} | {flat_x:.2f}x | {cal_x:.2f}x | {cal_x / n:.0%} |")
    lines += [
        "",
        "Collection divides by N but the rest does not (the updates, and the test steps, which run on "
        "rank 0 only): the speed-up is capped at one-process time / (the rest + communication), "
        f"{one_busy / busy_rest:.2f}x here without communication.",
    ]
    return lines


# ---------------------------------------------------------------------------- extrapolation
def extrapolate(env_extra: dict[str, Any], comm: dict[str, Any], ppo_runs: dict[str, Any]) -> list[str]:
    """Markdown lines: the (a) and (b) models at 8 and 64 workers / ranks from the measured costs."""
    lines: list[str] = []
    busy = next(v for k, v in env_extra.items() if k.startswith("busy"))
    cart = env_extra["CartPole-v1"]
    t_env = busy["sync, 1 env"]["seconds_per_vector_step"]
    t_sync_cart = cart["sync, 1 env"]["seconds_per_vector_step"]
    rt = cart["ray, 1 worker x 1 env"]["seconds_per_vector_step"] - t_sync_cart
    driver_cpu_1 = cart["ray, 1 worker x 1 env"]["cpu_seconds_per_vector_step"]
    rt2 = cart["ray, 2 workers x 2 envs"]["seconds_per_vector_step"] - t_sync_cart
    per_worker = max((rt2 - rt), 0.0) if rt2 > rt else rt / 2
    lines += [
        "### Env workers (a)",
        "",
        f"Measured: a busy-env step costs t_env = {t_env * 1e3:.2f} ms; a Ray vector step on 1 worker adds "
        f"r = {rt * 1e3:.2f} ms round trip over stepping CartPole in-process; a second worker adds "
        f"c = {per_worker * 1e3:.2f} ms per vector step (the driver sends and gathers one call per worker; "
        f"whole-tree CPU per 1-worker vector step {driver_cpu_1 * 1e3:.2f} ms).",
        "",
        "Model: W workers with E envs each, one core per worker plus one for the driver: a vector step takes "
        "E * t_env + r + (W - 1) * c, for W * E env steps. Assumptions: workers never share a core; the "
        "driver's cost per worker call stays c (no batching of calls); the network adds nothing (one "
        "machine) -- on a cluster add the network round trip to r.",
        "",
        "| workers W | envs per worker E | predicted env steps/s, busy env | predicted, CartPole |",
        "| ---: | ---: | ---: | ---: |",
    ]
    t_cart = t_sync_cart
    for workers in (1, 2, 8, 64):
        for per in (1, 8):
            step_busy = per * t_env + rt + (workers - 1) * per_worker
            step_cart = per * t_cart + rt + (workers - 1) * per_worker
            lines.append(
                f"| {workers} | {per} | {workers * per / step_busy:,.0f} | {workers * per / step_cart:,.0f} |"
            )
    lines += [
        "",
        "The driver's per-worker cost c is what stops Ray scaling for cheap envs: at W = 64 the step is "
        "dominated by 63 * c, so workers should hold many envs (E >> c / t_env) or the env must be slow.",
        "",
    ]
    sizes = {int(k): v for k, v in comm["all_reduce_by_numel"].items()}
    t_small, t_big = sizes[min(sizes)], sizes[max(sizes)]
    alpha = t_small / 2  # per hop: a 2-rank ring all-reduce of one number is 2 hops
    per_byte = max(t_big - t_small, 0.0) / (max(sizes) * 4)  # at N = 2, 2 (N - 1) / N = 1 x the bytes
    num_params, num_tensors = comm["ppo_num_params"], comm["ppo_num_param_tensors"]
    hooks = comm["per_parameter_hooks"]
    singles = ppo_runs[ONE]
    one = statistics.median(r[0]["run_s"] for r in singles)
    one_collect = statistics.median(r[0]["collect_s"] for r in singles)
    one_update = statistics.median(r[0]["update_s"] for r in singles)
    grad_steps = singles[0][0]["gradient_steps"]
    two = statistics.median(max(x["run_s"] for x in r) for r in ppo_runs[TWO])
    rest = one - one_collect - one_update
    grad_bytes = num_params * 4

    flat = comm["average_gradients"]

    def allreduce_s(n: int, at_two: float) -> float:  # ring: 2 (N - 1) hops of latency + the bytes
        bytes_s = 2 * (n - 1) / n * grad_bytes * per_byte
        return 0.0 if n == 1 else max(at_two - grad_bytes * per_byte, 0.0) * (n - 1) + bytes_s

    def predicted_s(n: int, per_step_at_two: float) -> float:
        return one_collect / n + one_update + rest + grad_steps * allreduce_s(n, per_step_at_two)

    # calibrated to the 2-rank run: what each gradient step cost beyond one process's compute
    observed_at_two = max((two - (one_collect / 2 + one_update + rest)) / grad_steps, 0.0)

    lines += [
        "### Data-parallel PPO (b)",
        "",
        f"Measured on 2 gloo ranks (loopback): an all-reduce of one float takes {t_small * 1e6:.0f} us "
        f"(so a hop costs alpha = {alpha * 1e6:.0f} us), of 1M floats {t_big * 1e3:.1f} ms "
        f"({per_byte * 1e9:.2f} ns per byte beyond the latency); the PPO model's {num_params:,} parameters "
        f"in {num_tensors} tensors take {comm['average_gradients'] * 1e6:.0f} us as one flattened "
        f"all-reduce (`average_gradients`, what the trainer's gradient hooks do once per backward pass) and "
        f"{hooks * 1e6:.0f} us as one all-reduce per parameter tensor ({num_tensors} all-reduces, the "
        f"trainer's earlier design); the per-collection-step statistics gather takes "
        f"{comm['all_gather_object_collect_stats'] * 1e6:.0f} us. One process: {one:.1f} s for the run "
        f"(collection {one_collect:.1f} s, updates {one_update:.1f} s, {grad_steps} gradient steps); "
        f"2 ranks: {two:.1f} s.",
        "",
        "Model: T(N) = collection / N + updates + other + gradient_steps * a(N), with a(N) the gradient "
        "averaging per gradient step as a ring all-reduce: (N - 1) times its latency part at N = 2 "
        "(2 (N - 1) hops) plus 2 (N - 1) / N of the bytes times the per-byte cost. Three values of a(2): "
        f"one all-reduce per parameter tensor as measured alone ({hooks * 1e3:.2f} ms), one flattened "
        "all-reduce (the trainer's) "
        f"({flat * 1e3:.2f} ms), and what a gradient step of the 2-rank run cost beyond one process's "
        f"compute ({observed_at_two * 1e3:.2f} ms: {two:.1f} s measured against "
        f"{predicted_s(2, 0.0):.1f} s without communication -- the ranks wait for each other at every "
        "gradient step, on a machine with no core to spare). Assumptions: one core per rank; collection "
        "divides by N (each rank steps 1/N of the envs); "
        "the update compute per rank does not shrink although the per-rank mini-batch is 256 / N (true for "
        "a small MLP, whose forward / backward cost is per call, not per sample; pessimistic for large "
        "models); test steps and the rest run at one process's speed; latency and bandwidth stay those of "
        "loopback on this machine (on a network the latency is 10-100x larger).",
        "",
        "| ranks N | a(N), per tensor | a(N), flattened | a(N), calibrated | speed-up, per tensor "
        "| speed-up, flattened | speed-up, calibrated | efficiency (speed-up / N), flattened |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in (1, 2, 8, 64):
        cells = [allreduce_s(n, x) for x in (hooks, flat, observed_at_two)]
        speedups = [one / predicted_s(n, x) for x in (hooks, flat, observed_at_two)]
        lines.append(
            f"| {n} | "
            + " | ".join(f"{c * 1e3:.2f} ms" for c in cells)
            + " | "
            + " | ".join(f"{x:.2f}x" for x in speedups)
            + f" | {speedups[1] / n:.0%} |"
        )
    if ONE_BUSY in ppo_runs and TWO_BUSY in ppo_runs:
        lines += _busy_extrapolation(ppo_runs, flat, allreduce_s)
    latency_flat = max(flat - grad_bytes * per_byte, 0.0)
    log_speedups = {
        n: one / (one_collect / n + one_update + rest + grad_steps * latency_flat * math.log2(n))
        for n in (8, 64)
    }
    lines += [
        "",
        "A ring is the pessimistic case for latency; with an algorithm whose latency grows with log2 N "
        "(halving-doubling, trees) the flattened column becomes "
        + ", ".join(f"{x:.2f}x at N = {n}" for n, x in log_speedups.items())
        + ". Either way the speed-up is capped by the updates, which do not shrink with N here.",
    ]
    lines += [
        "",
        "With PPO's default settings (20 whole-batch gradient steps per 256 env steps) the run is "
        "update-bound, so data-parallel ranks buy little for CartPole-sized models: the updates do not get "
        "cheaper per rank, and each gradient step adds all-reduces whose latency grows with N. They pay off "
        "where collection dominates (slow envs, few gradient steps per env step: the busy-env rows) or "
        "where the per-rank compute shrinks with the per-rank mini-batch (large models, GPUs). The "
        "trainer's one flattened all-reduce per gradient step, instead of one per parameter tensor, cut "
        f"the latency term {num_tensors}-fold.",
    ]
    return lines


# ---------------------------------------------------------------------------- (c) overlapped collection
def _sac_run(*, overlap: bool, seed: int, epoch_num_steps: int) -> Callable[[], None]:
    """SAC Pendulum (examples/sac_pendulum.py's settings, prefilled buffer), one epoch, no test steps."""
    sys.path.insert(0, str(REPO_ROOT / "examples"))
    import sac_pendulum

    from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams, TrainerOptions

    algorithm, training_collector, test_collector = sac_pendulum.build(seed)
    test_collector.env.close()
    trainer = sac_pendulum.TRAINER
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        max_epochs=1,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=trainer["collection_step_num_env_steps"],
        update_step_num_gradient_steps_per_sample=trainer["update_step_num_gradient_steps_per_sample"],
        batch_size=trainer["batch_size"],
        verbose=False,
        show_progress=False,
        overlap_collection=overlap,
    )
    built = OffPolicyTrainer(algorithm, params, TrainerOptions(close_envs=True))
    return lambda: built.run() and None


def overlap_table(*, quick: bool) -> TableResult:
    """DQN CartPole (bench_overlap.py's ``cartpole`` workload) and SAC Pendulum, overlap off and on."""
    import itertools

    import bench_overlap

    sac_steps = 300 if quick else 1000
    contestants = []
    for overlap in (False, True):
        dqn_seeds, sac_seeds = itertools.count(), itertools.count()
        contestants += [
            Contestant(
                name=f"DQN CartPole, overlap {'on' if overlap else 'off'}",
                setup=lambda o=overlap, s=dqn_seeds: bench_overlap.make_run(
                    overlap=o, busy_us=None, epochs=1, seed=next(s), batch_size=64
                ),
                work=float(bench_overlap.TRAINER["epoch_num_steps"]),
            ),
            Contestant(
                name=f"SAC Pendulum, overlap {'on' if overlap else 'off'}",
                setup=lambda o=overlap, s=sac_seeds: _sac_run(
                    overlap=o, seed=next(s), epoch_num_steps=sac_steps
                ),
                work=float(sac_steps),
            ),
        ]
    order = [contestants[i] for i in (0, 2, 1, 3)]  # DQN off, DQN on, SAC off, SAC on
    rows = run_interleaved(order, reps=2 if quick else 3, unit="env steps/s", label="overlap")
    return TableResult(
        title="Off-policy wall time with and without overlapped collection (one epoch, no test steps)",
        unit="training env steps/s",
        rows=rows,
        goals=[
            Goal(numerator="DQN CartPole, overlap on", denominator="DQN CartPole, overlap off", target=1.0),
            Goal(numerator="SAC Pendulum, overlap on", denominator="SAC Pendulum, overlap off", target=1.0),
        ],
        notes=[
            "DQN: bench_overlap.py's `cartpole` workload (the DQN example, "
            f"{bench_overlap.TRAINER['epoch_num_steps']} env steps, 0.5 gradient steps per env step, batch "
            f"64); SAC: examples/sac_pendulum.py's settings, {sac_steps} env steps, one gradient step per "
            "env step. A new seed per repetition; CPU: this process (both threads)."
        ],
    )


# ---------------------------------------------------------------------------- main
OVERLAP_STUB = (
    "### DQN / SAC with and without overlapped collection (c)\n\n"
    "**Not measured: overlapped collection (branch `overlap`) had not landed on main when this ran.** "
    "When it does, this part times DQN CartPole and SAC Pendulum end to end with the option off and on, "
    "interleaved, at the same env-step and gradient-step budget."
)


def _load_sentence(load_before: float | None, load_after: float | None, num_cpus: int) -> str:
    """How busy the machine was, from the 1-minute load averages recorded around the run."""
    if load_before is None or load_after is None:
        return "The load average was not recorded for this run."
    # the load after includes this benchmark's own processes (ranks, subprocess envs, Ray): judge by before
    verdict = (
        "**other jobs shared the machine**: absolute rates are low and noisy"
        if load_before > 0.5 * num_cpus
        else "a quiet machine (the load after is this benchmark's own processes)"
    )
    return (
        f"Load average (1 min) {load_before:.2f} before and {load_after:.2f} after the run on {num_cpus} "
        f"CPUs: {verdict}."
    )


def write_markdown(
    tables: list[TableResult], extra_lines: list[str], comm: dict[str, Any] | None, payload: dict[str, Any]
) -> Path:
    machine = payload["machine"]
    load = _load_sentence(payload.get("load_before"), payload.get("load_after"), int(machine["usable_cpus"]))
    parts = [
        "# Scale-out measurements (`benchmarks/bench_scale.py`)",
        "",
        "Written by `python benchmarks/bench_scale.py`; raw numbers in `scale.json`. " + load + " Compare "
        "rows of one table (contestants ran interleaved) and read the paired ratios and ranges.",
        "",
        environment_markdown({"versions": package_versions(PACKAGES), **payload}),
        "",
    ]
    for table in tables:
        parts += [markdown_table(table), ""]
    if comm is not None:
        parts += [
            "**gloo collectives on 2 ranks (loopback), median seconds**",
            "",
            "| collective | median |",
            "| --- | ---: |",
            *[
                f"| all_reduce of {int(k):,} float32 | {v * 1e6:,.0f} us |"
                for k, v in comm["all_reduce_by_numel"].items()
            ],
            f"| `average_gradients`, PPO model ({comm['ppo_num_params']:,} params, one flattened all-reduce) "
            f"| {comm['average_gradients'] * 1e6:,.0f} us |",
            f"| per-parameter gradient hooks, PPO model ({comm['ppo_num_param_tensors']} all-reduces) "
            f"| {comm['per_parameter_hooks'] * 1e6:,.0f} us |",
            f"| `all_gather_object` of the collection statistics "
            f"| {comm['all_gather_object_collect_stats'] * 1e6:,.0f} us |",
            f"| `broadcast_object` of a test step's result | {comm['broadcast_object'] * 1e6:,.0f} us |",
            "",
        ]  # fmt: skip
    if not any(t.title.startswith("Off-policy") for t in tables):
        parts += [OVERLAP_STUB, ""]
    parts += ["## Extrapolation to 8 and 64 workers / ranks", "", *extra_lines, ""]
    path = RESULTS_DIR / "scale.md"
    path.write_text("\n".join(parts))
    return path


def render() -> None:
    """Rewrite ``results/scale.md`` (and the extrapolation in ``scale.json``) from ``scale.json``."""
    path = RESULTS_DIR / "scale.json"
    payload = json.loads(path.read_text())
    tables = [TableResult.from_json(t) for t in payload["tables"]]
    lines = extrapolate(payload["envs_per_vector_step"], payload["comm"], payload["ppo_runs"])
    payload["extrapolation"] = lines
    write_json("scale", payload)
    print(f"wrote {write_markdown(tables, lines, payload['comm'], payload)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", choices=["envs", "comm", "ppo", "overlap"], default=None)
    parser.add_argument(
        "--render", action="store_true", help="rewrite results/scale.md from results/scale.json (no runs)"
    )
    parser.add_argument("--worker", choices=["ppo", "comm"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--env-steps", type=int, default=16384, help=argparse.SUPPRESS)
    parser.add_argument("--busy-iterations", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "ppo":
        return ppo_worker(args.out, args.env_steps, args.busy_iterations)
    if args.worker == "comm":
        return comm_worker(args.out, args.quick)
    if args.render:
        return render()
    pin_torch_threads()
    os.environ.update(SUBPROCESS_ENV)  # subprocess envs and the Ray instance inherit it: one BLAS thread
    parts = set(args.only or ["envs", "comm", "ppo", "overlap"])
    tables: list[TableResult] = []
    payload: dict[str, Any] = {**run_header(PACKAGES), "quick": args.quick}
    env_extra: dict[str, Any] | None = None
    comm = ppo_runs = None
    num_iterations = busy_env.calibrate_num_iterations(1e-3)
    if "envs" in parts:
        payload["busy_env"] = {
            "num_iterations": num_iterations,
            "step_cpu_seconds": busy_env.step_cpu_seconds(num_iterations),
        }
        print(
            f"busy env: {num_iterations} iterations, "
            f"{payload['busy_env']['step_cpu_seconds'] * 1e3:.3f} ms CPU per step"
        )
        env_results, env_extra = env_tables(quick=args.quick, num_iterations=num_iterations)
        tables += env_results
        payload["envs_per_vector_step"] = env_extra
    if "comm" in parts:
        comm = measure_comm(args.quick)
        payload["comm"] = comm
        print("comm:", json.dumps(comm, indent=1))
    if "ppo" in parts:
        ppo, ppo_runs = ppo_table(quick=args.quick, busy_iterations=num_iterations)
        tables.append(ppo)
        payload["ppo_runs"] = ppo_runs
    if "overlap" in parts:
        tables.append(overlap_table(quick=args.quick))
    for table in tables:
        print_table(table)
    payload["tables"] = [t.to_json() for t in tables]
    extra_lines: list[str] = []
    if env_extra is not None and comm is not None and ppo_runs is not None:
        extra_lines = extrapolate(env_extra, comm, ppo_runs)
        payload["extrapolation"] = extra_lines
        print("\n".join(extra_lines))
    write_json("scale_quick" if args.quick else "scale", payload)
    if not args.quick and extra_lines:
        print(f"wrote {write_markdown(tables, extra_lines, comm, payload)}")


if __name__ == "__main__":
    main()
