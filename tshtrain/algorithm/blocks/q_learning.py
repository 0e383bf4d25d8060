"""What the DQN family (DQN, discrete CQL, C51, Rainbow, QR-DQN, IQN) shares around its one Q-network:
a target network copied every ``target_update_freq`` gradient steps, Adam on the network's parameters,
the learning-rate schedule, the gradient-step counter and n-step replay sampling.

* :class:`HardTargetParams`: the fields of the algorithms' params this block reads.
* :class:`HardTargetQLearner`: the component (each algorithm holds one and registers
  :meth:`HardTargetQLearner.components`).
* :func:`weighted_mean`: the mean of per-sample losses, with prioritized replay's importance weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, final

import torch
from torch import nn

from tshtrain.algorithm.base import Stateful, UpdateHooks, make_adam
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates
from tshtrain.algorithm.blocks.offpolicy import ReplaySample, host_scalars, sample_replay, update_priorities
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.algorithm.blocks.schedules import Schedule
from tshtrain.data.collector_base import AnyReplayBuffer


class HardTargetParams(Protocol):
    """The hyperparameters :class:`HardTargetQLearner` reads (fields of the DQN family's params)."""

    @property
    def lr(self) -> float:
        """Adam learning rate"""
        ...

    @property
    def gamma(self) -> float:
        """discount factor of the n-step returns"""
        ...

    @property
    def n_step(self) -> int:
        """transitions summed in the target before bootstrapping"""
        ...

    @property
    def target_update_freq(self) -> int:
        """gradient steps between two hard copies of the network into the target network"""
        ...

    @property
    def lr_schedule(self) -> Schedule | None:
        """multiplies the learning rate by schedule.factor(k) after k gradient steps; None: constant"""
        ...


def weighted_mean(loss_N: torch.Tensor, weight_N: torch.Tensor | None) -> torch.Tensor:
    """``mean(loss_N)``, or ``mean(loss_N * weight_N)`` with importance weights (prioritized replay)."""
    return loss_N.mean() if weight_N is None else (loss_N * weight_N).mean()


@final
class HardTargetQLearner:
    """The gradient-step plumbing of one Q-network with a hard-copied target network."""

    def __init__(self, net: nn.Module, params: HardTargetParams):
        """Args:
        net: the online network (the policy's ``q_net``); Adam trains all its parameters.
        params: the algorithm's hyperparameters.
        """
        self.net = net
        self.params = params
        self.target = TargetNetwork(net)
        self.net_params = list(net.parameters())
        self.optim = make_adam(self.net_params, lr=params.lr)
        self.lrs = ScheduledLearningRates(params.lr_schedule, [self.optim])
        self.num_gradient_steps = 0
        """gradient steps taken (saved in the algorithm's extra state)"""

    def components(self) -> dict[str, Stateful]:
        """What the algorithm registers: ``target_q_net``, ``optim`` and the schedule's count."""
        return {"target_q_net": self.target, "optim": self.optim, **self.lrs.components()}

    def extra_state(self) -> dict[str, Any]:
        """The gradient-step counter."""
        return {"num_gradient_steps": self.num_gradient_steps}

    def load_extra_state(self, state: Any, *, required: bool = False) -> None:
        """Restore :meth:`extra_state` (missing: 0, unless ``required``, then a KeyError)."""
        count = state["num_gradient_steps"] if required else state.get("num_gradient_steps", 0)
        self.num_gradient_steps = int(count)

    def begin_gradient_step(self) -> None:
        """Set this gradient step's learning rate (for algorithms that sample otherwise than
        :meth:`begin_update`: value decomposition's joint transitions)."""
        self.lrs.begin_update()

    def begin_update(
        self, buffer: AnyReplayBuffer, batch_size: int, hooks: UpdateHooks, device: torch.device
    ) -> ReplaySample:
        """Set this update's learning rate, then sample a batch with n-step returns from ``buffer``."""
        self.begin_gradient_step()
        p = self.params
        return sample_replay(buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=device, hooks=hooks)

    def gradient_step(
        self,
        losses: Mapping[str, torch.Tensor],
        hooks: UpdateHooks,
        *,
        max_grad_norm: float | None = None,
        foreach: bool | None = None,
    ) -> torch.Tensor:
        """One Adam step on the single loss in ``losses`` (reported to the hooks under its name), counted;
        a hard target copy every ``target_update_freq`` steps. Returns the gradient norm before clipping
        (0 when ``max_grad_norm`` is None: not computed)."""
        (loss,) = losses.values()
        clipped = optimizer_step(
            self.optim,
            "optim",
            losses,
            hooks,
            params=self.net_params,
            max_grad_norm=max_grad_norm,
            foreach=foreach,
        )
        grad_norm = torch.zeros((), device=loss.device) if clipped is None else clipped
        self.num_gradient_steps += 1
        if self.num_gradient_steps % self.params.target_update_freq == 0:
            self.target.hard_update()
        return grad_norm

    def prioritized_step(
        self,
        owner: str,
        buffer: AnyReplayBuffer,
        sample: ReplaySample,
        hooks: UpdateHooks,
        *,
        loss_N: torch.Tensor,
        q_N: torch.Tensor,
        max_grad_norm: float | None,
    ) -> dict[str, float]:
        """The step of the distributional algorithms: :meth:`gradient_step` on the weighted mean of the
        per-sample losses ``loss_N``, which become the new priorities. Returns ``loss``, ``q_mean`` (of
        ``q_N``) and ``grad_norm`` as floats; raises naming ``owner`` if the loss is not finite."""
        loss = weighted_mean(loss_N, sample.weight)
        grad_norm = self.gradient_step({"loss": loss}, hooks, max_grad_norm=max_grad_norm)
        stats = host_scalars(
            owner, {"loss": loss, "q_mean": q_N.mean(), "grad_norm": grad_norm}, losses=("loss",)
        )
        update_priorities(buffer, sample.indices, loss_N.detach().unsqueeze(0))
        return stats
