"""The machine a benchmark ran on and the files it writes: every results file starts from
:func:`run_header` (CPU, package versions, tshtrain revision, load average before the run);
:func:`write_json` adds the load average after it and writes ``results/<name>.json``;
:func:`environment_markdown` turns that head into the lines every report starts with;
:func:`write_report` writes ``results/<name>.md`` and :func:`write_docs_section` a section of
``docs/benchmarks.md``. Timing and tables are in ``harness.py``.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import re
import subprocess
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tshtrain.atomic import atomic_write_bytes

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
DOCS_FILE = REPO_ROOT / "docs" / "benchmarks.md"


def load_average() -> float:
    """The 1-minute load average (the machine may be shared: every report gives it before and after)."""
    return os.getloadavg()[0]


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
            "Benchmarks are scripts under `benchmarks/`, never timed assertions in tests. Each one runs "
            "its contestants interleaved and rotated (A B C, B C A, ...) over several repetitions in one "
            "process, with torch pinned to one thread, and reports medians with min/max and ratios. Raw "
            "numbers are in "
            "`benchmarks/results/*.json`. Sections below are rewritten by the scripts.\n"
        )
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    text = (
        pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    )
    DOCS_FILE.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(DOCS_FILE, text.encode())
    return DOCS_FILE
