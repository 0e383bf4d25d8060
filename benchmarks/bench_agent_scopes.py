"""Agent scopes (issue 17, part 3): Sequential vs Parallel update mode, 2 and 4 PPO agents over one
CartPole vector env, wall time per training step and end to end; skrl's SequentialTrainer /
ParallelTrainer on the same setting beside them.

Run from the repository root::

    python benchmarks/bench_agent_scopes.py           # 5 interleaved reps; writes results/agent_scopes.*
    python benchmarks/bench_agent_scopes.py --quick   # 2 reps, short runs, prints only
    python benchmarks/bench_agent_scopes.py --no-skrl # tshtrain only

Setting (``Settings``): A in {2, 4} PPO agents, each over its own scope of 4 sub-envs of one
``CartPole-v1`` vector env (``agents_scope=[4] * A``, 4A sub-envs); per training step 64 vector steps
(256 transitions per agent), 4 epochs of 2 mini-batches of 128 (8 gradient steps per agent), 64-64
tanh actor and critic, lr 3e-4. Every agent has its own networks and optimizer.

Tables (interleaved repetitions, medians; ratios are ratios of medians with the paired range):

* ``update``: wall time of one training step's update alone (``MultiAgentOnPolicy.update`` on a
  fixed rollout, ``K`` updates per run), Sequential vs Parallel. Parallel's workers are started in the
  untimed setup; their start-up time is reported separately.
* ``end to end``: ``OnPolicyTrainer.run`` (collect + update, no test episodes) over a fixed number of
  env steps, Sequential vs Parallel (workers started in the setup), and skrl 2.x with the same agents'
  settings: ``SequentialTrainer`` (agents act and update one after the other) and ``ParallelTrainer``
  (one process per agent for acting, recording and updating; its processes are spawned inside
  ``train()``, so its rows include their start-up: the price of using it as shipped).

The main process and the parallel workers each run torch on one thread (``harness.pin_torch_threads``,
``ParallelParams.num_threads=1``). The parallel mode cannot beat the sequential one by more than
``min(A, cores)``: on a 2-core machine, 2x.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (
    Clock,
    Contestant,
    Goal,
    Run,
    TableResult,
    markdown_table,
    pin_torch_threads,
    print_table,
    run_interleaved,
)
from report import run_header, write_json, write_report

from tshtrain.algorithm import PPO, CategoricalPolicy, MultiAgentOnPolicy, PPOParams, scoped_learners
from tshtrain.algorithm.multi_agent_parallel import ParallelParams, ParallelUpdater
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

warnings.filterwarnings("ignore", category=DeprecationWarning)


PACKAGES = ("tshtrain", "torch", "gymnasium", "skrl", "numpy")


@dataclasses.dataclass(frozen=True)
class Settings:
    envs_per_agent: int = 4
    rollout_len: int = 64
    """vector steps per training step"""
    num_epochs: int = 4
    batch_size: int = 128
    hidden: tuple[int, ...] = (64, 64)
    lr: float = 3e-4
    updates_per_run: int = 10
    """training steps per run of the ``update`` table"""
    training_steps_per_run: int = 6
    """training steps per run of the ``end to end`` table"""

    def num_envs(self, num_agents: int) -> int:
        return num_agents * self.envs_per_agent

    @property
    def minibatches(self) -> int:
        return self.rollout_len * self.envs_per_agent // self.batch_size


def _mlp(in_dim: int, out_dim: int, hidden: tuple[int, ...]) -> nn.Module:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(in_dim, h), nn.Tanh()]
        in_dim = h
    return nn.Sequential(*layers, nn.Linear(in_dim, out_dim))


# ---------------------------------------------------------------------- tshtrain
def _algorithm(num_agents: int, s: Settings, mode: str) -> tuple[MultiAgentOnPolicy, Any]:
    torch.manual_seed(0)
    env = make_vector_env("CartPole-v1", s.num_envs(num_agents))
    space = env.single_action_space
    members = [
        PPO(
            policy=CategoricalPolicy(_mlp(4, 2, s.hidden), space, seed=k),
            critic=_mlp(4, 1, s.hidden),
            params=PPOParams(lr=s.lr),
            seed=k,
        )
        for k in range(num_agents)
    ]
    algorithm = MultiAgentOnPolicy(
        scoped_learners([s.envs_per_agent] * num_agents, members),
        num_units=s.num_envs(num_agents),
        update_mode=mode,  # type: ignore[arg-type]
        parallel=ParallelParams(num_threads=1),
    )
    return algorithm, env


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; 10 ms resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


WORKER_CPU: dict[str, list[list[float]]] = {}
"""update table, parallel mode: per run, each worker's CPU seconds (by ``"<A> agents"``)"""

_OPEN: list[MultiAgentOnPolicy] = []
"""parallel algorithms of the previous run, closed (untimed) by the next setup"""


def _close_open() -> None:
    while _OPEN:
        _OPEN.pop().close()


def _collector(algorithm: MultiAgentOnPolicy, env: Any, s: Settings) -> Collector:
    n = env.num_envs
    return Collector(algorithm.policy, env, VectorReplayBuffer(n * s.rollout_len, buffer_num=n), seed=0)


def _update_run(num_agents: int, s: Settings, mode: str, reps: int) -> Callable[[], Run]:
    def setup() -> Run:
        _close_open()
        algorithm, env = _algorithm(num_agents, s, mode)
        collector = _collector(algorithm, env, s)
        collector.collect(n_step=s.rollout_len * env.num_envs)
        buffer = collector.buffer
        assert isinstance(buffer, VectorReplayBuffer)
        rollout = buffer.rollout()
        algorithm.update(rollout, batch_size=s.batch_size, num_repetitions=1)  # starts the workers
        if mode == "parallel":
            _OPEN.append(algorithm)
            assert algorithm._parallel is not None
            pids = list(algorithm._parallel.pids().values())

        def run() -> None:
            before = [_cpu_seconds(pid) for pid in pids] if mode == "parallel" else []
            for _ in range(reps):
                algorithm.update(rollout, batch_size=s.batch_size, num_repetitions=s.num_epochs)
            if mode == "parallel":
                used = [_cpu_seconds(pid) - b for pid, b in zip(pids, before, strict=True)]
                WORKER_CPU.setdefault(f"{num_agents} agents", []).append(used)

        return run

    return setup


def _e2e_run(num_agents: int, s: Settings, mode: str) -> Callable[[], Run]:
    def setup() -> Run:
        _close_open()
        algorithm, env = _algorithm(num_agents, s, mode)
        n = env.num_envs
        per_step = s.rollout_len * n
        collector = _collector(algorithm, env, s)
        collector.collect(n_step=per_step)  # starts the workers (parallel) and warms both modes up
        buffer = collector.buffer
        assert isinstance(buffer, VectorReplayBuffer)
        algorithm.update(buffer.rollout(), batch_size=s.batch_size, num_repetitions=1)
        buffer.reset()
        if mode == "parallel":
            _OPEN.append(algorithm)
        trainer = OnPolicyTrainer(
            algorithm,
            OnPolicyTrainerParams(
                training_collector=collector,
                max_epochs=1,
                epoch_num_steps=per_step * s.training_steps_per_run,
                collection_step_num_env_steps=per_step,
                batch_size=s.batch_size,
                update_step_num_repetitions=s.num_epochs,
                verbose=False,
                show_progress=False,
            ),
        )
        return trainer.run  # type: ignore[return-value]

    return setup


def startup_seconds(num_agents: int, s: Settings, reps: int) -> list[float]:
    """Wall seconds to start the parallel workers (``ParallelUpdater``, forkserver) and have them
    report ready."""
    out = []
    for _ in range(reps):
        algorithm, _env = _algorithm(num_agents, s, "parallel")
        clock = Clock()
        updater = ParallelUpdater(algorithm.members.trained(), algorithm.parallel_params, "bench")
        out.append(clock.wall())
        updater.close_without_sync()
    return out


# ---------------------------------------------------------------------- skrl
def _skrl_models(env: Any, s: Settings) -> dict[str, Any]:
    """skrl's models; their classes live at module level: skrl's ParallelTrainer pickles the agents
    into spawned processes (through a queue, whose feeder thread only prints a pickling error, so a
    local class makes ``train()`` wait forever)."""
    from skrl_models import SkrlCategoricalPolicy, SkrlValue

    return {
        "policy": SkrlCategoricalPolicy(env.observation_space, env.action_space, _mlp(4, 2, s.hidden)),
        "value": SkrlValue(env.observation_space, env.action_space, _mlp(4, 1, s.hidden)),
    }


def _skrl_run(num_agents: int, s: Settings, parallel: bool) -> Callable[[], Run]:
    def setup() -> Run:
        _close_open()
        import gymnasium as gym
        from skrl.agents.torch.base import ExperimentCfg
        from skrl.agents.torch.ppo import PPO as SkrlPPO  # noqa: N811
        from skrl.agents.torch.ppo import PPO_CFG
        from skrl.envs.wrappers.torch import wrap_env
        from skrl.memories.torch import RandomMemory
        from skrl.trainers.torch import (
            ParallelTrainer,
            ParallelTrainerCfg,
            SequentialTrainer,
            SequentialTrainerCfg,
        )

        torch.manual_seed(0)
        env = wrap_env(gym.make_vec("CartPole-v1", s.num_envs(num_agents), vectorization_mode="sync"))
        agents = []
        for _ in range(num_agents):
            cfg = PPO_CFG(
                rollouts=s.rollout_len,
                learning_epochs=s.num_epochs,
                mini_batches=s.minibatches,
                learning_rate=s.lr,
                experiment=ExperimentCfg(write_interval=0, checkpoint_interval=0),
            )
            agents.append(
                SkrlPPO(
                    models=_skrl_models(env, s),
                    memory=RandomMemory(memory_size=s.rollout_len, num_envs=s.envs_per_agent, device="cpu"),
                    observation_space=env.observation_space,
                    action_space=env.action_space,
                    device="cpu",
                    cfg=cfg,
                )
            )
        common = {
            "timesteps": s.rollout_len * s.training_steps_per_run,
            "headless": True,
            "disable_progressbar": True,
            "close_environment_at_exit": False,
        }
        scopes = [s.envs_per_agent] * num_agents
        if parallel:
            trainer: Any = ParallelTrainer(
                env=env, agents=agents, scopes=scopes, cfg=ParallelTrainerCfg(**common)
            )
        else:
            trainer = SequentialTrainer(
                env=env, agents=agents, scopes=scopes, cfg=SequentialTrainerCfg(**common)
            )
        return trainer.train  # type: ignore[no-any-return]

    return setup


# ---------------------------------------------------------------------- main
RESULTS_NOTE = """\
Notes: the machine has 2 cores shared with other jobs (see the load average at the end), so the
parallel mode cannot beat the sequential one by more than 2x here, and with more runnable processes
than cores its workers wait for a CPU; *CPU* is the main process's CPU time only (parallel workers'
CPU: the last section). tshtrain's workers are started in the untimed setup; skrl's ParallelTrainer
spawns its processes inside `train()`, so its rows include their start-up. Discussion:
`docs/multi_agent_scopes.md`."""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-skrl", action="store_true")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--agents", default="2,4")
    args = parser.parse_args()
    pin_torch_threads()
    header = run_header(PACKAGES)
    s = Settings(updates_per_run=3, training_steps_per_run=2) if args.quick else Settings()
    reps = 2 if args.quick else args.reps
    skrl = not args.no_skrl
    if skrl:
        try:
            import skrl as _skrl  # noqa: F401
        except ImportError:
            skrl = False
    tables: list[TableResult] = []
    startup: dict[int, list[float]] = {}
    for num_agents in [int(a) for a in args.agents.split(",")]:
        label = f"{num_agents} agents"
        update_rows = run_interleaved(
            [
                Contestant(
                    name="sequential",
                    setup=_update_run(num_agents, s, "sequential", s.updates_per_run),
                    work=s.updates_per_run,
                ),
                Contestant(
                    name="parallel",
                    setup=_update_run(num_agents, s, "parallel", s.updates_per_run),
                    work=s.updates_per_run,
                ),
            ],
            reps=reps,
            unit="training steps/s",
            label=f"update, {label}",
        )
        _close_open()
        tables.append(
            TableResult(
                title=f"update only, {label} x {s.envs_per_agent} envs",
                unit="training steps/s",
                rows=update_rows,
                goals=[Goal(numerator="parallel", denominator="sequential", target=1.0)],
            )
        )
        env_steps = s.rollout_len * s.num_envs(num_agents) * s.training_steps_per_run
        e2e = [
            Contestant(
                name="tshtrain sequential", setup=_e2e_run(num_agents, s, "sequential"), work=env_steps
            ),
            Contestant(name="tshtrain parallel", setup=_e2e_run(num_agents, s, "parallel"), work=env_steps),
        ]
        goals = [Goal(numerator="tshtrain parallel", denominator="tshtrain sequential", target=1.0)]
        if skrl:
            e2e += [
                Contestant(name="skrl sequential", setup=_skrl_run(num_agents, s, False), work=env_steps),
                Contestant(
                    name="skrl parallel",
                    setup=_skrl_run(num_agents, s, True),
                    work=env_steps,
                    warmup_setup=lambda: lambda: None,  # spawns fresh processes every run anyway
                ),
            ]
            goals += [
                Goal(numerator="skrl parallel", denominator="skrl sequential", target=1.0),
                Goal(numerator="tshtrain sequential", denominator="skrl sequential", target=1.0),
                Goal(numerator="tshtrain parallel", denominator="skrl parallel", target=1.0),
            ]
        e2e_rows = run_interleaved(e2e, reps=reps, unit="env steps/s", label=f"e2e, {label}")
        _close_open()
        tables.append(
            TableResult(
                title=f"end to end, {label} x {s.envs_per_agent} envs",
                unit="env steps/s",
                rows=e2e_rows,
                goals=goals,
            )
        )
        startup[num_agents] = startup_seconds(num_agents, s, reps)
    for table in tables:
        print_table(table)
    for a, secs in startup.items():
        print(f"parallel worker start-up, {a} agents: median {statistics.median(secs):.3f} s {secs}")
    worker_ms = {
        key: statistics.median(max(run) for run in runs[1:] or runs) * 1000 / s.updates_per_run
        for key, runs in WORKER_CPU.items()
    }
    print(f"busiest worker's CPU ms per training step (update table, median): {worker_ms}")
    if args.quick:
        return
    payload = {
        "settings": dataclasses.asdict(s),
        "tables": [t.to_json() for t in tables],
        "startup_seconds": {str(a): v for a, v in startup.items()},
        "worker_cpu_seconds_per_run": WORKER_CPU,
        "busiest_worker_cpu_ms_per_training_step": worker_ms,
        **header,
    }
    write_json("agent_scopes", payload)
    lines = [
        "",
        "`python benchmarks/bench_agent_scopes.py` (see its docstring for the setting).",
        "",
        RESULTS_NOTE,
        "",
    ]
    for table in tables:
        lines += [f"## {table.title}", "", markdown_table(table), ""]
    lines += ["## parallel worker start-up (forkserver, untimed in the tables above)", ""]
    lines += [f"- {a} agents: median {statistics.median(v):.3f} s over {len(v)}" for a, v in startup.items()]
    lines += [
        "",
        "## busiest parallel worker's CPU time per training step (update table, median over runs)",
        "",
        *[f"- {key}: {ms:.1f} ms" for key, ms in worker_ms.items()],
    ]
    write_report("agent_scopes", "Agent scopes: Sequential vs Parallel update mode", payload, lines)


if __name__ == "__main__":
    main()
