"""C51, QR-DQN, IQN and Rainbow on CartPole-v1 with the settings of their default experiments
(tshtrain/config/algos/q_learning.py; ``tshtrain config c51`` prints them): the setups of Tianshou's
test/discrete/test_c51.py, test_qrdqn.py, test_iqn.py and test_rainbow.py. examples/c51_cartpole.py,
qrdqn_cartpole.py, iqn_cartpole.py and rainbow_cartpole.py run them; this module builds them.

Run: python examples/distributional_cartpole.py c51 [--seed 0] [--max-epochs 10]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

from tshtrain.algorithm import (
    C51,
    IQN,
    QRDQN,
    C51Params,
    EpsilonSchedule,
    IQNSampling,
    NoisyQPolicy,
    QuantileParams,
    QValuePolicy,
    Rainbow,
    categorical_mlp,
    iqn_mlp,
    quantile_mlp,
)
from tshtrain.config import default_experiment
from tshtrain.data import Collector, PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

NAMES = ("c51", "qrdqn", "iqn", "rainbow")


def build_algorithm(name: str, seed: int, action_space: Any) -> Any:
    """The algorithm ``name`` with its default experiment's params, network and exploration."""
    experiment = default_experiment(name)
    section = experiment.algorithm
    net, explore = section.network, section.exploration
    hidden = tuple(net["hidden_sizes"])
    eps = EpsilonSchedule(
        start=explore["eps_start"], end=explore["eps_end"], num_env_steps=explore["eps_decay_env_steps"]
    )
    if name in ("c51", "rainbow"):
        params = C51Params(**section.params)
        sigma0 = net["noisy_sigma0"] if name == "rainbow" else None
        atoms = {k: net[k] for k in ("num_atoms", "v_min", "v_max", "dueling")}
        q_policy = QValuePolicy(
            categorical_mlp(4, 2, hidden, noisy_sigma0=sigma0, **atoms),
            action_space,
            eps_schedule=eps,
            seed=seed,
        )
        if name == "c51":
            return C51(policy=q_policy, params=params)
        return Rainbow(policy=NoisyQPolicy(q_policy, seed=seed), params=params, seed=seed)
    quantile_params = QuantileParams(**section.params)
    if name == "qrdqn":
        q_net = quantile_mlp(4, 2, hidden, num_quantiles=net["num_quantiles"])
        policy = QValuePolicy(q_net, action_space, eps_schedule=eps, seed=seed)
        return QRDQN(policy=policy, params=quantile_params)
    iqn_net = iqn_mlp(
        4, 2, hidden, num_cosines=net["num_cosines"], num_policy_quantiles=net["num_policy_quantiles"]
    )
    sampling = IQNSampling(num_online_taus=net["num_online_taus"], num_target_taus=net["num_target_taus"])
    policy = QValuePolicy(iqn_net, action_space, eps_schedule=eps, seed=seed)
    return IQN(policy=policy, params=quantile_params, sampling=sampling, seed=seed)


def build(name: str, seed: int = 0, max_epochs: int | None = None, verbose: bool = True) -> tuple[Any, Any]:
    """``name``'s algorithm and trainer params (the training buffer prefilled with random steps)."""
    experiment = default_experiment(name)
    trainer, env, buf = experiment.trainer, experiment.env, experiment.buffer
    torch.manual_seed(seed)  # network initialisation
    train_envs = make_vector_env(env.id, env.num_training_envs)
    test_envs = make_vector_env(env.id, env.num_test_envs)
    algorithm = build_algorithm(name, seed, train_envs.single_action_space)
    buffer: BaseReplayBuffer = (
        PrioritizedVectorReplayBuffer(buf.size, env.num_training_envs, buf.alpha, buf.beta, seed=seed)
        if buf.prioritized
        else VectorReplayBuffer(buf.size, env.num_training_envs, seed=seed)
    )
    training = Collector(algorithm.policy, train_envs, buffer, exploration_noise=True, seed=seed)
    training.collect(n_step=buf.prefill_env_steps, random=True)
    stop_score = trainer["stop_score"]
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs or trainer["max_epochs"],
        epoch_num_steps=trainer["epoch_num_steps"],
        collection_step_num_env_steps=trainer["collection_step_num_env_steps"],
        update_step_num_gradient_steps_per_sample=trainer["update_step_num_gradient_steps_per_sample"],
        batch_size=trainer["batch_size"],
        test_step_num_episodes=trainer["test_step_num_episodes"],
        stop_fn=lambda score: score >= stop_score,
        verbose=verbose,
    )
    return algorithm, params


def close(params: Any) -> None:
    """Close the envs of the trainer params of :func:`build`."""
    params.training_collector.env.close()
    params.test_collector.env.close()


TrainerFactory = Callable[[Any, OffPolicyTrainerParams], Any]
"""builds the trainer of (algorithm, params); the scripts pass their module's ``OffPolicyTrainer``"""


def train(
    name: str,
    seed: int = 0,
    max_epochs: int | None = None,
    verbose: bool = True,
    *,
    trainer: TrainerFactory = OffPolicyTrainer,
) -> tuple[Any, InfoStats]:
    """Train ``name`` until a test step averages the default experiment's stop score or the epochs run
    out; the envs are closed at the end."""
    algorithm, params = build(name, seed, max_epochs, verbose)
    try:
        return algorithm, trainer(algorithm, params).run()
    finally:
        close(params)


def script_main(
    description: str | None, train_script: Callable[[int, int | None], tuple[Any, InfoStats]]
) -> None:
    """The command line of the per-algorithm scripts: ``[--seed 0] [--max-epochs N]``, then
    ``train_script(seed, max_epochs)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=None)
    args = parser.parse_args()
    _, info = train_script(args.seed, args.max_epochs)
    print(f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, {info.train_step} env steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", choices=NAMES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=None)
    args = parser.parse_args()
    _, info = train(args.name, args.seed, args.max_epochs)
    print(f"{args.name} seed {args.seed}: best test return {info.best_reward:.1f} at epoch {info.best_epoch}")


if __name__ == "__main__":
    main()
