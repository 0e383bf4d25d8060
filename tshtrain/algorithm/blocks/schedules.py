"""Schedules of hyperparameters over update steps (learning rate, PPO's clip range).

A schedule is a value object: it maps an update-step count to a factor that multiplies the configured
base value (``lr * schedule.factor(k)``). The count ``k`` is the number of update steps the algorithm
has done before the current one; the algorithm keeps it itself and saves it with its state, so a
schedule never needs trainer internals and resumes correctly from a checkpoint.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import final

from typing_extensions import override

from tshtrain.constraints import NonNegativeFloat, PositiveInt, validate_fields
from tshtrain.errors import ConfigurationError, short_repr


class Schedule(ABC):
    """A multiplier of a base hyperparameter, as a function of the number of update steps done."""

    @abstractmethod
    def factor(self, num_update_steps: int) -> float:
        """The factor for an update step after ``num_update_steps`` earlier update steps."""


@final
@dataclass(frozen=True, kw_only=True)
class LinearSchedule(Schedule):
    """Linear from ``start_factor`` to ``end_factor`` over ``num_update_steps`` update steps, constant
    afterwards. ``LinearSchedule(num_update_steps=n)`` is the usual linear decay to 0 (as in
    Stable-Baselines3's ``lin_...`` schedules): update step k (0-based) uses the factor ``1 - k / n``.

    Compute ``num_update_steps`` for a run with :func:`num_update_steps_for`."""

    num_update_steps: PositiveInt
    """length of the linear part, in update steps: pass the number of update steps of the run (see
    :func:`num_update_steps_for`)"""
    start_factor: NonNegativeFloat = 1.0
    """factor at the first update step"""
    end_factor: NonNegativeFloat = 0.0
    """factor after num_update_steps update steps"""

    def __post_init__(self) -> None:
        validate_fields(self)

    @override
    def factor(self, num_update_steps: int) -> float:
        progress = min(num_update_steps, self.num_update_steps) / self.num_update_steps
        return self.start_factor + (self.end_factor - self.start_factor) * progress


def check_schedule(owner: object, name: str, value: object) -> None:
    """Raise ``ConfigurationError`` unless ``value`` (field ``name`` of ``owner``) is a Schedule or None."""
    if value is not None and not isinstance(value, Schedule):
        raise ConfigurationError(
            f"{type(owner).__name__}.{name} must be a tshtrain.algorithm.Schedule (e.g. "
            f"LinearSchedule(num_update_steps=...)) or None, got {short_repr(value)}."
        )


def schedule_factor(schedule: Schedule | None, num_update_steps: int) -> float:
    """``schedule.factor(num_update_steps)``, or 1.0 without a schedule."""
    return 1.0 if schedule is None else schedule.factor(num_update_steps)


def num_update_steps_for(*, num_env_steps: int, collection_step_num_env_steps: int, num_envs: int) -> int:
    """The update steps of an on-policy run of ``num_env_steps`` env steps.

    A collection step of n env steps on N envs collects ``c = ceil(n / N) * N`` env steps and is
    followed by one update step, so the run has ``ceil(num_env_steps / c)`` update steps. For a run
    that is not stopped early, ``num_env_steps = max_epochs * ceil(epoch_num_steps / c) * c``.
    """
    for name, value in (
        ("num_env_steps", num_env_steps),
        ("collection_step_num_env_steps", collection_step_num_env_steps),
        ("num_envs", num_envs),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"num_update_steps_for: {name} must be an int >= 1, got {value!r}.")
    collected = -(-collection_step_num_env_steps // num_envs) * num_envs
    return -(-num_env_steps // collected)
