"""EnvPoolVectorEnv: EnvPool's next-step autoreset turned into tshtrain's same-step autoreset.

The reference is EnvPool itself: a one-env pool seeded like sub-env ``i`` (``seed + i``) and driven with
the actions the collector stored for column ``i``, stepping once more (EnvPool's own reset step) after
every episode end. Every stored transition must match it exactly: ``obs_next`` of a terminated or
truncated transition is the episode's final observation, and the column's next transition starts from
the new episode's reset observation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from tests.extras import need

pytestmark = pytest.mark.integration
envpool = need("envpool", "envpool")

from tshtrain.config import build_run, load_experiment  # noqa: E402
from tshtrain.data import Collector, VectorReplayBuffer  # noqa: E402
from tshtrain.env import autoreset_mode  # noqa: E402
from tshtrain.env.envpool import EnvPoolVectorEnv  # noqa: E402
from tshtrain.errors import ConfigurationError, ExperimentError  # noqa: E402

NUM_ENVS = 4
SEED = 7
MAX_STEPS = 25
"""short episodes: CartPole under random actions ends after 10-40 steps, so both terminations and
truncations occur"""


class _RandomPolicy:
    def compute_actions(self, obs: Any, *, deterministic: bool) -> np.ndarray:
        raise AssertionError("collect(random=True) draws its own actions")

    def map_action(self, act: np.ndarray) -> np.ndarray:
        return act

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        return act

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return act


def _collect(num_env_steps: int) -> dict[str, np.ndarray]:
    env = EnvPoolVectorEnv("CartPole-v1", NUM_ENVS, seed=SEED, max_episode_steps=MAX_STEPS)
    assert autoreset_mode(env) is AutoresetMode.SAME_STEP
    buffer = VectorReplayBuffer(num_env_steps, NUM_ENVS)
    collector = Collector(_RandomPolicy(), env, buffer, seed=SEED)
    collector.collect(n_step=num_env_steps, random=True)
    env.close()
    return buffer.field_arrays()


def _replay_column(actions: np.ndarray, column: int) -> list[tuple[np.ndarray, np.ndarray, bool, bool]]:
    """(obs, obs_next, terminated, truncated) of EnvPool's own one-env pool under ``actions``."""
    pool = envpool.make(
        "CartPole-v1", env_type="gymnasium", num_envs=1, seed=SEED + column, max_episode_steps=MAX_STEPS
    )
    obs, _ = pool.reset()
    rows = []
    for act in actions:
        obs_next, _, terminated, truncated, _ = pool.step(np.array([act]))
        rows.append((obs[0], obs_next[0], bool(terminated[0]), bool(truncated[0])))
        obs = obs_next
        if terminated[0] or truncated[0]:
            obs, *_ = pool.step(np.array([act]))  # EnvPool resets in the step after the end
    pool.close()
    return rows


def test_stored_transitions_never_span_episodes() -> None:
    arrays = _collect(400)
    ends = arrays["terminated"] | arrays["truncated"]
    assert arrays["terminated"].any() and arrays["truncated"].any(), "both kinds of episode end occur"
    for column in range(NUM_ENVS):
        reference = _replay_column(arrays["act"][:, column], column)
        for t, (obs, obs_next, terminated, truncated) in enumerate(reference):
            np.testing.assert_array_equal(
                arrays["obs"][t, column], obs, err_msg=f"obs, env {column} step {t}"
            )
            np.testing.assert_array_equal(
                arrays["obs_next"][t, column], obs_next, err_msg=f"obs_next, env {column} step {t}"
            )
            assert (arrays["terminated"][t, column], arrays["truncated"][t, column]) == (
                terminated,
                truncated,
            )
        # inside an episode obs_next is the next row's obs; across an end it is not (a new episode starts)
        same = np.all(arrays["obs_next"][:-1, column] == arrays["obs"][1:, column], axis=-1)
        np.testing.assert_array_equal(same, ~ends[:-1, column])


def test_episode_lengths_respect_the_time_limit() -> None:
    arrays = _collect(200)
    for column in range(NUM_ENVS):
        ends = np.flatnonzero(arrays["terminated"][:, column] | arrays["truncated"][:, column])
        lengths = np.diff(np.concatenate([[-1], ends]))
        assert lengths.max() <= MAX_STEPS
        truncated_at = np.flatnonzero(arrays["truncated"][:, column])
        truncated_lengths = lengths[np.isin(ends, truncated_at)]
        assert np.all(truncated_lengths == MAX_STEPS), truncated_lengths


def test_seed_rebuilds_the_pool_and_reproduces_it() -> None:
    env = EnvPoolVectorEnv("CartPole-v1", 2, seed=0)
    first, _ = env.reset()
    other, _ = env.reset(seed=5)
    again, _ = env.reset(seed=0)
    env.close()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_unknown_task_and_reserved_kwargs_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'CartPole-v9' is not an EnvPool task"):
        EnvPoolVectorEnv("CartPole-v9", 2)
    with pytest.raises(ConfigurationError, match=r"\['batch_size'\] are set by tshtrain"):
        EnvPoolVectorEnv("CartPole-v1", 2, batch_size=1)


def test_experiment_file_env_type_envpool(tmp_path: Path) -> None:
    """``env.type: envpool`` builds EnvPoolVectorEnv for training and test collectors; a run trains."""
    experiment = load_experiment(
        None,
        [
            "algorithm.name=ppo",
            "env.type=envpool",
            "env.id=CartPole-v1",
            "env.num_training_envs=4",
            "env.num_test_envs=2",
            "trainer.max_epochs=1",
            "trainer.epoch_num_steps=256",
            "trainer.collection_step_num_env_steps=128",
            "trainer.batch_size=64",
            "trainer.update_step_num_repetitions=1",
            "trainer.test_step_num_episodes=2",
            "trainer.show_progress=false",
            "trainer.verbose=false",
            "loggers=[]",
            "checkpoint.enabled=false",
        ],
    )
    run = build_run(experiment, tmp_path / "run")
    try:
        assert all(isinstance(env, EnvPoolVectorEnv) for env in run.envs)
        info = run.trainer.run()
    finally:
        run.close()
    assert info.train_step == 256
    assert info.best_reward is not None and info.best_reward > 0


def test_experiment_file_refuses_wrappers_with_envpool() -> None:
    with pytest.raises(ExperimentError, match=r"env\.wrappers apply to Gymnasium envs only"):
        load_experiment(
            None,
            [
                "algorithm.name=ppo",
                "env.type=envpool",
                "env.id=CartPole-v1",
                "env.wrappers=[{name: gymnasium.wrappers.FlattenObservation}]",
            ],
        )


@pytest.mark.parametrize("task_id", ["Breakout-v5"])
def test_atari_pool_has_the_gymnasium_preprocessing_shape(task_id: str) -> None:
    env = EnvPoolVectorEnv(task_id, 2, seed=0, max_episode_steps=30)
    obs, _ = env.reset()
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    ended = 0
    for _ in range(40):
        obs, _, terminated, truncated, info = env.step(np.zeros(2, dtype=np.int64))
        if (terminated | truncated).any():
            ended += 1
            for i in np.flatnonzero(terminated | truncated):
                assert info["final_obs"][i].shape == (4, 84, 84)
                assert not np.array_equal(info["final_obs"][i], obs[i])
    env.close()
    assert ended >= 1


def test_info_follows_gymnasium_same_step_layout() -> None:
    """Ended sub-envs: the ending step's info under final_info (masked), the reset's at the top level."""
    env = EnvPoolVectorEnv("CartPole-v1", 3, seed=1, max_episode_steps=5)
    env.reset()
    for _ in range(5):
        _, _, terminated, truncated, info = env.step(np.zeros(3, dtype=np.int64))
    env.close()
    done = terminated | truncated
    assert done.all()  # CartPole under a constant push lasts more than 5 steps: the time limit ended all
    np.testing.assert_array_equal(info["final_info"]["elapsed_step"], [5, 5, 5])
    np.testing.assert_array_equal(info["final_info"]["_elapsed_step"], done)
    np.testing.assert_array_equal(info["elapsed_step"], [0, 0, 0])  # the new episodes' reset
