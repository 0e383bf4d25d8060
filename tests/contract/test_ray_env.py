"""RayVectorEnv on a local Ray instance (2 CPUs, 2 workers): the same transitions as Gymnasium's
SyncVectorEnv in same-step autoreset mode, a config run with ``env.vector: ray`` that trains exactly like
``env.vector: sync``, a killed worker raising or restarted, an env's own error re-raised, close()
killing the actors.

One Ray instance for the whole module, and at most one at a time on the machine (a file lock: pytest-xdist
may give this module's tests to two workers, which then take turns).
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from tests.extras import need
from tshtrain.config import build_run, resolve_experiment
from tshtrain.data import Collector
from tshtrain.env.vector import env_factories
from tshtrain.errors import EnvWorkerError, ExperimentError

pytestmark = pytest.mark.integration
ray = need("ray", "ray")

from tshtrain.env.ray_env import RayVectorEnv  # noqa: E402  (after the skip: it needs ray)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """A local Ray instance with 2 CPUs for this module (workers import tshtrain and this test module)."""
    lock = open(Path(tempfile.gettempdir()) / "tshtrain-ray-tests.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved["PYTHONPATH"]) if p)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
        yield
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


class FailingStep(gym.Wrapper[Any, Any, Any, Any]):
    """Raises ``KeyError`` in the step after ``after`` steps (an env bug, not a dead worker)."""

    def __init__(self, env: gym.Env[Any, Any], after: int):
        super().__init__(env)
        self.after = after
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps > self.after:
            raise KeyError("the env broke")
        return self.env.step(action)


def _kill(worker: Any) -> None:
    """``ray.kill`` the actor and wait until it is dead (the kill is asynchronous: a call sent right
    after it may still be served)."""
    ray.kill(worker)
    _wait_until_dead(worker)


def _wait_until_dead(worker: Any) -> None:
    for _ in range(300):  # a bound, not a timing assertion: a live actor answers each ping at once
        try:
            ray.get(worker.describe.remote(), timeout=600)  # a hang guard
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("the actor is still alive")


def _cartpole_fns(num_envs: int) -> list[Any]:
    # a short time limit: truncations as well as terminations in a few hundred steps
    return env_factories("CartPole-v1", num_envs, env_kwargs={"max_episode_steps": 25})


def _assert_same_info(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    assert got.keys() == want.keys(), where
    for key, value in want.items():
        if isinstance(value, dict):
            _assert_same_info(got[key], value, f"{where}/{key}")
        elif key == "final_obs":
            mask = want["_final_obs"]
            for i in np.flatnonzero(mask):
                np.testing.assert_array_equal(got[key][i], value[i], err_msg=f"{where}/{key}[{i}]")
            assert all(got[key][i] is None for i in np.flatnonzero(~mask)), where
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=f"{where}/{key}")
            assert np.asarray(got[key]).dtype == np.asarray(value).dtype, f"{where}/{key}"


def test_the_local_instance_listens_on_loopback_only(ray_instance: None) -> None:
    assert ray.util.get_node_ip_address() == "127.0.0.1"


def test_connect_ray_starts_a_loopback_instance_unless_told_otherwise(tmp_path: Path) -> None:
    """In a fresh process without the variable, tshtrain's own local instance is on 127.0.0.1."""
    code = (
        "from tshtrain.env.ray_env import connect_ray\n"
        "connect_ray(num_cpus=1)\n"
        "import ray\n"
        "print(ray.util.get_node_ip_address())\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env["PYTHONPATH"] = str(ROOT)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900
    )  # timeout: a hang guard
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "127.0.0.1"


RAYLET_NOTE_SCRIPT = """
import os, signal, sys, threading
import numpy as np
from tshtrain.env.ray_env import RayVectorEnv, connect_ray
from tshtrain.env.vector import env_factories
from tshtrain.errors import EnvWorkerError

noted = threading.Event()


class Watched:  # stdout, telling when Ray's driver printed the raylet's note
    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        if "(raylet)" in text:
            noted.set()
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


sys.stdout = Watched(sys.stdout)
connect_ray(num_cpus=1)
import ray

env = RayVectorEnv(env_factories("CartPole-v1", 2), num_workers=1)
env.reset(seed=0)
os.kill(ray.get(env.workers[0].__ray_call__.remote(lambda self: os.getpid())), signal.SIGKILL)
try:
    env.step(np.zeros(2, dtype=np.int64))
except EnvWorkerError as error:
    print(f"tshtrain train: error: EnvWorkerError: {error}", file=sys.stderr, flush=True)
assert noted.wait(900), "no raylet note"  # the event; 900 s: a hang guard only
sys.stdout.flush()
env.close()
"""


def test_raylets_notes_go_to_stdout_and_the_error_to_stderr(tmp_path: Path) -> None:
    """With ``on_worker_failure: raise``, Ray's driver prints the raylet's note on the dead worker to
    stdout (a thread Ray 2.x always starts; ``log_to_driver=False`` does not stop it): the one error line
    is on stderr, so ``> run.log`` hides the note (docs/ray.md)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env["PYTHONPATH"] = str(ROOT)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", RAYLET_NOTE_SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )  # timeout: a hang guard
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(raylet)" in done.stdout and "A worker died" in done.stdout  # "(raylet)" is coloured
    assert "(raylet)" not in done.stderr and "A worker died" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("tshtrain train: error: ")]
    assert len(errors) == 1 and "RayVectorEnv worker 0 (sub-envs 0-1 of 'CartPole-v1') died" in errors[0]


def test_same_transitions_as_the_sync_vector_env(ray_instance: None) -> None:
    # 5 sub-envs on 2 workers (3 + 2): the split is uneven on purpose
    fns = _cartpole_fns(5)
    env = RayVectorEnv(fns, num_workers=2)
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert [list(part) for part in env.slices] == [[0, 1, 2], [3, 4]]
        assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        assert env.observation_space == sync.observation_space and env.action_space == sync.action_space
        rng = np.random.default_rng(0)
        num_ends = {"terminated": 0, "truncated": 0}
        for seed in (3, 11):  # a second seeded reset starts the same episodes in both
            obs, info = env.reset(seed=seed)
            want_obs, want_info = sync.reset(seed=seed)
            np.testing.assert_array_equal(obs, want_obs)
            _assert_same_info(info, want_info, "reset")
            for t in range(150):
                act = rng.integers(0, 2, size=5)
                got, want = env.step(act), sync.step(act)
                for name, a, b in zip(
                    ("obs", "rew", "terminated", "truncated"), got[:4], want[:4], strict=True
                ):
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} at step {t}")
                    assert a.dtype == b.dtype, name
                _assert_same_info(got[4], want[4], f"info at step {t}")
                num_ends["terminated"] += int(want[2].sum())
                num_ends["truncated"] += int(want[3].sum())
        assert num_ends["terminated"] > 10 and num_ends["truncated"] > 5, num_ends  # both kinds were compared
    finally:
        env.close()
        sync.close()


def _experiment(vector: str) -> dict[str, Any]:
    env: dict[str, Any] = {"id": "CartPole-v1", "num_training_envs": 4, "num_test_envs": 2, "vector": vector}
    if vector == "ray":
        env["ray"] = {"num_workers": 2}
    return {
        "algorithm": {"name": "ppo"},
        "device": "cpu",
        "seed": 5,
        "env": env,
        "trainer": {
            "max_epochs": 2,
            "epoch_num_steps": 256,
            "collection_step_num_env_steps": 128,
            "test_step_num_episodes": 2,
            "show_progress": False,
        },
        "loggers": [],
    }


def _train(vector: str, output_dir: Path) -> tuple[Any, dict[str, torch.Tensor], Any]:
    run = build_run(resolve_experiment(_experiment(vector)), output_dir)
    try:
        collector = run.trainer.params.training_collector
        env_type = type(collector.env)
        snapshot = collector.env_snapshot()
        stats = run.trainer.run()
        weights = {k: v.clone() for k, v in run.algorithm.policy.state_dict().items()}
    finally:
        run.close()
    assert vector != "ray" or snapshot is None  # not snapshotted: a resumed run resets the Ray envs
    return env_type, weights, stats


def test_a_config_run_with_ray_workers_trains_like_the_sync_one(ray_instance: None, tmp_path: Path) -> None:
    ray_type, ray_weights, ray_stats = _train("ray", tmp_path / "ray")
    sync_type, sync_weights, sync_stats = _train("sync", tmp_path / "sync")
    assert ray_type is RayVectorEnv and sync_type is gym.vector.SyncVectorEnv
    assert ray_stats.train_step == sync_stats.train_step == 512
    assert ray_stats.best_reward == sync_stats.best_reward
    assert ray_weights.keys() == sync_weights.keys()
    for key, value in sync_weights.items():  # the same transitions, so the same updates, bit for bit
        assert torch.equal(ray_weights[key], value), key


def test_a_killed_worker_fails_the_run_by_default(ray_instance: None) -> None:
    env = RayVectorEnv(_cartpole_fns(4), num_workers=2)
    try:
        env.reset(seed=0)
        env.step(np.zeros(4, dtype=np.int64))
        _kill(env.workers[1])
        with pytest.raises(
            EnvWorkerError, match=r"worker 1 \(sub-envs 2-3 of 'CartPole-v1'\) died .* in a step"
        ):
            env.step(np.zeros(4, dtype=np.int64))
    finally:
        env.close()


def test_a_killed_worker_is_restarted_and_its_episodes_truncated(ray_instance: None) -> None:
    fns = _cartpole_fns(4)
    env = RayVectorEnv(fns, num_workers=2, on_worker_failure="restart")
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        obs, _ = env.reset(seed=1)
        sync.reset(seed=1)
        act = np.ones(4, dtype=np.int64)
        obs, *_ = env.step(act)
        sync.step(act)
        _kill(env.workers[0])
        got_obs, rew, terminated, truncated, info = env.step(act)
        want = sync.step(act)
        assert env.num_restarts == 1
        np.testing.assert_array_equal(truncated[:2], [True, True])
        np.testing.assert_array_equal(terminated[:2], [False, False])
        np.testing.assert_array_equal(rew[:2], [0.0, 0.0])
        np.testing.assert_array_equal(info["_final_obs"][:2], [True, True])
        for i in range(2):  # the last observation the worker gave is the episode's final one
            np.testing.assert_array_equal(info["final_obs"][i], obs[i])
        np.testing.assert_array_equal(info["final_info"]["worker_restarted"][:2], [True, True])
        assert np.all(np.abs(got_obs[:2]) <= 0.05)  # fresh CartPole episodes start within +-0.05
        # the other worker's sub-envs went on as if nothing had happened
        np.testing.assert_array_equal(got_obs[2:], want[0][2:])
        np.testing.assert_array_equal(rew[2:], want[1][2:])
        for _ in range(5):  # and the new worker steps
            env.step(act)
        obs, _ = env.reset(seed=1)  # a seeded reset is reproducible again after a restart
        np.testing.assert_array_equal(obs, sync.reset(seed=1)[0])
    finally:
        env.close()
        sync.close()


def test_an_env_error_is_raised_as_itself_with_the_sub_env(ray_instance: None) -> None:
    fns = env_factories("CartPole-v1", 4, wrappers=[lambda e: FailingStep(e, after=2)])
    env = RayVectorEnv(fns, num_workers=2)
    try:
        env.reset(seed=0)
        for _ in range(2):
            env.step(np.zeros(4, dtype=np.int64))
        with pytest.raises(KeyError, match="the env broke") as caught:
            env.step(np.zeros(4, dtype=np.int64))
        assert caught.value.sub_env_index in (0, 2)  # type: ignore[attr-defined]  # each worker's first
        assert "KeyError" in caught.value.worker_traceback  # type: ignore[attr-defined]
        assert any("sub-env" in note for note in caught.value.__notes__)
    finally:
        env.close()


def test_close_kills_the_actors(ray_instance: None) -> None:
    env = RayVectorEnv(_cartpole_fns(2), num_workers=2)
    workers = list(env.workers)
    env.close()
    assert env.closed and env.workers == []
    for worker in workers:
        _wait_until_dead(worker)


def test_a_collector_steps_a_ray_env(ray_instance: None) -> None:
    env = RayVectorEnv(_cartpole_fns(4), num_workers=2)

    class RandomPolicy:
        def compute_actions(self, obs: Any, *, deterministic: bool) -> np.ndarray:
            return np.zeros(len(obs), dtype=np.int64)

        def map_action(self, act: np.ndarray) -> np.ndarray:
            return act

        def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
            return act

        def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return act

    try:
        collector = Collector(RandomPolicy(), env, seed=0)
        stats = collector.collect(n_episode=4)
        assert stats.n_collected_episodes == 4
        assert not collector.restore_env_snapshot(collector.env_snapshot())  # reset, not restored
    finally:
        env.close()


def test_config_options_are_checked_at_load_time(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _experiment("sync")
    data["env"]["ray"] = {"num_workers": 2}
    with pytest.raises(ExperimentError, match=r"env\.ray applies to env\.vector: ray only"):
        resolve_experiment(data)
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real_find_spec(name, *a)
    )
    with pytest.raises(ExperimentError, match=r"pip install 'tshtrain\[ray\]'"):
        resolve_experiment(_experiment("ray"))


def test_too_many_reserved_cpus_are_an_error_not_a_hang(ray_instance: None) -> None:
    with pytest.raises(Exception, match=r"3 CPUs needed .* has 2 free"):
        RayVectorEnv(_cartpole_fns(3), num_workers=3, num_cpus_per_worker=1.0)
