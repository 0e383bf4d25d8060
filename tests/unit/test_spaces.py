"""Space helpers: array layouts, supported / unsupported spaces, random actions, action checks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from tshtrain.env import ArraySpec, action_spec, array_spec, check_actions, observation_specs, sample_actions
from tshtrain.errors import PolicyOutputError, UnsupportedSpaceError

# ---------------------------------------------------------------------------- specs


def test_array_spec_box() -> None:
    space = spaces.Box(low=-1.0, high=1.0, shape=(3, 4), dtype=np.float32)
    assert array_spec(space) == ArraySpec(shape=(3, 4), dtype=np.dtype(np.float32))


def test_array_spec_discrete_is_int64_scalar() -> None:
    assert array_spec(spaces.Discrete(5, start=2)) == ArraySpec(shape=(), dtype=np.dtype(np.int64))


def test_array_spec_multidiscrete() -> None:
    spec = array_spec(spaces.MultiDiscrete([3, 4, 5]))
    assert spec.shape == (3,)
    assert spec.dtype == np.dtype(np.int64)


def test_array_spec_multibinary() -> None:
    spec = array_spec(spaces.MultiBinary([2, 3]))
    assert spec.shape == (2, 3)
    assert spec.dtype == np.dtype(np.int8)


def test_observation_specs_single_space() -> None:
    assert observation_specs(spaces.Box(0, 1, (2,), np.float64)) == ArraySpec(
        shape=(2,), dtype=np.dtype(np.float64)
    )


def test_observation_specs_flat_dict() -> None:
    space = spaces.Dict(
        {
            "pos": spaces.Box(-1, 1, (2,), np.float32),
            "mode": spaces.Discrete(3),
            "flags": spaces.MultiBinary(4),
        }
    )
    specs = observation_specs(space)
    assert isinstance(specs, dict)
    assert specs == {
        "pos": ArraySpec(shape=(2,), dtype=np.dtype(np.float32)),
        "mode": ArraySpec(shape=(), dtype=np.dtype(np.int64)),
        "flags": ArraySpec(shape=(4,), dtype=np.dtype(np.int8)),
    }


def test_nested_dict_observation_is_rejected_naming_the_key() -> None:
    space = spaces.Dict({"outer": spaces.Dict({"inner": spaces.Discrete(2)})})
    with pytest.raises(UnsupportedSpaceError, match=r"key 'outer' holds a nested Dict.*FlattenObservation"):
        observation_specs(space)


def test_tuple_space_is_rejected_naming_the_space() -> None:
    space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))
    with pytest.raises(UnsupportedSpaceError, match=r"Unsupported observation space Tuple\(Discrete\(2\)"):
        observation_specs(space)


def test_text_space_is_rejected_naming_the_space() -> None:
    with pytest.raises(UnsupportedSpaceError, match=r"Unsupported action space Text\("):
        action_spec(spaces.Text(5))


def test_tuple_inside_dict_is_rejected_naming_the_key() -> None:
    space = spaces.Dict({"a": spaces.Discrete(2), "t": spaces.Tuple((spaces.Discrete(2),))})
    with pytest.raises(UnsupportedSpaceError, match=r"observation space \(key 't'\) Tuple"):
        observation_specs(space)


def test_unsupported_space_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        array_spec(spaces.Text(3))


def test_dict_action_space_is_rejected() -> None:
    with pytest.raises(UnsupportedSpaceError, match="Unsupported action space Dict"):
        action_spec(spaces.Dict({"a": spaces.Discrete(2)}))


# ---------------------------------------------------------------------------- sampling

SAMPLE_SPACES: list[gym.Space[object]] = [
    spaces.Discrete(4, start=-2),
    spaces.MultiDiscrete([2, 5, 3], start=[1, 0, -3]),
    spaces.MultiBinary(5),
    spaces.Box(
        low=np.array([-2.0, 0.0], np.float32), high=np.array([-1.0, 10.0], np.float32), dtype=np.float32
    ),
    spaces.Box(low=-np.inf, high=np.inf, shape=(3,), dtype=np.float32),
    spaces.Box(low=np.array([5.0, -np.inf]), high=np.array([np.inf, -5.0]), dtype=np.float64),
    spaces.Box(low=0, high=3, shape=(2,), dtype=np.int64),
]


@pytest.mark.parametrize("space", SAMPLE_SPACES, ids=repr)
def test_sample_actions_stay_in_space_and_pass_check(space: gym.Space[object]) -> None:
    rng = np.random.default_rng(0)
    act = sample_actions(space, 500, rng)
    spec = action_spec(space)
    assert act.shape == (500, *spec.shape)
    assert all(space.contains(a) for a in act)
    check_actions(space, act, 500)


@pytest.mark.parametrize("space", SAMPLE_SPACES, ids=repr)
def test_sample_actions_reproducible_with_same_seed(space: gym.Space[object]) -> None:
    a = sample_actions(space, 20, np.random.default_rng(123))
    b = sample_actions(space, 20, np.random.default_rng(123))
    c = sample_actions(space, 20, np.random.default_rng(124))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_sample_actions_discrete_covers_every_value_uniformly() -> None:
    act = sample_actions(spaces.Discrete(4, start=-2), 40_000, np.random.default_rng(1))
    values, counts = np.unique(act, return_counts=True)
    assert values.tolist() == [-2, -1, 0, 1]
    np.testing.assert_allclose(counts / 40_000, 0.25, atol=0.01)


def test_sample_actions_integer_box_reaches_both_bounds() -> None:
    space = spaces.Box(low=0, high=2, shape=(1,), dtype=np.int64)
    act = sample_actions(space, 3000, np.random.default_rng(2))
    values, counts = np.unique(act, return_counts=True)
    assert values.tolist() == [0, 1, 2]
    np.testing.assert_allclose(counts / 3000, 1 / 3, atol=0.03)


def test_sample_actions_does_not_touch_global_rng() -> None:
    np.random.seed(7)
    expected = np.random.random()
    np.random.seed(7)
    sample_actions(spaces.Box(-1, 1, (3,), np.float32), 10, np.random.default_rng(0))
    sample_actions(spaces.Discrete(3), 10, np.random.default_rng(0))
    assert np.random.random() == expected


def test_sample_actions_unsupported_space() -> None:
    with pytest.raises(UnsupportedSpaceError, match="Unsupported action space Text"):
        sample_actions(spaces.Text(4), 2, np.random.default_rng(0))


# ---------------------------------------------------------------------------- checking


def test_check_actions_accepts_valid_discrete() -> None:
    check_actions(spaces.Discrete(3, start=1), np.array([1, 2, 3]), 3)


def test_check_actions_wrong_batch_size() -> None:
    with pytest.raises(PolicyOutputError, match=r"actions of shape \(2,\).*with 3 envs needs shape \(3,\)"):
        check_actions(spaces.Discrete(3), np.array([0, 1]), 3)


def test_check_actions_wrong_element_shape() -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    with pytest.raises(PolicyOutputError, match=r"actions of shape \(4, 3\).*needs shape \(4, 2\)"):
        check_actions(space, np.zeros((4, 3), np.float32), 4)


def test_check_actions_discrete_out_of_range() -> None:
    with pytest.raises(PolicyOutputError, match=r"discrete actions \[0, 3\]; Discrete\(3\) allows 0\.\.2"):
        check_actions(spaces.Discrete(3), np.array([0, 3]), 2)


def test_check_actions_discrete_below_start() -> None:
    with pytest.raises(PolicyOutputError, match=r"allows 1\.\.3"):
        check_actions(spaces.Discrete(3, start=1), np.array([0, 1]), 2)


def test_check_actions_discrete_non_integer() -> None:
    with pytest.raises(PolicyOutputError, match=r"non-integer"):
        check_actions(spaces.Discrete(3), np.array([0.5, 1.0]), 2)


def test_check_actions_box_out_of_range() -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    act = np.array([[0.0, 0.5], [1.5, -0.25]], np.float32)
    with pytest.raises(PolicyOutputError, match=r"outside Box.*min -0\.25, max 1\.5.*map_action"):
        check_actions(space, act, 2)


def test_check_actions_box_non_finite() -> None:
    space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    with pytest.raises(PolicyOutputError, match=r"non-finite actions \[\[nan\]\]"):
        check_actions(space, np.array([[np.nan]], np.float32), 1)


def test_check_actions_box_bounds_are_inclusive() -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    check_actions(space, np.array([[-1.0, 1.0]], np.float32), 1)


def test_check_actions_multidiscrete_out_of_range() -> None:
    space = spaces.MultiDiscrete([2, 3])
    check_actions(space, np.array([[1, 2], [0, 0]]), 2)
    with pytest.raises(PolicyOutputError, match=r"actions \[\[1, 3\]\] outside MultiDiscrete"):
        check_actions(space, np.array([[1, 3]]), 1)
    with pytest.raises(PolicyOutputError, match=r"actions \[\[-1, 0\]\] outside MultiDiscrete"):
        check_actions(space, np.array([[-1, 0]]), 1)


def test_check_actions_multibinary_out_of_range() -> None:
    space = spaces.MultiBinary(3)
    check_actions(space, np.array([[0, 1, 1]], np.int8), 1)
    with pytest.raises(PolicyOutputError, match=r"actions \[\[0, 2, 1\]\] outside MultiBinary\(3\)"):
        check_actions(space, np.array([[0, 2, 1]]), 1)


def test_policy_output_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        check_actions(spaces.Discrete(2), np.array([5]), 1)


def test_make_action_checker_fast_path_accepts_valid_and_reports_invalid_actions() -> None:
    import gymnasium as gym
    import numpy as np
    import pytest

    from tshtrain.env.spaces import make_action_checker
    from tshtrain.errors import PolicyOutputError

    discrete = make_action_checker(gym.spaces.Discrete(3), 4)
    discrete(np.array([0, 1, 2, 1]))
    with pytest.raises(PolicyOutputError, match=r"allows 0\.\.2"):
        discrete(np.array([0, 1, 3, 1]))
    with pytest.raises(PolicyOutputError, match="shape"):
        discrete(np.array([0, 1, 2]))
    box = make_action_checker(gym.spaces.Box(-1.0, 1.0, (2,)), 2)
    box(np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(PolicyOutputError, match="non-finite"):
        box(np.array([[0.0, np.nan], [0.0, 0.0]], dtype=np.float32))
    with pytest.raises(PolicyOutputError, match="outside"):
        box(np.array([[0.0, 1.5], [0.0, 0.0]], dtype=np.float32))


def test_dqn_on_multidiscrete_actions_names_the_algorithms_that_take_them() -> None:
    import torch

    from tshtrain.algorithm.blocks.policies import QValuePolicy

    with pytest.raises(UnsupportedSpaceError) as info:
        QValuePolicy(torch.nn.Linear(4, 6), spaces.MultiDiscrete([3, 3]))
    assert str(info.value) == (
        "QValuePolicy needs a Discrete action space, got MultiDiscrete([3 3]). MultiDiscrete actions are "
        "taken by MultiCategoricalPolicy, which the on-policy algorithms accept: A2C, PPO, NPG, TRPO and "
        "REINFORCE (algorithm.name: a2c, ppo, npg, trpo, reinforce); DQN and the other Q-learning "
        "algorithms need one Discrete action (wrap the env to map the MultiDiscrete action to a Discrete "
        "one of prod(nvec) actions)."
    )
    with pytest.raises(UnsupportedSpaceError, match=r"^QValuePolicy needs a Discrete action space, got Box"):
        QValuePolicy(torch.nn.Linear(4, 6), spaces.Box(-1, 1, (2,)))


@pytest.mark.parametrize("one_dim", [False, True])
@pytest.mark.parametrize("num_envs", [1, 3, 40])
def test_box_action_checker_agrees_with_the_full_check(num_envs: int, one_dim: bool) -> None:
    """The small-batch fast path (Python floats) passes exactly the actions the full check passes:
    per-dimension bounds, NaN and inf, float32 and float64, multi-dimensional boxes, batches above the
    fast path's size."""
    import gymnasium as gym
    import numpy as np

    from tshtrain.env.spaces import check_actions, make_action_checker
    from tshtrain.errors import PolicyOutputError

    if one_dim:  # Pendulum's action space: the one-env, one-dimension path
        space = gym.spaces.Box(-2.0, 2.0, (1,))
    else:
        space = gym.spaces.Box(np.array([[-1.0, 0.0], [-2.0, -0.5]]), np.array([[1.0, 0.5], [2.0, 0.5]]))
    checker = make_action_checker(space, num_envs)
    rng = np.random.default_rng(0)
    for trial in range(300):
        act = rng.uniform(-2.5, 2.5, (num_envs, *space.shape)).astype(np.float32 if trial % 2 else np.float64)
        if trial % 7 == 0:
            act.reshape(num_envs, -1)[rng.integers(num_envs), -1] = [np.nan, np.inf, -np.inf][trial % 3]
        if trial % 5 == 0:  # all inside, touching the bounds
            act = np.clip(act, space.low, space.high)
        try:
            check_actions(space, act, num_envs)
            expected_ok = True
        except PolicyOutputError:
            expected_ok = False
        try:
            checker(act)
            ok = True
        except PolicyOutputError:
            ok = False
        assert ok == expected_ok, act


def test_an_empty_box_action_passes_the_checker() -> None:
    import gymnasium as gym
    import numpy as np

    from tshtrain.env.spaces import make_action_checker

    make_action_checker(gym.spaces.Box(-1.0, 1.0, (0,)), 2)(np.zeros((2, 0), np.float32))
