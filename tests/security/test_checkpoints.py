"""Checkpoints from strangers: nothing from the file runs without ``trusted=True``, and a checkpoint that
does not fit the trainer changes nothing (weights, counters, buffers).

A hostile checkpoint can rewrite its own manifest, so every case re-hashes the files it plants: the
integrity check passes and only the trust model stands between the file and the program.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.contract._hook_setups import off_policy_trainer
from tshtrain.errors import CheckpointError
from tshtrain.trainer import Trainer


class _MakesDirectory:
    """Unpickling this creates a directory: the proof that a payload ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def _rehash(checkpoint: Path) -> None:
    """List every file of ``checkpoint`` in its manifest with its true size and hash (what an attacker
    who controls the directory can always do)."""
    manifest_path = checkpoint / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    files = {}
    for file in sorted(checkpoint.rglob("*")):
        rel = file.relative_to(checkpoint).as_posix()
        if file.is_file() and rel != "manifest.json":
            data = file.read_bytes()
            files[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest["files"] = files
    manifest_path.write_text(json.dumps(manifest))


def _snapshot(trainer: Trainer[Any, Any]) -> tuple[Any, ...]:
    weights = {k: v.clone() for k, v in trainer.algorithm.policy.state_dict().items()}
    algorithm: Any = trainer.algorithm
    params = [p.detach().clone() for p in algorithm.net.parameters()] if hasattr(algorithm, "net") else []
    buffer = trainer.params.training_collector.buffer
    return weights, params, trainer.counters, len(buffer), buffer.layout()


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    weights_equal = a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])
    params_equal = len(a[1]) == len(b[1]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1], strict=True))
    return weights_equal and params_equal and a[2:] == b[2:]


def _copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(saved, target)
    return target


def _fresh_with_data() -> Trainer[Any, Any]:
    """A trainer that has already trained a little (its state must survive a refused load)."""
    trainer = off_policy_trainer(max_epochs=1, epoch_num_steps=10)
    trainer.reset()
    trainer.execute_training_step()
    return trainer


def test_a_malicious_env_snapshot_is_not_unpickled_without_trust(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    marker = tmp_path / "pwned"
    (checkpoint / "envs").mkdir(exist_ok=True)
    (checkpoint / "envs" / "training.pkl").write_bytes(pickle.dumps(_MakesDirectory(marker)))
    _rehash(checkpoint)
    trainer = off_policy_trainer(max_epochs=1)
    trainer.load_checkpoint(checkpoint)  # loads; the envs are reset instead
    assert not marker.exists()
    assert trainer.counters.env_step == 20


def test_a_dcp_checkpoint_is_refused_without_trust(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    marker = tmp_path / "pwned"
    (checkpoint / "state.dcp").mkdir()
    (checkpoint / "state.dcp" / ".metadata").write_bytes(pickle.dumps(_MakesDirectory(marker)))
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    manifest["info"]["backend"] = "dcp"
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))
    _rehash(checkpoint)
    trainer = off_policy_trainer(max_epochs=1)
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError, match=r"a 'dcp' .* unpickles its metadata file.* trusted=True"):
        trainer.load_checkpoint(checkpoint)
    assert not marker.exists()
    assert _same(before, _snapshot(trainer))


def test_an_unknown_backend_is_refused(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    manifest["info"]["backend"] = "pickle"
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"unknown backend 'pickle'; allowed: 'torch', 'dcp'"):
        off_policy_trainer(max_epochs=1).load_checkpoint(checkpoint)


@pytest.mark.parametrize("planted", ["envs/other.pkl", "evil.py", "buffers/training/extra.npy"])
def test_files_the_manifest_does_not_list_are_refused(saved: Path, tmp_path: Path, planted: str) -> None:
    checkpoint = _copy(saved, tmp_path)
    (checkpoint / planted).parent.mkdir(parents=True, exist_ok=True)
    (checkpoint / planted).write_bytes(b"not listed")
    trainer = off_policy_trainer(max_epochs=1)
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError, match=r"not listed in the checkpoint's manifest"):
        trainer.load_checkpoint(checkpoint, trusted=True)
    assert _same(before, _snapshot(trainer))


def test_a_statistics_class_named_by_the_file_is_never_imported(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = _copy(saved, tmp_path)
    module_dir = tmp_path / "site"
    module_dir.mkdir()
    marker = tmp_path / "pwned"
    (module_dir / "evil_stats.py").write_text(f"import os\nos.mkdir({str(marker)!r})\n")
    monkeypatch.syspath_prepend(str(module_dir))
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    state["run"]["epoch"] = {
        "progress": 0,
        "collect": [],
        "training": [{"class": "evil_stats:Evil", "fields": {}}],
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    (checkpoint / "state.pt").write_bytes(buffer.getvalue())
    _rehash(checkpoint)
    trainer = _fresh_with_data()
    before = _snapshot(trainer)
    with pytest.raises(
        CheckpointError, match=r"'evil_stats:Evil' is not a TrainingStats class of this program"
    ):
        trainer.load_checkpoint(checkpoint, trusted=True)
    assert "evil_stats" not in sys.modules and not marker.exists()
    assert _same(before, _snapshot(trainer))


def test_another_number_of_envs_changes_nothing(saved: Path) -> None:
    trainer = off_policy_trainer(max_epochs=1, num_envs=3)
    trainer.reset()
    trainer.execute_training_step()
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError, match=r"training collector was saved with 2 envs, this one has 3"):
        trainer.load_checkpoint(saved, trusted=True)
    assert _same(before, _snapshot(trainer))


def test_a_buffer_of_other_sizes_changes_nothing(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    manifest_path = checkpoint / "buffers" / "training" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["column_capacity"] = 128
    manifest_path.write_text(json.dumps(manifest))
    _rehash(checkpoint)
    trainer = _fresh_with_data()
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError, match=r"saved training buffer has 2 sub-buffers of 128 rows, this"):
        trainer.load_checkpoint(checkpoint, trusted=True)
    assert _same(before, _snapshot(trainer))


def test_a_state_that_does_not_parse_changes_nothing(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    state["run"]["counters"]["env_step"] = -5
    buffer = io.BytesIO()
    torch.save(state, buffer)
    (checkpoint / "state.pt").write_bytes(buffer.getvalue())
    _rehash(checkpoint)
    trainer = _fresh_with_data()
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError, match=r"does not fit this trainer: .*env_step must be an int >= 0"):
        trainer.load_checkpoint(checkpoint, trusted=True)
    assert _same(before, _snapshot(trainer))


def test_the_policy_weights_of_another_shape_change_nothing(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    name = next(k for k, v in state["algorithm"]["net"].items() if isinstance(v, torch.Tensor))
    state["algorithm"]["net"][name] = torch.zeros(7, 7)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    (checkpoint / "state.pt").write_bytes(buffer.getvalue())
    _rehash(checkpoint)
    trainer = _fresh_with_data()
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError, match=r"algorithm\.net\..* is \(7, 7\) in the checkpoint"):
        trainer.load_checkpoint(checkpoint, trusted=True)
    assert _same(before, _snapshot(trainer))


def test_eval_warns_about_a_policy_with_nan_weights(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tshtrain.cli import main

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    checkpoint = run_dir / "checkpoints" / "final"
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    policy = state["algorithm"]["policy"]
    name = next(k for k, v in policy.items() if torch.is_floating_point(v))
    policy[name] = torch.full_like(policy[name], float("nan"))
    buffer = io.BytesIO()
    torch.save(state, buffer)
    (checkpoint / "state.pt").write_bytes(buffer.getvalue())
    _rehash(checkpoint)
    assert main(["eval", str(checkpoint), "-n", "1"]) == 0
    err = capsys.readouterr().err
    assert f"tshtrain eval: warning: {checkpoint}: the policy's {name}" in err and "NaN or inf" in err
