"""Statistics of gradient steps converted to floats once per update step, not once per gradient step.

An off-policy update step is many ``algorithm.update`` calls (one gradient step each). Turning each
call's scalars (losses, Q means, ...) into floats costs a host transfer per gradient step (a device sync
on CUDA). Instead an algorithm builds its record with :func:`gradient_step_stats`, which keeps the
scalars as detached tensors while the algorithm :meth:`~tshtrain.algorithm.Algorithm.defers_stats`
(the off-policy trainer's update step, :class:`tshtrain.trainer.steps.OffPolicyStep`), and
:func:`resolve_stats` fills in the floats of all of them with one ``torch.stack(...).tolist()``.
Called outside that block, :func:`gradient_step_stats` resolves at once: ``algorithm.update`` returns
floats, as it always did.

A record is complete only once resolved (its tensor fields read NaN before); the trainer resolves the
records of an update step before anything reads them. The non-finite loss check
(:class:`~tshtrain.errors.NonFiniteLossError`) runs at resolution: when deferred, after the update
step's last gradient step rather than after the failing one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import torch

from tshtrain.algorithm.base import TrainingStats, check_finite_loss

__all__ = ["gradient_step_stats", "resolve_stats"]

_TStats = TypeVar("_TStats", bound=TrainingStats)

_PENDING = "_pending_scalars"
"""the instance attribute (outside the dataclass fields) that holds a record's unresolved scalars"""


class _Pending(NamedTuple):
    owner: str
    tensors: dict[str, torch.Tensor]
    """field name -> detached 0-dim tensor"""
    losses: Mapping[str, str]
    """field name -> the loss's name in the error message, for the fields checked to be finite"""


def gradient_step_stats(
    cls: type[_TStats],
    owner: str,
    tensors: Mapping[str, torch.Tensor],
    *,
    losses: Mapping[str, str],
    deferred: bool,
    **values: Any,
) -> _TStats:
    """A ``cls`` record whose fields named in ``tensors`` are those 0-dim tensors as floats, and whose
    other fields are ``values``.

    Args:
        owner: the algorithm, named in a non-finite loss error.
        losses: the fields that must be finite, each with its name for the error (``{"loss": "TD loss"}``).
        deferred: keep the tensors until :func:`resolve_stats` (the algorithm's ``defers_stats``);
            False resolves now (one host transfer).
    """
    placeholders: dict[str, Any] = dict.fromkeys(tensors, math.nan)  # read NaN until resolved
    stat = cls(**values, **placeholders)
    pending = _Pending(owner, {name: t.detach() for name, t in tensors.items()}, losses)
    object.__setattr__(stat, _PENDING, pending)  # outside the frozen fields; removed when resolved
    if not deferred:
        resolve_stats((stat,))
    return stat


def resolve_stats(stats: Sequence[TrainingStats]) -> None:
    """Fill in the floats of every unresolved record in ``stats`` with one host transfer (records built
    otherwise are left as they are). Raises :class:`~tshtrain.errors.NonFiniteLossError` for the first
    non-finite loss, in the order of ``stats``."""
    pending = [(stat, p) for stat in stats if (p := stat.__dict__.get(_PENDING)) is not None]
    if not pending:
        return
    tensors = [t.float() for _, p in pending for t in p.tensors.values()]
    values: list[float] = torch.stack(tensors).tolist()
    start = 0
    for stat, p in pending:
        named = dict(zip(p.tensors, values[start : start + len(p.tensors)], strict=True))
        start += len(p.tensors)
        for name, label in p.losses.items():
            if not math.isfinite(named[name]):
                check_finite_loss(p.owner, label, p.tensors[name])
        for name, value in named.items():
            object.__setattr__(stat, name, value)  # completing the record once, before it is read
        object.__delattr__(stat, _PENDING)
