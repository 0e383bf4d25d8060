"""MADDPG and MASAC learn MPE2 ``simple_spread_v3`` with continuous actions (3 agents, 25-step
episodes, actions in [0, 1]^5) through the ordinary :class:`~tshtrain.trainer.OffPolicyTrainer`: a
:class:`~tshtrain.data.MultiAgentCollector` over a
:class:`~tshtrain.env.pettingzoo.PettingZooParallelVectorEnv` (``global_state=True``,
``agent_id=True``), one shared actor (``obs`` + ``agent_id``) and one shared centralised critic (the
54-dim global state, the agent id and all three agents' actions).

Returns are per-agent means (the default ``multi_agent_return_reduction``, BenchMARL's convention).
The score is the mean greedy test return of the last two tests (64 episodes). Per-seed results, the
random policy and the settings: docs/multi_agent.md, "MADDPG and MASAC".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import pytest
import torch
from torch import nn

from tests.extras import need
from tshtrain.algorithm import (
    MADDPG,
    MASAC,
    DeterministicActorPolicy,
    MADDPGParams,
    MASACParams,
    TanhGaussianPolicy,
    centralised_critic,
    mlp,
    obs_encoder,
)
from tshtrain.algorithm.blocks.agent_nets import SelectKeys
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.data.stats import CollectStats
from tshtrain.env.pettingzoo import PettingZooParallelVectorEnv, make_pettingzoo_vector_env
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams

pytestmark = pytest.mark.integration
need("mpe2", "pettingzoo")

Kind = Literal["maddpg", "masac"]

ENV_ID = "mpe2.simple_spread_v3"
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": True}


@dataclass(frozen=True)
class OffPolicySpreadSettings:
    """The experiment of the learning results (both algorithms)."""

    num_envs: int = 8
    num_test_episodes: int = 32
    collection_step_num_env_steps: int = 80
    """env steps per collection step (10 vector steps of the 8 envs)"""
    gradient_steps_per_env_step: float = 0.25
    batch_size: int = 256
    """joint transitions per gradient step (each holds the 3 agents' transitions)"""
    buffer_num_env_steps: int = 100_000
    prefill_num_env_steps: int = 2_000
    """uniformly random env steps in the buffer before training (not counted by the trainer)"""
    actor_lr: float = 1e-3
    critic_lr: float = 1e-3
    gamma: float = 0.95
    tau: float = 0.01
    hidden_sizes: tuple[int, ...] = (128, 128)
    noise_std: float = 0.1
    """MADDPG's Gaussian exploration noise in the policy's [-1, 1] action space"""
    epoch_num_env_steps: int = 10_000
    """env steps between two greedy tests"""


SETTINGS = OffPolicySpreadSettings()


@dataclass(frozen=True)
class SpreadResult:
    """What a run reached."""

    test_returns: tuple[float, ...]
    """mean greedy per-agent return of each epoch's test"""
    num_env_steps: int

    @property
    def score(self) -> float:
        """The mean of the last two tests (64 greedy episodes)."""
        return sum(self.test_returns[-2:]) / 2

    def first_env_steps_to(self, threshold: float, epoch_num_env_steps: int) -> int | None:
        """Env steps (trainer-counted) of the first test at or above ``threshold``."""
        for k, value in enumerate(self.test_returns):
            if value >= threshold:
                return k * epoch_num_env_steps
        return None


def _env(num_envs: int) -> PettingZooParallelVectorEnv:
    built = make_pettingzoo_vector_env(
        ENV_ID, num_envs, kwargs=ENV_KWARGS, kind="parallel", global_state=True, agent_id=True
    )
    assert isinstance(built, PettingZooParallelVectorEnv)
    return built


def spread_algorithm(
    kind: Kind, env: PettingZooParallelVectorEnv, seed: int, s: OffPolicySpreadSettings = SETTINGS
) -> MADDPG | MASAC:
    """A shared actor on ``obs`` + ``agent_id`` and a shared critic on ``state`` + agent id + actions."""
    space, act_space = env.single_observation_space, env.single_action_space
    assert isinstance(space, gym.spaces.Dict)
    actor_space = gym.spaces.Dict({key: space.spaces[key] for key in ("obs", "agent_id")})
    act_dim = int(act_space.shape[0])  # type: ignore[index]

    def actor(output_dim: int) -> nn.Module:
        encoder = obs_encoder(actor_space)
        return SelectKeys(
            nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, s.hidden_sizes)), ["obs", "agent_id"]
        )

    critic = centralised_critic(
        space,
        act_space,
        env.columns.num_agents,
        num_critics=1 if kind == "maddpg" else 2,
        hidden_sizes=s.hidden_sizes,
    )
    if kind == "maddpg":
        policy = DeterministicActorPolicy(actor(act_dim), act_space, noise_std=s.noise_std, seed=seed)
        params = MADDPGParams(actor_lr=s.actor_lr, critic_lr=s.critic_lr, gamma=s.gamma, tau=s.tau)
        return MADDPG(env.columns, policy, critic, params=params)
    sac_policy = TanhGaussianPolicy(actor(2 * act_dim), act_space, seed=seed)
    sac_params = MASACParams(actor_lr=s.actor_lr, critic_lr=s.critic_lr, gamma=s.gamma, tau=s.tau)
    return MASAC(env.columns, sac_policy, critic, params=sac_params)


def spread_trainer(
    kind: Kind, seed: int, num_env_steps: int, s: OffPolicySpreadSettings = SETTINGS
) -> tuple[OffPolicyTrainer, list[CollectStats]]:
    """The trainer (its buffer prefilled with random steps) and the list its test stats go into."""
    torch.manual_seed(seed)
    train_env, test_env = _env(s.num_envs), _env(s.num_envs)
    algorithm = spread_algorithm(kind, train_env, seed, s)
    rows = -(-s.buffer_num_env_steps // s.num_envs) * train_env.num_columns
    buffer = VectorReplayBuffer(rows, buffer_num=train_env.num_columns, seed=seed)
    collector = MultiAgentCollector(algorithm.policy, train_env, buffer, exploration_noise=True, seed=seed)
    collector.collect(n_step=s.prefill_num_env_steps, random=True)
    seen: list[CollectStats] = []

    def score(stat: CollectStats) -> float:
        seen.append(stat)
        return float(stat.returns_stat.mean)

    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=MultiAgentCollector(algorithm.policy, test_env, seed=seed + 10_000),
        max_epochs=num_env_steps // s.epoch_num_env_steps,
        epoch_num_steps=s.epoch_num_env_steps,
        collection_step_num_env_steps=s.collection_step_num_env_steps,
        update_step_num_gradient_steps_per_sample=s.gradient_steps_per_env_step,
        batch_size=s.batch_size,
        test_step_num_episodes=s.num_test_episodes,
        compute_score_fn=score,
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(algorithm, params), seen


def train_spread(
    kind: Kind, seed: int, num_env_steps: int, s: OffPolicySpreadSettings = SETTINGS
) -> SpreadResult:
    """Train and return the per-epoch greedy test returns (the first is the untrained policy's)."""
    trainer, seen = spread_trainer(kind, seed, num_env_steps, s)
    info = trainer.run()
    returns = tuple(float(stat.returns.mean()) for stat in seen)
    return SpreadResult(test_returns=returns, num_env_steps=int(info.train_step))


BUDGET_ENV_STEPS = 50_000
"""the slow tier's budget: 12,500 gradient steps of 256 joint transitions, 2-3 CPU minutes a run"""
THRESHOLD = -18.5
"""slow tier: the score must reach it. At this budget (per-seed tables in docs/multi_agent.md) MASAC scores
-14.1 / -15.2 / -15.0 and MADDPG -17.1 / -16.2 / -16.8 (seeds 0 / 1 / 2); tshtrain's IPPO with continuous
actions (the settings of test_multi_agent_spread_learning.py) -19.1 / -18.9 / -19.2 at 52k env steps, and a
uniform random policy -25.9 (64-episode mean: sd 1.0). So the bar asks for at least IPPO's level at the
same env steps, 1.4 below MADDPG's worst seed"""
CI_BUDGET_ENV_STEPS = 20_000
"""the CI tier's budget: MASAC seed 0, tests after 10k and 20k env steps, about 70 CPU seconds"""
CI_THRESHOLD = -22.0
"""the CI tier's bar, 3.8 sd of a 64-episode mean above a random policy (-25.9); seed 0 scores -18.8"""


@pytest.mark.learning
def test_masac_learns_simple_spread_seed_0_reduced_budget() -> None:
    result = train_spread("masac", 0, CI_BUDGET_ENV_STEPS)
    assert result.num_env_steps >= CI_BUDGET_ENV_STEPS
    assert result.score >= CI_THRESHOLD, result


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("kind", ["maddpg", "masac"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_maddpg_and_masac_learn_simple_spread(kind: Kind, seed: int) -> None:
    result = train_spread(kind, seed, BUDGET_ENV_STEPS)
    assert result.num_env_steps >= BUDGET_ENV_STEPS
    assert result.score >= THRESHOLD, result
