"""DQN learns PettingZoo tic-tac-toe moving second against a uniformly random first player (issue 17).

Setup: ``make_pettingzoo_vector_env("pettingzoo.classic.tictactoe_v3", E)`` (the AEC adapter, masks in
the observations), ``MultiAgentOffPolicy(independent_learners(...))`` with a fixed mask-aware
:class:`RandomPolicy` as ``player_1`` and a DQN learner as ``player_2``, whose Q-network is wrapped in
:class:`ActionMasked` (illegal moves are never chosen, neither greedily nor by epsilon-greedy
exploration, and the bootstrap max runs over the legal moves of the next observation), trained by the
ordinary :class:`OffPolicyTrainer`. The reward is PettingZoo's: +1 / 0 / -1 at the end of the game only.

Evaluation: :func:`greedy_outcomes` plays ``num_games`` games with the learner greedy (argmax of the
masked Q-values) and counts wins, draws and losses from the per-agent returns of
``CollectStats.per_agent_returns`` (``collect(n_episode=...)`` starts exactly that many games, so short
games are not over-represented).

Thresholds. The best possible policy against a random first player wins 93.4% and loses 0.95%
(``benchmarks/tictactoe_optimum.py``, exact expectimax); a random second player wins 29% and loses 58%.
Tianshou 2.0.1's own example ends at 73-76% wins and 24% losses after 50k env steps (51-72% / 28-45%
with its early stop). Measured numbers for every seed: ``benchmarks/results/tictactoe.md``.

* slow tier: seeds 0, 1, 2 at the full budget (:data:`FULL`, 150k env steps, about 45 CPU seconds
  each), >= 85% wins and <= 5% losses over 1000 greedy games, as the issue asks (measured on seeds 0-5:
  90.6-93.6% wins, 0.7-3.7% losses);
* CI tier: seed 0 at a reduced budget (:data:`CI`, 30k env steps, about 10 CPU seconds), >= 70% wins
  and <= 15% losses over 1000 games. Measured on seeds 0-2: 83.0-88.7% wins, 6.0-7.4% losses; the bar
  keeps 13 points of wins and 7 points of losses as room for seed-to-seed and platform spread, and is
  still far above a random or untrained learner (29% / 58%, see the first test) and above what
  Tianshou's example reaches with 50k env steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from tests.extras import need
from tshtrain.algorithm import (
    DQN,
    ActionMasked,
    DQNParams,
    LinearSchedule,
    MultiAgentOffPolicy,
    QValuePolicy,
    RandomPolicy,
    independent_learners,
)
from tshtrain.algorithm.blocks.encoders import FlatEncoder
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import OBS_KEY
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams

pytestmark = pytest.mark.integration
need("pettingzoo", "pettingzoo")

from tshtrain.env.pettingzoo import make_pettingzoo_vector_env

ENV_ID = "pettingzoo.classic.tictactoe_v3"
LEARNER = "player_2"
"""the learner moves second (PettingZoo's player_2, O)"""
OPPONENT = "player_1"


@dataclass(frozen=True, kw_only=True)
class TicTacToeSetup:
    """The hyperparameters of one DQN-vs-random tic-tac-toe run."""

    num_env_steps: int
    """training budget in env steps (one env step = one move of either player)"""
    num_envs: int = 8
    """training envs"""
    hidden_sizes: tuple[int, ...] = (128, 128)
    """the Q-network's hidden layers (ReLU)"""
    lr: float = 1e-3
    lr_end_factor: float | None = 0.0
    """decay the learning rate linearly to ``lr * lr_end_factor`` over the run's gradient steps (the
    final network is then far less noisy: a constant rate left 3-5.4% losses, see
    benchmarks/results/tictactoe.md); None: constant"""
    gamma: float = 0.9
    n_step: int = 3
    """n-step returns, counted in the learner's own moves"""
    target_update_freq: int = 200
    """gradient steps between target-network copies"""
    eps_decay_env_steps: int = 20_000
    """epsilon decays linearly from 1 to eps_end over this many LEARNER moves (the policy counts its own
    actions, about half of the env steps)"""
    eps_end: float = 0.05
    batch_size: int = 64
    gradient_steps_per_env_step: float = 0.25
    collection_step_num_env_steps: int = 64
    buffer_size: int = 50_000
    prefill_env_steps: int = 1_000
    """uniformly random (legal) moves collected before training"""


FULL = TicTacToeSetup(num_env_steps=150_000, eps_decay_env_steps=30_000)
"""the slow tier's budget"""
CI = TicTacToeSetup(num_env_steps=30_000, eps_decay_env_steps=8_000)
"""the CI tier's reduced budget"""


def build_trainer(setup: TicTacToeSetup, seed: int) -> OffPolicyTrainer:
    """The DQN learner (player_2) against a random player_1, ready to ``run()``."""
    torch.manual_seed(seed)
    env = make_pettingzoo_vector_env(ENV_ID, setup.num_envs)
    space = env.single_action_space
    encoder = FlatEncoder((3, 3, 2), setup.hidden_sizes, nn.ReLU)  # the int8 board planes as floats
    q_net = ActionMasked(nn.Sequential(encoder, nn.Linear(encoder.output_dim, 9)), single_key=OBS_KEY)
    schedule = EpsilonSchedule(start=1.0, end=setup.eps_end, num_env_steps=setup.eps_decay_env_steps)
    policy = QValuePolicy(q_net, space, eps_schedule=schedule, seed=seed)
    num_gradient_steps = round(setup.num_env_steps * setup.gradient_steps_per_env_step)
    dqn = DQN(
        policy=policy,
        params=DQNParams(
            lr=setup.lr,
            lr_schedule=None
            if setup.lr_end_factor is None
            else LinearSchedule(num_update_steps=num_gradient_steps, end_factor=setup.lr_end_factor),
            gamma=setup.gamma,
            n_step=setup.n_step,
            target_update_freq=setup.target_update_freq,
        ),
    )
    algorithm = MultiAgentOffPolicy(
        independent_learners(env.columns, {OPPONENT: RandomPolicy(space, seed=seed + 7), LEARNER: dqn}),
        num_units=2,
    )
    collector = MultiAgentCollector(
        algorithm.policy,
        env,
        VectorReplayBuffer(setup.buffer_size, buffer_num=env.num_columns, seed=seed),
        exploration_noise=True,
        seed=seed,
    )
    collector.collect(n_step=setup.prefill_env_steps, random=True)
    epoch_num_steps = 10_000
    learner_index = env.agents.index(LEARNER)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=MultiAgentCollector(
            algorithm.policy, make_pettingzoo_vector_env(ENV_ID, 10), seed=seed + 1
        ),
        max_epochs=max(1, setup.num_env_steps // epoch_num_steps),
        epoch_num_steps=min(epoch_num_steps, setup.num_env_steps),
        collection_step_num_env_steps=setup.collection_step_num_env_steps,
        update_step_num_gradient_steps_per_sample=setup.gradient_steps_per_env_step,
        batch_size=setup.batch_size,
        test_step_num_episodes=50,
        multi_agent_return_reduction=lambda returns: returns[:, learner_index],
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(algorithm, params)


@dataclass(frozen=True)
class Outcomes:
    """Fractions of games the learner won, drew and lost."""

    win: float
    draw: float
    loss: float
    num_games: int


def greedy_outcomes(trainer: OffPolicyTrainer, num_games: int = 1000, seed: int = 12345) -> Outcomes:
    """Play ``num_games`` games, the learner greedy, player_1 uniformly random; count the outcomes
    from the learner's per-agent returns."""
    env = make_pettingzoo_vector_env(ENV_ID, 10)
    collector = MultiAgentCollector(trainer.algorithm.policy, env, seed=seed)
    stat = collector.collect(n_episode=num_games, deterministic=True, reset_before_collect=True)
    returns = stat.per_agent_returns
    assert returns is not None and returns.shape == (num_games, 2), returns
    assert stat.agents is not None
    ret = returns[:, stat.agents.index(LEARNER)]
    assert np.isin(ret, (-1.0, 0.0, 1.0)).all(), np.unique(ret)  # one terminal reward per game
    return Outcomes(
        win=float(np.mean(ret > 0)),
        draw=float(np.mean(ret == 0)),
        loss=float(np.mean(ret < 0)),
        num_games=num_games,
    )


def train_and_evaluate(setup: TicTacToeSetup, seed: int, num_games: int = 1000) -> Outcomes:
    """Train one seed, then evaluate greedily."""
    torch.set_num_threads(1)
    trainer = build_trainer(setup, seed)
    info = trainer.run()
    assert info.train_step >= setup.num_env_steps
    return greedy_outcomes(trainer, num_games)


def test_an_untrained_learner_is_far_below_the_ci_bar() -> None:
    """The evaluation can fail: a learner before training (random weights, legal moves) loses often."""
    trainer = build_trainer(CI, seed=0)
    outcome = greedy_outcomes(trainer, num_games=300)
    assert outcome.win < 0.6 and outcome.loss > 0.2, outcome


@pytest.mark.learning
def test_dqn_learns_tictactoe_second_vs_random_seed_0() -> None:
    outcome = train_and_evaluate(CI, seed=0)
    assert outcome.win >= 0.70 and outcome.loss <= 0.15, outcome


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dqn_learns_tictactoe_second_vs_random_to_the_full_bar(seed: int) -> None:
    outcome = train_and_evaluate(FULL, seed)
    assert outcome.win >= 0.85 and outcome.loss <= 0.05, outcome
