"""Multi-agent algorithms through the generic trainers: an off-policy learner against a fixed policy
in a turn-based game, shared and scoped on-policy learners, per-agent returns in the logs, the return
reduction for scoring, and bit-exact checkpoint resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tests.multi_agent_envs import LeavingParallel, TurnGame
from tshtrain.algorithm import (
    DQN,
    PPO,
    ActionMasked,
    CategoricalPolicy,
    DiscreteQEnsemble,
    DiscreteSAC,
    DQNParams,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    PPOParams,
    QValuePolicy,
    RandomPolicy,
    independent_learners,
    mlp,
    scoped_learners,
    shared_learner,
)
from tshtrain.algorithm.blocks.agent_nets import SelectKeys
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import Collector, MultiAgentCollector, VectorReplayBuffer
from tshtrain.data.stats import CollectStats
from tshtrain.env import OBS_KEY, make_vector_env
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams, OnPolicyTrainer, OnPolicyTrainerParams


def _dqn_vs_random(seed: int, *, max_epochs: int = 2, **kwargs: Any) -> OffPolicyTrainer:
    torch.manual_seed(seed)
    env, test_env = TurnGame(num_envs=2, length=4), TurnGame(num_envs=2, length=4)
    q_net = ActionMasked(nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 4)), single_key=OBS_KEY)
    policy = QValuePolicy(
        q_net, env.single_action_space, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed
    )
    algorithm = MultiAgentOffPolicy(
        independent_learners(
            env.columns,
            {
                "p0": RandomPolicy(env.single_action_space, seed=seed),
                "p1": DQN(policy=policy, params=DQNParams(lr=1e-3, n_step=2, target_update_freq=10)),
            },
        ),
        num_units=2,
    )
    params = OffPolicyTrainerParams(
        training_collector=MultiAgentCollector(
            algorithm.policy,
            env,
            VectorReplayBuffer(400, buffer_num=env.num_columns, seed=seed),
            exploration_noise=True,
            seed=seed,
        ),
        test_collector=MultiAgentCollector(algorithm.policy, test_env, seed=seed + 1),
        max_epochs=max_epochs,
        epoch_num_steps=40,
        collection_step_num_env_steps=8,
        batch_size=16,
        test_step_num_episodes=4,
        multi_agent_return_reduction=lambda returns: returns[:, 1],
        verbose=False,
        show_progress=False,
        **kwargs,
    )
    return OffPolicyTrainer(algorithm, params)


def _weights(trainer: Any) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.algorithm.policy.parameters()]


def test_a_dqn_learner_against_a_random_player_trains_and_logs_per_agent() -> None:
    seen: list[CollectStats] = []
    trainer = _dqn_vs_random(0, compute_score_fn=lambda stat: seen.append(stat) or stat.returns_stat.mean)
    before = _weights(trainer)
    info = trainer.run()
    assert info.train_step == 2 * 40
    assert info.gradient_step > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, _weights(trainer), strict=True))
    stat = seen[-1]
    assert stat.agents == ("p0", "p1")
    assert stat.per_agent_returns is not None and stat.per_agent_returns.shape == (4, 2)
    np.testing.assert_array_equal(stat.returns, stat.per_agent_returns[:, 1])  # the reduction scored p1
    scalars = stat.as_scalars()
    assert {"returns/p0/mean", "returns/p1/mean"} <= set(scalars)


def test_multi_agent_checkpoint_resume_is_bit_exact(tmp_path: Path) -> None:
    straight = _dqn_vs_random(
        3, max_epochs=4, checkpoint=CheckpointParams(directory=tmp_path / "ckpt", every_num_epochs=1)
    )
    straight.run()
    periodic = sorted((tmp_path / "ckpt").glob("periodic-000002-*"))
    assert len(periodic) == 1
    resumed = _dqn_vs_random(3, max_epochs=4)
    resumed.load_checkpoint(periodic[0], trusted=True)  # the envs' snapshot is a pickle
    resumed.run()
    assert all(torch.equal(a, b) for a, b in zip(_weights(straight), _weights(resumed), strict=True))
    buffers = straight.params.training_collector.buffer, resumed.params.training_collector.buffer
    assert isinstance(buffers[0], VectorReplayBuffer) and isinstance(buffers[1], VectorReplayBuffer)
    for name, arr in buffers[0].field_arrays().items():
        np.testing.assert_array_equal(arr, buffers[1].field_arrays()[name])


def _ppo(space: gym.Space[Any], obs_dim: int, seed: int) -> PPO:
    policy = CategoricalPolicy(mlp(obs_dim, int(space.n), (16,)), space, seed=seed)  # type: ignore[attr-defined]
    return PPO(policy=policy, critic=mlp(obs_dim, 1, (16,)), params=PPOParams(lr=1e-3), seed=seed)


def test_a_shared_on_policy_learner_trains_on_a_parallel_env_with_leaving_agents() -> None:
    torch.manual_seed(0)
    env = LeavingParallel(num_envs=3)
    algorithm = MultiAgentOnPolicy(shared_learner(env.columns, _ppo(env.single_action_space, 2, 0)))
    params = OnPolicyTrainerParams(
        training_collector=MultiAgentCollector(
            algorithm.policy, env, VectorReplayBuffer(6 * 12, buffer_num=6), seed=0
        ),
        test_collector=MultiAgentCollector(algorithm.policy, LeavingParallel(num_envs=2), seed=1),
        max_epochs=2,
        epoch_num_steps=36,
        collection_step_num_env_steps=36,
        batch_size=16,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
    )
    before = _weights(OnPolicyTrainer(algorithm, params))
    info = OnPolicyTrainer(algorithm, params).run()
    assert info.gradient_step > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, _weights_of(algorithm), strict=True))


def _weights_of(algorithm: Any) -> list[torch.Tensor]:
    return [p.detach().clone() for p in algorithm.policy.parameters()]


@pytest.mark.parametrize("scopes", [[2, 2], [1, 3]])
def test_agent_scopes_train_side_by_side_on_one_single_agent_vector_env(scopes: list[int]) -> None:
    torch.manual_seed(0)
    env = make_vector_env("CartPole-v1", 4)
    members = [_ppo(env.single_action_space, 4, seed) for seed in range(len(scopes))]
    algorithm = MultiAgentOnPolicy(scoped_learners(scopes, members), num_units=4)
    params = OnPolicyTrainerParams(
        training_collector=Collector(algorithm.policy, env, VectorReplayBuffer(4 * 16, buffer_num=4), seed=0),
        test_collector=Collector(algorithm.policy, make_vector_env("CartPole-v1", 4), seed=1),
        max_epochs=1,
        epoch_num_steps=64,
        collection_step_num_env_steps=64,
        batch_size=16,
        test_step_num_episodes=4,
        verbose=False,
        show_progress=False,
    )
    before = [_weights_of(m) for m in members]
    OnPolicyTrainer(algorithm, params).run()
    for old, member in zip(before, members, strict=True):  # every scope's agent was updated
        assert any(not torch.equal(a, b) for a, b in zip(old, _weights_of(member), strict=True))
    state = algorithm.state_dict()
    assert set(state) == {f"agent_{k}" for k in range(len(scopes))}


def test_independent_learners_of_different_families_train_side_by_side() -> None:
    """A value-based learner (DQN) and an actor-critic one (discrete SAC), each on its own agent's
    columns, through one OffPolicyTrainer; each reports its own statistics and neither acts illegally."""
    torch.manual_seed(0)
    env, test_env = TurnGame(num_envs=2, length=4), TurnGame(num_envs=2, length=4)
    space = env.single_action_space
    q_net = ActionMasked(mlp(3, 4, (16,)), single_key=OBS_KEY)
    dqn = DQN(
        policy=QValuePolicy(q_net, space, eps_schedule=EpsilonSchedule(num_env_steps=50), seed=0),
        params=DQNParams(lr=1e-3, target_update_freq=5),
    )
    actor = CategoricalPolicy(ActionMasked(mlp(3, 4, (16,)), single_key=OBS_KEY), space, seed=1)
    sac = DiscreteSAC(policy=actor, critic=SelectKeys(DiscreteQEnsemble(3, 4, (16,)), [OBS_KEY]))
    algorithm = MultiAgentOffPolicy(independent_learners(env.columns, {"p0": sac, "p1": dqn}), num_units=2)
    trainer = OffPolicyTrainer(
        algorithm,
        OffPolicyTrainerParams(
            training_collector=MultiAgentCollector(
                algorithm.policy,
                env,
                VectorReplayBuffer(400, buffer_num=4, seed=0),
                exploration_noise=True,
                seed=0,
            ),
            test_collector=MultiAgentCollector(algorithm.policy, test_env, seed=1),
            max_epochs=2,
            epoch_num_steps=40,
            collection_step_num_env_steps=8,
            batch_size=16,
            test_step_num_episodes=2,
            verbose=False,
            show_progress=False,
        ),
    )
    before_sac, before_dqn = _params(actor), _params(dqn.policy)
    trainer.run()
    assert any(not torch.equal(a, b) for a, b in zip(before_sac, _params(actor), strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(before_dqn, _params(dqn.policy), strict=True))
    assert all(action != 3 for _, _, action in env.log)  # the masked action is never taken
    stats = algorithm.update(trainer.params.training_collector.buffer, 8)  # type: ignore[arg-type]
    scalars = stats.as_scalars()
    assert "p1/loss" in scalars and "p0/critic_loss" in scalars and "p0/alpha" in scalars


def _params(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]
