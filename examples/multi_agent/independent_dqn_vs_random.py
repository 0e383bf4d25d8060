"""Independent learners: DQN moving second against a uniformly random first player in PettingZoo
tic-tac-toe (turn-based AEC env, action masks).

``player_1`` is a fixed :class:`~tshtrain.algorithm.RandomPolicy` (never trained), ``player_2`` a DQN whose
Q-network is wrapped in :class:`~tshtrain.algorithm.ActionMasked`, so that greedy actions, epsilon
exploration and random prefill actions are all legal moves. The test score is player_2's return
(``multi_agent_return_reduction``); after training the greedy DQN plays ``--eval-games`` games.

The settings are those of the results table in docs/multi_agent.md ("DQN against a random first
player", tests/learning/test_tictactoe_learning.py's ``FULL``): 150k env steps, gamma 0.9, 3-step
returns, double DQN, lr 1e-3 decayed linearly to 0 over the run's gradient steps, epsilon 1 -> 0.05 over
the learner's first 30k moves (a fifth of the budget); measured: 90.6-93.6% wins and 0.7-3.7% losses
over 1,000 greedy games, seeds 0-5. A smaller ``--env-steps`` scales the decays with it.

The same experiment as a file: ``tshtrain train examples/configs/dqn_tictactoe.yaml``.

Run: python examples/multi_agent/independent_dqn_vs_random.py [--env-steps 150000] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tshtrain.algorithm import (
    DQN,
    ActionMasked,
    DQNParams,
    EpsilonSchedule,
    LinearSchedule,
    MultiAgentOffPolicy,
    QValuePolicy,
    RandomPolicy,
    independent_learners,
    mlp,
    obs_encoder,
    without_action_mask,
)
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import make_pettingzoo_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

ENV_ID = "pettingzoo.classic.tictactoe_v3"
NUM_TRAINING_ENVS = 8
NUM_TEST_ENVS = 10
EPOCH_NUM_STEPS = 10_000
"""env steps per epoch (one env step = one move in one game)"""
ENV_STEPS = 150_000
"""the default training budget (the results table's)"""
GRADIENT_STEPS_PER_ENV_STEP = 0.25
"""gradient steps per collected env step (16 per collection step of 64 moves)"""


def dqn_params(env_steps: int) -> DQNParams:
    """player_2's DQN: gamma 0.9, 3-step returns, double Q (the default), target copy every 200 gradient
    steps, lr 1e-3 decayed linearly to 0 over the run's gradient steps."""
    num_gradient_steps = max(1, round(env_steps * GRADIENT_STEPS_PER_ENV_STEP))
    return DQNParams(
        lr=1e-3,
        lr_schedule=LinearSchedule(num_update_steps=num_gradient_steps, end_factor=0.0),
        gamma=0.9,
        n_step=3,
        target_update_freq=200,
    )


def eps_decay_moves(env_steps: int) -> int:
    """Epsilon decays over the learner's first ``env_steps / 5`` moves (30k of 150k)."""
    return max(1, env_steps // 5)


def q_network(observation_space: gym.Space[Any], num_actions: int) -> ActionMasked:
    """Q-values of the squares from the board planes (``obs``); illegal squares get -1e9."""
    encoder = obs_encoder(without_action_mask(observation_space))  # the Dict space minus "action_mask"
    net = nn.Sequential(encoder, mlp(encoder.output_dim, num_actions, (128, 128), nn.ReLU))
    return ActionMasked.for_space(net, observation_space)  # net sees obs["obs"]; the mask masks its output


def train(
    *, seed: int = 0, env_steps: int = ENV_STEPS, test_episodes: int = 50, verbose: bool = True
) -> tuple[MultiAgentOffPolicy, InfoStats]:
    """Train player_2 for about ``env_steps`` env steps (whole epochs, at least one)."""
    torch.manual_seed(seed)
    train_envs = make_pettingzoo_vector_env(ENV_ID, NUM_TRAINING_ENVS)
    test_envs = make_pettingzoo_vector_env(ENV_ID, NUM_TEST_ENVS)
    space = train_envs.single_action_space
    assert isinstance(space, gym.spaces.Discrete)  # the 9 squares
    policy = QValuePolicy(
        q_network(train_envs.single_observation_space, int(space.n)),
        space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=eps_decay_moves(env_steps)),
        seed=seed,
    )
    algorithm = MultiAgentOffPolicy(
        independent_learners(
            train_envs.columns,  # agents ("player_1", "player_2"): columns 0..E-1 and E..2E-1
            {
                "player_1": RandomPolicy(space, seed=seed),  # fixed: acts, never trains
                "player_2": DQN(policy=policy, params=dqn_params(env_steps)),
            },
        ),
        num_units=train_envs.columns.num_agents,
    )
    buffer = VectorReplayBuffer(50_000, buffer_num=train_envs.num_columns, seed=seed)  # A * E columns
    collector = MultiAgentCollector(algorithm.policy, train_envs, buffer, exploration_noise=True, seed=seed)
    collector.collect(n_step=min(1000, env_steps), random=True)  # random *legal* moves
    epoch_num_steps = min(EPOCH_NUM_STEPS, env_steps)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=MultiAgentCollector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max(1, env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=64,
        update_step_num_gradient_steps_per_sample=GRADIENT_STEPS_PER_ENV_STEP,
        batch_size=64,
        test_step_num_episodes=test_episodes,
        multi_agent_return_reduction=lambda returns_EA: returns_EA[:, 1],  # score: player_2's return
        verbose=verbose,
        show_progress=False,
    )
    try:
        return algorithm, OffPolicyTrainer(algorithm, params).run()
    finally:
        train_envs.close()
        test_envs.close()


def evaluate(algorithm: MultiAgentOffPolicy, num_games: int, seed: int = 1) -> tuple[float, float]:
    """(win rate, loss rate) of the greedy player_2 over ``num_games`` games against the random player_1."""
    envs = make_pettingzoo_vector_env(ENV_ID, NUM_TEST_ENVS)
    try:
        stats = MultiAgentCollector(algorithm.policy, envs, seed=seed).collect(
            n_episode=num_games, deterministic=True, reset_before_collect=True
        )
    finally:
        envs.close()
    returns = stats.per_agent_returns
    assert returns is not None and stats.agents == ("player_1", "player_2")
    player_2 = returns[:, 1]  # +1 win, -1 loss, 0 draw
    return float(np.mean(player_2 > 0)), float(np.mean(player_2 < 0))


def main(argv: Sequence[str] | None = None) -> tuple[float, float]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=ENV_STEPS, help="training budget in env steps")
    parser.add_argument("--eval-games", type=int, default=1000)
    parser.add_argument("--test-episodes", type=int, default=50, help="episodes per test step")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    algorithm, info = train(
        seed=args.seed, env_steps=args.env_steps, test_episodes=args.test_episodes, verbose=not args.quiet
    )
    wins, losses = evaluate(algorithm, args.eval_games, seed=args.seed + 2000)
    print(
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s; greedy player_2 over "
        f"{args.eval_games} games: {wins:.1%} wins, {losses:.1%} losses"
    )
    return wins, losses


if __name__ == "__main__":
    main()
