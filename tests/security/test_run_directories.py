"""Run directories never mix or lose data: the marker, the exclusive lock, foreign content, resume with
an override that does not fit, leftovers of killed writes, Ctrl-C."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tshtrain.atomic import remove_interrupted_writes
from tshtrain.cli import main
from tshtrain.errors import RunDirectoryError
from tshtrain.rundir import LOCK_FILE, RUN_MARKER, RunDirectory

from .conftest import TINY, assert_interrupted_message, assert_one_line_error, cli_env, snapshot

LOCKED = "is locked by another tshtrain process training there"


def _copy_run(finished_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


# ---------------------------------------------------------------------------- resume with a bad override
@pytest.mark.parametrize(
    "override",
    [
        "algorithm.network.hidden_sizes=[7]",  # the checkpoint's weights do not fit: load fails
        "env.id=Pendulum-v1",  # another env: the algorithm cannot even be built
        "algorithm.params.no_such_key=1",  # the experiment does not validate
        "trainer.max_epochs=0",  # invalid trainer params
    ],
)
def test_resume_with_an_override_that_does_not_fit_keeps_config_yaml(
    override: str, finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(finished_run, tmp_path)
    before = snapshot(run_dir)
    assert main(["train", "--resume", str(run_dir), "--set", override]) == 1
    assert_one_line_error(capsys.readouterr().err, "train")
    assert snapshot(run_dir) == before  # config.yaml byte-identical, same mtime; nothing else touched


def test_resume_with_a_fitting_override_writes_config_yaml(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(finished_run, tmp_path)
    assert main(["train", "--resume", str(run_dir), "--set", "trainer.verbose=true"]) == 0
    assert "verbose: true" in (run_dir / "config.yaml").read_text()


# ---------------------------------------------------------------------------- the lock
def _hold_lock(path: Path) -> int:
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("mode", ["new run", "resume"])
def test_a_locked_run_directory_is_refused(
    mode: str, finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(finished_run, tmp_path)
    fd = _hold_lock(run_dir)  # stands for a live run in another process (flock is per open file)
    try:
        before = snapshot(run_dir)
        argv = (
            ["train", *TINY, "-o", str(run_dir)] if mode == "new run" else ["train", "--resume", str(run_dir)]
        )
        assert main(argv) == 1
        assert_one_line_error(capsys.readouterr().err, "train", LOCKED)
        assert snapshot(run_dir) == before
    finally:
        os.close(fd)


def test_two_runs_started_together_in_one_directory(tmp_path: Path) -> None:
    """Exactly one trains; the other is refused with the lock message while the first runs."""
    run_dir = tmp_path / "same"
    argv = [
        sys.executable, "-m", "tshtrain.cli", "train", *TINY,
        "--set", "trainer.max_epochs=3", "--set", "trainer.stop_score=null", "-o", str(run_dir),
    ]  # fmt: skip
    processes = [
        subprocess.Popen(argv, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.communicate()) for p in processes]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    refused_err = next(err for code, (_, err) in results if code == 1)
    assert_one_line_error(refused_err, "train", LOCKED)
    assert json.loads((run_dir / "info_stats.json").read_text())["stop_reason"] == "max_epochs"


def _lock_holder(run_dir: Path) -> subprocess.Popen[str]:
    code = (
        "import sys, time; from tshtrain.rundir import RunDirectory; "
        f"RunDirectory.create({str(run_dir)!r}); print('locked', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], env=cli_env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    return holder


def test_a_lock_left_by_a_killed_process_is_free(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    holder = _lock_holder(run_dir)
    try:
        with pytest.raises(RunDirectoryError, match=LOCKED):
            RunDirectory.open_existing(run_dir)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (run_dir / LOCK_FILE).exists()  # the file stays, the lock is gone with the process
    claimed, cleaned = RunDirectory.open_existing(run_dir)
    claimed.release()
    assert cleaned == []


def test_the_lock_is_held_for_the_whole_run_and_released_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    seen: list[bool] = []
    from tshtrain.trainer.base import Trainer

    real_run = Trainer.run

    def run(self: Trainer, *args: object, **kwargs: object) -> object:  # type: ignore[type-arg]
        probe = os.open(run_dir / LOCK_FILE, os.O_RDONLY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append(False)
        except BlockingIOError:
            seen.append(True)
        finally:
            os.close(probe)
        return real_run(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Trainer, "run", run)
    assert main(["train", *TINY, "-o", str(run_dir)]) == 0
    assert seen == [True]
    fd = _hold_lock(run_dir)  # free again
    os.close(fd)


# ---------------------------------------------------------------------------- marker and foreign content
def _foreign(kind: str, path: Path, outside: Path) -> None:
    path.mkdir()
    if kind == "leftover periodic checkpoint":
        (path / "checkpoints" / "periodic-000001-000000000064").mkdir(parents=True)
        (path / "checkpoints" / "periodic-000001-000000000064" / "manifest.json").write_text("{}")
    elif kind == "old run without marker":
        (path / "config.yaml").write_text("seed: 0\n")
    elif kind == "a user file":
        (path / "notes.txt").write_text("mine")
    elif kind == "a hidden file":
        (path / ".env").write_text("SECRET=1")
    elif kind == "planted lock symlink":
        (path / LOCK_FILE).symlink_to(outside)
        (path / "data.csv").write_text("1,2")
    elif kind == "symlink to elsewhere":
        (path / "link").symlink_to(outside)


FOREIGN = [
    "leftover periodic checkpoint",
    "old run without marker",
    "a user file",
    "a hidden file",
    "planted lock symlink",
    "symlink to elsewhere",
]


@pytest.mark.parametrize("kind", FOREIGN)
def test_a_new_run_refuses_foreign_content(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    run_dir = tmp_path / "run"
    _foreign(kind, run_dir, outside)
    before = snapshot(tmp_path)
    assert main(["train", *TINY, "-o", str(run_dir)]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", "is not a tshtrain run directory")
    assert snapshot(tmp_path) == before  # no marker, no lock file, the symlink target untouched


def test_a_new_run_refuses_a_file_as_output_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["train", *TINY, "-o", str(target)]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", "not a directory")
    assert target.read_text() == "x"


def _marker(kind: str, path: Path, outside: Path) -> None:
    path.mkdir()
    (path / "config.yaml").write_text("seed: 0\n")
    (path / "checkpoints" / "periodic-000001-000000000064").mkdir(parents=True)
    marker = path / RUN_MARKER
    if kind == "wrong format":
        marker.write_text(json.dumps({"format": "something", "version": 1}))
    elif kind == "future version":
        marker.write_text(json.dumps({"format": "tshtrain-run", "version": 99}))
    elif kind == "garbage":
        marker.write_bytes(b"\x80\x81" * 10)
    elif kind == "huge":
        marker.write_text('{"format": "tshtrain-run", "version": 1, "x": "' + "y" * 100_000 + '"}')
    elif kind == "deeply nested":
        marker.write_text("[" * 100_000)
    elif kind == "symlink":
        outside.write_text(json.dumps({"format": "tshtrain-run", "version": 1}))
        marker.symlink_to(outside)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "without the run marker .tshtrain-run"),
        ("wrong format", "not a tshtrain run marker"),
        ("future version", "run directory format version 99"),
        ("garbage", "not a tshtrain run marker"),
        ("huge", "not a tshtrain run marker"),
        ("deeply nested", "not a tshtrain run marker"),
        ("symlink", "cannot read the run marker"),
    ],
)
def test_resume_refuses_a_directory_without_a_valid_marker(
    kind: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    _marker(kind, run_dir, tmp_path / "outside.json")
    before = snapshot(tmp_path)
    assert main(["train", "--resume", str(run_dir)]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", message)
    assert snapshot(tmp_path) == before


def test_resume_refuses_a_planted_lock_symlink(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(finished_run, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (run_dir / LOCK_FILE).unlink()
    (run_dir / LOCK_FILE).symlink_to(victim)
    before = snapshot(tmp_path)
    assert main(["train", "--resume", str(run_dir)]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", "cannot open the run lock")
    assert snapshot(tmp_path) == before


def test_the_marker_is_written_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    seen: list[list[str]] = []
    import tshtrain.config

    real_build = tshtrain.config.build_run

    def build_run(*args: object, **kwargs: object) -> object:
        seen.append(sorted(p.name for p in run_dir.iterdir()))
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tshtrain.config, "build_run", build_run)
    assert main(["train", *TINY, "-o", str(run_dir)]) == 0
    assert seen == [[LOCK_FILE, RUN_MARKER]]
    assert json.loads((run_dir / RUN_MARKER).read_text())["version"] == 1


@pytest.mark.parametrize("existed", [False, True])
def test_a_failed_build_leaves_the_directory_as_it_was(
    existed: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    if existed:
        run_dir.mkdir()
    assert (
        main(["train", *TINY, "--set", "trainer.max_epochs=0", "-o", str(run_dir)]) == 1
    )  # fails in the build
    assert_one_line_error(capsys.readouterr().err, "train")
    assert run_dir.exists() == existed
    if existed:  # trainer values are checked when the file is resolved, before the directory is touched
        assert {p.name for p in run_dir.iterdir()} <= {LOCK_FILE}


# ---------------------------------------------------------------------------- leftovers of killed writes
def test_leftovers_of_killed_writes_are_cleaned_on_resume(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(finished_run, tmp_path)
    checkpoints = run_dir / "checkpoints"
    kept = snapshot(run_dir / "csv")
    (checkpoints / ".periodic-000002-000000000128.tmp-4242").mkdir()  # checkpoint_io, killed mid-write
    (checkpoints / ".periodic-000002-000000000128.tmp-4242" / "state.pt").write_bytes(b"half")
    (run_dir / ".buffer.tmp-77").mkdir()  # buffer_io, killed mid-write
    (run_dir / "csv" / ".tshtrain-rewrite-abc123.tmp").write_text("half a csv")  # logger._files
    (run_dir / ".tshtrain-rewrite-zz.tmp").write_text("half a config.yaml")
    shutil.copytree(checkpoints / "best", checkpoints / ".best.old-99")  # replaced, new one in place
    shutil.move(checkpoints / "final", checkpoints / ".final.old-98")  # killed between the two renames
    assert main(["train", "--resume", str(run_dir)]) == 0
    assert "removed 6 leftover(s) of writes interrupted by a killed run" in capsys.readouterr().out
    names = {p.name for p in run_dir.rglob("*")}
    assert not {n for n in names if ".tmp" in n or ".old-" in n}
    assert (checkpoints / "final" / "manifest.json").is_file()  # put back, not deleted
    assert (checkpoints / "best" / "manifest.json").is_file()
    assert snapshot(run_dir / "csv") == kept  # the real logs untouched


def test_cleanup_does_not_follow_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".x.tmp-1").mkdir()
    (outside / ".tshtrain-rewrite-1.tmp").write_text("not ours")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "link").symlink_to(outside, target_is_directory=True)
    assert remove_interrupted_writes(run_dir) == []
    assert (outside / ".x.tmp-1").is_dir() and (outside / ".tshtrain-rewrite-1.tmp").is_file()


# ---------------------------------------------------------------------------- Ctrl-C
def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_ctrl_c_during_training_names_the_checkpoint_and_the_resume_command(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    argv = [
        sys.executable, "-m", "tshtrain.cli", "train", *TINY,
        "--set", "trainer.max_epochs=100000", "--set", "trainer.stop_score=null", "-o", str(run_dir),
    ]  # fmt: skip
    # Ctrl-C as in a terminal: a shell without job control (CI scripts, `cmd &`) starts its background
    # commands with SIGINT ignored, and Python keeps an ignored SIGINT ignored, so the child would never
    # see the signal; give it the default disposition, as an interactive shell does
    process = subprocess.Popen(
        argv,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    try:
        _wait_for(lambda: bool(list(run_dir.glob("checkpoints/periodic-*/manifest.json"))), process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=900)  # a hang guard
    finally:
        process.kill()
    assert process.returncode == 130
    lines = assert_interrupted_message(err, "train", "interrupted (Ctrl-C); the last checkpoint is ")
    assert lines[-2:] == ["  continue the run with:", f"  tshtrain train --resume {run_dir}"]
    checkpoint = run_dir / lines[1].strip()  # shown relative to the run directory
    assert checkpoint.parent.name == "checkpoints" and (checkpoint / "manifest.json").is_file()
    fd = _hold_lock(run_dir)  # the lock was released
    os.close(fd)


def test_content_appearing_before_the_lock_is_taken_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The race between the first emptiness check and the lock: the second check refuses, and deletes
    nothing that appeared meanwhile."""
    import tshtrain.rundir

    run_dir = tmp_path / "run"
    real_lock = tshtrain.rundir._lock

    def lock(path: Path) -> int:
        (path / "written-by-someone-else.txt").write_text("keep me")
        return real_lock(path)

    monkeypatch.setattr(tshtrain.rundir, "_lock", lock)
    assert main(["train", *TINY, "-o", str(run_dir)]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", "is not a tshtrain run directory")
    assert (run_dir / "written-by-someone-else.txt").read_text() == "keep me"
    assert not (run_dir / RUN_MARKER).exists()
