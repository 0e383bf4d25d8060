"""Collection cost per env step: a hand loop vs the Collector's vector path vs its direct-step fast paths,
with one env (DQN's and SAC's policies) and with 2 and 8 envs (which the fast paths must not slow).

Run from the repository root::

    python benchmarks/bench_collect_one_env.py            # 20,480 env steps per run, 5 interleaved reps
    python benchmarks/bench_collect_one_env.py --quick    # 2,048 env steps, 2 reps (smoke run)

Workloads (torch on one thread; the same network object in every contestant of a workload):

* ``dqn_cartpole``: CartPole-v1, ``QValuePolicy`` over a 2x256 ReLU MLP, epsilon-greedy at its final
  epsilon 0.04 (as DQN's collection after the decay), 256 env steps per ``collect`` call.
* ``sac_pendulum``: Pendulum-v1, SAC's ``TanhGaussianPolicy`` over a 2x256 ReLU MLP (sampled actions),
  256 env steps per ``collect``.
* ``argmax_cartpole_2`` / ``argmax_cartpole_8``: CartPole-v1 with 2 / 8 envs in a ``SyncVectorEnv``,
  ``QValuePolicy`` over a 2x64 tanh MLP, greedy (no noise), 256 vector steps per ``collect``.

Contestants:

* ``hand``: the loop one writes by hand: the raw env (the 2- and 8-env workloads: Gymnasium's same-step
  ``SyncVectorEnv``, final observations taken from its info), ``torch.no_grad`` forward of the network,
  epsilon-greedy / Gaussian sampling inline, a numpy ring buffer of preallocated arrays written row by
  row, reset on episode end.
* ``vector``: ``Collector(..., direct_step=False)`` into a ``VectorReplayBuffer``: ``env.step`` of the
  ``SyncVectorEnv`` (the collector as it was before the fast paths, with today's policy code).
* ``fast``: ``Collector(...)`` (``direct_step=True``, the default): the sub-envs stepped directly (one
  env: the scalar path).

Each run takes the same number of env steps; the runs of one workload are interleaved (hand, vector,
fast, hand, ...), and the median over the repetitions is reported in microseconds per env step, with
ratios to the hand loop: of the medians, and the median of the per-repetition ratios (interleaving and
ratios keep the numbers meaningful on a loaded machine).
Results go to ``benchmarks/results/collect_one_env.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Contestant, Run, paired_ratio, pin_torch_threads, run_interleaved
from report import run_header, write_json

from tshtrain.algorithm import EpsilonSchedule, QValuePolicy, TanhGaussianPolicy, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env

CHUNK = 256  # env steps per collect call (DQN's and SAC's collection steps in bench_e2e)
BUFFER = 100_000
PACKAGES = ("tshtrain", "torch", "numpy", "gymnasium")


# ------------------------------------------------------------------------------------------ hand loops
def hand_dqn(q_net: nn.Module, num_steps: int, eps: float = 0.04) -> Run:
    env = gym.make("CartPole-v1")
    obs_dim, num_actions = 4, 2
    obs_buf = np.zeros((BUFFER, obs_dim), np.float32)
    next_buf = np.zeros((BUFFER, obs_dim), np.float32)
    act_buf = np.zeros(BUFFER, np.int64)
    rew_buf = np.zeros(BUFFER, np.float32)
    term_buf = np.zeros(BUFFER, np.float32)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)

    def run() -> None:
        nonlocal obs
        ptr = 0
        for _ in range(num_steps):
            if rng.random() < eps:
                action = int(rng.integers(num_actions))
            else:
                with torch.no_grad():
                    action = int(q_net(torch.as_tensor(obs, dtype=torch.float32)).argmax())
            next_obs, reward, terminated, truncated, _ = env.step(action)
            obs_buf[ptr], next_buf[ptr], act_buf[ptr] = obs, next_obs, action
            rew_buf[ptr], term_buf[ptr] = reward, float(terminated)
            ptr = (ptr + 1) % BUFFER
            obs = env.reset()[0] if terminated or truncated else next_obs

    return run


def hand_sac(actor: nn.Module, num_steps: int) -> Run:
    env = gym.make("Pendulum-v1")
    obs_buf = np.zeros((BUFFER, 3), np.float32)
    next_buf = np.zeros((BUFFER, 3), np.float32)
    act_buf = np.zeros((BUFFER, 1), np.float32)
    rew_buf = np.zeros(BUFFER, np.float32)
    term_buf = np.zeros(BUFFER, np.float32)
    obs, _ = env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)

    def run() -> None:
        nonlocal obs
        ptr = 0
        for _ in range(num_steps):
            with torch.no_grad():
                mu, log_std = actor(torch.as_tensor(obs, dtype=torch.float32)).chunk(2, dim=-1)
                eps = torch.randn(mu.shape, generator=generator)
                action = torch.tanh(mu + log_std.clamp(-20.0, 2.0).exp() * eps).numpy()
            next_obs, reward, terminated, truncated, _ = env.step(2.0 * action)
            obs_buf[ptr], next_buf[ptr], act_buf[ptr] = obs, next_obs, action
            rew_buf[ptr], term_buf[ptr] = reward, float(terminated)
            ptr = (ptr + 1) % BUFFER
            obs = env.reset()[0] if terminated or truncated else next_obs

    return run


def hand_argmax(q_net: nn.Module, num_steps: int, num_envs: int) -> Run:
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    rows = BUFFER // num_envs
    obs_buf = np.zeros((rows, num_envs, 4), np.float32)
    next_buf = np.zeros((rows, num_envs, 4), np.float32)
    act_buf = np.zeros((rows, num_envs), np.int64)
    rew_buf = np.zeros((rows, num_envs), np.float32)
    term_buf = np.zeros((rows, num_envs), bool)
    trunc_buf = np.zeros((rows, num_envs), bool)
    obs, _ = envs.reset(seed=0)

    def run() -> None:
        nonlocal obs
        for t in range(num_steps // num_envs):
            with torch.no_grad():
                action = q_net(torch.from_numpy(obs)).argmax(-1).numpy()
            next_obs, reward, terminated, truncated, info = envs.step(action)
            stored = next_obs
            done = terminated | truncated
            if done.any():
                stored = next_obs.copy()
                for i in np.flatnonzero(done):
                    stored[i] = info["final_obs"][i]
            row = t % rows
            obs_buf[row], next_buf[row], act_buf[row] = obs, stored, action
            rew_buf[row], term_buf[row], trunc_buf[row] = reward, terminated, truncated
            obs = next_obs

    return run


# ------------------------------------------------------------------------------------------ collectors
def collector_run(collector: Collector, num_steps: int, *, chunk: int = CHUNK) -> Run:
    def run() -> None:
        done = 0
        while done < num_steps:
            done += collector.collect(n_step=min(chunk, num_steps - done)).n_collected_steps

    return run


def dqn_collector(q_net: nn.Module, num_steps: int, direct: bool) -> Run:
    env = make_vector_env("CartPole-v1", 1)
    schedule = EpsilonSchedule(start=0.04, end=0.04, num_env_steps=0)
    policy = QValuePolicy(q_net, env.single_action_space, eps_schedule=schedule, seed=0)
    buffer = VectorReplayBuffer(BUFFER, 1, seed=0)
    collector = Collector(policy, env, buffer, exploration_noise=True, seed=0, direct_step=direct)
    return collector_run(collector, num_steps)


def sac_collector(actor: nn.Module, num_steps: int, direct: bool) -> Run:
    env = make_vector_env("Pendulum-v1", 1)
    policy = TanhGaussianPolicy(actor, env.single_action_space, seed=0)
    buffer = VectorReplayBuffer(BUFFER, 1, seed=0)
    collector = Collector(policy, env, buffer, exploration_noise=True, seed=0, direct_step=direct)
    return collector_run(collector, num_steps)


def argmax_collector(q_net: nn.Module, num_steps: int, num_envs: int, direct: bool) -> Run:
    env = make_vector_env("CartPole-v1", num_envs)
    policy = QValuePolicy(q_net, env.single_action_space, seed=0)
    buffer = VectorReplayBuffer(BUFFER, num_envs, seed=0)
    collector = Collector(policy, env, buffer, seed=0, direct_step=direct)
    assert collector.uses_direct_step == direct
    return collector_run(collector, num_steps, chunk=CHUNK * num_envs)


# ------------------------------------------------------------------------------------------ measuring
def measure_workload(
    contestants: dict[str, Callable[[], Run]], num_steps: int, reps: int, label: str
) -> dict[str, Any]:
    """Interleaved, rotated runs (each contestant built afresh per rep, one warm-up round): µs per env
    step, wall and CPU."""
    rows = run_interleaved(
        [Contestant(name=name, setup=make, work=num_steps) for name, make in contestants.items()],
        reps=reps,
        unit="env steps/s",
        label=label,
    )
    micros = {r.name: [s / num_steps * 1e6 for s in r.seconds] for r in rows}
    cpu_micros = {r.name: [s / num_steps * 1e6 for s in r.cpu_seconds] for r in rows}
    # ratio of medians, and the median of the per-rep ratios (the runs of one rep ran back to back:
    # their ratio is steadier on a loaded machine)
    ratios = {name: paired_ratio(values, micros["hand"]) for name, values in micros.items()}
    return {
        "us_per_env_step": micros,
        "cpu_us_per_env_step": cpu_micros,
        "median_us_per_env_step": {name: statistics.median(values) for name, values in micros.items()},
        "ratio_to_hand": {name: q["ratio_of_medians"] for name, q in ratios.items()},
        "median_rep_ratio_to_hand": {name: q["paired_median"] for name, q in ratios.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,048 env steps, 2 reps")
    args = parser.parse_args()
    num_steps, reps = (2048, 2) if args.quick else (20_480, 5)
    pin_torch_threads()
    header = run_header(PACKAGES)
    torch.manual_seed(0)
    q_net = mlp(4, 2, (256, 256), nn.ReLU)
    actor = mlp(3, 2, (256, 256), nn.ReLU)
    q_net_8 = mlp(4, 2, (64, 64), nn.Tanh)
    workloads: dict[str, dict[str, Callable[[], Run]]] = {
        "dqn_cartpole": {
            "hand": lambda: hand_dqn(q_net, num_steps),
            "vector": lambda: dqn_collector(q_net, num_steps, False),
            "fast": lambda: dqn_collector(q_net, num_steps, True),
        },
        "sac_pendulum": {
            "hand": lambda: hand_sac(actor, num_steps),
            "vector": lambda: sac_collector(actor, num_steps, False),
            "fast": lambda: sac_collector(actor, num_steps, True),
        },
        "argmax_cartpole_2": {
            "hand": lambda: hand_argmax(q_net_8, num_steps, 2),
            "vector": lambda: argmax_collector(q_net_8, num_steps, 2, False),
            "fast": lambda: argmax_collector(q_net_8, num_steps, 2, True),
        },
        "argmax_cartpole_8": {
            "hand": lambda: hand_argmax(q_net_8, num_steps, 8),
            "vector": lambda: argmax_collector(q_net_8, num_steps, 8, False),
            "fast": lambda: argmax_collector(q_net_8, num_steps, 8, True),
        },
    }
    results = {
        name: measure_workload(contestants, num_steps, reps, name) for name, contestants in workloads.items()
    }
    print(f"\nµs per env step, median of {reps} interleaved runs of {num_steps:,} env steps (ratio to hand)")
    print(f"{'workload':20s} {'contestant':10s} {'µs/step':>9s} {'x hand':>7s} {'rep x hand':>11s}")
    for workload, res in results.items():
        for name, median in res["median_us_per_env_step"].items():
            ratio, rep_ratio = res["ratio_to_hand"][name], res["median_rep_ratio_to_hand"][name]
            print(f"{workload:20s} {name:10s} {median:9.1f} {ratio:7.2f} {rep_ratio:11.2f}")
    path = write_json(
        "collect_one_env" + ("_quick" if args.quick else ""),
        {
            **header,
            "num_env_steps": num_steps,
            "reps": reps,
            "chunk_env_steps": CHUNK,
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
