"""tshtrain.atomic: the atomic file and directory writers, and the cleanup of what killed writes leave."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tshtrain.atomic import atomic_directory, atomic_write_bytes, remove_interrupted_writes


def test_directory_appears_whole_and_replaces_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "ckpt"
    previous = None
    for text in ("one", "two"):
        with atomic_directory(target) as tmp:
            assert tmp.parent == target.parent and tmp.name.startswith(".ckpt.tmp-")
            (tmp / "sub").mkdir()
            (tmp / "sub" / "file").write_text(text)
            seen = (target / "sub" / "file").read_text() if target.exists() else None
            assert seen == previous  # the target is untouched while the new one is written
        assert (target / "sub" / "file").read_text() == text
        previous = text
    assert sorted(p.name for p in target.parent.iterdir()) == ["ckpt"]


def test_failed_directory_write_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "ckpt"
    with atomic_directory(target) as tmp:
        (tmp / "file").write_text("old")
    with pytest.raises(RuntimeError, match="half way"), atomic_directory(target) as tmp:
        (tmp / "file").write_text("new")
        raise RuntimeError("half way")
    assert (target / "file").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_cleanup_knows_the_names_the_writers_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a killed writer leaves (captured mid-write) is exactly what the cleanup removes."""
    (tmp_path / "kept").mkdir()
    seen: list[str] = []
    real_replace = os.replace

    def killed_before_rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append(Path(src).name)
        raise KeyboardInterrupt  # stands for the kill: the temporary file would stay

    with atomic_directory(tmp_path / "dir") as tmp:
        (tmp / "f").write_text("x")
        seen.append(tmp.name)
        leftover_dir = tmp.with_name(tmp.name.replace(".dir.", ".other."))
        leftover_dir.mkdir()  # as if another write had been killed
    monkeypatch.setattr(os, "replace", killed_before_rename)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(tmp_path / "file", b"x")
    monkeypatch.setattr(os, "replace", real_replace)
    (tmp_path / seen[1]).write_text("half")  # the kill left the temporary file
    (tmp_path / "dir").rename(tmp_path / ".dir.old-12")  # killed between the two renames
    removed = {p.name for p in remove_interrupted_writes(tmp_path)}
    assert removed == {leftover_dir.name, seen[1], ".dir.old-12"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "kept"]  # the old one is put back
