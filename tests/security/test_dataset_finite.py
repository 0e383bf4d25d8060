"""Non-finite rewards and observations in an offline dataset are refused when it meets the algorithm
(issue 30, item 5b), in one line naming the dataset, the field, the row and the value, unless the user
opts in with ``buffer.allow_nonfinite = True`` (which ``load_tianshou_hdf5(..., allow_nonfinite=True)``
sets). A NaN reward would otherwise train a policy on NaN losses without a word."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.security.test_dataset_spaces import _buffer, _crr, _iql_pendulum, _one_line, _trainer
from tshtrain.data import ReplayBuffer
from tshtrain.data.buffer import BufferLayout
from tshtrain.errors import ConfigurationError


def _cartpole(**bad: tuple[int, float]) -> ReplayBuffer:
    """CartPole-shaped data with ``field=(row, value)`` planted in its first element."""
    buffer = _buffer(4, np.arange(6) % 2)
    arrays = buffer.field_arrays()
    for field, (row, value) in bad.items():
        arrays[field].reshape(6, -1)[row, 0] = value
    return buffer


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("rew", math.nan, "nan"),
        ("rew", -math.inf, "-inf"),
        ("obs", math.inf, "inf"),
        ("obs_next", math.nan, "nan"),
    ],
)
def test_a_non_finite_reward_or_observation_is_refused_when_built(
    field: str, value: float, shown: str
) -> None:
    buffer = _cartpole(**{field: (4, value)})
    buffer.source = "/data/cartpole-v1"
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_crr("CartPole-v1"), buffer, "CartPole-v1")
    _one_line(
        raised, "dataset /data/cartpole-v1", f"field {field!r}", f"holds {shown} at row 4", "allow_nonfinite"
    )


def test_the_first_bad_row_is_named_with_the_count() -> None:
    buffer = _buffer(3, np.zeros((6, 1), np.float32), rew=math.nan)
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_iql_pendulum(), buffer, "Pendulum-v1")
    _one_line(raised, "dataset OfflineTrainerParams.buffer", "field 'rew'", "nan at row 0", "6 of 6")


def test_the_user_may_opt_in() -> None:
    buffer = _cartpole(rew=(1, math.nan), obs=(2, math.inf))
    buffer.allow_nonfinite = True
    trainer = _trainer(_crr("CartPole-v1"), buffer, "CartPole-v1")  # built: the user asked for it
    assert trainer.params.buffer is buffer


def test_actions_stay_checked_with_the_opt_in() -> None:
    act = np.zeros((6, 1), np.float32)
    act[2, 0] = np.nan
    buffer = _buffer(3, act)
    buffer.allow_nonfinite = True
    with pytest.raises(ConfigurationError) as raised:
        _trainer(_iql_pendulum(), buffer, "Pendulum-v1")
    _one_line(raised, "'act'", "nan", "row 2")


def test_rows_not_stored_are_not_checked() -> None:
    buffer = ReplayBuffer(8, seed=0)
    full = _buffer(4, np.arange(6) % 2)
    arrays = {
        k: np.concatenate([v, np.full((2, *v.shape[1:]), np.nan, v.dtype) if v.dtype.kind == "f" else v[:2]])
        for k, v in full.field_arrays().items()
    }
    buffer.restore(arrays, BufferLayout(column_capacity=8, num_columns=1, ptr=(6,), length=(6,)))
    _trainer(_crr("CartPole-v1"), buffer, "CartPole-v1")  # rows 6 and 7 hold NaN but are not stored
