"""The example experiment files (``examples/configs/*.yaml``), generated from the default experiments.

Each file states its algorithm's default experiment as its spec writes it (:mod:`tshtrain.config.algos`:
the tuned keys; every other key takes its default), plus the spec's ``example_extras``; the task examples
are :data:`tshtrain.config.defaults.TASK_EXAMPLES`.
``python scripts/generate_example_configs.py`` writes them; a test regenerates them in memory and
compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tshtrain.config.defaults import TASK_EXAMPLES
from tshtrain.config.files import dumps, merge_data
from tshtrain.config.registry import SPECS, AlgorithmSpec, Family

GENERATOR = "scripts/generate_example_configs.py"
"""the script that writes the files"""


def generated_note(source: str) -> str:
    """The last comment line of every generated file: where its settings are written (``source``)."""
    return f"# Generated from {source} by {GENERATOR}; edit that."


def spec_source(spec: AlgorithmSpec) -> str:
    """Where ``spec``'s default experiment is written: its entry in its family's module of
    :mod:`tshtrain.config.algos` (the module of its builder, which sits beside it)."""
    return f"the {spec.name} entry of {spec.build.__module__.replace('.', '/')}.py"


TASK_EXAMPLES_SOURCE = "TASK_EXAMPLES in tshtrain/config/defaults.py"
"""where the task examples are written"""


def example_file_data(spec: AlgorithmSpec) -> dict[str, Any]:
    """What the example experiment file of ``spec`` states: the default experiment as
    its spec writes it, with ``example_extras`` laid over it."""
    return merge_data(merge_data({"algorithm": {"name": spec.name}}, spec.defaults), spec.example_extras)


def example_file_text(spec: AlgorithmSpec) -> str:
    """The text of the example experiment file of ``spec``: comment lines, then the YAML data."""
    lines = [f"# {spec.summary}", f"# Run: tshtrain train {spec.example_config}"]
    if spec.example is not None:
        lines.append(f"# The same settings, built from params objects in Python: {spec.example}")
    lines.append(f"# Every key left out takes its default; `tshtrain config {spec.name}` prints them all.")
    if _buffer_saved(spec.example_extras):
        lines.append("# buffer.save_on_exit keeps the replay buffer as a dataset for the offline examples.")
    producer = _dataset_producer(spec)
    if producer is not None:
        lines.append(f"# The dataset is the replay buffer saved by: tshtrain train {producer.example_config}")
    lines.append(generated_note(spec_source(spec)))
    return "\n".join(lines) + "\n" + dumps(example_file_data(spec), "yaml")


def task_example_text(stem: str) -> str:
    """The text of the task example ``examples/configs/<stem>.yaml`` (see ``TASK_EXAMPLES``)."""
    summary, data = TASK_EXAMPLES[stem]
    name = data["algorithm"]["name"]
    lines = [
        f"# {summary}",
        f"# Run: tshtrain train examples/configs/{stem}.yaml",
        f"# Every key left out takes its default; `tshtrain config {name}` prints them all.",
        generated_note(TASK_EXAMPLES_SOURCE),
    ]
    return "\n".join(lines) + "\n" + dumps(dict(data), "yaml")


def example_files() -> dict[str, str]:
    """Every example experiment file: path (relative to the repository root) -> text."""
    files = {spec.example_config: example_file_text(spec) for spec in SPECS.values()}
    files.update({f"examples/configs/{stem}.yaml": task_example_text(stem) for stem in TASK_EXAMPLES})
    return files


def _buffer_saved(extras: Mapping[str, Any]) -> bool:
    buffer = extras.get("buffer")
    return isinstance(buffer, Mapping) and buffer.get("save_on_exit") is True


def _dataset_producer(spec: AlgorithmSpec) -> AlgorithmSpec | None:
    """The spec whose example file saves the buffer that ``spec``'s default dataset path names."""
    dataset = spec.defaults.get("dataset")
    if spec.family is not Family.OFFLINE or not isinstance(dataset, Mapping):
        return None
    for other in SPECS.values():
        output_dir = other.example_extras.get("output_dir")
        if _buffer_saved(other.example_extras) and dataset.get("path") == f"{output_dir}/buffer":
            return other
    return None
