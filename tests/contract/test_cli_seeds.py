"""``tshtrain train --seeds``: one run directory per seed, seeded as ``--set seed=N`` runs are,
trained side by side (PPO: stacked updates), results per seed, and ``--resume`` of a killed batch that
ends where the uninterrupted batch ends; ``--seeds`` forms and mistakes (issue 35)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from tests.contract.test_cli_extend import CONSTANT, TINY_PPO, _final_tensors, _info
from tshtrain.cli import main
from tshtrain.cli.seeds import MAX_SEEDS, parse_seeds
from tshtrain.config import load_experiment


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("0-3", [0, 1, 2, 3]),
        ("5", [5]),
        ("0,3,7", [0, 3, 7]),
        ("0-2, 10", [0, 1, 2, 10]),
        (" 4 - 5 ", [4, 5]),
    ],
)
def test_seed_forms(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is not a seed or a range"),
        ("a-b", "is not a seed or a range"),
        ("-1", "is not a seed or a range"),
        ("5-3", "descending"),
        ("1,1", "twice"),
        (f"0-{MAX_SEEDS}", f"more than {MAX_SEEDS}"),
        ("9223372036854775808", "not below 2\\*\\*63"),
        ("0-99999999999999", f"more than {MAX_SEEDS}"),
    ],
)
def test_seed_mistakes_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)


def test_seeds_write_a_run_directory_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "train",
        *TINY_PPO,
        *CONSTANT,
        "--set",
        "trainer.max_epochs=2",
        "--seeds",
        "3,5",
        "-o",
        str(tmp_path),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "stacked updates" in out
    for seed in (3, 5):
        run = tmp_path / f"seed-{seed}"
        assert load_experiment(str(run / "config.yaml")).seed == seed
        assert _info(run)["train_step"] == 2 * 256
        assert (run / "checkpoints" / "final" / "state.pt").is_file()
    solo = tmp_path / "solo-5"
    assert (
        main(
            [
                "train",
                *TINY_PPO,
                *CONSTANT,
                "--set",
                "trainer.max_epochs=2",
                "--set",
                "seed=5",
                "-o",
                str(solo),
            ]
        )
        == 0
    )
    batched, alone = _final_tensors(tmp_path / "seed-5"), _final_tensors(solo)
    assert batched.keys() == alone.keys()
    for key, tensor in alone.items():  # the same run to float rounding
        if tensor.is_floating_point():
            torch.testing.assert_close(batched[key], tensor, rtol=1e-3, atol=1e-4)


def test_a_killed_batch_resumes_to_the_same_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [*TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=3", "--set", "checkpoint.every_num_epochs=1"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["train", *args, "--seeds", "0-1", "-o", str(whole)]) == 0
    assert main(["train", *args, "--seeds", "0-1", "-o", str(killed)]) == 0
    # as if killed after seed 0 wrote its epoch-3 checkpoint and before seed 1 did: resume from epoch 2
    for seed in (0, 1):
        (killed / f"seed-{seed}" / "info_stats.json").unlink()
        shutil.rmtree(killed / f"seed-{seed}" / "checkpoints" / "final")
    for path in (killed / "seed-1" / "checkpoints").glob("periodic-000003-*"):
        shutil.rmtree(path)
    capsys.readouterr()
    assert main(["train", "--resume", str(killed)]) == 0
    assert "(resumed from periodic-000002-" in capsys.readouterr().out
    for seed in (0, 1):
        assert _info(killed / f"seed-{seed}") == _info(whole / f"seed-{seed}")
        a, b = _final_tensors(whole / f"seed-{seed}"), _final_tensors(killed / f"seed-{seed}")
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert main(["train", "--resume", str(killed)]) == 0  # finished: nothing to do
    assert "every seed finished" in capsys.readouterr().out


def test_seeds_without_a_common_checkpoint_continue_each_from_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*TINY_PPO, *CONSTANT, "--set", "trainer.max_epochs=3", "--set", "checkpoint.every_num_epochs=1"]
    assert main(["train", *args, "--seeds", "0-2", "-o", str(tmp_path)]) == 0
    # seed 0 finished; seeds 1 and 2 were killed at different points, with no checkpoint in common
    for seed in (1, 2):
        (tmp_path / f"seed-{seed}" / "info_stats.json").unlink()
        shutil.rmtree(tmp_path / f"seed-{seed}" / "checkpoints" / "final")
    for path in (tmp_path / "seed-1" / "checkpoints").glob("periodic-00000[23]-*"):
        shutil.rmtree(path)
    for path in (tmp_path / "seed-2" / "checkpoints").glob("periodic-00000[13]-*"):
        shutil.rmtree(path)
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seed-0: finished" in out and "no periodic checkpoint in common" in out
    for seed in range(3):
        assert _info(tmp_path / f"seed-{seed}")["train_step"] == 3 * 256


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", "3-1"], "descending"),
        (["--seeds", "0-1", "--resume", "{tmp}"], "--seeds starts a new batch"),
        (["--seeds", "0-1", "--nproc", "2"], "--nproc and a batch of seeds"),
    ],
)
def test_seeds_usage_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", *(a.format(tmp=tmp_path) for a in argv)]) == 2
    assert message in capsys.readouterr().err
