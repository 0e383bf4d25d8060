"""Timing, statistics and result tables for tshtrain's benchmark scripts (not a test: nothing here
asserts a timing). Machine details and the writing of results files are in ``report.py``.

The rules every benchmark follows:

* contestants run **interleaved and rotated** (A B C, B C A, C A B, ...) for several repetitions in
  one process, so that a slow phase of the machine hits all of them alike and none always goes first
  (:func:`rotated`, :func:`run_interleaved`);
* every timing records **wall time** (``perf_counter``) and this process's **CPU time**
  (``process_time``) side by side (:class:`Clock`, :func:`measure`);
* torch runs on **one thread** (:func:`pin_torch_threads`);
* each row reports the median, min and max over the repetitions (:func:`median_min_max`);
* ratios are **paired**: the ratio of the medians, with the median and range of the per-repetition
  ratios beside it (:func:`paired_ratio`);
* every results file starts from ``report.run_header`` (machine, package versions, revision, load
  average before the run) and is written by ``report.write_json`` (which adds the load average after
  it), ``report.write_report`` or ``report.write_docs_section``.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

Run = Callable[[], None]
"""One timed unit of work (setup happens before it is returned and is not timed)."""

T = TypeVar("T")


# ---------------------------------------------------------------------------- timing
class Clock:
    """Wall-clock seconds (``perf_counter``) and CPU seconds since it was made. CPU time leaves out the
    time the process waited for a CPU on a shared machine; by default it is this process's
    (``process_time``), ``cpu_clock`` counts another way (e.g. a whole process tree's)."""

    def __init__(self, cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.cpu_clock = cpu_clock
        self.wall_start = time.perf_counter()
        self.cpu_start = cpu_clock()

    def wall(self) -> float:
        return time.perf_counter() - self.wall_start

    def cpu(self) -> float:
        return self.cpu_clock() - self.cpu_start


def measure(run: Run, cpu_clock: Callable[[], float] = time.process_time) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``run()``, after a garbage collection (so that no earlier run's
    garbage is collected inside it)."""
    gc.collect()
    clock = Clock(cpu_clock)
    run()
    return clock.wall(), clock.cpu()


def rotated(items: Sequence[T], rep: int) -> list[T]:
    """The order of repetition ``rep``: A B C, then B C A, then C A B, ..."""
    k = rep % max(len(items), 1)
    return [*items[k:], *items[:k]]


def median_min_max(values: Sequence[float]) -> tuple[float, float, float]:
    """The three numbers every row of a report gives."""
    return statistics.median(values), min(values), max(values)


def paired_ratio(num: Sequence[float], den: Sequence[float]) -> dict[str, float]:
    """``median(num) / median(den)``, and the median, min and max of the per-repetition ratios
    ``num[i] / den[i]`` (each repetition ran both back to back, so its ratio is the least disturbed
    by load that comes and goes)."""
    paired = [a / b for a, b in zip(num, den, strict=True)]
    return {
        "ratio_of_medians": statistics.median(num) / statistics.median(den),
        "paired_median": statistics.median(paired),
        "paired_min": min(paired),
        "paired_max": max(paired),
    }


@dataclass(frozen=True, kw_only=True)
class Contestant:
    """One row of a benchmark table."""

    name: str
    setup: Callable[[], Run]
    """builds everything the run needs (untimed) and returns the run"""
    work: float
    """units of work one run does (env steps, sample calls, ...), to turn seconds into a rate"""
    info_only: bool = False
    """shown for information; not one of the contestants the goals compare"""
    warmup_setup: Callable[[], Run] | None = None
    """a cheaper run for the untimed warm-up round (default: ``setup``)"""


Basis = Literal["wall", "cpu"]
"""What a rate divides by: wall-clock seconds (``perf_counter``), or this process's CPU seconds
(``process_time``), which leaves out the time the process waited for a CPU on a shared machine."""


@dataclass(kw_only=True)
class RowResult:
    """Rates (work units per second) of one contestant, one per repetition, in run order."""

    name: str
    unit: str
    work: float
    seconds: list[float]
    """wall-clock seconds per repetition"""
    cpu_seconds: list[float]
    """process CPU seconds per repetition"""
    info_only: bool = False

    def rates(self, basis: Basis = "wall") -> list[float]:
        secs = self.seconds if basis == "wall" else self.cpu_seconds
        return [self.work / max(s, 1e-12) for s in secs]

    def median(self, basis: Basis = "wall") -> float:
        return statistics.median(self.rates(basis))

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "unit": self.unit,
            "work": self.work,
            "info_only": self.info_only,
        }
        for basis in ("wall", "cpu"):
            rates = self.rates(basis)
            out[basis] = {
                "median": statistics.median(rates),
                "min": min(rates),
                "max": max(rates),
                "rates": rates,
            }
        out["seconds"], out["cpu_seconds"] = self.seconds, self.cpu_seconds
        return out


@dataclass(frozen=True, kw_only=True)
class Goal:
    """``rate(numerator) / rate(denominator) >= target`` (rates: higher is better)."""

    numerator: str
    denominator: str
    target: float


@dataclass(kw_only=True)
class TableResult:
    """One benchmark table: its rows and the ratios against its goals."""

    title: str
    unit: str
    rows: list[RowResult]
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self, name: str) -> RowResult:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def ratio(self, goal: Goal, basis: Basis = "wall") -> dict[str, Any]:
        ratio = paired_ratio(self.row(goal.numerator).rates(basis), self.row(goal.denominator).rates(basis))
        return {
            "numerator": goal.numerator,
            "denominator": goal.denominator,
            "basis": basis,
            **ratio,
            "target": goal.target,
            "met": ratio["ratio_of_medians"] >= goal.target,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableResult:
        """Rebuild a table from :meth:`to_json` output (to re-render docs without rerunning)."""
        rows = [
            RowResult(
                name=r["name"],
                unit=r["unit"],
                work=r["work"],
                seconds=list(r["seconds"]),
                cpu_seconds=list(r["cpu_seconds"]),
                info_only=r["info_only"],
            )
            for r in data["rows"]
        ]
        goals: list[Goal] = []
        for q in data["ratios"]:
            goal = Goal(numerator=q["numerator"], denominator=q["denominator"], target=q["target"])
            if goal not in goals:
                goals.append(goal)
        return cls(title=data["title"], unit=data["unit"], rows=rows, goals=goals, notes=list(data["notes"]))

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "unit": self.unit,
            "rows": [r.summary() for r in self.rows],
            "ratios": [self.ratio(g, b) for g in self.goals for b in ("wall", "cpu")],
            "notes": self.notes,
        }


def pin_torch_threads() -> None:
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def run_interleaved(
    contestants: Sequence[Contestant],
    *,
    reps: int,
    unit: str,
    warmup: bool = True,
    label: str = "",
    cpu_clock: Callable[[], float] = time.process_time,
) -> list[RowResult]:
    """Run the contestants ``reps`` times, rotated (A B C, B C A, ...); one untimed warm-up round first
    (if ``warmup``). Each run is built by its ``setup`` (untimed), then timed by :func:`measure`."""
    results = [
        RowResult(name=c.name, unit=unit, work=c.work, seconds=[], cpu_seconds=[], info_only=c.info_only)
        for c in contestants
    ]
    if warmup:
        for c in contestants:
            (c.warmup_setup or c.setup)()()
    pairs = list(zip(contestants, results, strict=True))
    for rep in range(reps):
        for c, res in rotated(pairs, rep):
            wall, cpu = measure(c.setup(), cpu_clock)
            res.seconds.append(wall)
            res.cpu_seconds.append(cpu)
        progress = "  ".join(f"{r.name}={r.rates()[-1]:,.0f}" for r in results)
        print(f"  [{label} rep {rep + 1}/{reps}] {progress}", flush=True)
    return results


def format_rate(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:,.2f}"
    return f"{x:.4g}"


def print_table(table: TableResult) -> None:
    """Medians, min/max and the ratio to the first row side by side (wall clock and CPU time)."""
    width = max(len(r.name) for r in table.rows)
    ref = table.rows[0]
    print(
        f"\n== {table.title} ==\n  ({table.unit}; wall: median [min, max], cpu: median; "
        f"over {len(ref.seconds)} interleaved reps)"
    )
    for r in table.rows:
        tag = "  (info)" if r.info_only else ""
        w = r.rates("wall")
        print(
            f"  {r.name:<{width}}  wall {format_rate(r.median()):>10} [{format_rate(min(w))}, "
            f"{format_rate(max(w))}]  cpu {format_rate(r.median('cpu')):>10}  "
            f"x{r.median() / ref.median():.3f} / x{r.median('cpu') / ref.median('cpu'):.3f} "
            f"of {ref.name}{tag}"
        )
    for g in table.goals:
        qs = [table.ratio(g, b) for b in ("wall", "cpu")]
        text = "; ".join(
            f"{q['basis']} {q['ratio_of_medians']:.3f} (paired median {q['paired_median']:.3f}, "
            f"range {q['paired_min']:.3f}..{q['paired_max']:.3f})"
            for q in qs
        )
        verdict = "/".join("met" if q["met"] else "MISSED" for q in qs)
        print(f"  ratio {g.numerator} / {g.denominator}: {text}; goal >= {g.target}: {verdict}")


def _ratio_cell(q: dict[str, Any]) -> str:
    return (
        f"**{q['ratio_of_medians']:.2f}** ({q['paired_median']:.2f}; "
        f"{q['paired_min']:.2f}–{q['paired_max']:.2f})"
    )


def markdown_table(table: TableResult) -> str:
    ref = table.rows[0]
    lines = [
        f"**{table.title}** ({table.unit}; {len(ref.seconds)} interleaved repetitions; *wall* = wall clock, "
        f"*CPU* = this process's CPU time)",
        "",
        "| contestant | median (wall) | min (wall) | max (wall) | median (CPU) "
        f"| vs {ref.name} (wall / CPU) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in table.rows:
        name = f"{r.name} *(info)*" if r.info_only else r.name
        w = r.rates("wall")
        lines.append(
            f"| {name} | {format_rate(r.median())} | {format_rate(min(w))} | {format_rate(max(w))} | "
            f"{format_rate(r.median('cpu'))} | {r.median() / ref.median():.2f}x / "
            f"{r.median('cpu') / ref.median('cpu'):.2f}x |"
        )
    if table.goals:
        lines += [
            "",
            "| ratio | wall: ratio of medians (paired median; range) "
            "| CPU: ratio of medians (paired median; range) | goal | met |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for g in table.goals:
            qw, qc = table.ratio(g, "wall"), table.ratio(g, "cpu")
            met = "/".join("yes" if q["met"] else "**no**" for q in (qw, qc))
            lines.append(
                f"| {g.numerator} / {g.denominator} | {_ratio_cell(qw)} | {_ratio_cell(qc)} "
                f"| >= {g.target} | {met} |"
            )
    for note in table.notes:
        lines += ["", note]
    return "\n".join(lines)
