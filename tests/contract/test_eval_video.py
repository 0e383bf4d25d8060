"""``tshtrain eval --video DIR`` writes one video per counted episode, and nothing else."""

from __future__ import annotations

import re
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
