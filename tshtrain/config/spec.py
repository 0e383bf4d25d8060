"""What an experiment file's algorithm is: one :class:`AlgorithmSpec` per algorithm, holding its params
class, network and exploration sections, builder and default experiment.

The specs are written in the family modules of :mod:`tshtrain.config.algos` (next to their builders)
and collected by :mod:`tshtrain.config.registry`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tshtrain.algorithm.base import Algorithm
from tshtrain.config.builders import BuildContext
from tshtrain.config.models import MlpNetwork
from tshtrain.config.sections import Section


class Family(StrEnum):
    """Which trainer runs an algorithm."""

    ON_POLICY = "on-policy"
    OFF_POLICY = "off-policy"
    OFFLINE = "offline"


@dataclass(frozen=True, kw_only=True)
class AlgorithmSpec:
    """What the experiment files and the command line know of one algorithm: the one entry that adding
    an algorithm writes (in its family's module of :mod:`tshtrain.config.algos`)."""

    name: str
    """the experiment-file name (``algorithm.name``)"""
    summary: str
    """one line for ``tshtrain list``"""
    family: Family
    params_cls: type
    """the algorithm's params class (``algorithm.params`` are its value fields)"""
    network_model: type[MlpNetwork]
    """the ``algorithm.network`` section"""
    exploration_model: type[Section]
    """the ``algorithm.exploration`` section"""
    build: Callable[[BuildContext], Algorithm[Any]]
    """builds the algorithm, its policy and networks from the validated sections"""
    defaults: Mapping[str, Any]
    """the default experiment (every section but ``algorithm.name``, which is ``name``)"""
    example: str | None
    """the example script that builds the same run from params objects; None: no script yet (the
    example experiment file is the example; the learning test named in ``summary``'s docs page builds
    the same run in Python)"""
    example_config: str
    """the example experiment file generated from ``defaults`` (plus ``example_extras``)"""
    team: bool = False
    """one algorithm over every agent of a multi-agent env (value decomposition): the builder reads
    :attr:`~tshtrain.config.builders.BuildContext.agents`, and a file needs ``agents.layout: shared``"""
    example_extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """what the example experiment file sets beyond the default experiment: the online examples whose
    replay buffers are the offline examples' datasets set ``output_dir`` and ``buffer.save_on_exit``"""
