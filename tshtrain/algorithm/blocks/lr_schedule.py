"""The one way to schedule learning rates: an algorithm's ``lr_schedule`` param, applied by this block.

Every algorithm with optimizers takes ``lr_schedule: Schedule | None`` in its params and holds one
:class:`ScheduledLearningRates` over all its optimizers (as Stable-Baselines3 does, the entropy and
penalty-weight optimizers included). At the start of every ``update`` call the block sets each
optimizer's learning rate to its configured rate times ``schedule.factor(k)``, where ``k`` counts the
earlier ``update`` calls: update steps on-policy, gradient steps off-policy and offline (their trainers
call ``update`` once per gradient step). Without a schedule the block changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, final

import torch

from tshtrain.algorithm.base import Stateful
from tshtrain.algorithm.blocks.schedules import Schedule, schedule_factor


@final
class ScheduledLearningRates:
    """The learning rates of some optimizers on a :class:`Schedule` over the algorithm's updates.

    The base rates are those the optimizers hold when the block is built (the params' rates). The
    count of updates is saved with the algorithm: off-policy and offline algorithms register the block
    as their ``"lr_schedule"`` component when a schedule is set (:meth:`components`); A2C and PPO use
    their own update-step counter (it also drives PPO's clip schedule) with :meth:`apply`.
    """

    def __init__(self, schedule: Schedule | None, optimizers: Iterable[torch.optim.Optimizer]):
        self.schedule = schedule
        self._base_lrs = [
            (optim, [float(group["lr"]) for group in optim.param_groups]) for optim in optimizers
        ]
        self.num_updates = 0
        """``update`` calls begun so far (counted by :meth:`begin_update`)"""

    def apply(self, num_updates: int) -> float:
        """Set the learning rates of an update after ``num_updates`` earlier ones; the factor applied
        (1.0 without a schedule, when nothing is changed)."""
        if self.schedule is None:
            return 1.0
        factor = schedule_factor(self.schedule, num_updates)
        for optim, base_lrs in self._base_lrs:  # param_groups: loading an optimizer's state replaces them
            for group, base_lr in zip(optim.param_groups, base_lrs, strict=True):
                group["lr"] = base_lr * factor
        return factor

    def begin_update(self) -> float:
        """:meth:`apply` with the block's own count, then count this update; the factor applied."""
        factor = self.apply(self.num_updates)
        self.num_updates += 1
        return factor

    def components(self) -> dict[str, Stateful]:
        """``{"lr_schedule": self}`` when a schedule is set (its count is then saved), else ``{}``."""
        return {} if self.schedule is None else {"lr_schedule": self}

    def state_dict(self) -> dict[str, Any]:
        """The count of updates."""
        return {"num_updates": self.num_updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.num_updates = int(state["num_updates"])


def optimizers_in(components: Mapping[str, Stateful]) -> list[torch.optim.Optimizer]:
    """The optimizers among an algorithm's components, in their order."""
    return [component for component in components.values() if isinstance(component, torch.optim.Optimizer)]
