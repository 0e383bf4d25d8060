"""The run's counters: one frozen record used by the trainer, its callbacks, its logs and resumes.

A leaf module (standard library only), so that the logger layer, which imports nothing else of
tshtrain, can read counters back from its own records (``resume_from_log``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Counters:
    """How far a run has come (docs/concepts.md, "Counters").

    ``InfoStats`` reports the same numbers under Tianshou's names (``train_step`` for ``env_step``,
    ``train_episode`` for ``env_episode``).
    """

    epoch: int = 0
    """epochs begun (the open epoch included); 0 before the first training step"""
    env_step: int = 0
    """env steps collected for training (offline: transitions sampled from the dataset)"""
    env_episode: int = 0
    """training episodes finished"""
    update_step: int = 0
    """update steps taken"""
    gradient_step: int = 0
    """optimizer steps taken (summed from the updates' ``num_gradient_steps``)"""
    test_env_step: int = 0
    """env steps taken in test steps (``InfoStats.test_step``, Tianshou's name)"""
    test_episode: int = 0
    """test episodes finished"""
    training_step: int = 0
    """training steps completed in this run (not restored by ``resume_from_log``)"""

    def advanced(self, **increments: int) -> Counters:
        """A copy with the named counters increased by the given amounts."""
        return dataclasses.replace(self, **{k: getattr(self, k) + v for k, v in increments.items()})

    def state_dict(self) -> dict[str, int]:
        """The counters as plain ints (for checkpoints)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Counters:
        """Counters from :meth:`state_dict`; unknown names or non-int values raise ``ValueError``."""
        names = {f.name for f in dataclasses.fields(cls)}
        if "test_step" in state and "test_env_step" not in state:  # the name before 2026-11-29
            state = {("test_env_step" if k == "test_step" else k): v for k, v in state.items()}
        unknown = sorted(set(state) - names)
        if unknown:
            raise ValueError(f"Counters: unknown counters {unknown}; known: {sorted(names)}.")
        values: dict[str, int] = {}
        for name, value in state.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Counters.{name} must be an int >= 0, got {str(value)[:80]}.")
            values[name] = value
        return cls(**values)
