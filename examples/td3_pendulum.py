"""TD3 on Pendulum-v1: twin critics, target policy smoothing, delayed actor updates, Gaussian
exploration noise of std 0.1 (in the policy's [-1, 1] action space).

Run: python examples/td3_pendulum.py [--seed 0]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from tshtrain.algorithm import TD3, DeterministicActorPolicy, QEnsemble, TD3Params, mlp
from tshtrain.data import Collector, ReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

PREFILL_ENV_STEPS = 1000
"""uniformly random env steps collected before training (not counted by the trainer)"""


def build(seed: int = 0) -> tuple[TD3, Collector, Collector]:
    """The algorithm and its training and test collectors (the buffer prefilled with random steps)."""
    torch.manual_seed(seed)
    train_envs = make_vector_env("Pendulum-v1", 1)
    test_envs = make_vector_env("Pendulum-v1", 10)
    obs_dim, act_dim = 3, 1
    policy = DeterministicActorPolicy(
        mlp(obs_dim, act_dim, (256, 256), nn.ReLU), train_envs.single_action_space, noise_std=0.1, seed=seed
    )
    critic = QEnsemble(obs_dim, act_dim, (256, 256), num_critics=2)
    params = TD3Params(
        actor_lr=1e-3, critic_lr=1e-3, gamma=0.99, tau=0.005, policy_noise=0.2, noise_clip=0.5, policy_delay=2
    )
    algorithm = TD3(policy=policy, critic=critic, params=params, seed=seed)
    buffer = ReplayBuffer(20_000, seed=seed)
    training_collector = Collector(policy, train_envs, buffer, exploration_noise=True, seed=seed)
    training_collector.collect(n_step=PREFILL_ENV_STEPS, random=True)
    test_collector = Collector(policy, test_envs, seed=seed + 1000)
    return algorithm, training_collector, test_collector


def train(
    seed: int = 0, max_epochs: int = 19, stop_at: float = -200.0, verbose: bool = True
) -> tuple[TD3, InfoStats]:
    """Train with one gradient step per env step until the mean test return over 10 episodes reaches
    ``stop_at`` or ``max_epochs`` epochs of 1000 env steps end."""
    algorithm, training_collector, test_collector = build(seed)
    params = OffPolicyTrainerParams(
        training_collector=training_collector,
        test_collector=test_collector,
        max_epochs=max_epochs,
        epoch_num_steps=1000,
        collection_step_num_env_steps=1,
        update_step_num_gradient_steps_per_sample=1.0,
        batch_size=256,
        test_step_num_episodes=10,
        stop_fn=lambda score: score >= stop_at,
        verbose=verbose,
    )
    info = OffPolicyTrainer(algorithm, params).run()  # resets envs, keeps the prefilled buffer
    training_collector.env.close()
    test_collector.env.close()
    return algorithm, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=19)
    args = parser.parse_args()
    torch.set_num_threads(1)
    _, info = train(seed=args.seed, max_epochs=args.max_epochs)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step + PREFILL_ENV_STEPS} env steps (with prefill), {info.timing.total_time:.1f} s, "
        f"stop: {info.stop_reason}"
    )


if __name__ == "__main__":
    main()
