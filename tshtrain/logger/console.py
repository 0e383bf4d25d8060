"""The terminal side of a run: one bar per epoch, a transient bar for long update steps, and lines
written between them (the trainer's test-step lines and summary table: ``tshtrain.trainer.recorder``).

The epoch bar is laid out for the terminal's width every time it moves: the bar keeps at least
:data:`MIN_BAR_WIDTH` characters, and the fields around it (rate, whole-run ETA, training return,
losses, scalars of hooks) are dropped whole, least important first, until the line fits; nothing is
cut mid-word. A full line reads::

    Epoch 2/5  45%|█████      | 1.84k/4.10k [00:01<00:01, 4.79k env_step/s, run ≤0:12] rew 21.3 loss 2.08

``00:01<00:01`` is the epoch's time and what is left of it; ``run ≤0:12`` is the **whole-run ETA**:
the time left until the run's last epoch (``max_epochs``) at the run's rate so far. It reads "at most"
because a run that ``stop_fn`` (or ``stop_score``, a budget of env steps, a callback) ends earlier
finishes sooner; it is the time to ``max_epochs``, not a forecast of when a stop rule fires.

Lines written while a bar is open go through :func:`write_line` (``tqdm.write``), which clears the
bars, writes the line and redraws them, so that no bar is drawn twice around it.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import tqdm

RUN_ETA_PREFIX = "run ≤"
"""what precedes the whole-run ETA on the bar: the time to the last epoch, which a stop rule can only
shorten"""
MIN_BAR_WIDTH = 10
"""the epoch bar never gets narrower than this many characters (unless the terminal is too narrow
for the description, the percentage and the counts)"""


def short_number(value: float) -> str:
    """A number in at most 3 significant digits, SI-scaled from 1000 on: ``2.08``, ``-0.0123``,
    ``103``, ``4.79k``."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 999.5:
        return ("-" if value < 0 else "") + tqdm.tqdm.format_sizeof(abs(value))
    return f"{value:.3g}"


def format_return(value: float) -> str:
    """A return for the test-step line and the summary table: 2 decimals, or 3 significant digits
    when that shows more of a small value (``270.60``, ``-0.0523``)."""
    if value != 0 and abs(value) < 0.1 and math.isfinite(value):
        return f"{value:.3g}"
    return f"{value:.2f}"


def format_duration(seconds: float) -> str:
    """``m:ss`` under an hour, ``h:mm:ss`` from one hour on."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def write_line(text: str, file: IO[str] | None = None) -> None:
    """Write a line to stdout (or ``file``) without breaking open bars: they are cleared, the line is
    written and they are drawn again below it."""
    target = sys.stdout if file is None else file
    tqdm.tqdm.write(text, file=target)
    target.flush()


TERMINAL_ENV = "TSHTRAIN_TERMINAL_COLUMNS"
"""Set by ``tshtrain train --nproc N`` for its ranks when its own stderr is a terminal: that terminal's
width. The ranks' stderr is then a pipe to the launcher, which passes their lines (and bars) through."""


def stderr_is_terminal() -> bool:
    """True when stderr is a terminal, or a rank's pipe to a launcher whose stderr is one
    (:data:`TERMINAL_ENV`)."""
    return sys.stderr.isatty() or _launcher_columns() is not None


def terminal_width(file: IO[str]) -> int | None:
    """The width of the terminal ``file`` writes to (through the launcher: :data:`TERMINAL_ENV`); None
    when it is not a terminal."""
    try:
        return os.get_terminal_size(file.fileno()).columns or None
    except (OSError, ValueError, AttributeError):
        return _launcher_columns()


def _launcher_columns() -> int | None:
    text = os.environ.get(TERMINAL_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else None


# ====================================================================== the whole-run ETA
@dataclass
class RunClock:
    """Estimates the time left in a run from the progress made since it first saw the run (in this
    process: a resumed run measures from where it resumed). Test steps and everything else between
    bars count as part of the run's time."""

    clock: Callable[[], float] = time.monotonic
    """seconds from an arbitrary origin"""
    _start: tuple[float, int] | None = field(default=None, init=False)

    def remaining(self, done_units: int, total_units: int) -> float | None:
        """Seconds left for ``total_units - done_units`` units at the run's rate so far (None before
        there is a rate)."""
        now = self.clock()
        if self._start is None:
            self._start = (now, done_units)
            return None
        start_time, start_units = self._start
        if done_units <= start_units or now <= start_time:
            return None
        seconds_per_unit = (now - start_time) / (done_units - start_units)
        return max(0, total_units - done_units) * seconds_per_unit


# ====================================================================== layout of the epoch bar
@dataclass(frozen=True)
class BarField:
    """A piece of text right of the bar."""

    text: str
    bracketed: bool
    """inside ``[...]`` after the counts (times and rates) or after them (statistics)"""
    place: int
    """the position it is shown at (fields are chosen by importance, shown by place)"""


def layout_right(counts: str, fields: Iterable[BarField], budget: int | None) -> str:
    """The text right of the bar: ``counts``, then as many fields as fit in ``budget`` characters
    (no limit: None), taken whole in the given order of importance until one does not fit, and shown
    by their ``place``."""
    chosen: list[BarField] = []

    def render(parts: list[BarField]) -> str:
        parts = sorted(parts, key=lambda f: f.place)
        inside = [f.text for f in parts if f.bracketed]
        text = f"| {counts}" + (f" [{', '.join(inside)}]" if inside else "")
        return text + "".join(f" {f.text}" for f in parts if not f.bracketed)

    for candidate in fields:
        if budget is not None and len(render([*chosen, candidate])) > budget:
            break
        chosen.append(candidate)
    return render(chosen)


def _count(value: int) -> str:
    """Exact up to 5 digits (``4096``), then SI-scaled (``131k``)."""
    return str(value) if value < 100_000 else tqdm.tqdm.format_sizeof(value)


class ProgressBar:
    """An epoch's bar, advancing by env steps (online) or training steps (offline), laid out to the
    terminal's width (see the module docstring). Writes to stderr."""

    def __init__(
        self,
        *,
        epoch: int,
        max_epochs: int,
        total: int,
        initial: int,
        unit: str,
        run_clock: RunClock,
    ):
        """Args:
        epoch: the epoch this bar shows (1-based).
        max_epochs: the run's number of epochs (for the description and the whole-run ETA).
        total: the epoch's units (env steps or training steps).
        initial: units already done (an epoch resumed from a checkpoint).
        unit: what a unit is, for the rate (``env_step``: ``4.79k env_step/s``).
        run_clock: the run's clock (one per run, shared by its bars).
        """
        self._epoch = epoch
        self._max_epochs = max_epochs
        self._total = total
        self._unit = unit
        self._clock = run_clock
        self._description = f"Epoch {epoch}/{max_epochs}"
        self._stats: list[str] = []
        self._file: IO[str] = sys.stderr
        initial = min(initial, total)
        self._initial = initial
        self._n = initial
        self._bar: tqdm.tqdm[Any] = tqdm.tqdm(
            total=total,
            initial=initial,
            desc=self._description,
            file=self._file,
            dynamic_ncols=True,
            leave=True,
            bar_format=self._bar_format(initial, rate=None, elapsed=0.0),
        )

    def advance(
        self,
        amount: int,
        last_return: float | None,
        update: Mapping[str, float] | None,
        extra: Mapping[str, float] | None = None,
    ) -> None:
        """Move the bar by ``amount`` units and refresh the statistics right of it: the last training
        return, the losses among the last update's scalars (``update``), ``extra`` (scalars callbacks
        marked for the bar)."""
        stats: list[str] = []
        if last_return is not None:
            stats.append(f"rew {short_number(last_return)}")
        losses = {} if update is None else {k: v for k, v in update.items() if "loss" in k}
        total = {"loss": losses.pop("loss")} if "loss" in losses else {}
        # by importance: the total loss, the scalars hooks asked to show, the parts of the loss
        for name, value in {**total, **(extra or {}), **losses}.items():
            stats.append(f"{name} {short_number(value)}")
        self._stats = stats
        amount = max(0, min(amount, self._total - self._n))  # a last collection may overshoot
        self._n += amount
        state = self._bar.format_dict
        elapsed = float(state["elapsed"])
        rate: float | None = state["rate"]  # tqdm's smoothed rate, known once it redrew during a move
        if rate is None and elapsed > 0:
            rate = (self._n - self._initial) / elapsed
        self._bar.bar_format = self._bar_format(self._n, rate, elapsed)
        self._bar.update(amount)

    def close(self) -> None:
        """Close the bar (it stays on screen, followed by a new line)."""
        self._bar.close()

    def _bar_format(self, n: int, rate: float | None, elapsed: float) -> str:
        width = terminal_width(self._file)
        left = len(self._description) + len(" 100%|")
        budget = None if width is None else width - left - MIN_BAR_WIDTH - 1
        epoch_time = format_duration(elapsed)
        if rate:
            epoch_time += f"<{format_duration((self._total - n) / rate)}"
        stats = [BarField(text, bracketed=False, place=3 + i) for i, text in enumerate(self._stats)]
        # by importance; shown as tqdm users expect: [time, rate, ETA], then the statistics
        fields = [
            BarField(f"{short_number(rate) if rate else '?'} {self._unit}/s", bracketed=True, place=1),
            BarField(f"{RUN_ETA_PREFIX}{self._run_eta(n)}", bracketed=True, place=2),
            *stats[:1],
            BarField(epoch_time, bracketed=True, place=0),
            *stats[1:],
        ]
        right = layout_right(f"{_count(n)}/{_count(self._total)}", fields, budget)
        escaped = right.replace("{", "{{").replace("}", "}}")
        return "{desc} {percentage:3.0f}%|{bar}" + escaped

    def _run_eta(self, n: int) -> str:
        done = (self._epoch - 1) * self._total + n
        seconds = self._clock.remaining(done, self._max_epochs * self._total)
        return "?" if seconds is None else format_duration(seconds)


INNER_BAR_MIN_STEPS = 100
"""update steps with at least this many gradient steps get their own (transient) bar"""


def inner_bar(num_steps: int, description: str) -> Iterable[int]:
    """``range(num_steps)`` with a bar below the epoch's bar that disappears when done."""
    return tqdm.tqdm(
        range(num_steps),
        desc=description,
        leave=False,
        position=1,
        dynamic_ncols=True,
        bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, "
        "{rate_noinv_fmt}]",
        unit="",
    )
