"""Files tshtrain writes get the permissions ``open(path, "w")`` gives: 0o666 less the umask for a new
file, the old permissions for a file it replaces (the atomic writer once made them 0o600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tshtrain.atomic import atomic_write_bytes
from tshtrain.cli import main
from tshtrain.config import write_atomic


@pytest.fixture
def umask() -> Iterator[None]:
    """Restore the process's umask after a test that changes it."""
    old = os.umask(0o022)
    os.umask(old)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002, 0o027], ids=oct)
def test_a_new_file_gets_0666_less_the_umask_like_open(tmp_path: Path, mask: int, umask: None) -> None:
    os.umask(mask)
    (tmp_path / "plain").write_text("x")  # what open() does
    atomic_write_bytes(tmp_path / "atomic", b"x")
    write_atomic(tmp_path / "sub" / "text.yaml", "x: 1\n")
    assert _mode(tmp_path / "plain") == 0o666 & ~mask
    assert _mode(tmp_path / "atomic") == 0o666 & ~mask
    assert _mode(tmp_path / "sub" / "text.yaml") == 0o666 & ~mask


def test_a_replaced_file_keeps_its_permissions(tmp_path: Path, umask: None) -> None:
    os.umask(0o022)
    target = tmp_path / "config.yaml"
    target.write_text("old")
    target.chmod(0o640)
    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o640


def test_a_symlink_is_replaced_not_followed(tmp_path: Path, umask: None) -> None:
    os.umask(0o022)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    elsewhere.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    atomic_write_bytes(link, b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert _mode(link) == 0o644  # a new file: the link's target lends it nothing
    assert elsewhere.read_text() == "keep"


def test_every_file_of_a_command_line_run_has_the_same_mode(tmp_path: Path, umask: None) -> None:
    """config.yaml and info_stats.json as well as the logs and checkpoints: -rw-r--r-- under umask 022."""
    os.umask(0o022)
    run_dir = tmp_path / "run"
    tiny = [
        "--set", "trainer.max_epochs=1",
        "--set", "trainer.epoch_num_steps=256",
        "--set", "trainer.test_step_num_episodes=1",
        "--set", "trainer.show_progress=false",
        "--set", "loggers=[{kind: csv}, {kind: tensorboard}]",
    ]  # fmt: skip
    assert main(["train", *tiny, "-o", str(run_dir)]) == 0
    modes = {str(p.relative_to(run_dir)): _mode(p) for p in run_dir.rglob("*") if p.is_file()}
    assert {"config.yaml", "info_stats.json", "csv/test.csv"} <= set(modes)
    assert {name for name, mode in modes.items() if mode != 0o644} == set()
