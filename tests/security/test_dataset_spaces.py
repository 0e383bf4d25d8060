"""An offline dataset is checked against the env's spaces when it meets the algorithm (issue 30, item 5):
a dataset of another env, or actions the env's action space does not hold, are refused when the
trainer is built, in one line naming the dataset, the field, the value and what the env expects; never
an ``IndexError`` or a shape error after the first test epoch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    IQL,
    CategoricalPolicy,
    DiscreteCRR,
    IQLParams,
    OfflineAlgorithm,
    QEnsemble,
    TanhGaussianPolicy,
    mlp,
)
from tshtrain.data import Collector, ReplayBuffer
from tshtrain.data.buffer import BufferLayout
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

HIDDEN = (8,)


def _buffer(obs_dim: int, act: np.ndarray, *, rew: float = 1.0) -> ReplayBuffer:
    """A dataset of ``len(act)`` transitions with ``obs_dim``-dimensional observations."""
    num = len(act)
    obs = np.linspace(0, 1, num * obs_dim, dtype=np.float32).reshape(num, 1, obs_dim)
    truncated = np.zeros((num, 1), bool)
    truncated[-1] = True
    fields = {
        "obs": obs,
        "act": np.asarray(act).reshape(num, 1, *np.shape(act)[1:]),
        "rew": np.full((num, 1), rew, np.float32),
        "terminated": np.zeros((num, 1), bool),
        "truncated": truncated,
        "obs_next": obs + 0.5,
    }
    buffer = ReplayBuffer(num, seed=0)
    buffer.restore(fields, BufferLayout(column_capacity=num, num_columns=1, ptr=(0,), length=(num,)))
    return buffer


def _cartpole_data(num: int = 6) -> ReplayBuffer:
    return _buffer(4, np.arange(num) % 2)


def _crr(env_id: str) -> DiscreteCRR:
    torch.manual_seed(0)
    env = make_vector_env(env_id, 1)
    obs_dim, n = int(env.single_observation_space.shape[0]), int(env.single_action_space.n)
    env.close()
    actor = mlp(obs_dim, n, HIDDEN, nn.ReLU)
    policy = CategoricalPolicy(actor, make_vector_env(env_id, 1).single_action_space, seed=0)
    return DiscreteCRR(policy=policy, critic=mlp(obs_dim, n, HIDDEN, nn.ReLU))


def _iql_pendulum() -> IQL:
    torch.manual_seed(0)
    policy = TanhGaussianPolicy(
        mlp(3, 2, HIDDEN, nn.ReLU), make_vector_env("Pendulum-v1", 1).single_action_space
    )
    return IQL(
        policy=policy, critic=QEnsemble(3, 1, HIDDEN), value=mlp(3, 1, HIDDEN, nn.ReLU), params=IQLParams()
    )


def _trainer(algorithm: OfflineAlgorithm[Any], buffer: ReplayBuffer, env_id: str) -> OfflineTrainer:
    collector = Collector(algorithm.policy, make_vector_env(env_id, 1), seed=1)
    params = OfflineTrainerParams(
        buffer=buffer,
        test_collector=collector,
        max_epochs=1,
        epoch_num_steps=1,
        test_step_num_episodes=1,
        batch_size=2,
        show_progress=False,
        verbose=False,
    )
    return OfflineTrainer(algorithm, params)


def _one_line(error: pytest.ExceptionInfo[BaseException], *contains: str) -> None:
    text = str(error.value)
    assert "\n" not in text, text
    for part in contains:
        assert part in text, (part, text)


def test_discrete_crr_on_acrobot_with_cartpole_data_is_refused_when_built() -> None:
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_crr("Acrobot-v1"), _cartpole_data(), "Acrobot-v1")
    _one_line(raised, "dataset", "'obs'", "(4,)", "(6,)", "observation space")


def test_iql_on_pendulum_with_cartpole_data_is_refused_when_built() -> None:
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_iql_pendulum(), _cartpole_data(), "Pendulum-v1")
    _one_line(raised, "dataset", "'obs'", "(4,)", "(3,)")


def test_iql_on_discrete_actions_of_the_right_obs_shape_is_refused() -> None:
    buffer = _buffer(3, np.arange(6) % 2)  # Pendulum-shaped observations, CartPole's integer actions
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_iql_pendulum(), buffer, "Pendulum-v1")
    _one_line(raised, "dataset", "'act'", "int64", "Box")


@pytest.mark.parametrize(("bad", "shown"), [(10**9, "1000000000"), (-1, "-1"), (2, "2")])
def test_discrete_actions_outside_the_action_space_are_refused(bad: int, shown: str) -> None:
    act = np.arange(6) % 2
    act[3] = bad
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_crr("CartPole-v1"), _buffer(4, act), "CartPole-v1")
    _one_line(raised, "dataset", "'act'", shown, "row 3", "Discrete(2)")


def test_float_actions_on_a_discrete_space_are_refused() -> None:
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_crr("CartPole-v1"), _buffer(4, np.full(6, 0.5, np.float32)), "CartPole-v1")
    _one_line(raised, "dataset", "'act'", "float32", "Discrete(2)")


def test_non_finite_box_actions_are_refused() -> None:
    act = np.zeros((6, 1), np.float32)
    act[2, 0] = np.nan
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_iql_pendulum(), _buffer(3, act), "Pendulum-v1")
    _one_line(raised, "dataset", "'act'", "nan", "row 2")


def test_a_box_action_of_another_shape_is_refused() -> None:
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_iql_pendulum(), _buffer(3, np.zeros((6, 2), np.float32)), "Pendulum-v1")
    _one_line(raised, "dataset", "'act'", "shape (2,)", "shape (1,)")


def test_the_dataset_is_named_by_where_it_came_from() -> None:
    buffer = _cartpole_data()
    buffer.source = "/data/expert-cartpole"
    with pytest.raises(ConfigurationError, match="dataset /data/expert-cartpole: field 'obs'"):
        _trainer(_crr("Acrobot-v1"), buffer, "Acrobot-v1")


def test_matching_datasets_are_accepted() -> None:
    _trainer(_crr("CartPole-v1"), _cartpole_data(), "CartPole-v1")
    _trainer(_iql_pendulum(), _buffer(3, np.linspace(-1, 1, 6, dtype=np.float32)[:, None]), "Pendulum-v1")
