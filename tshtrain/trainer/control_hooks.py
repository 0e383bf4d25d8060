"""The target-network hook (the other built-ins are callbacks: :mod:`tshtrain.trainer.builtin_callbacks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.hooks import (
    HookContext,
    HookStage,
    OptimizerStep,
)

if TYPE_CHECKING:
    from tshtrain.trainer.base import Trainer


def _require_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{owner}.{name} must be an int >= 1, got {value!r}.")


@final
class TargetNetworkUpdate:
    """Refreshes a :class:`~tshtrain.algorithm.TargetNetwork` after every ``every_num_gradient_steps``
    steps of an optimizer: a hard copy (``tau=None``) or Polyak averaging by ``tau``.

    Stage: ``post_optim``. With several optimizers (actor and critic), name the one to count with
    ``optimizer`` (its name in ``algorithm.components()``); by default every optimizer step counts.
    """

    def __init__(
        self,
        target: TargetNetwork,
        *,
        tau: float | None = None,
        every_num_gradient_steps: int = 1,
        optimizer: str | None = None,
    ):
        _require_int("TargetNetworkUpdate", "every_num_gradient_steps", every_num_gradient_steps)
        if tau is not None and (isinstance(tau, bool) or not 0.0 < tau <= 1.0):
            raise ConfigurationError(
                f"TargetNetworkUpdate.tau must lie in (0, 1] (None: hard copies), got {tau!r}."
            )
        self.target = target
        self.tau = tau
        self.every_num_gradient_steps = every_num_gradient_steps
        self.optimizer = optimizer
        self.num_steps = 0

    def register(self, trainer: Trainer[Any, Any], *, name: str = "target_network") -> None:
        """Register at post_optim."""
        trainer.register_hook(HookStage.POST_OPTIM, self, name=name)

    def __call__(self, ctx: HookContext[OptimizerStep]) -> None:
        if self.optimizer is not None and ctx.data.name != self.optimizer:
            return
        self.num_steps += 1
        if self.num_steps % self.every_num_gradient_steps == 0:
            if self.tau is None:
                self.target.hard_update()
            else:
                self.target.update(self.tau)

    def state_dict(self) -> dict[str, Any]:
        return {"num_steps": self.num_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.num_steps = int(state["num_steps"])
