"""Tianshou's test/offline/test_cql.py, ported: CQL on Pendulum-v1 from a SAC expert's buffer.

The dataset is made as Tianshou's gather_pendulum_data.py makes it: SAC (hidden 128-128, lr 1e-3,
3-step returns, automatic alpha with lr 3e-4) trained with 10 envs, 10 env steps per collection and
0.125 gradient steps per env step (batch 256) until its test return reaches -250 (at most 7 epochs of
8000 env steps), then 20000 fresh stochastic env steps of the trained agent in a new buffer.

CQL then keeps the script's settings: its "1-d actor" (Tianshou's ``Net`` with ``action_shape`` makes
the 64-64 MLP end in a single unit, on which ActorProb puts a mean head and a state-conditioned sigma
head), twin 64-64 critics, lr 1e-3 everywhere, automatic alpha, CQL-Lagrange with cql_weight 1 and
threshold 10 (learning rate 1e-3), 5 epochs of 500 gradient steps of batch 64, 10 test episodes per
epoch, and the threshold -1200 on the best test return. Tianshou's CQL has ``calibrated=True`` and a
critic ``max_grad_norm`` of 1.0 by default; the port sets both (``--no-calibrated`` turns Cal-QL off).

Run: python examples/from_tianshou/from_test_cql.py [--seed 0] [--epochs 5] [--no-calibrated]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from torch import nn

from tshtrain.algorithm import CQL, SAC, CQLParams, QEnsemble, SACParams, TanhGaussianPolicy, mlp
from tshtrain.data import Collector, VectorReplayBuffer, load_buffer, save_buffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams, OffPolicyTrainer, OffPolicyTrainerParams

TASK = "Pendulum-v1"
REWARD_THRESHOLD = -1200.0
"""Tianshou's threshold for this test (on the best mean test return)"""
DATASET_ENV_STEPS = 20000
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "tshtrain_datasets"


def gather_data(
    seed: int = 0,
    max_epochs: int = 7,
    epoch_num_steps: int = 8000,
    *,
    deterministic: bool = True,
    num_env_steps: int = DATASET_ENV_STEPS,
) -> VectorReplayBuffer:
    """gather_pendulum_data.py: train SAC to -250, then collect 20000 env steps with it. Tianshou's
    collector acts deterministically outside a training step (its SAC has no exploration noise), so
    the dataset holds the mean actions: ``deterministic=True``."""
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env(TASK, 10), make_vector_env(TASK, 10)
    policy = TanhGaussianPolicy(mlp(3, 2, (128, 128), nn.ReLU), train_envs.single_action_space, seed=seed)
    sac = SAC(
        policy=policy,
        critic=QEnsemble(3, 1, (128, 128)),
        params=SACParams(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=3e-4, gamma=0.99, tau=0.005, n_step=3),
    )
    collector = Collector(policy, train_envs, VectorReplayBuffer(20000, 10, seed=seed), seed=seed)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.125,
        batch_size=256,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= -250.0,
        show_progress=False,
        verbose=False,
    )
    OffPolicyTrainer(sac, params).run()
    dataset = VectorReplayBuffer(num_env_steps, 10, seed=seed)
    Collector(policy, train_envs, dataset, seed=seed + 1).collect(
        n_step=num_env_steps, deterministic=deterministic
    )
    train_envs.close()
    test_envs.close()
    return dataset


def dataset(
    cache_dir: str | Path | None = None, sample_seed: int = 0, *, deterministic: bool = True
) -> BaseReplayBuffer:
    """The dataset of :func:`gather_data` (seed 0), cached in ``cache_dir``."""
    kind = "deterministic" if deterministic else "stochastic"
    directory = Path(cache_dir or DEFAULT_CACHE_DIR) / f"tianshou_expert_sac_pendulum_seed0_{kind}"
    if not (directory / "done").exists():
        save_buffer(gather_data(0, deterministic=deterministic), directory / "buffer")
        (directory / "done").write_text("ok")
    return load_buffer(directory / "buffer", seed=sample_seed)


def one_unit_actor(hidden_sizes: tuple[int, ...] = (64, 64)) -> nn.Module:
    """Tianshou's ``ActorProb(Net(obs, action_shape, hidden), unbounded=True, conditioned_sigma=True)``:
    the MLP ends in one linear unit; the mean and the log-std are each a linear map of that unit."""
    return nn.Sequential(mlp(3, 1, hidden_sizes, nn.ReLU), nn.Linear(1, 2))


def build(seed: int, *, calibrated: bool = True, max_grad_norm: float | None = 1.0) -> tuple[CQL, Collector]:
    """The ported CQL agent and its test collector (10 envs)."""
    torch.manual_seed(seed)
    test_envs = make_vector_env(TASK, 10)
    policy = TanhGaussianPolicy(one_unit_actor(), test_envs.single_action_space, seed=seed)
    params = CQLParams(
        actor_lr=1e-3,
        critic_lr=1e-3,
        alpha_lr=1e-3,
        alpha=1.0,  # Tianshou's log_alpha starts at 0
        auto_alpha=True,
        gamma=0.99,
        tau=0.005,
        temperature=1.0,
        cql_weight=1.0,
        with_lagrange=True,
        lagrange_threshold=10.0,
        cql_weight_lr=1e-3,
        num_sampled_actions=10,
        calibrated=calibrated,
        max_grad_norm=max_grad_norm,
    )
    algorithm = CQL(policy=policy, critic=QEnsemble(3, 1, (64, 64)), params=params)
    return algorithm, Collector(policy, test_envs, seed=seed + 1000)


def run(
    seed: int = 0,
    *,
    epochs: int = 5,
    epoch_num_steps: int = 500,
    calibrated: bool = True,
    max_grad_norm: float | None = 1.0,
    deterministic_data: bool = True,
    cache_dir: str | Path | None = None,
    buffer: BaseReplayBuffer | None = None,
    verbose: bool = False,
) -> float:
    """Train the port; returns the best mean test return over its test steps (what Tianshou's
    test asserts to be >= -1200). ``buffer``: a dataset to use instead of :func:`dataset`'s."""
    if buffer is None:
        buffer = dataset(cache_dir, sample_seed=seed, deterministic=deterministic_data)
    algorithm, test_collector = build(seed, calibrated=calibrated, max_grad_norm=max_grad_norm)
    params = OfflineTrainerParams(
        buffer=buffer,
        test_collector=test_collector,
        max_epochs=epochs,
        epoch_num_steps=epoch_num_steps,
        batch_size=64,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= REWARD_THRESHOLD,
        show_progress=False,
        verbose=verbose,
    )
    info = OfflineTrainer(algorithm, params).run()
    test_collector.env.close()
    assert info.best_score is not None  # the run has test steps
    return float(info.best_score)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--no-calibrated", action="store_true")
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    best = run(args.seed, epochs=args.epochs, calibrated=not args.no_calibrated, cache_dir=args.cache_dir)
    print(f"seed {args.seed}: best test return {best:.1f} (threshold {REWARD_THRESHOLD})")


if __name__ == "__main__":
    main()
