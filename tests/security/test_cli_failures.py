"""Every failure of `tshtrain train` / `tshtrain eval` ends in one line ``tshtrain CMD: error: ...``,
exit code 1 (130 for Ctrl-C, 2 for usage), no traceback unless ``--debug``.

The exceptions are raised where a real run raises them (``Trainer.run``, the checkpoint loader of
eval); real triggers (deep nesting, huge values, shape errors) are used where they are cheap.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from tshtrain.cli import main
from tshtrain.cli.failure import MAX_MESSAGE_CHARS
from tshtrain.errors import (
    BufferFormatError,
    CheckpointError,
    EnvStepError,
    LoggerError,
    NonFiniteLossError,
    PolicyOutputError,
)

from .conftest import TINY, assert_interrupted_message, assert_one_line_error, cli


def _recurse(depth: int = 0) -> int:
    return _recurse(depth + 1) + 1


def _numpy_shape_error() -> BaseException:
    try:
        np.zeros((3, 4)) + np.zeros((5, 4))
    except ValueError as error:
        return error
    raise AssertionError("numpy broadcast did not fail")


def _torch_shape_error() -> BaseException:
    try:
        torch.zeros(2, 3) @ torch.zeros(2, 3)
    except RuntimeError as error:
        return error
    raise AssertionError("torch matmul did not fail")


def _recursion_error() -> BaseException:
    try:
        _recurse()
    except RecursionError as error:
        return error
    raise AssertionError("no RecursionError")


class _BrokenStrError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ fails")


FAILURES: dict[str, tuple[Callable[[], BaseException], str]] = {
    "CheckpointError": (
        lambda: CheckpointError("ck/manifest.json: corrupt manifest (x)."),
        "CheckpointError: ck/",
    ),
    "BufferFormatError": (
        lambda: BufferFormatError("buf/act.npy: truncated"),
        "BufferFormatError: buf/act.npy",
    ),
    "PolicyOutputError": (
        lambda: PolicyOutputError("The policy returned actions [7]"),
        "PolicyOutputError: The",
    ),
    "NonFiniteLossError": (
        lambda: NonFiniteLossError("ppo: the loss is nan"),
        "NonFiniteLossError: ppo: the loss",
    ),
    "LoggerError": (lambda: LoggerError("CsvLogger failed to write"), "LoggerError: CsvLogger failed"),
    "OSError-disk-full": (
        lambda: OSError(errno.ENOSPC, "No space left on device", "run/config.yaml"),
        "OSError: [Errno 28] No space left on device: 'run/config.yaml'",
    ),
    "EnvStepError": (
        lambda: EnvStepError("sub-env 3 returned NaN in rew", env_index=3, env_step=8, field="rew"),
        "EnvStepError: sub-env 3 returned NaN in rew",
    ),
    "numpy-shape": (_numpy_shape_error, "ValueError: operands could not be broadcast"),
    "torch-shape": (_torch_shape_error, "RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
    "RecursionError": (_recursion_error, "RecursionError: the input is nested too deeply"),
    "MemoryError": (MemoryError, "MemoryError: out of memory"),
    "multi-line-message": (
        lambda: ValueError("first line\n  second line\n\nthird"),
        "first line second line third",
    ),
    "broken-__str__": (_BrokenStrError, "_BrokenStrError"),
}


def _raise(factory: Callable[[], BaseException]) -> Callable[..., object]:
    def raiser(*args: object, **kwargs: object) -> object:
        raise factory()

    return raiser


@pytest.mark.parametrize("name", list(FAILURES))
def test_train_failure_is_one_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    factory, expected = FAILURES[name]
    monkeypatch.setattr("tshtrain.trainer.base.Trainer.run", _raise(factory))
    assert main(["train", *TINY, "-o", str(tmp_path / "run")]) == 1
    assert_one_line_error(capsys.readouterr().err, "train", expected)


@pytest.mark.parametrize("name", list(FAILURES))
def test_eval_failure_is_one_line(
    name: str, finished_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    factory, expected = FAILURES[name]
    monkeypatch.setattr("tshtrain.checkpoint.load_algorithm_checkpoint", _raise(factory))
    assert main(["eval", str(finished_run), "-n", "1"]) == 1
    assert_one_line_error(capsys.readouterr().err, "eval", expected)


def test_a_real_corrupt_checkpoint_in_eval_is_one_line(finished_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    (copy / "checkpoints" / "best" / "manifest.json").write_text('{"format": "tshtrain-chec')
    result = cli("eval", str(copy), "-n", "1")
    assert result.returncode == 1
    assert_one_line_error(result.stderr, "eval", "CheckpointError: ", "best/manifest.json: corrupt manifest")


@pytest.mark.parametrize("command", ["train", "eval"])
def test_ctrl_c_outside_the_training_loop_exits_130(
    command: str, finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setattr("tshtrain.config.load_experiment", _raise(KeyboardInterrupt))
    argv = (
        ["train", *TINY, "-o", str(tmp_path / "run")] if command == "train" else ["eval", str(finished_run)]
    )
    assert main(argv) == 130
    assert_one_line_error(capsys.readouterr().err, command, "interrupted (Ctrl-C)")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("where", ["global", "per-command"])
def test_debug_prints_the_traceback_then_the_line(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("tshtrain.trainer.base.Trainer.run", _raise(lambda: LoggerError("disk gone")))
    args = ["train", *TINY, "-o", str(tmp_path / "run")]
    argv = ["--debug", *args] if where == "global" else [*args, "--debug"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "in raiser\n    raise factory()" in err
    assert err.strip().split("\n")[-1] == "tshtrain train: error: LoggerError: disk gone"


def test_debug_is_off_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    from tshtrain.cli import build_parser

    assert build_parser().parse_args(["list"]).debug is False
    assert build_parser().parse_args(["--debug", "list"]).debug is True
    assert build_parser().parse_args(["list", "--debug"]).debug is True


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["train", "--no-such-flag"])
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_resume_with_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "x.yaml", "--resume", str(tmp_path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", "--resume DIR takes the experiment")


def test_deeply_nested_value_is_one_line(tmp_path: Path) -> None:
    result = cli("train", "--set", "trainer.max_epochs=" + "[" * 100_000, "-o", str(tmp_path / "run"))
    assert result.returncode == 1
    assert_one_line_error(result.stderr, "train", "nested too deeply")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("part", ["key", "value"])
def test_huge_override_gives_a_short_line(
    part: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "k" * 1_000_000
    override = f"{huge}=1" if part == "key" else f"trainer.max_epochs={huge}"
    assert main(["train", "--set", override, "-o", str(tmp_path / "run")]) == 1
    line = assert_one_line_error(capsys.readouterr().err, "train")
    assert len(line) < MAX_MESSAGE_CHARS + 200
    if part == "key":
        assert "(1000002 chars)" in line and len(line) < 300
    assert not (tmp_path / "run").exists()


def test_a_huge_exception_message_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("tshtrain.trainer.base.Trainer.run", _raise(lambda: ValueError("v" * 10_000_000)))
    assert main(["train", *TINY, "-o", str(tmp_path / "run")]) == 1
    line = assert_one_line_error(capsys.readouterr().err, "train", "(10000000 characters in all; --debug")
    assert len(line) < MAX_MESSAGE_CHARS + 200


def test_an_env_step_error_names_the_sub_env_in_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    real_reset, real_step = CartPoleEnv.reset, CartPoleEnv.step

    def reset(self: CartPoleEnv, *, seed: int | None = None, options: object = None) -> object:
        if seed is not None:
            self.first_seed = seed  # type: ignore[attr-defined]  # sub-env i of the training envs: seed 0 + i
        return real_reset(self, seed=seed, options=options)  # type: ignore[arg-type]

    def step(self: CartPoleEnv, action: object) -> object:
        if getattr(self, "first_seed", None) == 5:
            raise ValueError("physics exploded")
        return real_step(self, action)  # type: ignore[arg-type]

    monkeypatch.setattr(CartPoleEnv, "reset", reset)
    monkeypatch.setattr(CartPoleEnv, "step", step)
    assert main(["train", *TINY, "-o", str(tmp_path / "run")]) == 1
    assert_one_line_error(
        capsys.readouterr().err, "train", "ValueError: physics exploded (raised by the step of sub-env 5 "
    )


def test_ctrl_c_before_the_first_checkpoint_says_there_is_nothing_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("tshtrain.trainer.base.Trainer.run", _raise(KeyboardInterrupt))
    run_dir = tmp_path / "run"
    assert main(["train", *TINY, "-o", str(run_dir)]) == 130
    assert_interrupted_message(
        capsys.readouterr().err,
        "train",
        f"interrupted (Ctrl-C) before the first periodic checkpoint; nothing to resume in {run_dir}",
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a" * 1_000_000, "'" + "a" * 60 + "... (1000000 chars)"),
        (b"x" * 5000, "b'" + "x" * 62 + "... (5000 bytes)"),
        (list(range(10**6)), "[0, 1, 2, 3, 4, 5, ...]"),
        (10**5000, "<int of 16610 bits>"),
        ({"k": [1, 2]}, "{'k': [1, 2]}"),
    ],
    ids=["str", "bytes", "list", "int", "small-dict"],
)
def test_short_repr_keeps_huge_values_short(value: object, expected: str) -> None:
    from tshtrain.errors import short_repr

    assert short_repr(value) == expected
    assert len(short_repr(value)) <= 80


def test_short_repr_survives_deep_nesting_and_broken_reprs() -> None:
    from tshtrain.errors import short_repr

    nested: list[object] = []
    inner = nested
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    assert short_repr(nested) == "[[[[...]]]]"

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert short_repr(Broken()).startswith("<Broken instance at 0x")
