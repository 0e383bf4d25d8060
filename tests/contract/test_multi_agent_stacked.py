"""``update_mode="stacked"`` of multi-agent algorithms (issue 35, part 3): independent learners of one
algorithm (PPO; DQN, SAC) update in one pass over their stacked networks, the building block of seed
batches. Each learner learns what its sequential update gives (to float rounding), bit-exact resume,
and what cannot be stacked is refused in one line when the algorithm is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tests.contract.test_multi_agent_parallel import _scoped_ppo
from tests.contract.test_multi_agent_trainer import _ppo
from tests.multi_agent_envs import TurnGame
from tshtrain.algorithm import (
    A2C,
    DQN,
    PPO,
    SAC,
    ActionMasked,
    CategoricalPolicy,
    DiscreteQEnsemble,
    DiscreteSAC,
    DQNParams,
    MultiAgentOffPolicy,
    MultiAgentOnPolicy,
    PPOParams,
    QEnsemble,
    QValuePolicy,
    RandomPolicy,
    SACParams,
    TanhGaussianPolicy,
    independent_learners,
    mlp,
    scoped_learners,
)
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import Collector, MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import OBS_KEY, make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import Callback, OffPolicyTrainer, OffPolicyTrainerParams


def _weights(trainer: Any) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.algorithm.policy.parameters()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-5)


def _spy(monkeypatch: pytest.MonkeyPatch, kind: Any) -> list[int]:
    """Counts the members of every ``kind.stacked_update`` call."""
    calls: list[int] = []
    original = kind.stacked_update

    def counted(members: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(members))
        return original(members, *args, **kwargs)

    monkeypatch.setattr(kind, "stacked_update", staticmethod(counted))
    return calls


def test_stacked_ppo_learners_learn_what_sequential_updates_give(monkeypatch: pytest.MonkeyPatch) -> None:
    sequential, stacked = _scoped_ppo("sequential"), _scoped_ppo("stacked")
    sequential.run()
    calls = _spy(monkeypatch, PPO)
    stacked.run()
    assert calls == [2] * 4  # 2 epochs x 2 collection steps, both learners at once
    _close(_weights(sequential), _weights(stacked))
    assert stacked.info_stats().gradient_step == sequential.info_stats().gradient_step


def _dqn_learners(seed: int, mode: str, **kwargs: Any) -> OffPolicyTrainer:
    """Two independent DQN players of the turn game (each samples its own columns of one buffer)."""
    torch.manual_seed(seed)
    env, test_env = TurnGame(num_envs=2, length=4), TurnGame(num_envs=2, length=4)

    def player(k: int) -> DQN:
        q_net = ActionMasked(nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 4)), single_key=OBS_KEY)
        policy = QValuePolicy(
            q_net, env.single_action_space, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed + k
        )
        return DQN(policy=policy, params=DQNParams(lr=1e-3, n_step=2, target_update_freq=10))

    algorithm = MultiAgentOffPolicy(
        independent_learners(env.columns, {"p0": player(0), "p1": player(1)}),
        num_units=2,
        update_mode=mode,  # type: ignore[arg-type]
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
        max_epochs=2,
        epoch_num_steps=40,
        collection_step_num_env_steps=8,
        batch_size=16,
        test_step_num_episodes=4,
        verbose=False,
        show_progress=False,
        **kwargs,
    )
    return OffPolicyTrainer(algorithm, params)


def test_stacked_dqn_players_learn_what_sequential_updates_give(monkeypatch: pytest.MonkeyPatch) -> None:
    sequential, stacked = _dqn_learners(0, "sequential"), _dqn_learners(0, "stacked")
    sequential.run()
    calls = _spy(monkeypatch, DQN)
    stacked.run()
    assert calls and set(calls) == {2}
    _close(_weights(sequential), _weights(stacked))
    assert stacked.info_stats().gradient_step == sequential.info_stats().gradient_step > 0


def _sac_scopes(mode: str, **kwargs: Any) -> OffPolicyTrainer:
    """Two SAC learners over two sub-envs each of a Pendulum vector env (agent scopes)."""
    torch.manual_seed(0)
    env = make_vector_env("Pendulum-v1", 4)
    space = env.single_action_space

    def member(seed: int) -> SAC:
        policy = TanhGaussianPolicy(mlp(3, 2, (16,)), space, seed=seed)
        return SAC(policy=policy, critic=QEnsemble(3, 1, (16,)), params=SACParams(tau=0.05))

    algorithm = MultiAgentOffPolicy(
        scoped_learners([2, 2], [member(0), member(1)]),
        num_units=4,
        update_mode=mode,  # type: ignore[arg-type]
    )
    params = OffPolicyTrainerParams(
        training_collector=Collector(
            algorithm.policy, env, VectorReplayBuffer(400, buffer_num=4, seed=0), seed=0
        ),
        test_collector=Collector(algorithm.policy, make_vector_env("Pendulum-v1", 4), seed=1),
        max_epochs=2,
        epoch_num_steps=40,
        collection_step_num_env_steps=8,
        batch_size=16,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
        **kwargs,
    )
    return OffPolicyTrainer(algorithm, params)


def test_stacked_sac_learners_learn_what_sequential_updates_give(monkeypatch: pytest.MonkeyPatch) -> None:
    sequential, stacked = _sac_scopes("sequential"), _sac_scopes("stacked")
    sequential.run()
    calls = _spy(monkeypatch, SAC)
    stacked.run()
    assert calls and set(calls) == {2}
    _close(_weights(sequential), _weights(stacked))


def test_stacked_learners_resume_bit_exact(tmp_path: Path) -> None:
    straight = _dqn_learners(
        0, "stacked", checkpoint=CheckpointParams(directory=tmp_path, every_num_epochs=1)
    )
    straight.run()
    resumed = _dqn_learners(0, "stacked")
    (periodic,) = sorted(tmp_path.glob("periodic-000001-*"))
    resumed.load_checkpoint(periodic)
    resumed.run()
    assert all(torch.equal(a, b) for a, b in zip(_weights(straight), _weights(resumed), strict=True))


def test_what_cannot_be_stacked_is_refused_when_built() -> None:
    env = make_vector_env("CartPole-v1", 4)
    space = env.single_action_space
    a2c = A2C(policy=CategoricalPolicy(mlp(4, 2, (16,)), space, seed=1), critic=mlp(4, 1, (16,)))
    with pytest.raises(
        ConfigurationError, match=r"update_mode='stacked' takes learners of one algorithm \(PPO\)"
    ):
        MultiAgentOnPolicy(scoped_learners([2, 2], [_ppo(space, 4, 0), a2c]), update_mode="stacked")
    with pytest.raises(ConfigurationError, match="equal numbers of units"):
        MultiAgentOnPolicy(
            scoped_learners([1, 3], [_ppo(space, 4, 0), _ppo(space, 4, 1)]), update_mode="stacked"
        )
    other = _ppo(space, 4, 1)
    other.params = PPOParams(lr=3e-4)
    with pytest.raises(ConfigurationError, match="PPOParams differ"):
        MultiAgentOnPolicy(scoped_learners([2, 2], [_ppo(space, 4, 0), other]), update_mode="stacked")
    dqn = DQN(policy=QValuePolicy(mlp(4, 2, (16,)), space, seed=0), params=DQNParams(lr=1e-3))
    discrete_sac = DiscreteSAC(
        policy=CategoricalPolicy(mlp(4, 2, (16,)), space, seed=1), critic=DiscreteQEnsemble(4, 2, (16,))
    )
    with pytest.raises(ConfigurationError, match=r"one algorithm \(DQN or SAC\); the learners train with"):
        MultiAgentOffPolicy(scoped_learners([2, 2], [dqn, discrete_sac]), update_mode="stacked")
    # a fixed policy beside one learner: nothing to stack, accepted
    MultiAgentOnPolicy(
        scoped_learners([2, 2], [_ppo(space, 4, 0), RandomPolicy(space, seed=0)]), update_mode="stacked"
    )


def test_update_hooks_are_refused_in_stacked_mode() -> None:
    class OnLoss(Callback):
        def on_loss(self, *args: Any, **kwargs: Any) -> None:
            pass

    trainer = _scoped_ppo("stacked")
    trainer.add_callback(OnLoss())
    with pytest.raises(ConfigurationError, match="calls no update hooks"):
        trainer.run()
