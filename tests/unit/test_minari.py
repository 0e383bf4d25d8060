"""The Minari loader: a tiny dataset recorded locally with minari's DataCollector (nothing downloaded)
becomes a replay buffer with the same transitions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from tests.extras import need
from tshtrain.data import minari_to_buffer
from tshtrain.functional.targets import nstep_indices

pytestmark = pytest.mark.integration
minari = need("minari", "minari")


def _record(env_id: str, dataset_id: str, num_steps: int, seed: int = 0) -> Any:
    """Record ``num_steps`` random steps (the last episode left unfinished) and return the dataset."""
    env = minari.DataCollector(gym.make(env_id))
    env.reset(seed=seed)
    space = gym.make(env_id).action_space
    space.seed(seed)
    step, done = 0, False
    while step < num_steps or done:  # stop mid-episode
        _, _, terminated, truncated, _ = env.step(space.sample())
        step, done = step + 1, bool(terminated or truncated)
        if done:
            env.reset()
    dataset = env.create_dataset(
        dataset_id=dataset_id, eval_env=env_id, algorithm_name="random", description="tshtrain unit test"
    )
    env.close()
    return dataset


@pytest.fixture
def datasets_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    return tmp_path


def test_cartpole_transitions_match_the_episodes(datasets_path: Path) -> None:
    dataset = _record("CartPole-v1", "cartpole/random-v0", 60)
    buffer = minari_to_buffer("cartpole/random-v0", seed=0)  # loaded by id from the tmp path
    episodes = list(dataset.iterate_episodes())
    assert len(buffer) == sum(len(ep.rewards) for ep in episodes) == dataset.total_steps
    batch = buffer.sample_all()
    start = 0
    for ep in episodes:
        n = len(ep.rewards)
        np.testing.assert_array_equal(batch.obs[start : start + n], ep.observations[:-1])
        np.testing.assert_array_equal(batch.obs_next[start : start + n], ep.observations[1:])
        np.testing.assert_array_equal(batch.act[start : start + n], ep.actions)
        np.testing.assert_array_equal(batch.rew[start : start + n], ep.rewards)
        np.testing.assert_array_equal(batch.terminated[start : start + n], ep.terminations)
        assert batch.done[start + n - 1] and not batch.done[start : start + n - 1].any()
        start += n
    # the unfinished last episode is stored as truncated, so n-step chains stop there
    assert not episodes[-1].terminations[-1] and batch.truncated[-1]
    indices_KN, valid_KN = nstep_indices(np.array([len(buffer) - 1]), buffer.next_index, 3)
    assert valid_KN[:, 0].tolist() == [True, False, False] and indices_KN[0, 0] == len(buffer) - 1


def test_pendulum_actions_are_scaled_to_minus_one_one(datasets_path: Path) -> None:
    dataset = _record("Pendulum-v1", "pendulum/random-v0", 30)
    scaled = minari_to_buffer(dataset).sample_all()
    raw = minari_to_buffer(dataset, action_scaling=False).sample_all()
    actions = np.concatenate([ep.actions for ep in dataset.iterate_episodes()])
    np.testing.assert_allclose(raw.act, actions)
    np.testing.assert_allclose(scaled.act, actions / 2.0, rtol=1e-6)  # Pendulum: [-2, 2]
    assert scaled.act.dtype == np.float32 and np.abs(scaled.act).max() <= 1.0


def test_episode_indices_select_episodes(datasets_path: Path) -> None:
    dataset = _record("CartPole-v1", "cartpole/random-v0", 60)
    first = next(iter(dataset.iterate_episodes([0])))
    buffer = minari_to_buffer(dataset, episode_indices=[0])
    assert len(buffer) == len(first.rewards)


def test_missing_minari_names_the_package_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "minari", None)  # makes "import minari" raise ImportError
    with pytest.raises(ImportError, match=r"needs the 'minari' package.*pip install 'tshtrain\[minari\]'"):
        minari_to_buffer("cartpole/random-v0")
