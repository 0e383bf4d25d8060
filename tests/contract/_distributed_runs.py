"""Runs for the data-parallel tests: a launcher of N local gloo ranks (spawned processes, loopback only)
and small seeded PPO / DQN CartPole runs that a rank (or one process) trains."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tshtrain.algorithm import (
    DQN,
    PPO,
    CategoricalPolicy,
    DQNParams,
    PPOParams,
    QValuePolicy,
    mlp,
)
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.distributed import DistributedContext
from tshtrain.parallel import DataParallel
from tshtrain.env import make_vector_env
from tshtrain.trainer import (
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    Trainer,
    TrainerOptions,
)

HANG_GUARD_SECONDS = 900.0
"""how long the launcher waits for the ranks before it calls the run hung (not a speed assertion)"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _entry(rank: int, world_size: int, port: int, timeout: float, fn: Any, args: Any, out: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    context = DistributedContext.init(
        rank=rank, world_size=world_size, backend="gloo", timeout_seconds=timeout
    )
    try:
        out.put((rank, "ok", fn(context, *args)))
    except BaseException as error:
        out.put((rank, "error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))
    finally:
        context.close()


def run_ranks(
    fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 60.0
) -> dict[int, tuple[str, Any]]:
    """Run ``fn(context, *args)`` on ``world_size`` gloo ranks; ``{rank: ("ok", result) | ("error", text)}``."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=_entry, args=(rank, world_size, port, timeout, fn, args, out))
        for rank in range(world_size)
    ]
    for proc in procs:
        proc.start()
    results: dict[int, tuple[str, Any]] = {}
    try:
        while len(results) < world_size:
            rank, kind, value = out.get(timeout=HANG_GUARD_SECONDS)
            results[rank] = (kind, value)
    except queue.Empty:
        raise AssertionError(f"ranks {sorted(set(range(world_size)) - set(results))} hung") from None
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return results


def weights(trainer: Trainer[Any, Any]) -> dict[str, np.ndarray]:
    """The policy's parameters as numpy arrays."""
    return {k: v.detach().numpy().copy() for k, v in trainer.algorithm.policy.state_dict().items()}


def counters(trainer: Trainer[Any, Any]) -> dict[str, int]:
    c = trainer.counters
    return {
        "epoch": c.epoch,
        "env_step": c.env_step,
        "env_episode": c.env_episode,
        "update_step": c.update_step,
        "gradient_step": c.gradient_step,
    }


def ppo(context: DistributedContext | None, num_envs: int, *, seed: int = 0) -> Trainer[Any, Any]:
    """PPO on CartPole, 16 env steps per env per collection step, whole-rollout updates without advantage
    normalisation (so the mean loss of two halves averaged is the mean loss of the whole), acting
    deterministically while collecting (so that rollouts depend on the env seeds only)."""
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", num_envs), make_vector_env("CartPole-v1", 2)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), envs.single_action_space, seed=seed)
    actions = policy.actions
    policy.actions = lambda obs, deterministic: actions(obs, deterministic=True)  # type: ignore[method-assign]
    algorithm = PPO(
        policy=policy,
        critic=mlp(4, 1, (16,)),
        params=PPOParams(lr=1e-2, advantage_normalization=False),
        seed=seed,
    )
    env_seed = seed if context is None else context.env_seed(seed, num_envs)
    params = OnPolicyTrainerParams(
        training_collector=Collector(
            policy, envs, VectorReplayBuffer(16 * num_envs, num_envs), seed=env_seed
        ),
        test_collector=Collector(policy, test_envs, seed=seed + 100),
        max_epochs=2,
        epoch_num_steps=128,
        collection_step_num_env_steps=16 * num_envs,
        batch_size=None,
        update_step_num_repetitions=1,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
    )
    return OnPolicyTrainer(
        algorithm, params, TrainerOptions(distributed=None if context is None else DataParallel(context))
    )


def record_first_gradients(trainer: Trainer[Any, Any]) -> list[np.ndarray]:
    """Fill the returned list with the gradients the first optimizer step uses (after averaging)."""
    grads: list[np.ndarray] = []
    optim = trainer.algorithm.components()["optim"]
    assert isinstance(optim, torch.optim.Optimizer)

    def pre_step(optimizer: torch.optim.Optimizer, *_: Any) -> None:
        if not grads:
            grads.extend(p.grad.numpy().copy() for g in optimizer.param_groups for p in g["params"])

    optim.register_step_pre_hook(pre_step)
    return grads


def train_ppo(context: DistributedContext | None, num_envs: int) -> dict[str, Any]:
    trainer = ppo(context, num_envs)
    grads = record_first_gradients(trainer)
    info = trainer.run()
    return {
        "counters": counters(trainer),
        "grads": grads,
        "weights": weights(trainer),
        "best": info.best_reward,
    }


def dqn(
    context: DistributedContext | None,
    num_envs: int,
    directory: Path | None = None,
    *,
    seed: int = 0,
    training_fn: Callable[[int, int], None] | None = None,
) -> Trainer[Any, Any]:
    """DQN on CartPole: each rank its own replay buffer; 3 epochs of 96 env steps (all ranks together)."""
    torch.manual_seed(seed)
    envs, test_envs = make_vector_env("CartPole-v1", num_envs), make_vector_env("CartPole-v1", 2)
    policy = QValuePolicy(mlp(4, 2, (16,), nn.ReLU), envs.single_action_space, seed=seed)
    algorithm = DQN(policy=policy, params=DQNParams(target_update_freq=10))
    env_seed = seed if context is None else context.env_seed(seed, num_envs)
    training = Collector(
        policy, envs, VectorReplayBuffer(1000, num_envs, seed=env_seed), exploration_noise=True, seed=env_seed
    )
    training.collect(n_step=8 * num_envs, random=True)
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(policy, test_envs, seed=seed + 100),
        max_epochs=3,
        epoch_num_steps=96,
        collection_step_num_env_steps=4 * num_envs,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=16,
        test_step_num_episodes=2,
        training_fn=training_fn,
        checkpoint=None if directory is None else CheckpointParams(directory=directory, every_num_epochs=1),
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(
        algorithm, params, TrainerOptions(distributed=None if context is None else DataParallel(context))
    )


def train_dqn(
    context: DistributedContext | None, num_envs: int, directory: Path | None = None
) -> dict[str, Any]:
    trainer = dqn(context, num_envs, directory)
    trainer.run()
    generator = trainer.algorithm.policy.generator
    return {
        "counters": counters(trainer),
        "weights": weights(trainer),
        "action_seed": generator.initial_seed(),
    }


def resume_dqn(context: DistributedContext | None, num_envs: int, checkpoint: Path) -> dict[str, Any]:
    trainer = dqn(context, num_envs)
    trainer.load_checkpoint(checkpoint)  # every rank's own checkpoint, signed with the shared key
    trainer.run()
    return {"counters": counters(trainer), "weights": weights(trainer)}


def _fail_on_rank_1(rank: int) -> Callable[[int, int], None]:
    def training_fn(epoch: int, env_step: int) -> None:
        if rank == 1 and epoch == 2:
            raise ValueError(f"rank 1 breaks at env step {env_step}")

    return training_fn


def failing_dqn(context: DistributedContext, num_envs: int) -> dict[str, Any]:
    trainer = dqn(context, num_envs, training_fn=_fail_on_rank_1(context.rank))
    trainer.run()
    return {"counters": counters(trainer)}
