"""Hyperparameters as flat ``{"a.b.c": value}`` mappings: what TensorBoard's HPARAMS tab and MLflow's
params take (W&B takes the nested data as it is)."""

from __future__ import annotations

import json
from collections.abc import Mapping

HParamValue = str | int | float | bool
"""a value TensorBoard's hparams plugin stores as it is"""

HPARAM_METRICS = ("test/returns/mean", "test/score", "info/best_reward")
"""the logged tags the TensorBoard HPARAMS tab shows next to the hyperparameters of each run"""


def flatten_hparams(data: Mapping[str, object], prefix: str = "") -> dict[str, HParamValue]:
    """Nested mappings flattened to dotted keys (``{"algorithm": {"params": {"lr": 1e-3}}}`` ->
    ``{"algorithm.params.lr": 0.001}``).

    Numbers, bools and strings stay as they are; None becomes ``"None"``; lists (and empty mappings)
    become their JSON text, so that every key of the experiment shows up.
    """
    flat: dict[str, HParamValue] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_hparams(value, f"{name}."))
        elif isinstance(value, str | int | float | bool):
            flat[name] = value
        elif value is None:
            flat[name] = "None"
        else:
            flat[name] = json.dumps(value, default=str)
    return flat
