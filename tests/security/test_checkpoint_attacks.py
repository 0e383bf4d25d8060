"""Checkpoints crafted to escape their directory, carry values no run writes, or break the manifest's
shape (issue 30, items 3, 4 and 7).

Every case rewrites the manifest with the true sizes and hashes of what it plants (what anyone who can
write the directory can do) and loads with ``trusted=True`` where it matters: these checks hold whoever
wrote the file. Each refusal is one line naming the file and what is wrong, and the trainer is left as
it was.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.contract._hook_setups import off_policy_trainer
from tests.security.conftest import assert_one_line_error
from tshtrain.errors import CheckpointError
from tshtrain.trainer import Trainer
from tshtrain.checkpoint import load_algorithm_checkpoint


def _copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run" / "ckpt"
    shutil.copytree(saved, target)
    return target


def _entry(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _edit_manifest(checkpoint: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = checkpoint / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def _edit_state(checkpoint: Path, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Change ``state.pt`` (``edit`` may return a replacement) and list its true size and hash."""
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    replaced = edit(state)
    buffer = io.BytesIO()
    torch.save(state if replaced is None else replaced, buffer)
    (checkpoint / "state.pt").write_bytes(buffer.getvalue())
    _edit_manifest(checkpoint, lambda m: m["files"].update({"state.pt": _entry(buffer.getvalue())}))


def _snapshot(trainer: Trainer[Any, Any]) -> tuple[Any, ...]:
    algorithm: Any = trainer.algorithm
    weights = {k: v.clone() for k, v in algorithm.state_dict()["net"].items()}
    groups = copy_groups(algorithm.optim.state_dict()["param_groups"])
    state = trainer.state
    return weights, groups, trainer.counters, state.best, len(trainer.params.training_collector.buffer)


def copy_groups(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(group) for group in groups]


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return all(torch.equal(a[0][k], b[0][k]) for k in a[0]) and a[1:] == b[1:]


def _refused(checkpoint: Path, *contains: str) -> str:
    """Load ``checkpoint`` with trusted=True into a trainer that has trained a little; the one-line
    message, checked to contain ``contains``; the trainer is unchanged."""
    trainer = off_policy_trainer(max_epochs=1, epoch_num_steps=10)
    trainer.reset()
    trainer.execute_training_step()
    before = _snapshot(trainer)
    with pytest.raises(CheckpointError) as caught:
        trainer.load_checkpoint(checkpoint, trusted=True)
    message = str(caught.value)
    assert "\n" not in message, message
    for text in contains:
        assert text in message, (text, message)
    assert _same(before, _snapshot(trainer))
    return message


# ---------------------------------------------------------------------------- item 3: paths and links
@pytest.mark.parametrize(
    "listed", ["../outside.bin", "../../run/outside.bin", "buffers/../../outside.bin", "ABSOLUTE"]
)
def test_a_manifest_entry_outside_the_directory_is_refused(saved: Path, tmp_path: Path, listed: str) -> None:
    checkpoint = _copy(saved, tmp_path)
    outside = tmp_path / "run" / "outside.bin"
    outside.write_bytes(b"a file beside the checkpoint")
    name = str(outside) if listed == "ABSOLUTE" else listed
    _edit_manifest(checkpoint, lambda m: m["files"].update({name: _entry(outside.read_bytes())}))
    _refused(checkpoint, str(checkpoint / "manifest.json"), repr(name), "plain relative path")
    with pytest.raises(CheckpointError, match="plain relative path"):
        load_algorithm_checkpoint(off_policy_trainer(max_epochs=1).algorithm, checkpoint, trusted=True)


@pytest.mark.parametrize("listed", ["./state.pt", "buffers//x", "", "a\\..\\b", "x\x00y"])
def test_a_manifest_entry_that_is_not_a_plain_name_is_refused(
    saved: Path, tmp_path: Path, listed: str
) -> None:
    checkpoint = _copy(saved, tmp_path)
    _edit_manifest(checkpoint, lambda m: m["files"].update({listed: _entry(b"")}))
    _refused(checkpoint, str(checkpoint / "manifest.json"), "plain relative path")


def test_a_state_file_that_is_a_link_out_of_the_directory_is_refused(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (checkpoint / "state.pt").rename(elsewhere / "state.pt")
    (checkpoint / "state.pt").symlink_to(elsewhere / "state.pt")  # same bytes: size and hash match
    _refused(checkpoint, f"{checkpoint / 'state.pt'}: a symbolic link", str(elsewhere / "state.pt"))
    with pytest.raises(CheckpointError, match="a symbolic link"):
        load_algorithm_checkpoint(off_policy_trainer(max_epochs=1).algorithm, checkpoint, trusted=True)


def test_a_directory_that_is_a_link_out_of_the_checkpoint_is_refused(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(checkpoint / "buffers", elsewhere)
    (checkpoint / "buffers").symlink_to(elsewhere, target_is_directory=True)
    _refused(checkpoint, f"{checkpoint / 'buffers'}: a symbolic link")


def test_the_manifest_itself_may_not_be_a_link(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    elsewhere = tmp_path / "manifest.json"
    (checkpoint / "manifest.json").rename(elsewhere)
    (checkpoint / "manifest.json").symlink_to(elsewhere)
    _refused(checkpoint, f"{checkpoint / 'manifest.json'}: a symbolic link")


def test_eval_with_trust_still_refuses_a_path_out_of_the_checkpoint(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tshtrain.cli import main

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    checkpoint = run_dir / "checkpoints" / "final"
    (run_dir / "outside.bin").write_bytes(b"x")
    _edit_manifest(checkpoint, lambda m: m["files"].update({"../../outside.bin": _entry(b"x")}))
    assert main(["eval", str(checkpoint), "-n", "1", "--trust"]) == 1
    err = capsys.readouterr().err
    assert_one_line_error(err, "eval", str(checkpoint / "manifest.json"), "'../../outside.bin'")


# ---------------------------------------------------------------------------- item 4: values in the state
def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(state: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = state
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value

    return edit


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("run.best.score", math.inf, "a finite number or None"),
        ("run.best.score", math.nan, "a finite number or None"),
        ("run.best.reward", -math.inf, "a finite number or None"),
        ("run.best.reward_std", "1.0", "a finite number or None"),
        ("run.best.epoch", -1, "an int >= 0 or None"),
        ("run.timing.collect", math.nan, "a finite number >= 0"),
        ("run.elapsed", -5.0, "a finite number >= 0"),
        ("run.epoch", {"progress": -3, "collect": [], "training": []}, "run.epoch.progress"),
        ("run.last_logged.training", -2, "an int >= 0 or None"),
        ("env_step_mark", -1, "an int >= 0"),
        ("algorithm.optim.param_groups.0.lr", math.nan, "a finite number"),
        ("algorithm.optim.param_groups.0.lr", "0.01", "a finite number"),
        ("algorithm.optim.param_groups.0.momentum", math.inf, "a finite number"),
        ("algorithm.optim.param_groups.0.nesterov", 1.5, "True or False"),
        ("algorithm.optim.param_groups.0.lr_fn", 1.0, "not a hyperparameter of this optimizer"),
    ],
)
def test_a_value_no_run_writes_is_refused(
    saved: Path, tmp_path: Path, key: str, value: Any, allowed: str
) -> None:
    checkpoint = _copy(saved, tmp_path)
    _edit_state(checkpoint, _set(key, value))
    message = _refused(checkpoint, f"{checkpoint / 'state.pt'}: ", allowed)
    assert key.replace("param_groups.0", "param_groups[0]") in message or key in message, message


def test_an_optimizer_lr_of_nan_is_refused_by_the_algorithm_only_load(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    _edit_state(checkpoint, _set("algorithm.optim.param_groups.0.lr", math.nan))
    algorithm: Any = off_policy_trainer(max_epochs=1).algorithm
    before = copy_groups(algorithm.optim.state_dict()["param_groups"])
    with pytest.raises(CheckpointError, match=r"state\.pt: .*algorithm\.optim\.param_groups\[0\]\.lr is nan"):
        load_algorithm_checkpoint(algorithm, checkpoint, trusted=True)
    assert copy_groups(algorithm.optim.state_dict()["param_groups"]) == before


def test_a_finite_best_score_and_other_lr_still_load(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    _edit_state(checkpoint, _set("algorithm.optim.param_groups.0.lr", 0.5))
    trainer = off_policy_trainer(max_epochs=1)
    trainer.load_checkpoint(checkpoint, trusted=True)
    algorithm: Any = trainer.algorithm
    assert algorithm.optim.param_groups[0]["lr"] == 0.5
    assert trainer.state.best.score == 10.0


# ---------------------------------------------------------------------------- item 7: malformed manifests
@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda m: m.update(files=list(m["files"])), "'files' must be a mapping"),
        (lambda m: m["files"].update({"state.pt": 7}), "the entry of 'state.pt' must be a mapping"),
        (lambda m: m["files"]["state.pt"].update(size="big"), "'state.pt' has the size 'big'"),
        (lambda m: m["files"]["state.pt"].update(size=-1), "'state.pt' has the size -1"),
        (lambda m: m["files"]["state.pt"].update(sha256=None), "'state.pt' has the sha256 None"),
        (lambda m: m.update(created="yesterday"), "'created' must be a finite number"),
        (lambda m: m.update(created=None), "'created' must be a finite number"),
        (lambda m: m.update(info=["reason"]), "'info' must be a mapping"),
        (lambda m: m["info"].update(backend=["torch"]), "unknown backend"),
        (lambda m: m["files"].pop("state.pt"), "lists no 'state.pt'"),
    ],
)
def test_a_malformed_manifest_is_one_line_naming_it(
    saved: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None], problem: str
) -> None:
    checkpoint = _copy(saved, tmp_path)
    _edit_manifest(checkpoint, edit)
    _refused(checkpoint, f"{checkpoint / 'manifest.json'}: ", problem)


def test_a_deeply_nested_manifest_is_one_line_naming_it(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    depth = 200_000
    (checkpoint / "manifest.json").write_text(
        '{"format": "tshtrain-checkpoint", "version": 2, "info": ' + "[" * depth + "]" * depth + "}"
    )
    _refused(checkpoint, f"{checkpoint / 'manifest.json'}: ", "nested too deeply")


def test_a_huge_manifest_is_refused_unread(saved: Path, tmp_path: Path) -> None:
    checkpoint = _copy(saved, tmp_path)
    with open(checkpoint / "manifest.json", "r+b") as handle:
        handle.seek(0, io.SEEK_END)
        handle.truncate(handle.tell() + (64 << 20))  # sparse: 64 MiB of NULs after the JSON
    _refused(checkpoint, f"{checkpoint / 'manifest.json'}: ", "MiB")


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ([1, 2, 3], "holds a list, not a mapping"),
        ({"algorithm": {}, 1: 2}, "keys must be strings"),
        (torch.zeros(3), "holds a Tensor, not a mapping"),
    ],
)
def test_a_state_file_of_another_shape_is_one_line_naming_it(
    saved: Path, tmp_path: Path, state: Any, problem: str
) -> None:
    checkpoint = _copy(saved, tmp_path)
    _edit_state(checkpoint, lambda _: state)
    _refused(checkpoint, f"{checkpoint / 'state.pt'}: ", problem)
    with pytest.raises(CheckpointError, match=problem):
        load_algorithm_checkpoint(off_policy_trainer(max_epochs=1).algorithm, checkpoint, trusted=True)


def test_a_state_without_an_algorithm_is_one_line_for_the_algorithm_only_load(
    saved: Path, tmp_path: Path
) -> None:
    checkpoint = _copy(saved, tmp_path)

    def drop(state: dict[str, Any]) -> None:
        del state["algorithm"]

    _edit_state(checkpoint, drop)
    with pytest.raises(CheckpointError, match=r"state\.pt: holds no 'algorithm'"):
        load_algorithm_checkpoint(off_policy_trainer(max_epochs=1).algorithm, checkpoint, trusted=True)
