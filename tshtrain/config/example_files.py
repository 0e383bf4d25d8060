"""The example experiment files (``examples/configs/*.yaml``), generated from the default experiments.

Each file states its algorithm's default experiment as :mod:`tshtrain.config.defaults` writes it (the
tuned keys; every other key takes its default), plus the spec's ``example_extras``.
``python scripts/generate_example_configs.py`` writes them; a test regenerates them in memory and
compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tshtrain.config.defaults import EXTRA_EXAMPLES
from tshtrain.config.files import dumps, merge_data
from tshtrain.config.registry import SPECS, AlgorithmSpec, Family

GENERATED_NOTE = (
    "# Generated from tshtrain/config/defaults.py by scripts/generate_example_configs.py; edit that."
)
"""the last comment line of every generated file"""


def example_file_data(spec: AlgorithmSpec) -> dict[str, Any]:
    """What the example experiment file of ``spec`` states: the default experiment as
    :mod:`tshtrain.config.defaults` writes it, with ``example_extras`` laid over it."""
    return merge_data(merge_data({"algorithm": {"name": spec.name}}, spec.defaults), spec.example_extras)


def example_file_text(spec: AlgorithmSpec) -> str:
    """The text of the example experiment file of ``spec``: comment lines, then the YAML data."""
    lines = [
        f"# {spec.summary}",
        f"# Run: tshtrain train {spec.example_config}",
        f"# The same settings, built from params objects in Python: {spec.example}",
        f"# Every key left out takes its default; `tshtrain config {spec.name}` prints them all.",
    ]
    if _buffer_saved(spec.example_extras):
        lines.append("# buffer.save_on_exit keeps the replay buffer as a dataset for the offline examples.")
    producer = _dataset_producer(spec)
    if producer is not None:
        lines.append(f"# The dataset is the replay buffer saved by: tshtrain train {producer.example_config}")
    lines.append(GENERATED_NOTE)
    return "\n".join(lines) + "\n" + dumps(example_file_data(spec), "yaml")


def extra_example_text(path: str) -> str:
    """The text of the extra example experiment file ``path`` (:data:`EXTRA_EXAMPLES`)."""
    summary, data = EXTRA_EXAMPLES[path]
    lines = [
        f"# {summary}",
        f"# Run: tshtrain train {path}",
        f"# Every key left out takes the default of `tshtrain config {data['algorithm']['name']}`.",
        GENERATED_NOTE,
    ]
    return "\n".join(lines) + "\n" + dumps(dict(data), "yaml")


def example_files() -> dict[str, str]:
    """Every example experiment file: path (relative to the repository root) -> text. The algorithms'
    default experiments, then the extra examples (:data:`~tshtrain.config.defaults.EXTRA_EXAMPLES`)."""
    files = {spec.example_config: example_file_text(spec) for spec in SPECS.values()}
    return files | {path: extra_example_text(path) for path in EXTRA_EXAMPLES}


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
