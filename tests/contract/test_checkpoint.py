"""Checkpoints: exact resume, automatic checkpoints, integrity errors, crash safety, backends."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.contract import _checkpoint_runs as runs
from tests.contract import _held_runs as held
from tests.contract._hook_setups import off_policy_trainer
from tshtrain.checkpoint import CheckpointManager, CheckpointParams
from tshtrain.checkpoint.files import read_manifest
from tshtrain.errors import CheckpointError, ConfigurationError
from tshtrain.logger import read_csv_log
from tshtrain.trainer import InfoStats, Trainer

Build = Callable[..., Trainer[Any, Any]]
UNTIMED = ("time", "speed")


def _weights(trainer: Trainer[Any, Any]) -> dict[str, torch.Tensor]:
    return {
        k: v.clone() for k, v in trainer.algorithm.policy.state_dict().items() if isinstance(v, torch.Tensor)
    }


def _logs(directory: Path) -> dict[str, list[tuple[int, dict[str, float]]]]:
    return {
        str(scope): [
            (step, {k: v for k, v in data.items() if not any(t in k for t in UNTIMED)}) for step, data in recs
        ]
        for scope, recs in read_csv_log(directory / "log").items()
    }


def _interrupt_at(epoch: int) -> Callable[[int, int], None]:
    def training_fn(current: int, env_step: int) -> None:
        if current == epoch:
            raise KeyboardInterrupt

    return training_fn


def _assert_same_run(
    reference: Trainer[Any, Any],
    info_a: InfoStats,
    other: Trainer[Any, Any],
    info_b: InfoStats,
    tmp_path: Path,
) -> None:
    """The two runs (logged under tmp_path/a and tmp_path/b) end with the same weights, counters and logs."""
    wa, wb = _weights(reference), _weights(other)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    fields = ("gradient_step", "train_step", "train_episode", "best_reward")
    assert [getattr(info_a, f) for f in fields] == [getattr(info_b, f) for f in fields]
    assert _logs(tmp_path / "a") == _logs(tmp_path / "b")


@pytest.mark.parametrize("build", [runs.off_policy, runs.on_policy], ids=["off_policy", "on_policy"])
def test_resumed_run_equals_uninterrupted_run_bitwise(build: Build, tmp_path: Path) -> None:
    reference = build(tmp_path / "a")
    info_a = reference.run()

    interrupted = build(tmp_path / "b", training_fn=_interrupt_at(3))
    with pytest.raises(KeyboardInterrupt):
        interrupted.run()
    final = read_manifest(tmp_path / "b" / "checkpoints" / "final")
    assert final.info["reason"].startswith("KeyboardInterrupt")
    latest = CheckpointManager(CheckpointParams(directory=tmp_path / "b" / "checkpoints")).latest()
    assert latest is not None and latest.name.startswith("periodic-000002-")

    resumed = build(tmp_path / "b")
    resumed.load_checkpoint(latest, trusted=True)
    info_b = resumed.run()

    _assert_same_run(reference, info_a, resumed, info_b, tmp_path)  # no duplicated, no missing points


def test_keep_last_rotation_best_and_final(tmp_path: Path) -> None:
    trainer = runs.off_policy(tmp_path, keep_last=2)
    trainer.run()
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["best", "final", "periodic-000003-000000001200", "periodic-000004-000000001600"]
    assert read_manifest(tmp_path / "checkpoints" / "final").info["reason"] == "max_epochs"
    assert read_manifest(tmp_path / "checkpoints" / "best").info["reason"] == "best"


def test_every_num_env_steps(tmp_path: Path) -> None:
    runs.off_policy(
        tmp_path, every_num_epochs=None, every_num_env_steps=500, keep_last=10, save_best=False
    ).run()
    steps = [int(p.name.split("-")[2]) for p in sorted((tmp_path / "checkpoints").glob("periodic-*"))]
    assert steps == [512, 1008, 1504]  # first training step at or past each multiple of 500


def test_final_checkpoint_on_exception(tmp_path: Path) -> None:
    def fail(epoch: int, env_step: int) -> None:
        if epoch == 2:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        runs.off_policy(tmp_path, training_fn=fail).run()
    assert read_manifest(tmp_path / "checkpoints" / "final").info["reason"] == "RuntimeError: boom"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("saved")
    trainer = runs.off_policy(directory, every_num_epochs=None, save_on_exit=True, save_best=False)
    trainer.run()
    return directory / "checkpoints" / "final"


def _corrupt_copy(saved: Path, tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    edit(copy)
    return copy


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda p: (p / "state.pt").write_bytes((p / "state.pt").read_bytes()[:100]),
            r"state\.pt: 100 bytes.*truncated",
        ),
        (
            lambda p: (p / "state.pt").write_bytes(b"x" * (p / "state.pt").stat().st_size),
            r"state\.pt: content hash",
        ),
        (lambda p: (p / "manifest.json").unlink(), r"manifest\.json: missing"),
        (lambda p: (p / "manifest.json").write_text("{"), r"manifest\.json: corrupt"),
        (
            lambda p: (p / "manifest.json").write_text(
                json.dumps({**json.loads((p / "manifest.json").read_text()), "version": 99})
            ),
            r"format version 99",
        ),
        (
            lambda p: (p / "buffers" / "training" / "obs.npy").unlink(),
            r"obs\.npy: listed in the manifest but missing",
        ),
    ],
    ids=["truncated", "corrupted", "no_manifest", "bad_manifest", "other_version", "missing_file"],
)
def test_bad_checkpoints_raise_and_change_nothing(
    saved: Path, tmp_path: Path, edit: Callable[[Path], None], message: str
) -> None:
    broken = _corrupt_copy(saved, tmp_path, edit)
    trainer = runs.off_policy(tmp_path / "run")
    before = _weights(trainer)
    with pytest.raises(CheckpointError, match=message):
        trainer.load_checkpoint(broken)
    after = _weights(trainer)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_checkpoint_of_another_algorithm_is_refused(saved: Path, tmp_path: Path) -> None:
    trainer = runs.on_policy(tmp_path)
    with pytest.raises(CheckpointError, match=r"saved by algorithm 'DQN', this is 'Reinforce'"):
        trainer.load_checkpoint(saved)


def test_dcp_backend_round_trip(tmp_path: Path) -> None:
    trainer = runs.off_policy(tmp_path / "a")
    trainer.run()
    path = trainer.save_checkpoint(tmp_path / "dcp", backend="dcp")
    assert (path / "state.dcp").is_dir()
    other = runs.off_policy(tmp_path / "b")
    other.load_checkpoint(path, trusted=True)
    wa, wb = _weights(trainer), _weights(other)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert other.counters == trainer.counters


def test_checkpoint_params_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"CheckpointParams.keep_last must be an int >= 1 or None, got 0"):
        CheckpointParams(directory=tmp_path, keep_last=0)
    with pytest.raises(ValueError, match="no checkpoint would ever be written"):
        CheckpointParams(directory=tmp_path, every_num_epochs=None, save_on_exit=False)


def test_sigkill_mid_run_and_mid_write_then_resume(tmp_path: Path) -> None:
    """Killed inside the write of its second periodic checkpoint (the child holds there until killed:
    tests/contract/_held_runs.py), the run resumes from the first one and ends like a run never stopped."""
    run_dir = tmp_path / "run"
    ckpt = run_dir / "checkpoints"
    marker = tmp_path / "held"
    held.wait_then_kill(held.start(marker, "during:2", "runs", str(run_dir)), marker)
    assert list(ckpt.glob(".periodic-*.tmp-*")), "the kill did not land during a checkpoint write"
    latest = CheckpointManager(CheckpointParams(directory=ckpt)).latest()
    assert latest is not None  # the half-written one is ignored; the last complete one loads
    resumed = runs.off_policy(run_dir)
    resumed.load_checkpoint(latest)  # our own run, signed with our key: its envs too, no flag
    info = resumed.run()
    reference = runs.off_policy(tmp_path / "reference")
    info_ref = reference.run()
    wa, wb = _weights(reference), _weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert info.gradient_step == info_ref.gradient_step


def test_save_checkpoint_without_a_path_writes_into_the_run_checkpoint_directory(tmp_path: Path) -> None:
    trainer = runs.off_policy(tmp_path)
    trainer.reset()
    trainer.execute_training_step()
    path = trainer.save_checkpoint()
    c = trainer.counters
    assert path == tmp_path / "checkpoints" / f"manual-{c.epoch:06d}-{c.env_step:012d}"
    assert read_manifest(path).provenance.own  # signed: loading it restores the envs too
    loaded = runs.off_policy(tmp_path / "other")
    loaded.load_checkpoint(path)
    assert loaded.counters == trainer.counters
    assert CheckpointManager(CheckpointParams(directory=tmp_path / "checkpoints")).latest() is None
    with pytest.raises(ConfigurationError, match=re.escape(
        "OffPolicyTrainer.save_checkpoint(): no path given and params.checkpoint is None, so the run has "
        "no checkpoint directory; pass a path, or build the params with checkpoint=CheckpointParams("
    )):  # fmt: skip
        off_policy_trainer(max_epochs=1).save_checkpoint()


def test_a_finished_run_continues_for_more_epochs_in_python(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/checkpoints.md, "Continuing a finished run": a 2-epoch run, loaded from final/ into a trainer
    with max_epochs=4 and reopened, ends like the 4-epoch run (weights, counters, logs)."""
    reference = runs.off_policy(tmp_path / "a")
    info_a = reference.run()
    runs.off_policy(tmp_path / "b", max_epochs=2).run()
    final = tmp_path / "b" / "checkpoints" / "final"

    not_reopened = runs.off_policy(tmp_path / "b", max_epochs=4)
    not_reopened.load_checkpoint(final)
    with caplog.at_level(logging.WARNING, logger="tshtrain"):
        assert not_reopened.run().train_step == info_a.train_step // 2  # ended: returns at once
    assert "the loaded checkpoint's run had ended (max_epochs, after 2 epochs)" in caplog.text
    assert "call trainer.reopen() after load_checkpoint" in caplog.text

    continued = runs.off_policy(tmp_path / "b", max_epochs=4)
    continued.load_checkpoint(final)
    continued.reopen()
    info_b = continued.run()
    _assert_same_run(reference, info_a, continued, info_b, tmp_path)
