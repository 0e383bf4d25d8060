"""The pydantic base of every experiment-file section, and the env section's own sub-sections.

Split from :mod:`tshtrain.config.models` so that :mod:`tshtrain.config.env_kinds` (which the env
section validates against) can use the sub-sections without importing the models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class Section(BaseModel):
    """A section of an experiment: unknown keys are errors, values are immutable after validation, float
    fields refuse NaN and infinity."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class WrapperConfig(Section):
    """A Gymnasium wrapper applied to every sub-env."""

    name: str
    """the wrapper's import path: ``"gymnasium.wrappers.FlattenObservation"`` or ``"module:attr"``"""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """keyword arguments of the wrapper (after the env)"""


class RayEnvConfig(Section):
    """Where and how ``env.vector: ray`` runs the sub-envs (:class:`tshtrain.env.ray_env.RayVectorEnv`)."""

    address: str | None = None
    """an existing Ray cluster to connect to (``ray.init(address=...)``: ``auto``, ``ray://host:10001``);
    None: start a local instance (unless Ray is initialised in the process already)"""
    num_cpus: PositiveInt | None = None
    """logical CPUs of the local instance tshtrain starts; None: all of the machine's"""
    num_workers: PositiveInt | None = None
    """Ray actors per vector env, each holding a contiguous group of sub-envs (more than the env has
    sub-envs: one per sub-env); None: one per sub-env, at most the instance's CPUs"""
    num_cpus_per_worker: PositiveFloat | None = None
    """CPUs each actor reserves (spreads workers over a cluster); None: none reserved (Ray's actor
    default), so that the training and test envs fit on any instance"""
    on_worker_failure: Literal["raise", "restart"] = "raise"
    """a dead or silent worker: ``raise`` stops the run naming the worker, its sub-envs and the env;
    ``restart`` replaces it, its episodes end truncated"""
    timeout_s: PositiveFloat = 60.0
    """how long a worker may take for a reset, step or call before it counts as failed"""
