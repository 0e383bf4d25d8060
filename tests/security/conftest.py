"""Shared helpers of the attack suite: tiny CLI runs (in-process and as subprocesses) and checks of the
one-line error contract."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tshtrain.cli import main

REPO = Path(__file__).resolve().parents[2]

TINY = [
    "--set", "trainer.max_epochs=1",
    "--set", "trainer.epoch_num_steps=64",
    "--set", "trainer.test_step_num_episodes=1",
    "--set", "trainer.update_step_num_repetitions=1",
    "--set", "trainer.show_progress=false",
    "--set", "trainer.verbose=false",
    "--set", "env.num_test_envs=1",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip
"""PPO on CartPole (the default experiment) for 64 env steps: a second or two"""


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tshtrain.cli ARGS`` in a subprocess using this worktree's tshtrain."""
    return subprocess.run(
        [sys.executable, "-m", "tshtrain.cli", *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def assert_one_line_error(stderr: str, command: str, *contains: str) -> str:
    """stderr is exactly one line ``tshtrain COMMAND: error: ...`` without a traceback; that line."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip("\n").split("\n")
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"tshtrain {command}: error: "), lines[0]
    for text in contains:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def assert_interrupted_message(stderr: str, command: str, *contains: str) -> list[str]:
    """stderr is the Ctrl-C message of ``tshtrain COMMAND`` and nothing else: its first line starts with
    ``tshtrain COMMAND: error: interrupted (Ctrl-C)``, continuation lines are indented, none is wider
    than 80 columns, no traceback; its lines. ``contains`` are looked for in the message with its
    line breaks and indents read as single spaces."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip("\n").split("\n")
    assert lines[0].startswith(f"tshtrain {command}: error: interrupted (Ctrl-C)"), stderr
    assert all(line.startswith("  ") for line in lines[1:]), stderr
    assert all(len(line) <= 80 for line in lines if "/pytest-" not in line), stderr  # tmp paths are long
    flat = " ".join(" ".join(lines).split())
    for text in contains:
        assert text in flat, (text, flat)
    return lines


def snapshot(root: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry under ``root`` (not following links) with its bytes (or link target) and mtime."""
    found: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = (os.readlink(path), path.lstat().st_mtime_ns)
        elif path.is_file():
            found[rel] = (path.read_bytes(), path.stat().st_mtime_ns)
        else:
            found[rel] = ("<dir>", 0)
    return found


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny finished `tshtrain train` run (checkpoints, config.yaml); tests must not change it."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", *TINY, "-o", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of a finished one-epoch DQN run (one per module), for tests to copy and tamper with."""
    from tests.contract._hook_setups import off_policy_trainer

    trainer = off_policy_trainer(max_epochs=1)
    trainer.run()
    return trainer.save_checkpoint(tmp_path_factory.mktemp("ckpt") / "ckpt")
