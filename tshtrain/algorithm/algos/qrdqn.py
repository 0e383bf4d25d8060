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
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.distributional import QuantileQNet, quantile_huber_loss
from tshtrain.algorithm.blocks.offpolicy import ReplaySample
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.q_learning import HardTargetQLearner
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


@torch.no_grad()
def quantile_target(
    online: nn.Module, next_NAT: torch.Tensor, sample: ReplaySample, *, is_double: bool
) -> torch.Tensor:
    """The target samples ``R + D * theta_j(o', a')`` of QR-DQN and IQN, shape (N, T), from the target
    network's quantiles ``next_NAT`` of ``o'``; ``a'`` maximises ``online``'s values of ``o'``
    (``is_double``) or the mean of ``next_NAT``."""
    chooser_NA = online(sample.obs_next) if is_double else next_NAT.mean(-1)
    next_NT = taken(next_NAT, chooser_NA.argmax(dim=-1))
    return sample.returns.unsqueeze(-1) + sample.discounts.unsqueeze(-1) * next_NT


def quantile_stats(stats: dict[str, float], epsilon: float) -> QuantileTrainingStats:
    """The record of :meth:`HardTargetQLearner.prioritized_step`'s floats."""
    return QuantileTrainingStats(
        loss=stats["loss"], q_mean=stats["q_mean"], epsilon=epsilon, grad_norm=stats["grad_norm"]
    )


@final
class QRDQN(OffPolicyAlgorithm[QValuePolicy, QuantileTrainingStats]):
    """Quantile-regression DQN on a :class:`QValuePolicy` whose ``q_net`` is a :class:`QuantileQNet`
    (greedy on the quantiles' mean, epsilon-greedy exploration through the collector's
    ``exploration_noise=True``)."""

    def __init__(self, *, policy: QValuePolicy, params: QuantileParams | None = None):
        super().__init__(policy=policy)
        self.params = params or QuantileParams()
        self.net = _quantile_net(policy.q_net)
        self.learner = HardTargetQLearner(self.net, self.params)
        """the target network, Adam and the gradient-step counter"""
        self.target_net = _quantile_net(self.learner.target.net)
        self.register_components(self.learner.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.learner.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.learner.load_extra_state(state)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> QuantileTrainingStats:
        p = self.params
        batch = self.learner.begin_update(buffer, batch_size, hooks, self.policy.device)
        assert isinstance(batch.obs, torch.Tensor) and isinstance(batch.obs_next, torch.Tensor)
        with torch.no_grad():
            next_NAT = self.target_net.quantiles(batch.obs_next)
        target_NT = quantile_target(self.net, next_NAT, batch, is_double=p.is_double)
        pred_NQ = taken(self.net.quantiles(batch.obs), batch.act)
        loss_N = quantile_huber_loss(pred_NQ, target_NT, self.net.tau_hat, kappa=p.kappa)
        stats = self.learner.prioritized_step(
            "QRDQN", buffer, batch, hooks, loss_N=loss_N, q_N=pred_NQ, max_grad_norm=p.max_grad_norm
        )
        return quantile_stats(stats, self.policy.eps)
