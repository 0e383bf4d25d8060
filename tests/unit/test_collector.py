"""The Collector: step / episode counts, carried-over episodes, autoreset correctness, errors, seeding."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from tshtrain.data import Collector, CollectStats, ReplayBuffer, VectorReplayBuffer
from tshtrain.data.batch import ObsArray
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError, PolicyOutputError

# ---------------------------------------------------------------------------- fixtures


class ChainEnv(gym.Env[np.ndarray, np.int64]):
    """obs = [t, start]; reward 1 + action; terminates after ``length`` steps.

    ``start`` is drawn from the env's seeded generator at every reset, so seeding is observable.
    """

    def __init__(self, length: int):
        self.length = length
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.start = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.start = float(self.np_random.integers(0, 1000))
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.start], dtype=np.float32)

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._obs(), 1.0 + float(action), self.t >= self.length, False, {}


def chain_factory(lengths: Sequence[int]) -> Callable[[], gym.Env[Any, Any]]:
    """A factory whose i-th call builds a ChainEnv of length ``lengths[i]`` (sub-env i of a vector env)."""
    counter = itertools.count()

    def make() -> gym.Env[Any, Any]:
        return ChainEnv(lengths[next(counter)])

    return make


def array_obs(obs: ObsArray) -> np.ndarray:
    assert isinstance(obs, np.ndarray)
    return obs


def chain_venv(lengths: Sequence[int]) -> gym.vector.VectorEnv[Any, Any, Any]:
    return make_vector_env(chain_factory(lengths), len(lengths))


def chain_return(length: int) -> float:
    """Return of one ChainEnv episode under ParityPolicy: rewards 1, 2, 1, 2, ..."""
    return float(length + length // 2)


class ParityPolicy:
    """act = t mod 2 (obs[:, 0] is t); exploration noise flips actions with probability 1/2."""

    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        assert isinstance(obs, np.ndarray)
        return obs[:, 0].astype(np.int64) % 2

    def map_action(self, act: np.ndarray) -> np.ndarray:
        return act

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        return act

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.where(rng.random(len(act)) < 0.5, 1 - act, act)


class CartPolePolicy:
    """A deterministic balancing rule for CartPole (push towards the pole's fall)."""

    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        assert isinstance(obs, np.ndarray)
        return self.single(obs)

    @staticmethod
    def single(obs: np.ndarray) -> np.ndarray:
        return (obs[..., 2] + 0.5 * obs[..., 3] > 0).astype(np.int64)

    def map_action(self, act: np.ndarray) -> np.ndarray:
        return act

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        return act

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return act


class AlwaysZeroPolicy(CartPolePolicy):
    @staticmethod
    def single(obs: np.ndarray) -> np.ndarray:
        return np.zeros(obs.shape[:-1], dtype=np.int64)


# ---------------------------------------------------------------------------- n_step


@pytest.mark.parametrize(("n_step", "num_envs", "expected"), [(7, 3, 9), (6, 3, 6), (1, 3, 3), (5, 1, 5)])
def test_n_step_collects_a_multiple_of_num_envs(n_step: int, num_envs: int, expected: int) -> None:
    buf = VectorReplayBuffer(60, num_envs)
    collector = Collector(ParityPolicy(), chain_venv([100] * num_envs), buf, seed=0)
    stats = collector.collect(n_step=n_step)
    assert stats.n_collected_steps == expected
    assert len(buf) == expected
    assert collector.num_collected_env_steps == expected
    assert stats.n_collected_episodes == 0


def test_n_step_carries_unfinished_episodes_across_calls() -> None:
    buf = VectorReplayBuffer(40, 2)
    collector = Collector(ParityPolicy(), chain_venv([5, 3]), buf, seed=0)
    first = collector.collect(n_step=4)  # 2 vector steps: nothing ends
    assert first.n_collected_episodes == 0 and first.returns.shape == (0,)
    second = collector.collect(n_step=4)  # steps 3, 4: env 1 ends at step 3
    np.testing.assert_array_equal(second.lens, [3])
    np.testing.assert_array_equal(second.returns, [chain_return(3)])
    buf.reset()  # an on-policy update in between: episodes still carry on
    third = collector.collect(n_step=6)  # steps 5, 6, 7: env 0 ends at 5, env 1 at 6
    np.testing.assert_array_equal(third.lens, [5, 3])
    np.testing.assert_array_equal(third.returns, [chain_return(5), chain_return(3)])
    assert len(buf) == 6
    np.testing.assert_array_equal(array_obs(buf.rollout().obs)[:, :, 0], [[4, 1], [0, 2], [1, 0]])
    assert collector.num_collected_episodes == 3
    assert collector.num_collected_env_steps == 14


def test_n_step_without_buffer() -> None:
    collector = Collector(ParityPolicy(), chain_venv([2, 2]), None, seed=0)
    stats = collector.collect(n_step=6)
    assert stats.n_collected_steps == 6
    np.testing.assert_array_equal(stats.lens, [2, 2])


# ---------------------------------------------------------------------------- n_episode


@pytest.mark.parametrize(
    ("n_episode", "lengths", "expected_lens"),
    [
        (1, [2, 3, 5], [2]),  # n < N: only env 0 takes part
        (2, [2, 3, 5], [2, 3]),
        (3, [2, 3, 5], [2, 3, 5]),
        (4, [2, 3, 5], [2, 3, 2, 5]),  # env 0 starts the 4th episode
        (7, [2, 3, 5], [2, 3, 2, 5, 2, 3, 5]),
        (5, [4, 1], [1, 1, 1, 4, 1]),
        (3, [3], [3, 3, 3]),
    ],
)
def test_n_episode_collects_exactly_n_episodes(
    n_episode: int, lengths: list[int], expected_lens: list[int]
) -> None:
    buf = VectorReplayBuffer(30 * len(lengths), len(lengths))
    collector = Collector(ParityPolicy(), chain_venv(lengths), buf, seed=0)
    stats = collector.collect(n_episode=n_episode)
    assert stats.n_collected_episodes == n_episode
    np.testing.assert_array_equal(stats.lens, expected_lens)
    np.testing.assert_array_equal(stats.returns, [chain_return(n) for n in expected_lens])
    assert stats.n_collected_steps == sum(expected_lens) == len(buf)
    # every column holds complete episodes only: t runs 0, 1, ..., length - 1 and ends with done
    batch = buf.sample_all()
    for col in range(len(lengths)):
        in_col = batch.indices % len(lengths) == col
        t = batch.obs[in_col, 0] if isinstance(batch.obs, np.ndarray) else None
        assert t is not None
        done = batch.done[in_col]
        if len(t):
            assert done[-1]
            starts = np.flatnonzero(t == 0)
            ends = np.flatnonzero(done)
            np.testing.assert_array_equal(starts[1:], ends[:-1] + 1)


def test_n_episode_resets_envs_afterwards() -> None:
    buf = VectorReplayBuffer(40, 2)
    collector = Collector(ParityPolicy(), chain_venv([3, 4]), buf, seed=0)
    collector.collect(n_episode=1)  # env 1 was stepped 3 times without storing
    buf.reset()
    stats = collector.collect(n_step=2)
    np.testing.assert_array_equal(array_obs(buf.rollout().obs)[0, :, 0], [0, 0])
    assert stats.n_collected_episodes == 0


def test_n_episode_after_n_step_ends_the_cut_episodes_in_the_buffer() -> None:
    buf = VectorReplayBuffer(40, 2)
    collector = Collector(ParityPolicy(), chain_venv([5, 5]), buf, seed=0)
    collector.collect(n_step=4)  # 2 steps of unfinished episodes
    collector.collect(n_episode=2)  # resets the envs first
    roll = buf.rollout()
    np.testing.assert_array_equal(array_obs(roll.obs)[:, 0, 0], [0, 1, 0, 1, 2, 3, 4])
    np.testing.assert_array_equal(roll.truncated[:, 0], [False, True, False, False, False, False, False])
    assert not roll.terminated[1].any()
    np.testing.assert_array_equal(roll.boundary[:, 0], [False, True, False, False, False, False, True])
    # the cut episode's last transition is its own last neighbour
    np.testing.assert_array_equal(buf.next_index(np.array([2, 3])), [2, 3])
    np.testing.assert_array_equal(buf.prev_index(np.array([4, 5])), [4, 5])


def test_reset_before_collect_ends_the_cut_episodes() -> None:
    buf = VectorReplayBuffer(40, 2)
    collector = Collector(ParityPolicy(), chain_venv([5, 5]), buf, seed=0)
    collector.collect(n_step=4)
    collector.collect(n_step=4, reset_before_collect=True)
    roll = buf.rollout()
    np.testing.assert_array_equal(array_obs(roll.obs)[:, :, 0], [[0, 0], [1, 1], [0, 0], [1, 1]])
    np.testing.assert_array_equal(roll.boundary, [[False, False], [True, True], [False, False], [True, True]])
    np.testing.assert_array_equal(
        roll.truncated, [[False, False], [True, True], [False, False], [False, False]]
    )


# ---------------------------------------------------------------------------- autoreset


def plain_transitions(
    make_env: Callable[[], gym.Env[Any, Any]], policy: Any, seed: int, num_steps: int
) -> dict[str, np.ndarray]:
    """Run one plain (non-vector) env for ``num_steps`` steps, resetting after every episode."""
    env = make_env()
    obs, _ = env.reset(seed=seed)
    rows: dict[str, list[Any]] = {"obs": [], "act": [], "terminated": [], "truncated": [], "obs_next": []}
    for _ in range(num_steps):
        act = int(policy.single(obs))
        obs_next, _, terminated, truncated, _ = env.step(act)
        for key, value in zip(rows, (obs, act, terminated, truncated, obs_next), strict=True):
            rows[key].append(value)
        obs = env.reset()[0] if terminated or truncated else obs_next
    env.close()
    return {key: np.array(value) for key, value in rows.items()}


@pytest.mark.parametrize(
    ("policy", "max_episode_steps"),
    [(CartPolePolicy(), 5), (AlwaysZeroPolicy(), 9)],
    ids=["truncations", "terminations-and-truncations"],
)
def test_stored_transitions_match_plain_envs_and_never_span_episodes(
    policy: Any, max_episode_steps: int
) -> None:
    def make_env() -> gym.Env[Any, Any]:
        return gym.make("CartPole-v1", max_episode_steps=max_episode_steps)

    num_envs, num_steps, seed = 2, 23, 11
    buf = VectorReplayBuffer(num_envs * num_steps, num_envs)
    collector = Collector(policy, make_vector_env(make_env, num_envs), buf, seed=seed)
    collector.collect(n_step=num_envs * num_steps)
    roll = buf.rollout()
    assert roll.shape == (num_steps, num_envs)
    assert isinstance(roll.obs, np.ndarray) and isinstance(roll.obs_next, np.ndarray)
    num_truncated = 0
    for col in range(num_envs):
        plain = plain_transitions(make_env, policy, seed + col, num_steps)
        np.testing.assert_array_equal(roll.obs[:, col], plain["obs"])
        np.testing.assert_array_equal(roll.act[:, col], plain["act"])
        np.testing.assert_array_equal(roll.terminated[:, col], plain["terminated"])
        np.testing.assert_array_equal(roll.truncated[:, col], plain["truncated"])
        # the true final observation, not the reset observation, ends every episode
        np.testing.assert_array_equal(roll.obs_next[:, col], plain["obs_next"])
        done = plain["terminated"] | plain["truncated"]
        num_truncated += int(plain["truncated"].sum())
        for t in range(num_steps - 1):
            if done[t]:
                assert not np.array_equal(roll.obs_next[t, col], roll.obs[t + 1, col])
                # the next row starts a fresh episode: CartPole resets into [-0.05, 0.05]^4
                assert np.all(np.abs(roll.obs[t + 1, col]) <= 0.05)
            else:
                np.testing.assert_array_equal(roll.obs_next[t, col], roll.obs[t + 1, col])
    assert num_truncated >= 4


class DictObs(gym.ObservationWrapper[dict[str, np.ndarray], Any, np.ndarray]):
    """CartPole's observation split into a flat Dict."""

    def __init__(self, env: gym.Env[np.ndarray, Any]):
        super().__init__(env)
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({"cart": box, "pole": box})  # type: ignore[assignment]  # Dict is a Space[dict[str, Any]]

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        return {"cart": observation[:2], "pole": observation[2:]}


class DictCartPolePolicy(CartPolePolicy):
    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        assert not isinstance(obs, np.ndarray)
        return self.single(np.concatenate([obs["cart"], obs["pole"]], axis=-1))


def test_dict_observation_final_obs_is_stored() -> None:
    def make_env() -> gym.Env[Any, Any]:
        return DictObs(gym.make("CartPole-v1", max_episode_steps=4))

    buf = VectorReplayBuffer(20, 2)
    collector = Collector(DictCartPolePolicy(), make_vector_env(make_env, 2), buf, seed=3)
    collector.collect(n_step=10)
    roll = buf.rollout()
    assert isinstance(roll.obs, dict) and isinstance(roll.obs_next, dict)
    plain = plain_transitions(lambda: gym.make("CartPole-v1", max_episode_steps=4), CartPolePolicy(), 4, 5)
    np.testing.assert_array_equal(roll.truncated[:, 1], plain["truncated"])
    np.testing.assert_array_equal(roll.obs_next["pole"][:, 1], plain["obs_next"][:, 2:])
    np.testing.assert_array_equal(roll.obs_next["cart"][:, 1], plain["obs_next"][:, :2])
    np.testing.assert_array_equal(roll.obs["cart"][4, 1], plain["obs"][4, :2])


# ---------------------------------------------------------------------------- errors


def test_exactly_one_of_n_step_and_n_episode() -> None:
    collector = Collector(ParityPolicy(), chain_venv([3]), ReplayBuffer(10), seed=0)
    with pytest.raises(
        ConfigurationError, match=r"give exactly one of n_step and n_episode, got n_step=3, n_episode=2"
    ):
        collector.collect(n_step=3, n_episode=2)
    with pytest.raises(ConfigurationError, match=r"got n_step=None, n_episode=None"):
        collector.collect()


@pytest.mark.parametrize("kwargs", [{"n_step": 0}, {"n_episode": -1}])
def test_non_positive_counts(kwargs: dict[str, Any]) -> None:
    collector = Collector(ParityPolicy(), chain_venv([3]), ReplayBuffer(10), seed=0)
    with pytest.raises(ConfigurationError, match=r"Collector\.collect\.n_\w+ must be a positive number"):
        collector.collect(**kwargs)


def test_buffer_with_fewer_sub_buffers_than_envs() -> None:
    with pytest.raises(
        ConfigurationError, match=r"the buffer has 2 sub-buffer\(s\) but the env has 3 sub-envs.*buffer_num=3"
    ):
        Collector(ParityPolicy(), chain_venv([3, 3, 3]), VectorReplayBuffer(30, 2))


def test_buffer_too_small_for_one_collection() -> None:
    buf = VectorReplayBuffer(4, 2)
    collector = Collector(ParityPolicy(), chain_venv([9, 9]), buf, seed=0)
    with pytest.raises(
        ConfigurationError, match=r"needs 3 rows per env but each sub-buffer holds 2; .* at least 6"
    ):
        collector.collect(n_step=6)
    assert len(buf) == 0
    collector.collect(n_step=4)
    assert len(buf) == 4


class WrongShapePolicy(ParityPolicy):
    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        return np.zeros((2, 1), dtype=np.int64)


class OutOfRangePolicy(ParityPolicy):
    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        return np.array([0, 2])


def test_policy_returning_wrong_shape() -> None:
    buf = VectorReplayBuffer(10, 2)
    collector = Collector(WrongShapePolicy(), chain_venv([3, 3]), buf, seed=0)
    with pytest.raises(PolicyOutputError, match=r"actions of shape \(2, 1\).*with 2 envs needs shape \(2,\)"):
        collector.collect(n_step=2)
    assert len(buf) == 0


def test_policy_returning_out_of_range_actions() -> None:
    collector = Collector(OutOfRangePolicy(), chain_venv([3, 3]), VectorReplayBuffer(10, 2), seed=0)
    with pytest.raises(PolicyOutputError, match=r"discrete actions \[0, 2\]; Discrete\(2\) allows 0\.\.1"):
        collector.collect(n_step=2)


# ---------------------------------------------------------------------------- random, seeds, stats


def test_random_actions() -> None:
    buf = VectorReplayBuffer(200, 2)
    collector = Collector(WrongShapePolicy(), chain_venv([100, 100]), buf, seed=0)  # the policy is not asked
    stats = collector.collect(n_step=200, random=True)
    assert stats.n_collected_steps == 200
    act = buf.sample_all().act
    assert set(np.unique(act).tolist()) == {0, 1}
    assert 0.35 < act.mean() < 0.65


def run_and_dump(seed: int) -> dict[str, np.ndarray]:
    buf = VectorReplayBuffer(60, 3, seed=seed)
    collector = Collector(ParityPolicy(), chain_venv([4, 6, 5]), buf, seed=seed, exploration_noise=True)
    collector.collect(n_step=9, random=True)
    collector.collect(n_step=12)
    collector.collect(n_episode=4)
    return {**buf.field_arrays(), "sample": buf.sample(10).indices}


def test_same_seed_same_buffer_contents() -> None:
    a, b = run_and_dump(5), run_and_dump(5)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    c = run_and_dump(6)
    assert not np.array_equal(a["act"], c["act"]) or not np.array_equal(a["obs"], c["obs"])


def test_collector_seed_seeds_sub_env_i_with_seed_plus_i() -> None:
    buf = VectorReplayBuffer(20, 3)
    Collector(ParityPolicy(), chain_venv([4, 4, 4]), buf, seed=20).collect(n_step=3)
    starts = array_obs(buf.rollout().obs)[0, :, 1]
    expected = [ChainEnv(4).reset(seed=20 + i)[0][1] for i in range(3)]
    np.testing.assert_array_equal(starts, expected)


def test_collect_stats_fields() -> None:
    collector = Collector(ParityPolicy(), chain_venv([2, 4]), VectorReplayBuffer(20, 2), seed=0)
    stats = collector.collect(n_step=8)  # env 0: episodes of length 2 at steps 2 and 4; env 1: one at step 4
    assert isinstance(stats, CollectStats)
    assert stats.n_collected_steps == 8
    assert stats.n_collected_episodes == 3
    np.testing.assert_array_equal(stats.lens, [2, 2, 4])
    np.testing.assert_array_equal(stats.returns, [3.0, 3.0, 6.0])
    assert stats.returns_stat.mean == pytest.approx(4.0)
    assert stats.returns_stat.std == pytest.approx(np.std([3.0, 3.0, 6.0]))
    assert (stats.returns_stat.min, stats.returns_stat.max) == (3.0, 6.0)
    assert stats.lens_stat.mean == pytest.approx(8 / 3)
    assert (stats.lens_stat.min, stats.lens_stat.max) == (2.0, 4.0)
    assert stats.collect_time > 0
    assert stats.collect_speed == pytest.approx(8 / stats.collect_time)
    assert stats.collect_speed > 0
    scalars = stats.as_scalars()
    assert scalars["returns/mean"] == pytest.approx(4.0)
    assert scalars["n_collected_episodes"] == 3.0


def test_collect_stats_without_episodes_are_zero() -> None:
    stats = Collector(ParityPolicy(), chain_venv([9]), ReplayBuffer(10), seed=0).collect(n_step=2)
    assert stats.returns_stat.mean == 0.0 and stats.lens_stat.max == 0.0
    assert "returns/mean" not in stats.as_scalars()


def test_reset_clears_buffer_and_counters() -> None:
    buf = VectorReplayBuffer(20, 2)
    collector = Collector(ParityPolicy(), chain_venv([2, 2]), buf, seed=0)
    collector.collect(n_step=4)
    collector.reset()
    assert len(buf) == 0
    assert collector.num_collected_env_steps == 0 and collector.num_collected_episodes == 0
