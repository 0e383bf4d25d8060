"""``run_lockstep``: several collectors' loops stepped in lockstep, their networks evaluated in one stacked
pass, collect what each collects on its own (buffers, generators, stats), the actions come from the
stacked pass, errors stay with their collector, and a network changed mid-collection is stacked again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from tshtrain.algorithm import CategoricalPolicy, GaussianPolicy, QValuePolicy, mlp
from tshtrain.algorithm.blocks import lockstep
from tshtrain.algorithm.blocks.lockstep import LockstepJob, acting_network, run_lockstep
from tshtrain.data import Collector, CollectStats, VectorReplayBuffer
from tshtrain.data.collector import ActingLoop
from tshtrain.data.collector_base import CollectedEpisodes
from tshtrain.env import make_vector_env


def categorical_collector(seed: int, num_envs: int = 4) -> Collector:
    torch.manual_seed(seed)
    env = make_vector_env("CartPole-v1", num_envs)
    policy = CategoricalPolicy(mlp(4, 2, (16, 16)), env.single_action_space, seed=seed)
    return Collector(policy, env, VectorReplayBuffer(400 * num_envs, num_envs), seed=seed)


def q_collector(seed: int) -> Collector:
    """One env (the collector's scalar path), epsilon-greedy from the collector's generator."""
    torch.manual_seed(seed)
    env = make_vector_env("CartPole-v1", 1)
    policy = QValuePolicy(mlp(4, 2, (16, 16)), env.single_action_space, seed=seed)
    return Collector(policy, env, VectorReplayBuffer(400, 1), exploration_noise=True, seed=seed)


def in_lockstep(collectors: list[Collector], collect: Callable[[Collector], CollectStats]) -> list[Any]:
    """``collect(collector)`` for every collector, each in a thread of its own whose collection loop is
    handed to this thread; once every loop has arrived they run together in ``run_lockstep`` (a small
    SeedBatch). Per collector its stats, or the error its collect raised."""
    arrived: list[LockstepJob] = []
    all_arrived, done = threading.Barrier(len(collectors) + 1), threading.Event()
    results: list[Any] = [None] * len(collectors)

    def driver(collector: Collector, loop: ActingLoop, random: bool) -> CollectedEpisodes:
        job = LockstepJob(collector, loop, random)
        arrived.append(job)
        all_arrived.wait()
        done.wait()
        if isinstance(job.result, Exception):
            raise job.result
        assert isinstance(job.result, CollectedEpisodes)
        return job.result

    def main(k: int, collector: Collector) -> None:
        try:
            results[k] = collect(collector)
        except Exception as error:
            results[k] = error

    for collector in collectors:
        collector.loop_driver = driver
    threads = [threading.Thread(target=main, args=(k, c)) for k, c in enumerate(collectors)]
    for thread in threads:
        thread.start()
    all_arrived.wait()
    order = {id(c): k for k, c in enumerate(collectors)}
    run_lockstep(sorted(arrived, key=lambda job: order[id(job.collector)]))
    done.set()
    for thread in threads:
        thread.join()
    for collector in collectors:
        collector.loop_driver = None
    return results


def stored(collector: Collector) -> dict[str, np.ndarray]:
    buffer = collector.buffer
    assert buffer is not None
    batch = buffer.sample_all()
    return {"obs": np.asarray(batch.obs), "act": batch.act, "rew": batch.rew, "done": batch.terminated}


def same_collection(mine: Collector, own: Collector) -> None:
    for name, values in stored(own).items():
        np.testing.assert_array_equal(stored(mine)[name], values, err_msg=name)
    assert mine.rng.bit_generator.state == own.rng.bit_generator.state
    assert torch.equal(mine.policy.generator.get_state(), own.policy.generator.get_state())  # type: ignore[attr-defined]
    np.testing.assert_array_equal(np.asarray(mine.obs), np.asarray(own.obs))


@pytest.mark.parametrize("make", [categorical_collector, q_collector], ids=["categorical", "q-one-env"])
def test_lockstep_collects_what_each_collector_collects_on_its_own(make: Callable[[int], Collector]) -> None:
    own = [make(seed) for seed in range(3)]
    own_stats = [c.collect(n_step=300) for c in own] + [c.collect(n_episode=5) for c in own]
    mine = [make(seed) for seed in range(3)]
    stats = in_lockstep(mine, lambda c: c.collect(n_step=300)) + in_lockstep(
        mine, lambda c: c.collect(n_episode=5)
    )
    for a, b in zip(stats, own_stats, strict=True):
        assert isinstance(a, CollectStats)
        assert a.n_collected_steps == b.n_collected_steps
        np.testing.assert_array_equal(a.returns, b.returns)
        np.testing.assert_array_equal(a.lens, b.lens)
    for a, b in zip(mine, own, strict=True):
        same_collection(a, b)


def test_the_actions_come_from_the_stacked_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stacked pass that prefers action 1 everywhere: every seed's greedy actions are 1."""
    calls = []

    def prefers_one(net: Any, tensors: Any, prefix: str, x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape)
        return torch.tensor([-50.0, 50.0]).expand(*x.shape[:-1], 2)

    monkeypatch.setattr(lockstep, "stacked_mlp_forward", prefers_one)
    collectors = [categorical_collector(seed) for seed in range(3)]
    in_lockstep(collectors, lambda c: c.collect(n_step=40, deterministic=True))
    assert calls == [(3, 4, 4)] * 10  # one pass of 3 seeds x 4 envs per vector step
    for collector in collectors:
        assert (stored(collector)["act"] == 1).all()
        assert "forward" not in collector.policy.actor.__dict__  # type: ignore[attr-defined]


def test_an_error_stays_with_its_collector() -> None:
    """Seed 1's env raises at its 5th vector step: its collect raises that error, the others finish
    their collection exactly as on their own."""

    class Failing(gym.Wrapper[Any, Any, Any, Any]):
        steps = 0

        def step(self, action: Any) -> Any:
            Failing.steps += 1
            if Failing.steps == 5:
                raise RuntimeError("the env broke")
            return self.env.step(action)

    mine = [categorical_collector(seed, num_envs=1) for seed in range(3)]
    mine[1].env.envs[0] = Failing(mine[1].env.envs[0])  # type: ignore[attr-defined]
    results = in_lockstep(mine, lambda c: c.collect(n_step=50))
    assert isinstance(results[1], RuntimeError) and "the env broke" in str(results[1])
    for k in (0, 2):
        own = categorical_collector(k, num_envs=1)
        own.collect(n_step=50)
        same_collection(mine[k], own)


def test_a_network_changed_during_the_collection_is_stacked_again() -> None:
    """A listener of seed 0 changes its actor after every vector step: the lockstep run still collects
    what seed 0 collects on its own with that listener."""

    class Nudge:
        def __init__(self, collector: Collector):
            self.actor = collector.policy.actor  # type: ignore[attr-defined]

        def on_vector_step(self, done_env_ids: np.ndarray) -> None:
            with torch.no_grad():
                self.actor[-1].bias.add_(torch.tensor([0.3, -0.3]))

        def on_env_reset(self, env_ids: np.ndarray) -> None:
            pass

    own = [categorical_collector(seed) for seed in range(2)]
    own[0].listener = Nudge(own[0])
    for collector in own:
        collector.collect(n_step=80)
    mine = [categorical_collector(seed) for seed in range(2)]
    mine[0].listener = Nudge(mine[0])
    in_lockstep(mine, lambda c: c.collect(n_step=80))
    for a, b in zip(mine, own, strict=True):
        same_collection(a, b)


class _CapturedError(Exception):
    pass


def test_interrupt_closes_every_loop() -> None:
    """A KeyboardInterrupt from one loop leaves run_lockstep at once, the other loops closed."""

    class Interrupting(gym.Wrapper[Any, Any, Any, Any]):
        def step(self, action: Any) -> Any:
            raise KeyboardInterrupt

    collectors = [categorical_collector(seed, num_envs=1) for seed in range(3)]
    collectors[1].env.envs[0] = Interrupting(collectors[1].env.envs[0])  # type: ignore[attr-defined]
    jobs: list[LockstepJob] = []

    def capture(collector: Collector, loop: ActingLoop, random: bool) -> CollectedEpisodes:
        jobs.append(LockstepJob(collector, loop, random))
        raise _CapturedError  # the loop, not started, is run below

    for collector in collectors:
        collector.loop_driver = capture
        with pytest.raises(_CapturedError):
            collector.collect(n_step=5)
    with pytest.raises(KeyboardInterrupt):
        run_lockstep(jobs)
    assert all(job.loop.gi_frame is None for job in jobs)  # finished or closed: none left suspended
    assert jobs[0].result is None and jobs[2].result is None


def test_which_networks_are_stacked() -> None:
    env = gym.make("CartPole-v1")
    assert acting_network(CategoricalPolicy(mlp(4, 2, (8,)), env.action_space)) is not None
    assert acting_network(QValuePolicy(mlp(4, 2, (8,)), env.action_space)) is not None
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert acting_network(GaussianPolicy(mlp(4, 2, (8,)), box)) is None  # another policy
    dropout = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2))
    assert acting_network(CategoricalPolicy(dropout, env.action_space)) is None  # not a plain MLP


def test_a_failing_stacked_pass_leaves_no_network_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two groups (4-env and 2-env collectors): the second group's stacked pass raises after the first
    group's outputs were lent; run_lockstep raises it and every network is itself again."""
    original = lockstep.stacked_mlp_forward
    calls = []

    def second_fails(net: Any, tensors: Any, prefix: str, x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape)
        if len(calls) == 2:
            raise RuntimeError("the stacked pass failed")
        return original(net, tensors, prefix, x)

    monkeypatch.setattr(lockstep, "stacked_mlp_forward", second_fails)
    collectors = [categorical_collector(s, num_envs=4) for s in range(2)]
    collectors += [categorical_collector(s, num_envs=2) for s in range(2, 4)]
    jobs: list[LockstepJob] = []

    def capture(collector: Collector, loop: ActingLoop, random: bool) -> CollectedEpisodes:
        jobs.append(LockstepJob(collector, loop, random))
        raise _CapturedError

    for collector in collectors:
        collector.loop_driver = capture
        with pytest.raises(_CapturedError):
            collector.collect(n_step=8)
    with pytest.raises(RuntimeError, match="stacked pass failed"):
        run_lockstep(jobs)
    assert len(calls) == 2
    for collector in collectors:
        assert "forward" not in collector.policy.actor.__dict__  # type: ignore[attr-defined]
    assert all(job.loop.gi_frame is None for job in jobs)
