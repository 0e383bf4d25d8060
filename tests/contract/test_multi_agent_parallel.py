"""The parallel update mode of multi-agent on-policy algorithms (one worker process per learner):
the same weights as the sequential mode, bit-exact checkpoint resume, clean shutdown, dead workers and
worker errors reported in the main process, and what it refuses."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.contract.test_multi_agent_trainer import _dqn_vs_random, _ppo
from tshtrain.algorithm import (
    DQN,
    PPO,
    CategoricalPolicy,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    mlp,
    scoped_learners,
)
from tshtrain.algorithm.multi_agent_parallel import ParallelParams
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError, NonFiniteLossError, ParallelWorkerError
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams


def _scoped_ppo(
    mode: str, *, max_epochs: int = 2, parallel: ParallelParams | None = None, **kwargs: Any
) -> OnPolicyTrainer:
    torch.manual_seed(0)
    env = make_vector_env("CartPole-v1", 4)
    members = [_ppo(env.single_action_space, 4, seed) for seed in range(2)]
    algorithm = MultiAgentOnPolicy(
        scoped_learners([2, 2], members),
        num_units=4,
        update_mode=mode,  # type: ignore[arg-type]
        parallel=parallel,
    )
    params = OnPolicyTrainerParams(
        training_collector=Collector(algorithm.policy, env, VectorReplayBuffer(4 * 16, buffer_num=4), seed=0),
        test_collector=Collector(algorithm.policy, make_vector_env("CartPole-v1", 4), seed=1),
        max_epochs=max_epochs,
        epoch_num_steps=64,
        collection_step_num_env_steps=32,
        batch_size=16,
        update_step_num_repetitions=2,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
        **kwargs,
    )
    return OnPolicyTrainer(algorithm, params)


def _algorithm(trainer: OnPolicyTrainer) -> MultiAgentOnPolicy:
    algorithm = trainer.algorithm
    assert isinstance(algorithm, MultiAgentOnPolicy)
    return algorithm


def _flat(state: Any) -> list[Any]:
    """Every leaf of a nested state, in order (tensors and arrays as numpy)."""
    if isinstance(state, dict):
        return [leaf for key in sorted(state, key=str) for leaf in [key, *_flat(state[key])]]
    if isinstance(state, list | tuple):
        return [leaf for item in state for leaf in _flat(item)]
    if isinstance(state, torch.Tensor):
        return [state.detach().numpy().copy()]
    return [state]


def _assert_same_state(a: Any, b: Any) -> None:
    for x, y in zip(_flat(a), _flat(b), strict=True):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


def _run_then_restart_workers(trainer: OnPolicyTrainer) -> MultiAgentOnPolicy:
    """Run the trainer (which stops the workers at the end), then start them again with one update."""
    trainer.run()
    algorithm = _algorithm(trainer)
    assert algorithm._parallel is None
    collector = trainer.params.training_collector
    collector.buffer.reset()
    collector.collect(n_step=32)
    buffer = collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    algorithm.update(buffer.rollout(), batch_size=16, num_repetitions=1)
    assert algorithm._parallel is not None and algorithm._parallel.running
    return algorithm


def _exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts: it was not reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_parallel_updates_give_the_sequential_weights_bit_for_bit() -> None:
    sequential, parallel = _scoped_ppo("sequential"), _scoped_ppo("parallel")
    before = [p.detach().clone() for p in _algorithm(parallel).policy.parameters()]
    sequential.run()
    parallel.run()
    seq_alg, par_alg = _algorithm(sequential), _algorithm(parallel)
    try:
        assert par_alg._parallel is None  # the trainer stopped the workers when the run ended
        after = list(par_alg.policy.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
        for a, b in zip(seq_alg.policy.parameters(), after, strict=True):
            assert torch.equal(a, b)
        # optimizers, generators and update counters came back from the workers
        _assert_same_state(seq_alg.state_dict(), par_alg.state_dict())
        assert par_alg.state_dict()["agent_0"]["_extra"]["num_update_steps"] == 4
    finally:
        par_alg.close()


def test_parallel_checkpoint_resume_is_bit_exact(tmp_path: Path) -> None:
    straight = _scoped_ppo(
        "parallel", max_epochs=3, checkpoint=CheckpointParams(directory=tmp_path / "ckpt", every_num_epochs=1)
    )
    resumed = _scoped_ppo("parallel", max_epochs=3)
    try:
        straight.run()
        periodic = sorted((tmp_path / "ckpt").glob("periodic-000002-*"))
        assert len(periodic) == 1
        resumed.load_checkpoint(periodic[0], trusted=True)  # the envs' snapshot is a pickle
        resumed.run()
        _assert_same_state(_algorithm(straight).state_dict(), _algorithm(resumed).state_dict())
    finally:
        _algorithm(straight).close()
        _algorithm(resumed).close()


def test_close_loads_the_workers_state_and_stops_them_and_the_next_update_restarts_them() -> None:
    trainer = _scoped_ppo("parallel", max_epochs=1)
    trainer.run()
    algorithm = _algorithm(trainer)
    assert algorithm._parallel is None  # the trainer stopped the workers when the run ended
    rollout = trainer.params.training_collector.buffer
    assert isinstance(rollout, VectorReplayBuffer)
    trainer.params.training_collector.collect(n_step=32)
    algorithm.update(rollout.rollout(), batch_size=16, num_repetitions=1)  # starts them again
    pool = algorithm._parallel
    assert pool is not None
    processes = [worker.process for worker in pool._workers]
    assert sorted(pool.pids()) == ["agent_0", "agent_1"] and all(p.is_alive() for p in processes)
    from_workers = algorithm.state_dict()
    algorithm.close()
    assert all(p.exitcode == 0 for p in processes)  # exited on request, and reaped
    assert not any(_exists(pid) for pid in pool.pids().values())
    assert algorithm._parallel is None
    _assert_same_state(from_workers, algorithm.state_dict())  # the main process's copies are current
    algorithm.close()  # idempotent
    trainer.params.training_collector.collect(n_step=32)
    try:
        stats = algorithm.update(rollout.rollout(), batch_size=16, num_repetitions=1)
        assert set(stats.per_learner) == {"agent_0", "agent_1"}
        assert algorithm._parallel is not None and algorithm._parallel.running
    finally:
        algorithm.close()


def test_a_dead_worker_is_reported_with_its_learner_and_signal() -> None:
    trainer = _scoped_ppo("parallel", max_epochs=1)
    algorithm = _run_then_restart_workers(trainer)
    assert algorithm._parallel is not None
    saved = algorithm.state_dict()
    pids = algorithm._parallel.pids()
    os.kill(pids["agent_1"], signal.SIGKILL)
    collector = trainer.params.training_collector
    collector.buffer.reset()
    collector.collect(n_step=32)
    buffer = collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    with pytest.raises(ParallelWorkerError, match=r"learner 'agent_1' .* killed by signal 9"):
        algorithm.update(buffer.rollout(), batch_size=16, num_repetitions=1)
    assert not algorithm._parallel.running  # every worker was stopped
    assert not any(_exists(pid) for pid in pids.values())
    with pytest.raises(ParallelWorkerError, match="closed after a worker failure"):
        algorithm.state_dict()  # not the main process's stale optimizer states
    with pytest.raises(ParallelWorkerError, match="closed after a worker failure"):
        algorithm.update(buffer.rollout(), batch_size=16, num_repetitions=1)
    # loading a checkpoint starts fresh workers from it
    algorithm.load_state_dict(saved)
    try:
        stats = algorithm.update(buffer.rollout(), batch_size=16, num_repetitions=1)
        assert set(stats.per_learner) == {"agent_0", "agent_1"}
        assert algorithm._parallel is not None and algorithm._parallel.pids()["agent_1"] != pids["agent_1"]
    finally:
        algorithm.close()


def test_a_worker_that_does_not_answer_times_out_naming_its_learner() -> None:
    trainer = _scoped_ppo("parallel", max_epochs=1, parallel=ParallelParams(shutdown_timeout_s=0.5))
    algorithm = _run_then_restart_workers(trainer)
    assert algorithm._parallel is not None
    # the run above waits as long as the workers live (a busy machine may take seconds per reply); only
    # the stuck worker below meets a short timeout, which it cannot answer within however fast it is
    params = algorithm._parallel.params
    algorithm._parallel.params = dataclasses.replace(params, reply_timeout_s=2.0)
    pids = algorithm._parallel.pids()
    os.kill(pids["agent_0"], signal.SIGSTOP)  # alive but stuck: no reply, no exit
    collector = trainer.params.training_collector
    collector.buffer.reset()
    collector.collect(n_step=32)
    buffer = collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    with pytest.raises(ParallelWorkerError, match=r"learner 'agent_0' .* did not answer within"):
        algorithm.update(buffer.rollout(), batch_size=16, num_repetitions=1)
    assert not algorithm._parallel.running
    assert not any(_exists(pid) for pid in pids.values())  # the stuck worker was killed and reaped


def test_a_worker_error_is_raised_in_the_main_process_with_the_remote_traceback() -> None:
    trainer = _scoped_ppo("parallel", max_epochs=1)
    algorithm = _run_then_restart_workers(trainer)
    collector = trainer.params.training_collector
    collector.buffer.reset()
    collector.collect(n_step=32)
    buffer = collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    rollout = buffer.rollout()
    poisoned = dataclasses.replace(rollout, rew=np.full_like(rollout.rew, np.nan))
    saved = algorithm.state_dict()
    try:
        with pytest.raises(NonFiniteLossError) as info:
            algorithm.update(poisoned, batch_size=16, num_repetitions=1)
        assert "in the worker of learner 'agent_0'" in str(info.value.__cause__)
        # the workers survive an exception; the NaN update left NaN statistics (as it would in
        # sequential mode), so load the state from before it into the running workers
        pool = algorithm._parallel
        assert pool is not None and pool.running
        algorithm.load_state_dict(saved)
        assert algorithm._parallel is pool
        _assert_same_state(saved, algorithm.state_dict())
        stats = algorithm.update(rollout, batch_size=16, num_repetitions=1)
        assert stats.num_gradient_steps > 0
        assert all(torch.isfinite(p).all() for p in algorithm.policy.parameters())
    finally:
        algorithm.close()


def test_parallel_mode_refuses_off_policy_learners_and_shared_parameters() -> None:
    trainer = _dqn_vs_random(0)
    learners = trainer.algorithm.learners  # type: ignore[attr-defined]
    assert isinstance(learners[1].algorithm, DQN)
    with pytest.raises(ConfigurationError, match="update_mode='parallel' is not supported"):
        MultiAgentOffPolicy(learners, num_units=2, update_mode="parallel")
    env = make_vector_env("CartPole-v1", 2)
    first = _ppo(env.single_action_space, 4, 0)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), env.single_action_space, seed=1)
    second = PPO(policy=policy, critic=first.ac.critic, seed=1)  # shared: two processes would write it
    algorithm = MultiAgentOnPolicy(
        scoped_learners([1, 1], [first, second]),
        update_mode="parallel",
        parallel=ParallelParams(start_method="fork"),
    )
    collector = Collector(algorithm.policy, env, VectorReplayBuffer(2 * 8, buffer_num=2), seed=0)
    collector.collect(n_step=8)
    buffer = collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    with pytest.raises(ConfigurationError, match="'agent_0' and 'agent_1' share parameters"):
        algorithm.update(buffer.rollout(), batch_size=8, num_repetitions=1)
