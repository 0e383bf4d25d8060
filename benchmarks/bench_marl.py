"""Multi-agent PPO end to end (issue 17, part 6): env steps/s of IPPO (parameter sharing) and MAPPO
(centralised critic) with tshtrain, a hand-written torch loop and BenchMARL, on the same task with the
same hyperparameters, side by side in one run.

Run from the repository root::

    python benchmarks/bench_marl.py                       # both tasks, both algorithms, 5 reps
    python benchmarks/bench_marl.py --tasks simple_spread --algos mappo --reps 3
    python benchmarks/bench_marl.py --no-benchmarl        # without the BenchMARL subprocess

Tasks and hyperparameters: ``marl_config.py`` (``balance``: VMAS balance, 4 agents, 512 worlds on the
CPU; ``simple_spread``: MPE2 simple_spread_v3, 3 agents, 8 envs). An *env step* is one step of one env
(world) with all of its agents (BenchMARL's "frame"; tshtrain's ``collection_step_num_env_steps``);
A transitions are stored per env step.

Contestants (one timed run = ``iterations`` PPO iterations of ``num_envs * rollout_len`` env steps,
the same budget for every contestant):

* ``hand loop``: ``hand_marl_loops.HandMAPPO`` (VMAS through tshtrain's ``VmasEnv`` columns, the env
  tshtrain steps; MPE2 through the raw ``mpe2`` envs);
* ``tshtrain``: VMAS: ``TensorCollector`` + ``VmasEnv(agent_layout="columns", agent_id=True,
  global_state=True)`` + ``PPO`` on ``mappo_actor_critic`` (one PPO over all columns), run by
  ``OnPolicyTrainer``; MPE2: ``make_pettingzoo_vector_env`` + ``MultiAgentCollector`` +
  ``MultiAgentOnPolicy(shared_learner(...))`` of the same PPO, run by ``OnPolicyTrainer``;
* ``hand loop, per-env critic`` (MAPPO tables, information only): the hand loop with BenchMARL's kind
  of centralised critic (the state alone, evaluated once per env, its value shared by the env's agents,
  mini-batches drawn over env steps), to show what that design choice alone is worth;
* ``tshtrain, per-world critic`` (MAPPO tables): tshtrain with that kind of critic,
  ``mappo_actor_critic(..., critic_per_world=True)`` (a ``PerWorldCritic``: the state alone, once per
  world, one value per agent; the PPO update samples whole world steps); its goals are >= 0.9x the
  per-env-critic hand loop and ahead of BenchMARL;
* ``BenchMARL``: ``benchmarl_marl.py`` in BenchMARL's venv (``--benchmarl-python``), a subprocess per
  repetition, which builds and warms up untimed and reports the wall and CPU seconds of
  ``Experiment.run()`` itself (so its interpreter start and imports are not counted).

Repetitions are interleaved (rep r runs every table's contestants before rep r+1, starting at a
rotating contestant), torch is on one thread in every process, denormals flushed; rows report the
median, min and max over the repetitions, wall clock and process CPU time; ratios are the ratio of
medians with the paired (per-repetition) ratios' median and range. Results: ``benchmarks/results/
marl.json`` and the tables printed (``benchmarks/results/marl.md`` is written by hand from them).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hand_marl_loops as hml
import marl_config
from harness import Goal, RowResult, TableResult, markdown_table, measure, pin_torch_threads, print_table
from report import run_header, write_json, write_report

HAND, TSH, BENCHMARL = "hand loop", "tshtrain", "BenchMARL"
HAND_PER_ENV = "hand loop, per-env critic"
TSH_PER_WORLD = "tshtrain, per-world critic"
"""MAPPO tables: tshtrain with ``mappo_actor_critic(critic_per_world=True)`` (the state alone, once per
world, one value per agent; mini-batches of whole world steps), the design of BenchMARL's critic"""
"""info row of the MAPPO tables: the hand loop with BenchMARL's kind of centralised critic (state only,
once per env, its value shared by the env's agents) instead of tshtrain's (state + agent id, per agent)"""
PACKAGES = ("tshtrain", "torch", "vmas", "pettingzoo", "mpe2", "gymnasium", "numpy")
Run = Callable[[], None]


# ============================================================================ envs
def vmas_env(c: dict[str, Any], seed: int) -> Any:
    from tshtrain.env.vmas import VmasEnv

    return VmasEnv(
        "balance",
        num_envs=c["num_envs"],
        device="cpu",
        continuous_actions=True,
        seed=seed,
        max_episode_steps=c["max_steps"],
        agent_layout="columns",
        agent_id=True,
        global_state=True,
        n_agents=c["n_agents"],
        **c["env_kwargs"],
    )


def mpe_kwargs(c: dict[str, Any]) -> dict[str, Any]:
    return {"N": c["n_agents"], "max_cycles": c["max_steps"], "continuous_actions": False, **c["env_kwargs"]}


# ============================================================================ contestants
def build_hand(task: str, algo: str, seed: int, iterations: int, *, per_env_critic: bool = False) -> Run:
    c = marl_config.TASKS[task]
    centralised = algo == "mappo"
    if task == "balance":
        env: hml.ColumnEnv = hml.VmasColumns(vmas_env(c, seed), centralised)
    else:
        from mpe2 import simple_spread_v3

        env = hml.MpeColumns(
            lambda: simple_spread_v3.parallel_env(**mpe_kwargs(c)), c["num_envs"], centralised
        )
    loop = hml.HandMAPPO(env, c, seed=seed, per_env_critic=per_env_critic)
    return lambda: loop.train(iterations)


def build_tshtrain(task: str, algo: str, seed: int, iterations: int, *, per_world: bool = False) -> Run:
    from tshtrain.algorithm import PPO, PPOParams
    from tshtrain.algorithm.blocks.agent_nets import mappo_actor_critic
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

    c = marl_config.TASKS[task]
    centralised = algo == "mappo"
    torch.manual_seed(seed)
    E, A = c["num_envs"], c["n_agents"]
    params = PPOParams(
        lr=c["lr"],
        gamma=c["gamma"],
        gae_lambda=c["gae_lambda"],
        clip_range=c["clip"],
        ent_coef=c["entropy_coef"],
        vf_coef=c["value_coef"],
        max_grad_norm=c["max_grad_norm"],
    )
    rows = c["rollout_len"] * A * E
    env_steps = c["rollout_len"] * E
    collector: Any
    algorithm: Any
    if task == "balance":
        from tshtrain.data import TensorCollector, TensorReplayBuffer

        env: Any = vmas_env(c, seed)
        policy, critic = mappo_actor_critic(
            env.single_observation_space,
            env.single_action_space,
            hidden_sizes=c["hidden_sizes"],
            centralised_critic=centralised,
            critic_per_world=per_world,
            init_log_std=c["init_log_std"],
            seed=seed,
        )
        algorithm = PPO(policy=policy, critic=critic, params=params, seed=seed)
        collector = TensorCollector(policy, env, TensorReplayBuffer(rows, A * E, device="cpu"), seed=seed)
    else:
        from tshtrain.algorithm.multi_agent import MultiAgentOnPolicy, shared_learner
        from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
        from tshtrain.env.pettingzoo import make_pettingzoo_vector_env

        env = make_pettingzoo_vector_env(
            "mpe2.simple_spread_v3",
            E,
            kwargs=mpe_kwargs(c),
            kind="parallel",
            agent_id=True,
            global_state=centralised,
        )
        policy, critic = mappo_actor_critic(
            env.single_observation_space,
            env.single_action_space,
            hidden_sizes=c["hidden_sizes"],
            centralised_critic=centralised,
            critic_per_world=per_world,
            seed=seed,
        )
        ppo = PPO(policy=policy, critic=critic, params=params, seed=seed)
        algorithm = MultiAgentOnPolicy(shared_learner(env.columns, ppo))
        collector = MultiAgentCollector(
            algorithm.policy, env, VectorReplayBuffer(rows, buffer_num=A * E, seed=seed), seed=seed
        )
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=collector,
            max_epochs=iterations,
            epoch_num_steps=env_steps,
            collection_step_num_env_steps=env_steps,
            batch_size=rows // c["minibatches"],
            update_step_num_repetitions=c["epochs"],
            verbose=False,
            show_progress=False,
        ),
    )

    def run() -> None:
        trainer.run()

    return run


def run_benchmarl(
    python: str, task: str, algo: str, seed: int, iterations: int
) -> tuple[float, float, dict[str, Any]]:
    script = Path(__file__).resolve().parent / "benchmarl_marl.py"
    cmd = [
        python,
        str(script),
        "--task",
        task,
        "--algo",
        algo,
        "--iterations",
        str(iterations),
        "--seed",
        str(seed),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"BenchMARL subprocess failed ({out.returncode}): {out.stderr[-2000:]}")
    data = json.loads(lines[-1])
    return float(data["wall"]), float(data["cpu"]), data


def timed(run: Run) -> tuple[float, float]:
    torch.set_flush_denormal(True)
    try:
        return measure(run)
    finally:
        torch.set_flush_denormal(False)


# ============================================================================ main
def main() -> None:  # noqa: PLR0912, PLR0915 (one script body: parse, time, report)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", nargs="+", default=["balance", "simple_spread"], choices=sorted(marl_config.TASKS)
    )
    parser.add_argument("--algos", nargs="+", default=["ippo", "mappo"], choices=("ippo", "mappo"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-benchmarl", action="store_true")
    parser.add_argument("--benchmarl-python", default="/work/bench-venv-marl/bin/python")
    parser.add_argument(
        "--profile", metavar="TASK:ALGO", help="only cProfile tshtrain on TASK:ALGO (one run)"
    )
    parser.add_argument(
        "--profile-per-world", action="store_true", help="with --profile: tshtrain's per-world critic"
    )
    parser.add_argument("--output", default="marl")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    pin_torch_threads()
    header = run_header(PACKAGES)

    if args.profile:
        task, algo = args.profile.split(":")
        run = build_tshtrain(
            task, algo, 0, marl_config.TASKS[task]["iterations"], per_world=args.profile_per_world
        )
        prof = cProfile.Profile()
        prof.runcall(run)
        stats = pstats.Stats(prof).sort_stats("cumulative")
        stats.print_stats(45)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return

    base_names = [HAND, TSH] + ([] if args.no_benchmarl else [BENCHMARL])
    combos = [(t, a) for t in args.tasks for a in args.algos]
    names_of = {
        (t, a): base_names + ([HAND_PER_ENV, TSH_PER_WORLD] if a == "mappo" else []) for t, a in combos
    }
    rows: dict[tuple[str, str], dict[str, RowResult]] = {}
    extra: dict[str, list[dict[str, Any]]] = {}
    for task, algo in combos:
        c = marl_config.TASKS[task]
        work = float(c["iterations"] * c["rollout_len"] * c["num_envs"])
        rows[task, algo] = {
            n: RowResult(
                name=n, unit="env steps/s", work=work, seconds=[], cpu_seconds=[], info_only=n == HAND_PER_ENV
            )
            for n in names_of[task, algo]
        }
        print(f"warm-up {task}/{algo}", flush=True)
        for build in (build_hand, build_tshtrain):
            timed(build(task, algo, 999, 1))
        if algo == "mappo":
            timed(build_hand(task, algo, 999, 1, per_env_critic=True))
            timed(build_tshtrain(task, algo, 999, 1, per_world=True))
    for rep in range(args.reps):
        for task, algo in combos:
            c = marl_config.TASKS[task]
            names = names_of[task, algo]
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for name in order:
                if name == BENCHMARL:
                    wall, cpu, data = run_benchmarl(args.benchmarl_python, task, algo, rep, c["iterations"])
                    expected = c["iterations"] * c["rollout_len"] * c["num_envs"]
                    if data["frames"] != expected:
                        print(f"  BenchMARL {task}/{algo}: {data['frames']} frames, expected {expected}")
                    extra.setdefault(f"{task}/{algo}", []).append(data)
                elif name == HAND_PER_ENV:
                    wall, cpu = timed(build_hand(task, algo, rep, c["iterations"], per_env_critic=True))
                elif name == TSH_PER_WORLD:
                    wall, cpu = timed(build_tshtrain(task, algo, rep, c["iterations"], per_world=True))
                else:
                    build = build_hand if name == HAND else build_tshtrain
                    wall, cpu = timed(build(task, algo, rep, c["iterations"]))
                rows[task, algo][name].seconds.append(wall)
                rows[task, algo][name].cpu_seconds.append(cpu)
            r = rows[task, algo]
            print(
                f"  [rep {rep + 1}/{args.reps} {task}/{algo}] "
                + "  ".join(f"{n}={r[n].rates()[-1]:,.0f} (cpu {r[n].rates('cpu')[-1]:,.0f})" for n in names),
                flush=True,
            )

    tables = []
    for task, algo in combos:
        c = marl_config.TASKS[task]
        goals = [Goal(numerator=TSH, denominator=HAND, target=0.9)]
        if not args.no_benchmarl:
            goals.append(Goal(numerator=TSH, denominator=BENCHMARL, target=1.0))
        if algo == "mappo":
            goals.append(Goal(numerator=TSH_PER_WORLD, denominator=HAND_PER_ENV, target=0.9))
            if not args.no_benchmarl:
                goals.append(Goal(numerator=TSH_PER_WORLD, denominator=BENCHMARL, target=1.0))
        label = "VMAS balance" if task == "balance" else "MPE2 simple_spread_v3"
        table = TableResult(
            title=(
                f"{algo.upper()} on {label} ({c['n_agents']} agents, {c['num_envs']} envs; "
                f"{c['iterations']} iterations x {c['rollout_len'] * c['num_envs']:,} env steps per run)"
            ),
            unit="env steps/s",
            rows=[rows[task, algo][n] for n in names_of[task, algo]],
            goals=goals,
        )
        tables.append(table)
        print_table(table)
    payload = {
        **header,
        "benchmarl_versions": next(iter(extra.values()))[0]["versions"] if extra else None,
        "config": marl_config.TASKS,
        "tables": [t.to_json() for t in tables],
        "benchmarl_runs": extra,
    }
    path = write_json(args.output, payload)
    md = "\n\n".join(markdown_table(t) for t in tables)
    md_path = write_report(
        f"{args.output}_tables", "MARL throughput (`benchmarks/bench_marl.py`)", payload, ["", md]
    )
    print(f"\nwrote {path} and {md_path}")


if __name__ == "__main__":
    main()
