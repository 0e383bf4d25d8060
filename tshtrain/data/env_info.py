"""Summing the numeric metrics that envs report in their info dicts (``Collector(info_key=...)``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class EnvInfoAccumulator:
    """Sums the numeric scalars a vector env reports under ``info[key]`` (see ``Collector.info_key``).

    ``info[key]`` is either a number per sub-env (the metric is named ``key``) or a dict of them; the
    masks ``_name`` that Gymnasium's vector envs add tell which sub-envs reported a value. Values of
    the steps that ended an episode are read from ``info["final_info"][key]``, where same-step autoreset
    puts the final step's info. Entries that are not one number per sub-env are ignored.
    """

    def __init__(self, key: str):
        self.key = key
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, info: Mapping[str, Any], rows: np.ndarray | None) -> None:
        """Add one vector step's info; ``rows``: the sub-envs whose transitions count (None: all)."""
        self._add_level(info, rows)
        final = info.get("final_info")
        if isinstance(final, Mapping):
            self._add_level(final, rows)

    def add_single(self, info: Mapping[str, Any], final_info: Mapping[str, Any] | None) -> None:
        """Add one step of a single env stepped directly (the one-env fast path,
        :class:`~tshtrain.data.direct_step.SingleEnvStepper`): ``info`` as the step (or, after an
        episode ended, the reset) returned it, ``final_info`` the ended step's info (None: no episode
        ended). Sums what :meth:`add` sums of the vector info ``SyncVectorEnv`` builds from them, in
        the same order."""
        self._add_single_level(info)
        if final_info is not None:
            self._add_single_level(final_info)

    def _add_single_level(self, info: Mapping[str, Any]) -> None:
        entry = info.get(self.key)
        if entry is None:
            return
        if isinstance(entry, Mapping):
            for name, value in entry.items():
                if not name.startswith("_"):
                    self._add_values(name, _one_env_values(value), None, None)
        else:
            self._add_values(self.key, _one_env_values(entry), None, None)

    def _add_level(self, info: Mapping[str, Any], rows: np.ndarray | None) -> None:
        entry = info.get(self.key)
        if entry is None:
            return
        if isinstance(entry, Mapping):
            for name, value in entry.items():
                if not name.startswith("_"):
                    self._add_values(name, value, entry.get(f"_{name}"), rows)
        else:
            self._add_values(self.key, entry, info.get(f"_{self.key}"), rows)

    def _add_values(self, name: str, value: Any, mask: Any, rows: np.ndarray | None) -> None:
        if value is None:
            return
        values = np.asarray(value)
        if values.ndim != 1 or values.dtype.kind not in "biuf":
            return
        selected = np.ones(len(values), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if rows is not None:
            in_rows = np.zeros(len(values), dtype=bool)
            in_rows[rows] = True
            selected &= in_rows
        count = int(selected.sum())
        if count:
            self.sums[name] = self.sums.get(name, 0.0) + float(values[selected].sum(dtype=np.float64))
            self.counts[name] = self.counts.get(name, 0) + count

    def means(self) -> dict[str, float]:
        """The mean of every metric seen."""
        return {name: total / self.counts[name] for name, total in self.sums.items()}


def _one_env_values(value: Any) -> np.ndarray | None:
    """One sub-env's info value as ``SyncVectorEnv`` batches it for one env (None: an object array,
    which :class:`EnvInfoAccumulator` ignores)."""
    if type(value) in (int, float, bool) or isinstance(value, np.number):
        return np.array([value], dtype=type(value))
    if isinstance(value, np.ndarray):
        return value[None]
    return None
