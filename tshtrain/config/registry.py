"""The algorithms an experiment file can name: every :class:`AlgorithmSpec` by name.

A spec (params class, network and exploration sections, builder, default experiment) is written once,
in its family's module of :mod:`tshtrain.config.algos`; this module only collects them. ``tshtrain
config NAME`` prints a spec's default experiment, ``tshtrain list`` the specs in this order.
"""

from __future__ import annotations

import difflib
from typing import Any

from tshtrain.config.algos import actor_critic, offline, on_policy, q_learning, value_decomposition
from tshtrain.config.spec import AlgorithmSpec, Family
from tshtrain.errors import ExperimentError

__all__ = [
    "DEFAULT_ALGORITHM",
    "SPECS",
    "AlgorithmSpec",
    "Family",
    "did_you_mean",
    "get_spec",
    "offline_names",
]

SPECS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        *on_policy.SPECS,
        *q_learning.SPECS,
        *actor_critic.SPECS,
        *value_decomposition.SPECS,
        *offline.SPECS,
    )
}
"""every algorithm by its experiment-file name"""
_MODULES = (on_policy, q_learning, actor_critic, value_decomposition, offline)
assert len(SPECS) == sum(len(module.SPECS) for module in _MODULES), "two specs share a name"

DEFAULT_ALGORITHM = "ppo"
"""what ``tshtrain train`` runs without an experiment file"""


def offline_names() -> list[str]:
    """The offline algorithms (those that take a ``dataset``), in registry order."""
    return [name for name, spec in SPECS.items() if spec.family is Family.OFFLINE]


def get_spec(name: object, where: str = "algorithm.name") -> AlgorithmSpec:
    """The spec of ``name``; an :class:`ExperimentError` with a did-you-mean suggestion otherwise."""
    if isinstance(name, str) and name in SPECS:
        return SPECS[name]
    allowed = ", ".join(SPECS)
    hint = did_you_mean(str(name), SPECS)
    raise ExperimentError(f"{where}: unknown algorithm {name!r}{hint}; allowed: {allowed}.")


def did_you_mean(word: str, choices: Any) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
