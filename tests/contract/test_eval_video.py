"""``tshtrain eval --video DIR`` writes one video per counted episode, and nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import need
from tshtrain.cli import main

TINY_PPO = [
    "--set", "trainer.max_epochs=1",
    "--set", "trainer.epoch_num_steps=256",
    "--set", "trainer.test_step_num_episodes=1",
    "--set", "trainer.update_step_num_repetitions=2",
    "--set", "trainer.show_progress=false",
    "--set", "loggers=[]",
]  # fmt: skip


def _num_frames(path: Path) -> int:
    from moviepy import VideoFileClip  # type: ignore[import-untyped]

    clip = VideoFileClip(str(path))
    try:
        return int(clip.n_frames)
    finally:
        clip.close()


@pytest.mark.integration
@pytest.mark.parametrize("episodes", [1, 3])
def test_eval_video_writes_one_file_per_episode(
    tmp_path: Path, episodes: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """No one-frame stubs of the episodes the env starts after the last counted one (same-step autoreset
    starts one, the collector's final reset another): they used to be saved as 0.02 s videos."""
    need("moviepy", "video")
    need("pygame", "video")
    run_dir, videos = tmp_path / "run", tmp_path / "videos"
    assert main(["train", *TINY_PPO, "-o", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["eval", str(run_dir), "-n", str(episodes), "--video", str(videos)]) == 0
    files = sorted(videos.iterdir())
    assert [f.name for f in files] == [f"rl-video-episode-{i}.mp4" for i in range(episodes)]
    mean_length = float(re.findall(r"mean length ([0-9.]+)", capsys.readouterr().out)[0])
    frames = [_num_frames(f) for f in files]
    assert min(frames) > 1
    # each video holds its whole episode: about one frame per env step (the reset frame may be dropped
    # by the encoder's timing)
    assert abs(sum(frames) - round(mean_length * episodes)) <= episodes


def _headless_env() -> dict[str, str]:
    """This process's environment without a desktop session or SDL driver choices: what a user on a
    server or in a container has."""
    drop = {"XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER", "SDL_AUDIODRIVER"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.mark.integration
def test_eval_video_prints_no_sdl_window_system_errors(tmp_path: Path) -> None:
    """pygame's SDL probes the window systems when an env first renders; without a desktop session its
    Wayland probe prints "error: XDG_RUNTIME_DIR is invalid ..." from C, to file descriptor 2. The CLI
    runs in a subprocess so that the test sees that descriptor."""
    need("moviepy", "video")
    need("pygame", "video")
    env = _headless_env()
    probe = subprocess.run(  # the premise: here, plain pygame prints the message
        [sys.executable, "-c", "import pygame; pygame.display.init()"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    if "XDG_RUNTIME_DIR" not in probe.stderr:
        pytest.skip("this machine's SDL prints nothing without a desktop session (no Wayland probe)")
    run_dir, videos = tmp_path / "run", tmp_path / "videos"
    assert main(["train", *TINY_PPO, "-o", str(run_dir)]) == 0
    command = [sys.executable, "-m", "tshtrain.cli", "eval", str(run_dir), "-n", "1", "--video", str(videos)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "XDG_RUNTIME_DIR" not in done.stderr
    assert "ALSA" not in done.stderr
    assert [f.name for f in videos.iterdir()] == ["rl-video-episode-0.mp4"]


def test_windowless_sdl_sets_the_drivers_only_while_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    from tshtrain.cli.eval import _windowless_sdl

    monkeypatch.delenv("SDL_AUDIODRIVER", raising=False)
    monkeypatch.setenv("SDL_VIDEODRIVER", "x11")  # the user's own choice wins
    with _windowless_sdl():
        assert os.environ["SDL_VIDEODRIVER"] == "x11"
        assert os.environ["SDL_AUDIODRIVER"] == "dummy"
    assert os.environ["SDL_VIDEODRIVER"] == "x11"
    assert "SDL_AUDIODRIVER" not in os.environ
    monkeypatch.delenv("SDL_VIDEODRIVER")
    with pytest.raises(RuntimeError), _windowless_sdl():
        assert os.environ["SDL_VIDEODRIVER"] == "dummy"
        raise RuntimeError
    assert "SDL_VIDEODRIVER" not in os.environ
