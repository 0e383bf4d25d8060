"""Shared machinery for tshtrain's benchmark scripts (not a test: nothing here asserts a timing).

The rules every benchmark follows:

* contestants run **interleaved and rotated** (A B C, B C A, C A B, ...) for several repetitions in
  one process, so that a slow phase of the machine hits all of them alike and none always goes first
  (:func:`rotated`, :func:`run_interleaved`);
* every timing records **wall time** (``perf_counter``) and this process's **CPU time**
  (``process_time``) side by side (:class:`Clock`, :func:`measure`);
* torch runs on **one thread** (``torch.set_num_threads(1)``);
* each row reports the median, min and max over the repetitions, and ratios are the ratio of medians,
  with the range of the per-repetition (paired) ratios beside them;
* ratios are **paired**: the ratio of the medians, with the median and range of the per-repetition
  ratios beside it (:func:`paired_ratio`);
* every results file starts from :func:`run_header` (machine, package versions, revision, load average
  before the run); :func:`write_json` adds the load average after it; :func:`environment_markdown`
  turns that head into the lines every report section starts with; :func:`write_docs_section` writes
  the section of ``docs/benchmarks.md`` and :func:`write_report` a ``results/<name>.md``.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import math
import os
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from tshtrain.atomic import atomic_write_bytes

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
DOCS_FILE = REPO_ROOT / "docs" / "benchmarks.md"

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


def load_average() -> float:
    """The 1-minute load average (the machine may be shared: every report gives it before and after)."""
    return os.getloadavg()[0]


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


# ---------------------------------------------------------------------------- machine & versions
def cpu_info() -> dict[str, Any]:
    model, physical = "unknown", set()
    cores_per_socket = None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for block in text.strip().split("\n\n"):
        fields = dict(
            (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in block.splitlines())
        )
        model = fields.get("model name", model)
        physical.add((fields.get("physical id"), fields.get("core id")))
        if "cpu cores" in fields:
            cores_per_socket = int(fields["cpu cores"])
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    mem_total = None
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        mem_total = round(int(m.group(1)) / 2**20, 1) if m else None
    except OSError:
        pass
    return {
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": affinity,
        "physical_cores": len(physical) if text else None,
        "cores_per_socket": cores_per_socket,
        "memory_gib": mem_total,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def package_versions(names: Sequence[str]) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "tshtrain"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return rev + ("+dirty tshtrain/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_header(packages: Sequence[str]) -> dict[str, Any]:
    """The head of every results file, taken when a run starts: machine, package versions, tshtrain
    revision and the load average before the run (:func:`write_json` adds the one after it)."""
    return {
        "machine": cpu_info(),
        "versions": package_versions(packages),
        "revision": git_revision(),
        "load_before": load_average(),
    }


def load_before_after(payload: dict[str, Any]) -> tuple[float | None, float | None]:
    """The 1-minute load average before and after a run, from a results file of any age (older files
    stored it as ``load_before_after`` or as the three averages ``loadavg_before`` / ``_after``)."""
    if "load_before_after" in payload:
        before, after = payload["load_before_after"]
    elif "loadavg_before" in payload:
        before, after = payload["loadavg_before"][0], payload["loadavg_after"][0]
    else:
        before, after = payload.get("load_before"), payload.get("load_after")
    return (None if before is None or math.isnan(before) else before), after


def environment_markdown(payload: dict[str, Any]) -> str:
    """The lines every report section starts with: machine, versions, revision and load, from a
    payload that started as :func:`run_header`."""
    machine = payload["machine"]
    cores = (
        f"{machine['logical_cpus']} logical CPUs ({machine['usable_cpus']} usable, "
        f"{machine['physical_cores']} physical cores)"
    )
    vers = ", ".join(f"{k} {v}" for k, v in payload.get("versions", {}).items())
    before, after = load_before_after(payload)
    load = " / ".join("not recorded" if x is None else f"{x:.2f}" for x in (before, after))
    return "\n".join(
        [
            f"- Machine: {machine['cpu_model']}, {cores}, {machine['memory_gib']} GiB RAM; "
            f"{machine['platform']}",
            f"- Python {machine['python']}; {vers}",
            f"- tshtrain revision: {payload.get('revision', 'unknown')}; torch pinned to 1 thread",
            f"- Load average (1 min) before / after the run: {load} ({machine['logical_cpus']} CPUs, "
            "possibly shared with other work)",
        ]
    )


def write_json(name: str, payload: dict[str, Any]) -> Path:
    """Write ``results/<name>.json``; a payload with ``load_before`` gets ``load_after`` (now)."""
    if "load_before" in payload:
        payload["load_after"] = load_average()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    atomic_write_bytes(path, (json.dumps(payload, indent=2, default=_json_default) + "\n").encode())
    return path


def write_report(name: str, title: str, payload: dict[str, Any], lines: Sequence[str]) -> Path:
    """Write ``results/<name>.md``: the title, the run's head (:func:`environment_markdown` of the
    payload :func:`write_json` saved), then ``lines``."""
    text = "\n".join([f"# {title}", "", environment_markdown(payload), *lines]).rstrip() + "\n"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    atomic_write_bytes(path, text.encode())
    return path


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj)}")


def write_docs_section(key: str, markdown: str) -> Path:
    """Replace (or append) the section between ``<!-- BEGIN key -->`` and ``<!-- END key -->``."""
    begin, end = f"<!-- BEGIN {key} -->", f"<!-- END {key} -->"
    block = f"{begin}\n{markdown.rstrip()}\n{end}"
    if DOCS_FILE.exists():
        text = DOCS_FILE.read_text()
    else:
        text = (
            "# Benchmarks\n\n"
            "Benchmarks are scripts under `benchmarks/`, never timed assertions in tests. Each one runs its "
            "contestants interleaved and rotated (A B C, B C A, ...) over several repetitions in one process, "
            "with torch "
            "pinned to one thread, and reports medians with min/max and ratios. Raw numbers are in "
            "`benchmarks/results/*.json`. Sections below are rewritten by the scripts.\n"
        )
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    text = (
        pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    )
    DOCS_FILE.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(DOCS_FILE, text.encode())
    return DOCS_FILE
