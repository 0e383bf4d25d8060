"""What ``tshtrain train`` shows on a terminal, read through a pseudo-terminal of a given size.

A short PPO run on CartPole (2 epochs) runs in a child process whose stdout and stderr are a pty of
80 or 120 columns. Its raw output is replayed on a small screen model (carriage returns, new lines,
line wrap, the cursor moves and erasures tqdm uses), and every frame the epoch bar drew is checked:
fits the width without wrapping, keeps a bar of at least ``MIN_BAR_WIDTH``, ends on whole fields,
counts env steps, shows the whole-run ETA as an upper bound (``run ≤0:12``: to max_epochs); each bar is
on screen once, directly above its test step's line, and returns are rounded. The first line on screen
comes before torch is imported; at 80 columns no line wraps (the result lines at the end included). The
end-of-run lines and the Ctrl-C messages are checked at 80 columns with long values. Without a
terminal there is no bar at all.
"""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest

from tshtrain.cli import main
from tshtrain.cli.run_lines import LOADING_LINE, MESSAGE_COLUMNS, interrupted_message, result_lines
from tshtrain.logger.console import (
    MIN_BAR_WIDTH,
    BarField,
    format_duration,
    format_return,
    layout_right,
    short_number,
)

ROOT = Path(__file__).resolve().parents[2]
SHORT_RUN = [
    "--set", "trainer.max_epochs=2",
    "--set", "trainer.epoch_num_steps=512",
    "--set", "trainer.test_step_num_episodes=2",
    "--set", "trainer.update_step_num_repetitions=1",
    "--set", "checkpoint.enabled=false",
    "--set", "loggers=[{kind: csv}]",
]  # fmt: skip
TEST_LINE = re.compile(
    r"Epoch #(\d+): test_reward: (-?\d+\.\d{2}) ± (\d+\.\d{2}), "
    r"best_reward: -?\d+\.\d{2} ± \d+\.\d{2} in #\d+"
)
NUMBER = r"-?(?:\d+(?:\.\d+)?(?:e[-+]\d+)?[kMG]?|nan|inf)"
BAR_FRAME = re.compile(
    r"Epoch (?P<epoch>\d+)/2 +\d+%\|(?P<bar>[^|]*)\| (?P<n>\d+)/(?P<total>\d+)"
    rf" \[(?P<inside>[^\]]*)\](?P<stats>(?: [a-z_]+ {NUMBER})*)"
)
INSIDE_FIELD = re.compile(
    rf"\d+:\d\d(?:<\d+:\d\d)?|(?:\?|{NUMBER}) env_step/s|run ≤(?:\?|\d+:\d\d(?::\d\d)?)"
)


# ====================================================================== running on a pty
def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TERM"] = "xterm"
    return env


def _train_on_pty(tmp_path: Path, columns: int) -> str:
    """Run ``tshtrain train`` (the short run) on a pty of ``columns`` x 40; its raw output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    command = [sys.executable, "-m", "tshtrain.cli", "train", *SHORT_RUN, "-o", "run"]  # in tmp_path
    child = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=_child_env(), cwd=tmp_path)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert child.wait(timeout=900) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode()


class Screen:
    """A terminal of ``columns`` with unlimited scrollback: enough of a VT100 for tqdm's output."""

    def __init__(self, columns: int):
        self.columns = columns
        self.rows: list[list[str]] = [[]]
        self.row = 0
        self.col = 0
        self.wrapped_rows: set[int] = set()
        """rows whose text ran past the right edge onto the next row"""

    def feed(self, text: str) -> None:
        index = 0
        while index < len(text):
            char = text[index]
            if char == "\x1b":
                match = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])").match(text, index)
                assert match is not None, f"unexpected escape {text[index : index + 8]!r}"
                self._control(match.group(1), match.group(2))
                index = match.end()
                continue
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self._move_to(self.row + 1)
            elif char >= " ":
                if self.col >= self.columns:  # the pending wrap of a full row
                    self.wrapped_rows.add(self.row)
                    self._move_to(self.row + 1)
                    self.col = 0
                line = self.rows[self.row]
                line.extend(" " * (self.col + 1 - len(line)))
                line[self.col] = char
                self.col += 1
            index += 1

    def _control(self, params: str, command: str) -> None:
        count = int(params) if params.isdigit() else 1
        if command == "A":
            self.row = max(0, self.row - count)
        elif command == "B":
            self._move_to(self.row + count)
        elif command == "K":
            del self.rows[self.row][self.col :]
        elif command == "D":
            self.col = max(0, self.col - count)
        elif command == "C":
            self.col += count

    def _move_to(self, row: int) -> None:
        self.row = row
        while len(self.rows) <= row:
            self.rows.append([])

    def lines(self) -> list[str]:
        return ["".join(row).rstrip() for row in self.rows]


def _frames(raw: str) -> list[str]:
    """Every text tqdm drew for the epoch bar (what lies between carriage returns / new lines)."""
    pieces = re.split(r"[\r\n]|\x1b\[[0-9;?]*[A-Za-z]", raw)
    return [piece.rstrip() for piece in pieces if "%|" in piece and piece.startswith("Epoch ")]


def _check_frame(frame: str, columns: int) -> re.Match[str]:
    assert len(frame) <= columns, f"{len(frame)} characters on a {columns}-column terminal: {frame!r}"
    match = BAR_FRAME.fullmatch(frame)
    assert match is not None, f"not a bar of whole fields: {frame!r}"
    assert len(match["bar"]) >= MIN_BAR_WIDTH, frame
    for part in match["inside"].split(", "):
        assert INSIDE_FIELD.fullmatch(part), f"cut or unknown field {part!r} in {frame!r}"
    return match


@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_fits_the_terminal_and_each_epoch_is_drawn_once(tmp_path: Path, columns: int) -> None:
    raw = _train_on_pty(tmp_path, columns)
    frames = _frames(raw)
    assert len(frames) >= 4, raw  # each epoch: at least its first and its last frame
    for frame in frames:
        _check_frame(frame, columns)

    screen = Screen(columns)
    screen.feed(raw)
    lines = screen.lines()
    while lines and not lines[-1]:
        lines.pop()
    wrapped = [lines[row] for row in sorted(screen.wrapped_rows)]
    assert not wrapped  # no bar, and at 80 columns no plain line either (the run directory is short)
    assert lines[0] == LOADING_LINE  # on screen before torch is imported
    assert re.fullmatch(
        r"best test return -?\d+\.\d at epoch \d; stop: max_epochs after 1,024 env steps, \d+\.\d s",
        lines[-2],
    ), lines[-2:]
    assert lines[-1] == "results in run"
    tests = [i for i, line in enumerate(lines) if TEST_LINE.fullmatch(line)]
    assert [TEST_LINE.fullmatch(lines[i])[1] for i in tests] == ["0", "1", "2"]  # type: ignore[index]
    for epoch in (1, 2):
        bars = [i for i, line in enumerate(lines) if line.startswith(f"Epoch {epoch}/2")]
        assert len(bars) == 1, lines  # drawn once, not again around the test step's line
        final = _check_frame(lines[bars[0]], columns)
        assert final["n"] == final["total"] == "512"
        assert re.search(r"\d+(\.\d+)?k? env_step/s", final["inside"]), final[0]
        assert re.search(r"run ≤\d+:\d\d", final["inside"]), final[0]
        assert lines[bars[0] + 1].startswith(f"Epoch #{epoch}: test_reward: "), lines
        assert " rew " in final[0]
        if columns >= 120:
            assert " loss " in final[0]
            assert re.search(r"\d+:\d\d<\d+:\d\d", final["inside"])  # the epoch's own time
    assert "it/s" not in raw
    assert "Training finished" in raw


def test_without_a_terminal_there_are_plain_lines(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tshtrain.cli", "train", *SHORT_RUN, "-o", str(tmp_path / "run")]
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, env=_child_env(), cwd=tmp_path, timeout=900
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert "\r" not in out and "\x1b" not in out and "%|" not in out
    lines = done.stdout.splitlines()
    assert [m[1] for line in lines if (m := TEST_LINE.fullmatch(line))] == ["0", "1", "2"]
    assert "best reward " in done.stdout
    assert LOADING_LINE not in out  # only for a terminal


def test_verbose_false_prints_nothing_but_logs_the_epochs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tshtrain.trainer")
    args = ["train", *SHORT_RUN, "--set", "trainer.verbose=false", "-o", str(tmp_path / "run")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "test_reward" not in out and "Training finished" not in out
    messages = [r.getMessage() for r in caplog.records if r.name == "tshtrain.trainer"]
    assert [m[1] for m in map(TEST_LINE.fullmatch, messages) if m] == ["0", "1", "2"]
    assert any(m.startswith("Training finished (max_epochs): best_reward ") for m in messages)


# ====================================================================== the pieces
def test_numbers_are_short_and_rounded() -> None:
    assert [short_number(v) for v in (2.0812, -0.012345, 103.4, 500.0, 4790.0, -1762.0)] == [
        "2.08", "-0.0123", "103", "500", "4.79k", "-1.76k",
    ]  # fmt: skip
    assert [format_return(v) for v in (270.6, 92.031734, 0.0, -0.05234, 9.0)] == [
        "270.60", "92.03", "0.00", "-0.0523", "9.00",
    ]  # fmt: skip
    assert [format_duration(s) for s in (0.4, 12, 125, 3725)] == ["0:00", "0:12", "2:05", "1:02:05"]


def test_layout_takes_fields_whole_by_importance_and_shows_them_in_place() -> None:
    fields = [
        BarField("5k env_step/s", bracketed=True, place=1),
        BarField("run ≤0:12", bracketed=True, place=2),
        BarField("rew 21.3", bracketed=False, place=3),
        BarField("0:01<0:02", bracketed=True, place=0),
        BarField("loss 2.08", bracketed=False, place=4),
    ]
    full = "| 8/16 [0:01<0:02, 5k env_step/s, run ≤0:12] rew 21.3 loss 2.08"
    assert layout_right("8/16", fields, None) == full
    assert layout_right("8/16", fields, len(full)) == full
    assert (
        layout_right("8/16", fields, len(full) - 1) == "| 8/16 [0:01<0:02, 5k env_step/s, run ≤0:12] rew 21.3"
    )
    assert layout_right("8/16", fields, 42) == "| 8/16 [5k env_step/s, run ≤0:12] rew 21.3"
    assert layout_right("8/16", fields, 41) == "| 8/16 [5k env_step/s, run ≤0:12]"
    assert layout_right("8/16", fields, 30) == "| 8/16 [5k env_step/s]"
    assert layout_right("8/16", fields, 10) == "| 8/16"


# ====================================================================== the lines around a run at 80 columns
def _fits(text: str) -> None:
    for line in text.splitlines():
        assert len(line) <= MESSAGE_COLUMNS, f"{len(line)} > {MESSAGE_COLUMNS} columns: {line!r}"


DEFAULT_RUN_DIR = Path("runs/discrete_cql-cartpole-v1-20261129-071500")
"""a default run directory (runs/<algorithm>-<env>-<date>-<time>) with a long algorithm name"""


def _info(best_reward: float, best_epoch: int, env_steps: int, reason: str, seconds: float) -> Any:
    from tshtrain.trainer.stats import InfoStats, StopReason, TimingStats

    return InfoStats(
        update_step=1, gradient_step=1, best_score=best_reward, best_reward=best_reward, best_reward_std=0.0,
        best_epoch=best_epoch, train_step=env_steps, train_episode=1, test_step=1, test_episode=1,
        timing=TimingStats(total_time=seconds), stop_reason=StopReason(reason),
    )  # fmt: skip


def test_the_result_lines_fit_80_columns_and_keep_the_path_whole() -> None:
    lines = result_lines(_info(-1234.56, 120, 1_000_000, "max_env_steps", 3725.0), DEFAULT_RUN_DIR)
    _fits("\n".join(lines))
    assert " ".join(" ".join(lines[:-1]).split()) == (
        "best test return -1234.6 at epoch 120; stop: max_env_steps after 1,000,000 env steps, 1:02:05"
    )
    assert lines[-1] == f"results in {DEFAULT_RUN_DIR}"
    assert result_lines(_info(500.0, 3, 6144, "stop_fn", 21.04), Path("runs/x")) == [
        "best test return 500.0 at epoch 3; stop: stop_fn after 6,144 env steps, 21.0 s",
        "results in runs/x",
    ]


def test_the_ctrl_c_messages_fit_80_columns_with_each_command_on_its_own_line() -> None:
    prefix = "tshtrain train: error: "
    latest = DEFAULT_RUN_DIR / "checkpoints" / "periodic-000120-000001000000"
    message = prefix + interrupted_message(DEFAULT_RUN_DIR, latest)
    _fits(message)
    assert message.splitlines() == [
        "tshtrain train: error: interrupted (Ctrl-C); the last checkpoint is",
        "  checkpoints/periodic-000120-000001000000",
        "  continue the run with:",
        f"  tshtrain train --resume {DEFAULT_RUN_DIR}",
    ]
    key = Path("/home/someone/.config/tshtrain/signing.key")
    unsigned = f"the signing key {key} is readable or writable by others (mode 0644), so it is not used; " \
        f"fix it with: chmod 600 {key}"  # fmt: skip
    message = prefix + interrupted_message(DEFAULT_RUN_DIR, latest, unsigned)
    _fits(message)
    lines = message.splitlines()
    assert f"  tshtrain train --resume {DEFAULT_RUN_DIR}" in lines
    assert lines[-1] == f"  tshtrain train --resume {DEFAULT_RUN_DIR} --trust"
    assert f"fix it with: chmod 600 {key};" in " ".join(" ".join(lines).split())
    message = prefix + interrupted_message(DEFAULT_RUN_DIR, None)
    _fits(message)
    assert " ".join(message.split()) == (
        f"{prefix}interrupted (Ctrl-C) before the first periodic checkpoint; nothing to resume in "
        f"{DEFAULT_RUN_DIR}: start the run again in a new directory."
    )
