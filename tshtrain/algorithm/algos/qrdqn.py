"""QR-DQN: quantile regression distributional Q-learning (Dabney et al. 2018a), with the double-Q action
choice, n-step returns and prioritized replay of :mod:`tshtrain.algorithm.algos.dqn`.

The network (:class:`~tshtrain.algorithm.blocks.distributional.QuantileQNet`) predicts ``num_quantiles``
quantiles of the return per action at fixed fractions; each is regressed towards every target sample
``R + D * theta_j(o', a')`` with the quantile Huber loss. With a prioritized buffer the per-sample loss
is the new priority.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import torch
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
    make_adam,
)
from tshtrain.algorithm.blocks.distributional import QuantileQNet, quantile_huber_loss
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.offpolicy import host_scalars, sample_replay, update_priorities
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class QuantileParams:
    """Hyperparameters of :class:`QRDQN` and :class:`~tshtrain.algorithm.IQN` (IQN's tau sample sizes
    are arguments of IQN). The number of quantiles belongs to the network
    (:func:`~tshtrain.algorithm.quantile_mlp`)."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    target_update_freq: PositiveInt = 500
    """gradient steps between two hard copies of the online network into the target network"""
    is_double: bool = True
    """the online network picks the next action by its mean, the target network gives its quantiles (as
    Tianshou); False: the target network does both"""
    kappa: PositiveFloat = 1.0
    """threshold of the quantile Huber loss (Tianshou: 1, not configurable)"""
    max_grad_norm: PositiveFloat | None = None
    """clip the gradient norm to this value (None: no clipping)"""
    n_step: PositiveInt = 1
    """transitions summed in the target before bootstrapping (stops early at episode ends)"""
    lr_schedule: Schedule | None = None
    """multiplies the learning rate by schedule.factor(k) after k gradient steps; None: constant"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class QuantileTrainingStats(TrainingStats):
    """Statistics of QR-DQN / IQN gradient steps."""

    loss: float = 0.0
    """quantile Huber loss (importance-weighted with PER)"""
    q_mean: float = 0.0
    """mean of the predicted quantiles of the taken actions"""
    epsilon: float = 0.0
    """the exploration epsilon at the time of the step"""
    grad_norm: float = 0.0
    """gradient norm before clipping (0 when max_grad_norm is None: not computed)"""


def _quantile_net(q_net: Any) -> QuantileQNet:
    if not isinstance(q_net, QuantileQNet):
        raise ConfigurationError(
            f"QRDQN needs a policy whose q_net is a QuantileQNet (e.g. quantile_mlp(...)), "
            f"got {type(q_net).__name__}."
        )
    return q_net


def taken(values_NAX: torch.Tensor, act_N: torch.Tensor) -> torch.Tensor:
    """``values_NAX[n, act_N[n]]``, shape (N, X)."""
    return values_NAX[torch.arange(len(act_N), device=act_N.device), act_N.long()]


@final
class QRDQN(OffPolicyAlgorithm[QValuePolicy, QuantileTrainingStats]):
    """Quantile-regression DQN on a :class:`QValuePolicy` whose ``q_net`` is a :class:`QuantileQNet`
    (greedy on the quantiles' mean, epsilon-greedy exploration through the collector's
    ``exploration_noise=True``)."""

    def __init__(self, *, policy: QValuePolicy, params: QuantileParams | None = None):
        super().__init__(policy=policy)
        self.params = params or QuantileParams()
        self.net = _quantile_net(policy.q_net)
        self.target = TargetNetwork(self.net)
        self.target_net = _quantile_net(self.target.net)
        self._net_params = list(self.net.parameters())
        self.optim = make_adam(self._net_params, lr=self.params.lr)
        self.num_gradient_steps = 0
        self.register_components({"target_q_net": self.target, "optim": self.optim})
        self.lrs = ScheduledLearningRates(self.params.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"num_gradient_steps": self.num_gradient_steps}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.num_gradient_steps = int(state.get("num_gradient_steps", 0))

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> QuantileTrainingStats:
        self.lrs.begin_update()
        p = self.params
        batch = sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=self.policy.device, hooks=hooks
        )
        assert isinstance(batch.obs, torch.Tensor) and isinstance(batch.obs_next, torch.Tensor)
        with torch.no_grad():
            next_NAT = self.target_net.quantiles(batch.obs_next)
            chooser_NA = self.net(batch.obs_next) if p.is_double else next_NAT.mean(-1)
            next_NT = taken(next_NAT, chooser_NA.argmax(dim=-1))
            target_NT = batch.returns.unsqueeze(-1) + batch.discounts.unsqueeze(-1) * next_NT
        pred_NQ = taken(self.net.quantiles(batch.obs), batch.act)
        loss_N = quantile_huber_loss(pred_NQ, target_NT, self.net.tau_hat, kappa=p.kappa)
        loss = loss_N.mean() if batch.weight is None else (loss_N * batch.weight).mean()
        clipped = optimizer_step(
            self.optim, "optim", {"loss": loss}, hooks, params=self._net_params, max_grad_norm=p.max_grad_norm
        )
        grad_norm = torch.zeros((), device=loss.device) if clipped is None else clipped
        self.num_gradient_steps += 1
        if self.num_gradient_steps % p.target_update_freq == 0:
            self.target.hard_update()
        stats = host_scalars(
            "QRDQN", {"loss": loss, "q_mean": pred_NQ.mean(), "grad_norm": grad_norm}, losses=("loss",)
        )
        update_priorities(buffer, batch.indices, loss_N.detach().unsqueeze(0))
        return QuantileTrainingStats(
            loss=stats["loss"], q_mean=stats["q_mean"], epsilon=self.policy.eps, grad_norm=stats["grad_norm"]
        )
