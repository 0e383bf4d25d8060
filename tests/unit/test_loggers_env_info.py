"""Scalars from the envs' info dicts (``Collector(..., info_key=...)``, skrl's environment_info), the
rolling episode window, and the InfoStats summary table."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from typing_extensions import override

from tshtrain.algorithm.base import Policy
from tshtrain.data import Collector, CollectStats, ObsTensor, VectorReplayBuffer
from tshtrain.data.collector import EnvInfoAccumulator
from tshtrain.data.stats import merge_collect_stats
from tshtrain.env import make_vector_env
from tshtrain.logger.records import EpisodeWindow
from tshtrain.trainer import InfoStats, StopReason, TimingStats
from tshtrain.trainer.recorder import format_info_table


class MetricEnv(gym.Env[np.ndarray, np.int64]):
    """Episodes of ``length`` steps; every step reports ``info["episode_metrics"]`` with ``step`` (the
    1-based step number) and, on the last step only, ``success`` (1.0)."""

    def __init__(self, length: int):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    @override
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(1, dtype=np.float32), {}

    @override
    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        done = self._t >= self.length
        metrics: dict[str, Any] = {"step": float(self._t), "label": "not a number"}
        if done:
            metrics["success"] = 1.0
        return np.array([self._t], dtype=np.float32), 1.0, done, False, {"episode_metrics": metrics}


class ZeroPolicy(Policy):
    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)
        return torch.zeros(obs.shape[0], dtype=torch.int64)


def _collector(lengths: list[int], *, info_key: str | None = "episode_metrics") -> Collector:
    pending = list(lengths)
    env = make_vector_env(lambda: MetricEnv(pending.pop(0)), len(lengths))
    policy = ZeroPolicy(action_space=env.single_action_space)
    return Collector(policy, env, VectorReplayBuffer(1000, len(lengths)), seed=0, info_key=info_key)


def test_collector_reports_the_mean_of_each_numeric_info_scalar() -> None:
    # envs with episodes of 2 and 3 steps, 6 vector steps: steps 1,2,1,2,1,2 and 1,2,3,1,2,3
    stat = _collector([2, 3]).collect(n_step=12)
    assert stat.env_info_counts == {"step": 12, "success": 5}  # success only on the 3 + 2 last steps
    assert stat.env_info == pytest.approx({"step": (9 + 12) / 12, "success": 1.0})
    scalars = stat.as_scalars()
    assert scalars["env_info/step"] == pytest.approx(21 / 12)
    assert "env_info/label" not in scalars  # not a number: ignored


def test_collector_counts_only_the_envs_that_take_part_in_episode_collection() -> None:
    # 1 episode wanted, 2 envs: only env 0 (episodes of 2 steps) takes part
    stat = _collector([2, 5]).collect(n_episode=1)
    assert stat.n_collected_steps == 2
    assert stat.env_info_counts == {"step": 2, "success": 1}
    assert stat.env_info == {"step": 1.5, "success": 1.0}


def test_collector_without_info_key_reads_no_info() -> None:
    stat = _collector([2, 3], info_key=None).collect(n_step=6)
    assert stat.env_info == {} and stat.env_info_counts == {}
    assert not any(key.startswith("env_info/") for key in stat.as_scalars())


def test_info_key_with_one_number_per_env() -> None:
    accumulator = EnvInfoAccumulator("cost")
    accumulator.add({"cost": np.array([1.0, 3.0, 5.0]), "_cost": np.array([True, True, False])}, None)
    accumulator.add({"cost": np.array([2, 2, 2])}, np.array([2]))  # only env 2 counts
    assert accumulator.means() == {"cost": 2.0} and accumulator.counts == {"cost": 3}


def test_merged_collect_stats_weight_env_info_by_counts() -> None:
    a = CollectStats(env_info={"x": 1.0}, env_info_counts={"x": 3})
    b = CollectStats(env_info={"x": 5.0, "y": 2.0}, env_info_counts={"x": 1, "y": 4})
    merged = merge_collect_stats([a, b])
    assert merged.env_info == {"x": 2.0, "y": 2.0}
    assert merged.env_info_counts == {"x": 4, "y": 4}


def test_episode_window_keeps_the_last_episodes() -> None:
    window = EpisodeWindow(size=3)
    assert window.as_scalars() == {}
    window.add(CollectStats(n_collected_episodes=2, returns=np.array([1.0, 2.0]), lens=np.array([10, 20])))
    window.add(CollectStats(n_collected_steps=5))  # no episode finished
    window.add(CollectStats(n_collected_episodes=2, returns=np.array([3.0, 7.0]), lens=np.array([30, 40])))
    scalars = window.as_scalars()
    assert scalars["returns_window/mean"] == 4.0  # 2, 3, 7
    assert (scalars["returns_window/min"], scalars["returns_window/max"]) == (2.0, 7.0)
    assert scalars["returns_window/std"] == pytest.approx(np.std([2.0, 3.0, 7.0]))
    assert scalars["lens_window/mean"] == 30.0


def test_episode_window_averages_multi_agent_returns() -> None:
    window = EpisodeWindow()
    window.add(CollectStats(n_collected_episodes=1, returns=np.array([[1.0, 3.0]]), lens=np.array([4])))
    assert window.as_scalars()["returns_window/mean"] == 2.0


def test_info_table_lists_the_final_info_stats() -> None:
    info = InfoStats(
        update_step=6, gradient_step=12, best_score=187.4, best_reward=187.4, best_reward_std=12.1,
        best_epoch=3, train_step=24, train_episode=2, test_step=50, test_episode=3,
        timing=TimingStats(total_time=1.5, train_time=1.0, train_time_collect=0.75, train_time_update=0.25),
        stop_reason=StopReason.MAX_EPOCHS,
    )  # fmt: skip
    table = format_info_table(info)
    lines = table.splitlines()
    assert lines[1] == "Training finished"
    assert "stop reason        max_epochs" in lines
    assert "best reward        187.40 ± 12.10" in lines
    assert "gradient steps     12" in lines
    assert "    collection     0.75 s" in lines
    empty = format_info_table(
        InfoStats(
            update_step=0,
            gradient_step=0,
            best_score=None,
            best_reward=None,
            best_reward_std=None,
            best_epoch=None,
            train_step=0,
            train_episode=0,
            test_step=0,
            test_episode=0,
            timing=TimingStats(),
            stop_reason=None,
        )
    )
    assert "best reward        - ± -" in empty.splitlines()
