"""Atari from an experiment file: ALE ids through tshtrain.env.atari, Gymnasium's preprocessing and frame
stacking as env.wrappers, the Nature CNN on channels-first stacked frames, and the PPO / DQN examples.

Real ROMs (the ale-py wheel ships them); every test takes a few seconds at most.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.extras import need

pytestmark = pytest.mark.integration
need("ale_py", "atari")
need("cv2", "atari")

from tshtrain.algorithm.blocks.encoders import CnnEncoder, obs_encoder
from tshtrain.config import build_run, load_experiment, make_envs
from tshtrain.config.defaults import TASK_EXAMPLES
from tshtrain.env.atari import atari_wrappers, make_atari_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "configs"
ATARI_EXAMPLES = ("ppo_atari_breakout", "dqn_atari_breakout")

_TINY_RUN = [
    "trainer.max_epochs=1",
    "trainer.test_step_num_episodes=1",
    "env.num_test_envs=1",
    "env.num_training_envs=2",
    "env.kwargs.max_num_frames_per_episode=400",  # 100 agent steps: short test episodes
    "trainer.show_progress=false",
    "trainer.verbose=false",
    "loggers=[]",
    "checkpoint.enabled=false",
]


def test_example_env_section_is_atari_wrappers() -> None:
    """The examples' wrappers are the ones tshtrain.env.atari documents (one source for scripts/benches)."""
    for stem in ATARI_EXAMPLES:
        env = TASK_EXAMPLES[stem][1]["env"]
        assert env["id"] == "tshtrain.env.atari:ALE/Breakout-v5"
        assert env["kwargs"] == {"frameskip": 1}
        assert env["wrappers"] == atari_wrappers()


def test_experiment_file_builds_stacked_84x84_frames_without_allow_module() -> None:
    experiment = load_experiment(str(EXAMPLES / "ppo_atari_breakout.yaml"))
    envs = make_envs(experiment.env, 2)  # no allowed_modules: tshtrain.env.atari is built in
    try:
        assert envs.single_observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        assert envs.single_action_space == gym.spaces.Discrete(4)
        obs, _ = envs.reset(seed=3)
        for _ in range(5):
            obs, *_ = envs.step(np.array([1, 1]))  # FIRE: the ball moves, frames differ
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        assert not np.array_equal(obs[0, 0], obs[0, 3]), "the four stacked frames are distinct frames"
    finally:
        envs.close()


def test_experiment_file_equals_make_atari_env() -> None:
    """The experiment file's env and make_atari_env() (used by the benchmarks) step identically."""
    experiment = load_experiment(str(EXAMPLES / "dqn_atari_breakout.yaml"))
    envs = make_envs(experiment.env, 1)
    single = make_atari_env("ALE/Breakout-v5")
    try:
        vec_obs, _ = envs.reset(seed=11)
        obs, _ = single.reset(seed=11)
        np.testing.assert_array_equal(vec_obs[0], obs)
        rng = np.random.default_rng(0)
        for _ in range(50):
            act = int(rng.integers(4))
            vec_obs, vec_rew, *_ = envs.step(np.array([act]))
            obs, rew, terminated, truncated, _ = single.step(act)
            np.testing.assert_array_equal(vec_obs[0], obs)
            assert vec_rew[0] == rew
            if terminated or truncated:
                break
    finally:
        envs.close()
        single.close()


def test_ale_frameskip_must_be_one_for_the_preprocessing() -> None:
    """Frame skipping happens once, in AtariPreprocessing: ALE's own frameskip (4 in v5) is refused."""
    experiment = load_experiment(str(EXAMPLES / "ppo_atari_breakout.yaml"), ["env.kwargs={}"])
    with pytest.raises(ValueError, match="Disable frame-skipping in the original env"):
        make_envs(experiment.env, 1).close()


def test_auto_encoder_reads_stacked_frames_channels_first() -> None:
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    encoder = obs_encoder(space)
    assert isinstance(encoder, CnnEncoder) and not encoder.channels_last
    first = encoder.convs[0]
    assert isinstance(first, torch.nn.Conv2d)
    assert (first.in_channels, first.kernel_size, first.stride) == (4, (8, 8), (4, 4))
    assert encoder.output_dim == 512
    features = encoder(torch.zeros((3, 4, 84, 84), dtype=torch.uint8))
    assert features.shape == (3, 512)


@pytest.mark.parametrize("stem", ATARI_EXAMPLES)
def test_atari_examples_train_one_tiny_epoch(stem: str, tmp_path: Path) -> None:
    extra = (
        ["trainer.epoch_num_steps=64", "trainer.collection_step_num_env_steps=32", "trainer.batch_size=16"]
        if stem.startswith("ppo")
        else [
            "trainer.epoch_num_steps=64",
            "trainer.collection_step_num_env_steps=8",
            "buffer.size=256",
            "buffer.prefill_env_steps=32",
        ]
    )
    experiment = load_experiment(str(EXAMPLES / f"{stem}.yaml"), [*_TINY_RUN, *extra])
    run = build_run(experiment, tmp_path / "run")
    try:
        info = run.trainer.run()
        encoders = [m for m in run.algorithm.policy.modules() if isinstance(m, CnnEncoder)]
    finally:
        run.close()
    assert info.train_step == 64
    assert encoders and all(not e.channels_last and e.obs_shape == (4, 84, 84) for e in encoders)


def test_default_run_directory_is_one_level_without_the_module() -> None:
    from tshtrain.cli.train import _default_output_dir

    experiment = load_experiment(str(EXAMPLES / "ppo_atari_breakout.yaml"))
    name = _default_output_dir(experiment)
    assert name.startswith("runs/ppo-ale-breakout-v5-") and name.count("/") == 1 and ":" not in name
