"""``tshtrain train --resume DIR --extend N``: a finished run goes on for N more epochs, and ends as the run
given the larger budget from the start (bit-exact on the CPU with budget-free schedules; no --trust for
one's own run)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from tshtrain.cli import main
from tshtrain.config import load_experiment

TINY_PPO = [
    "--set", "trainer.epoch_num_steps=256",
    "--set", "trainer.test_step_num_episodes=2",
    "--set", "trainer.update_step_num_repetitions=2",
    "--set", "trainer.show_progress=false",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip
CONSTANT = [
    "--set", "algorithm.params.lr_schedule=constant",
    "--set", "algorithm.params.clip_schedule=constant",
    "--set", "trainer.stop_score=null",
]  # fmt: skip
"""nothing in the run depends on its budget: the extended run can equal the longer one bit for bit"""


def _info(run_dir: Path) -> dict[str, object]:
    info: dict[str, object] = json.loads((run_dir / "info_stats.json").read_text())
    info.pop("timing")
    return info


def _logs(run_dir: Path) -> dict[str, list[dict[str, str]]]:
    """Every CSV log without its wall-clock columns (times and speeds)."""
    logs = {}
    for path in sorted((run_dir / "csv").glob("*.csv")):
        with path.open() as handle:
            rows = list(csv.DictReader(handle))
        logs[path.name] = [
            {k: v for k, v in row.items() if "time" not in k and "speed" not in k} for row in rows
        ]
    return logs


def _final_tensors(run_dir: Path) -> dict[str, torch.Tensor]:
    state = torch.load(run_dir / "checkpoints" / "final" / "state.pt", weights_only=True)
    algorithm = state["algorithm"]
    flat: dict[str, torch.Tensor] = {}
    pending = [("", algorithm)]
    while pending:
        prefix, value = pending.pop()
        if isinstance(value, torch.Tensor):
            flat[prefix] = value
        elif isinstance(value, dict):
            pending.extend((f"{prefix}/{k}", v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((f"{prefix}/{i}", v) for i, v in enumerate(value))
    return flat


def test_extend_ends_like_the_run_with_the_larger_budget(tmp_path: Path) -> None:
    whole, extended = tmp_path / "whole", tmp_path / "extended"
    assert main(["train", *TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=3", "-o", str(whole)]) == 0
    assert main(["train", *TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=2", "-o", str(extended)]) == 0
    assert _info(extended)["train_step"] == 512
    assert main(["train", "--resume", str(extended), "--extend", "1"]) == 0  # own run: no --trust
    assert _info(extended) == _info(whole)
    assert _info(whole)["train_step"] == 768 and _info(whole)["stop_reason"] == "max_epochs"
    assert _logs(extended) == _logs(whole)  # the logs go on without a gap or a duplicate
    weights, expected = _final_tensors(extended), _final_tensors(whole)
    assert weights.keys() == expected.keys() and len(weights) > 4
    for name, tensor in expected.items():
        assert torch.equal(weights[name], tensor), name
    assert load_experiment(str(extended / "config.yaml")).trainer["max_epochs"] == 3
    # the config it wrote runs the same run again
    again = tmp_path / "again"
    assert main(["train", str(extended / "config.yaml"), "-o", str(again)]) == 0
    assert _info(again) == _info(whole)


def test_extend_twice_counts_from_the_epochs_done(tmp_path: Path) -> None:
    assert main(["train", *TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=1", "-o", str(tmp_path)]) == 0
    for extend, epochs_done in ((2, 3), (1, 4)):
        assert main(["train", "--resume", str(tmp_path), "--extend", str(extend)]) == 0
        assert _info(tmp_path)["train_step"] == 256 * epochs_done
        assert load_experiment(str(tmp_path / "config.yaml")).trainer["max_epochs"] == epochs_done


def test_a_linear_schedule_is_stretched_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default experiment's 'linear' schedules decay over the budget: an extension cannot be the run
    the larger budget would have given, and the command says what happens instead."""
    overrides = [*TINY_PPO, "--set", "trainer.stop_score=null", "--set", "trainer.max_epochs=1"]
    assert main(["train", *overrides, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path), "--extend", "2"]) == 0
    out = capsys.readouterr().out
    assert (
        "note: algorithm.params clip_schedule, lr_schedule are 'linear' schedules: they now decay over all "
        "3 epochs, so training goes on at the rates a 3-epoch run has at epoch 1" in out
    )
    assert _info(tmp_path)["train_step"] == 768


def test_a_run_stopped_by_its_score_needs_the_score_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [*TINY_PPO, *CONSTANT, "--set", "trainer.stop_score=0", "--set", "trainer.max_epochs=5"]
    assert main(["train", *overrides, "-o", str(tmp_path)]) == 0
    assert _info(tmp_path)["stop_reason"] == "stop_fn" and _info(tmp_path)["train_step"] == 256
    config = (tmp_path / "config.yaml").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path), "--extend", "1"]) == 1
    err = capsys.readouterr().err
    assert "the run stopped at epoch 1 because its test score reached trainer.stop_score=0.0" in err
    assert "add --set trainer.stop_score=null (or a score above" in err
    assert (tmp_path / "config.yaml").read_text() == config  # a refused extension changes nothing
    assert (
        main(["train", "--resume", str(tmp_path), "--extend", "1", "--set", "trainer.stop_score=null"]) == 0
    )
    assert _info(tmp_path)["stop_reason"] == "max_epochs" and _info(tmp_path)["train_step"] == 512


def test_resume_of_a_finished_run_points_to_extend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", *TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=1", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path)]) == 0
    assert f"tshtrain train --resume {tmp_path} --extend N" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--extend", "2"], 2, "--extend N continues a finished run: give it with --resume DIR"),
        (["--resume", "{run}", "--extend", "0"], 2, "--extend N needs N >= 1, got 0"),
        (
            ["--resume", "{run}", "--extend", "1", "--set", "trainer.max_epochs=9"],
            1,
            "--extend sets trainer.max_epochs (the epochs done + N); drop --set trainer.max_epochs",
        ),
    ],
)
def test_extend_usage_errors(
    tmp_path: Path, argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", *TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=1", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["train", *(a.format(run=tmp_path) for a in argv)]) == code
    assert message in capsys.readouterr().err
    assert _info(tmp_path)["train_step"] == 256
