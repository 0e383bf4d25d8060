"""Own runs are recognised by their signature, strangers' files still run nothing.

A checkpoint whose manifest is signed with this user's key (tshtrain/signing.py) restores its pickled
env snapshots without ``trusted=True``; every other checkpoint (signed with another key, re-signed after
a change, changed without re-signing, or checked with a key file that others can read) is loaded as a
stranger's: the planted pickle does not run, and one warning line says why and what ``--trust`` does.

Every session signs with its own key under a temporary XDG_CONFIG_HOME (tests/conftest.py); a test that
plays a stranger sets TSHTRAIN_SIGNING_KEY or XDG_CONFIG_HOME with monkeypatch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pickle
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.contract._hook_setups import off_policy_trainer
from tests.security.conftest import TINY, assert_interrupted_message, cli, cli_env
from tshtrain import signing
from tshtrain.cli import main
from tshtrain.errors import CheckpointError
from tshtrain.trainer import Trainer
from tshtrain.checkpoint import CheckpointManager
from tshtrain.checkpoint.files import SIGNATURE, read_manifest

STRANGER_KEY = "5a" * 32
"""another user's key (hex)"""
_PURPOSE = "checkpoint manifest"


class _MakesDirectory:
    """Unpickling this creates a directory: the proof that a payload ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def _plant(checkpoint: Path, marker: Path, *, rehash: bool = True) -> None:
    """Put a payload in ``envs/training.pkl`` and (``rehash``) list its true size and hash in the
    manifest, as anyone who can write the directory can; the signature is left as it was."""
    payload = pickle.dumps(_MakesDirectory(marker))
    (checkpoint / "envs").mkdir(exist_ok=True)
    (checkpoint / "envs" / "training.pkl").write_bytes(payload)
    if rehash:
        manifest_path = checkpoint / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["files"]["envs/training.pkl"] = {
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        manifest_path.write_text(json.dumps(manifest, indent=1))


def _sign_with(checkpoint: Path, key_hex: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-sign the manifest with ``key_hex``, with tshtrain's own signer (what a stranger can do)."""
    with monkeypatch.context() as patch:
        patch.setenv(signing.KEY_ENV, key_hex)
        text = signing.signature_text((checkpoint / "manifest.json").read_bytes(), _PURPOSE)
    assert text is not None
    (checkpoint / SIGNATURE).write_text(text)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our own checkpoint (signed with the session's key), with pickled env snapshots."""
    trainer = off_policy_trainer(max_epochs=1)
    trainer.run()
    path = trainer.save_checkpoint(tmp_path_factory.mktemp("ckpt") / "ckpt")
    assert (path / "envs" / "training.pkl").is_file() and (path / SIGNATURE).is_file()
    return path


def _copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(saved, target)
    return target


def _load_untrusted(checkpoint: Path, caplog: pytest.LogCaptureFixture) -> str:
    """Load without ``trusted``; the one warning line about the envs."""
    trainer = off_policy_trainer(max_epochs=1)
    with caplog.at_level(logging.WARNING, logger="tshtrain"):
        trainer.load_checkpoint(checkpoint)
    lines = [r.getMessage() for r in caplog.records if "were not restored" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert "trusted=True (tshtrain: --trust" in lines[0] and "not bit-exact" in lines[0], lines[0]
    assert trainer.counters.env_step == 20  # the rest of the state loaded
    return lines[0]


def _envs(trainer: Trainer[Any, Any]) -> Any:
    return trainer.params.training_collector.env.envs


def test_own_checkpoint_restores_its_envs_without_trust(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert read_manifest(saved).provenance.own
    trainer = off_policy_trainer(max_epochs=1)
    before = _envs(trainer)
    with caplog.at_level(logging.WARNING, logger="tshtrain"):
        trainer.load_checkpoint(saved)
    assert not caplog.records, caplog.text
    assert _envs(trainer) is not before  # unpickled from the snapshot, not reset


def test_the_key_file_is_made_private_on_the_first_write(saved: Path) -> None:
    path = signing.key_path()
    assert path.is_relative_to(os.environ["XDG_CONFIG_HOME"])  # never the real ~/.config here
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(bytes.fromhex(path.read_text())) == signing.KEY_BYTES
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0


def test_a_strangers_signed_checkpoint_runs_nothing(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    _plant(checkpoint, marker)
    _sign_with(checkpoint, STRANGER_KEY, monkeypatch)  # validly signed, by someone else
    line = _load_untrusted(checkpoint, caplog)
    assert not marker.exists()
    assert "it is not your own: signed with another key (key id " in line


def test_a_changed_file_re_signed_with_another_key_runs_nothing(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    own_key_id = json.loads((checkpoint / SIGNATURE).read_text())["key_id"]
    _plant(checkpoint, marker)
    _sign_with(checkpoint, STRANGER_KEY, monkeypatch)
    line = _load_untrusted(checkpoint, caplog)
    assert not marker.exists()
    assert "signed with another key" in line and f"is {own_key_id})" in line


def test_a_changed_file_with_its_hash_rewritten_but_not_re_signed_runs_nothing(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    _plant(checkpoint, marker)  # the manifest changes, the signature is still our own key's
    line = _load_untrusted(checkpoint, caplog)
    assert not marker.exists()
    assert "changed since it was signed" in line


def test_a_changed_file_whose_hash_was_not_rewritten_is_refused(saved: Path, tmp_path: Path) -> None:
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    _plant(checkpoint, marker, rehash=False)
    with pytest.raises(CheckpointError, match=r"training.pkl: \d+ bytes, the manifest says"):
        off_policy_trainer(max_epochs=1).load_checkpoint(checkpoint)
    assert not marker.exists()


def test_an_unsigned_checkpoint_runs_nothing(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    _plant(checkpoint, marker)
    (checkpoint / SIGNATURE).unlink()
    line = _load_untrusted(checkpoint, caplog)
    assert not marker.exists()
    assert "it is not signed" in line


@pytest.mark.parametrize("garbage", [b"", b"{", b'{"algorithm": "md5", "signature": "00"}', b"\xff" * 9000])
def test_a_garbled_signature_file_runs_nothing(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: bytes
) -> None:
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    _plant(checkpoint, marker)
    (checkpoint / SIGNATURE).write_bytes(garbage)
    line = _load_untrusted(checkpoint, caplog)
    assert not marker.exists()
    assert "its signature file is not one tshtrain writes" in line


def _key_file_copy(tmp_path: Path, mode: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Copy this session's key file into a fresh config directory with ``mode`` and use that one."""
    original = signing.key_path()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    copy = signing.key_path()
    copy.parent.mkdir(parents=True)
    shutil.copyfile(original, copy)
    copy.chmod(mode)
    return copy


def test_a_key_file_others_can_read_is_not_used(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payload is signed with the very key in the file: only the key file's mode stops it."""
    checkpoint, marker = _copy(saved, tmp_path), tmp_path / "pwned"
    _plant(checkpoint, marker)
    _sign_with(checkpoint, signing.key_path().read_text().strip(), monkeypatch)
    key_file = _key_file_copy(tmp_path, 0o644, monkeypatch)
    line = _load_untrusted(checkpoint, caplog)
    assert not marker.exists()
    assert f"(mode 0644), so it is not used; fix it with: chmod 600 {key_file}" in line

    key_file.chmod(0o600)  # the control: with a private key file the same checkpoint is trusted
    assert read_manifest(checkpoint).provenance.own
    with contextlib.suppress(Exception):  # the payload is not an env list: restoring it then fails
        off_policy_trainer(max_epochs=1).load_checkpoint(checkpoint)
    assert marker.exists()


def test_a_write_with_an_unusable_key_is_unsigned_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = _key_file_copy(tmp_path, 0o640, monkeypatch)
    trainer = off_policy_trainer(max_epochs=1)
    trainer.run()
    with caplog.at_level(logging.WARNING, logger="tshtrain"):
        path = trainer.save_checkpoint(tmp_path / "ckpt")
    assert not (path / SIGNATURE).exists()
    assert f"tshtrain writes checkpoints unsigned: the signing key {key_file}" in caplog.text
    assert "chmod 600" in caplog.text
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o640  # the user's file is left as it is


def test_the_environment_variable_overrides_the_key_file(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(signing.KEY_ENV, STRANGER_KEY)
    assert not read_manifest(saved).provenance.own  # signed with the key file's key, not this one
    checkpoint = _copy(saved, tmp_path)
    _sign_with(checkpoint, STRANGER_KEY, monkeypatch)
    assert read_manifest(checkpoint).provenance.own
    monkeypatch.setenv(signing.KEY_ENV, "not hex")
    line = _load_untrusted(checkpoint, caplog)
    assert "TSHTRAIN_SIGNING_KEY is set but is not a hex string of at least 32 digits" in line


def test_key_creation_keeps_a_key_made_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes (e.g. two ranks) writing their first checkpoint at once end up with one key."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    first = signing.write_key().key
    path = signing.key_path()
    text = path.read_text()
    signing._create_key_file(path)  # the loser of the race: must not replace the winner's key
    assert path.read_text() == text
    second = signing.write_key().key
    assert first is not None and second is not None and first.secret == second.secret
    assert [p.name for p in path.parent.iterdir()] == ["signing.key"]


def test_resume_of_a_strangers_run_directory_runs_nothing(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tshtrain train --resume` of a run directory from someone else: one line says why the envs are
    reset and what --trust would do; the payload does not run."""
    run_dir, marker = tmp_path / "run", tmp_path / "pwned"
    shutil.copytree(finished_run, run_dir)
    for checkpoint in (run_dir / "checkpoints").glob("periodic-*"):
        _plant(checkpoint, marker)
        _sign_with(checkpoint, STRANGER_KEY, monkeypatch)
    result = cli("train", "--resume", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    lines = [line for line in result.stderr.splitlines() if "were not restored" in line]
    assert len(lines) == 1, result.stderr
    assert "signed with another key" in lines[0] and "--trust" in lines[0]


def test_resume_of_an_own_run_directory_says_nothing_about_trust(finished_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    result = cli("train", "--resume", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert "trust" not in result.stderr + result.stdout
    assert "the run already finished" in result.stdout
    assert cli_env()["XDG_CONFIG_HOME"] == os.environ["XDG_CONFIG_HOME"]  # the child used our key


def test_ctrl_c_with_an_unusable_key_says_how_to_resume_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoints of a run whose key file others can read are unsigned: the Ctrl-C line says why,
    how to fix the key, and that --trust resumes this (own) run exactly."""
    key_file = _key_file_copy(tmp_path, 0o644, monkeypatch)
    real = CheckpointManager.periodic

    def interrupted_after_the_first(
        self: CheckpointManager, target: Any, *, epoch_closed: bool
    ) -> Path | None:
        path = real(self, target, epoch_closed=epoch_closed)
        if path is not None:
            raise KeyboardInterrupt
        return path

    monkeypatch.setattr(CheckpointManager, "periodic", interrupted_after_the_first)
    run_dir = tmp_path / "run"
    assert main(["train", *TINY, "-o", str(run_dir)]) == 130
    err = capsys.readouterr().err
    message = err[err.index("tshtrain train: error: interrupted (Ctrl-C)") :]  # after the key's warning
    lines = assert_interrupted_message(message, "train", "interrupted (Ctrl-C); the last checkpoint is ")
    assert f"(mode 0644), so it is not used; fix it with: chmod 600 {key_file}" in " ".join(
        " ".join(lines).split()
    )
    assert lines[-2:] == [
        "  or, as it is your own run, exactly with:",
        f"  tshtrain train --resume {run_dir} --trust",
    ]
