"""IQN: implicit quantile networks (Dabney et al. 2018b), with the double-Q action choice, n-step returns
and prioritized replay of :mod:`tshtrain.algorithm.algos.dqn`.

Each gradient step samples ``num_online_taus`` fractions per transition for the online quantiles and
``num_target_taus`` for the target samples, uniformly from the algorithm's ``generator`` (saved in
checkpoints), and applies the quantile Huber loss at the sampled fractions. Acting does not sample:
:class:`~tshtrain.algorithm.blocks.distributional.ImplicitQuantileNet` averages fixed, equally spaced
fractions (Tianshou samples 32 there), so acting draws no random numbers besides epsilon-greedy's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import torch
from typing_extensions import override

from tshtrain.algorithm.algos.qrdqn import (
    QuantileParams,
    QuantileTrainingStats,
    quantile_stats,
    quantile_target,
    taken,
)
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    UpdateHooks,
    seeded_generator,
)
from tshtrain.algorithm.blocks.distributional import ImplicitQuantileNet, quantile_huber_loss
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.q_learning import HardTargetQLearner
from tshtrain.constraints import PositiveInt, validate_fields
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class IQNSampling:
    """How many quantile fractions :class:`IQN` samples per transition in a gradient step."""

    num_online_taus: PositiveInt = 8
    """N: fractions of the online quantiles (Tianshou's online_sample_size: 8)"""
    num_target_taus: PositiveInt = 8
    """N': fractions of the target samples (Tianshou's target_sample_size: 8)"""

    def __post_init__(self) -> None:
        validate_fields(self)


def _iqn_net(q_net: Any) -> ImplicitQuantileNet:
    if not isinstance(q_net, ImplicitQuantileNet):
        raise ConfigurationError(
            f"IQN needs a policy whose q_net is an ImplicitQuantileNet (e.g. iqn_mlp(...)), "
            f"got {type(q_net).__name__}."
        )
    return q_net


@final
class IQN(OffPolicyAlgorithm[QValuePolicy, QuantileTrainingStats]):
    """Implicit quantile DQN on a :class:`QValuePolicy` whose ``q_net`` is an
    :class:`ImplicitQuantileNet` (greedy on the mean of fixed fractions, epsilon-greedy exploration)."""

    def __init__(
        self,
        *,
        policy: QValuePolicy,
        params: QuantileParams | None = None,
        sampling: IQNSampling | None = None,
        seed: int | None = None,
    ):
        """Args:
        policy: the policy over an ImplicitQuantileNet.
        params: hyperparameters shared with QR-DQN.
        sampling: fractions sampled per transition.
        seed: seeds ``generator``, the source of the sampled fractions.
        """
        super().__init__(policy=policy)
        self.params = params or QuantileParams()
        self.sampling = sampling or IQNSampling()
        self.net = _iqn_net(policy.q_net)
        self.learner = HardTargetQLearner(self.net, self.params)
        """the target network, Adam and the gradient-step counter"""
        self.target_net = _iqn_net(self.learner.target.net)
        self.generator = seeded_generator(seed, policy.device)
        """the generator of the sampled quantile fractions"""
        self.register_components(self.learner.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.learner.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.learner.load_extra_state(state)

    def _taus(self, n: int, num: int, device: torch.device) -> torch.Tensor:
        return torch.rand((n, num), generator=self.generator, device=device)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> QuantileTrainingStats:
        p = self.params
        device = self.policy.device
        batch = self.learner.begin_update(buffer, batch_size, hooks, device)
        assert isinstance(batch.obs, torch.Tensor) and isinstance(batch.obs_next, torch.Tensor)
        n = batch.obs.shape[0]
        taus_NQ = self._taus(n, self.sampling.num_online_taus, device)
        target_taus_NT = self._taus(n, self.sampling.num_target_taus, device)
        with torch.no_grad():
            next_NAT = self.target_net.quantiles(batch.obs_next, target_taus_NT)
        target_NT = quantile_target(self.net, next_NAT, batch, is_double=p.is_double)
        pred_NQ = taken(self.net.quantiles(batch.obs, taus_NQ), batch.act)
        loss_N = quantile_huber_loss(pred_NQ, target_NT, taus_NQ, kappa=p.kappa)
        stats = self.learner.prioritized_step(
            "IQN", buffer, batch, hooks, loss_N=loss_N, q_N=pred_NQ, max_grad_norm=p.max_grad_norm
        )
        return quantile_stats(stats, self.policy.eps)
