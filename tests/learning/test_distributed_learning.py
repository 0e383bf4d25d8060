"""Learning test of data-parallel PPO (slow tier): 2 local gloo ranks x 4 CartPole envs reach a mean
test return of 475 within the env-step budget that one process with 8 envs gets (100k env steps, the
budget of tests/learning/test_on_policy_learning.py), with the same hyperparameters; each contestant must
solve at least 4 of seeds 0-4.

Both contestants run here, in the slow tier, built by one function (:func:`train`) from PPO's default
experiment (examples/ppo_cartpole.py's settings): per rank, half the envs, half the env steps per
collection step and half the mini-batch, so that a collection step gathers 256 env steps over all ranks
and the averaged gradient is that of a mini-batch of 256, as in one process. The linear learning-rate and
clip schedules decay over the run's update steps counted over all ranks. Every rank seeds its policy with
the same seed (as ``tshtrain train --nproc`` does); the env seeds differ per rank
(``DistributedContext.env_seed``).

Every run prints a ``RESULT`` line (best test return, env steps, wall time).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.contract import _distributed_runs
from tshtrain.algorithm import PPO, CategoricalPolicy, LinearSchedule, PPOParams, mlp, num_update_steps_for
from tshtrain.config import default_experiment
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.distributed import DistributedContext
from tshtrain.parallel import DataParallel
from tshtrain.env import make_vector_env
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams, StopReason, TrainerOptions

EXPERIMENT = default_experiment("ppo")
HPARAMS = EXPERIMENT.algorithm.params
TRAINER = EXPERIMENT.trainer
TOTAL_ENVS = 8
"""training envs over all ranks (one process: 8; 2 ranks: 4 each)"""
BUDGET_ENV_STEPS = 100_000
THRESHOLD = 475.0
SEEDS = range(5)
REQUIRED = 4
"""seeds of 5 that must solve, for each contestant (as tests/learning/test_on_policy_learning.py's PPO)"""
RUN_GUARD_SECONDS = 1800.0
"""how long the launcher waits for a learning run's ranks before it calls them hung (not a speed assertion)"""


def train(context: DistributedContext | None, seed: int) -> dict[str, Any]:
    """PPO on CartPole on this rank (or in one process) with ``TOTAL_ENVS / world_size`` envs; the run's
    result as plain values."""
    world_size = 1 if context is None else context.world_size
    num_envs = TOTAL_ENVS // world_size
    collection_num_env_steps = TRAINER["collection_step_num_env_steps"] // world_size
    epoch_num_steps = TRAINER["epoch_num_steps"]
    max_epochs = BUDGET_ENV_STEPS // epoch_num_steps
    num_updates = num_update_steps_for(  # over all ranks: one update step per collection step of all
        num_env_steps=max_epochs * epoch_num_steps,
        collection_step_num_env_steps=collection_num_env_steps * world_size,
        num_envs=TOTAL_ENVS,
    )
    torch.manual_seed(seed)  # network initialisation (rank 0's weights are broadcast anyway)
    train_envs = make_vector_env(EXPERIMENT.env.id, num_envs)
    test_envs = make_vector_env(EXPERIMENT.env.id, EXPERIMENT.env.num_test_envs)
    hidden_sizes = tuple(EXPERIMENT.algorithm.network["hidden_sizes"])
    policy = CategoricalPolicy(mlp(4, 2, hidden_sizes), train_envs.single_action_space, seed=seed)
    params = PPOParams(
        lr=HPARAMS["lr"],
        lr_schedule=LinearSchedule(num_update_steps=num_updates),
        clip_range=HPARAMS["clip_range"],
        clip_schedule=LinearSchedule(num_update_steps=num_updates),
        gamma=HPARAMS["gamma"],
        gae_lambda=HPARAMS["gae_lambda"],
        ent_coef=HPARAMS["ent_coef"],
    )
    algorithm = PPO(policy=policy, critic=mlp(4, 1, hidden_sizes), params=params, seed=seed)
    env_seed = seed if context is None else context.env_seed(seed, num_envs)
    trainer_params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, train_envs, VectorReplayBuffer(collection_num_env_steps, num_envs), seed=env_seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=collection_num_env_steps,
        batch_size=TRAINER["batch_size"] // world_size,
        update_step_num_repetitions=TRAINER["update_step_num_repetitions"],
        test_step_num_episodes=TRAINER["test_step_num_episodes"],
        stop_fn=lambda score: score >= THRESHOLD,
        verbose=False,
        show_progress=False,
    )
    start = time.perf_counter()
    try:
        info = OnPolicyTrainer(algorithm, trainer_params, TrainerOptions(distributed=DataParallel(context))).run()
    finally:
        train_envs.close()
        test_envs.close()
    return {
        "best_reward": info.best_reward,
        "env_steps": info.train_step,
        "gradient_steps": info.gradient_step,
        "stop_reason": info.stop_reason,
        "seconds": time.perf_counter() - start,
    }


def _report(name: str, seed: int, result: dict[str, Any]) -> bool:
    print(
        f"RESULT {name} seed={seed} best_reward={result['best_reward']} env_steps={result['env_steps']} "
        f"gradient_steps={result['gradient_steps']} stop={result['stop_reason']} "
        f"time={result['seconds']:.1f}s"
    )
    # stop_fn is not consulted at the initial test step: STOP_FN means a test step after training got there
    return bool(
        result["stop_reason"] is StopReason.STOP_FN
        and result["best_reward"] is not None
        and result["best_reward"] >= THRESHOLD
        and result["env_steps"] <= BUDGET_ENV_STEPS
    )


def _two_ranks(seed: int) -> dict[str, Any]:
    results = _distributed_runs.run_ranks(train, 2, seed, timeout=300.0)
    for rank, (kind, value) in sorted(results.items()):
        assert kind == "ok", f"seed {seed}, rank {rank}: {value}"
    rank0, rank1 = results[0][1], results[1][1]
    # the ranks agree on the counters and the result (rank 0 tested; its result was broadcast)
    keys = ("best_reward", "env_steps", "gradient_steps", "stop_reason")
    assert {k: rank0[k] for k in keys} == {k: rank1[k] for k in keys}
    result: dict[str, Any] = rank0
    return result


def _require_seeds(name: str, run: Callable[[int], dict[str, Any]]) -> None:
    outcomes = {}
    for seed in SEEDS:
        result = run(seed)
        outcomes[seed] = (_report(name, seed, result), result["best_reward"], result["env_steps"])
    num_solved = sum(solved for solved, _, _ in outcomes.values())
    assert num_solved >= REQUIRED, f"{name}: {num_solved} of {len(SEEDS)} seeds solved: {outcomes}"


@pytest.mark.slow
@pytest.mark.learning
def test_ppo_one_process_with_8_envs_solves_cartpole() -> None:
    _require_seeds("ppo_1x8", lambda seed: train(None, seed))


@pytest.mark.slow
@pytest.mark.learning
def test_ppo_two_gloo_ranks_with_4_envs_each_solve_cartpole_in_the_same_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_distributed_runs, "HANG_GUARD_SECONDS", RUN_GUARD_SECONDS)
    _require_seeds("ppo_2x4_gloo", _two_ranks)
