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

from tshtrain.algorithm.algos.qrdqn import QuantileParams, QuantileTrainingStats, taken
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    UpdateHooks,
    make_adam,
    seeded_generator,
)
from tshtrain.algorithm.blocks.distributional import ImplicitQuantileNet, quantile_huber_loss
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.offpolicy import host_scalars, sample_replay, update_priorities
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.polyak import TargetNetwork
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
        self.target = TargetNetwork(self.net)
        self.target_net = _iqn_net(self.target.net)
        self._net_params = list(self.net.parameters())
        self.optim = make_adam(self._net_params, lr=self.params.lr)
        self.generator = seeded_generator(seed, policy.device)
        """the generator of the sampled quantile fractions"""
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

    def _taus(self, n: int, num: int, device: torch.device) -> torch.Tensor:
        return torch.rand((n, num), generator=self.generator, device=device)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> QuantileTrainingStats:
        self.lrs.begin_update()
        p = self.params
        device = self.policy.device
        batch = sample_replay(buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=device, hooks=hooks)
        assert isinstance(batch.obs, torch.Tensor) and isinstance(batch.obs_next, torch.Tensor)
        n = batch.obs.shape[0]
        taus_NQ = self._taus(n, self.sampling.num_online_taus, device)
        target_taus_NT = self._taus(n, self.sampling.num_target_taus, device)
        with torch.no_grad():
            next_NAT = self.target_net.quantiles(batch.obs_next, target_taus_NT)
            chooser_NA = self.net(batch.obs_next) if p.is_double else next_NAT.mean(-1)
            next_NT = taken(next_NAT, chooser_NA.argmax(dim=-1))
            target_NT = batch.returns.unsqueeze(-1) + batch.discounts.unsqueeze(-1) * next_NT
        pred_NQ = taken(self.net.quantiles(batch.obs, taus_NQ), batch.act)
        loss_N = quantile_huber_loss(pred_NQ, target_NT, taus_NQ, kappa=p.kappa)
        loss = loss_N.mean() if batch.weight is None else (loss_N * batch.weight).mean()
        clipped = optimizer_step(
            self.optim, "optim", {"loss": loss}, hooks, params=self._net_params, max_grad_norm=p.max_grad_norm
        )
        grad_norm = torch.zeros((), device=loss.device) if clipped is None else clipped
        self.num_gradient_steps += 1
        if self.num_gradient_steps % p.target_update_freq == 0:
            self.target.hard_update()
        stats = host_scalars(
            "IQN", {"loss": loss, "q_mean": pred_NQ.mean(), "grad_norm": grad_norm}, losses=("loss",)
        )
        update_priorities(buffer, batch.indices, loss_N.detach().unsqueeze(0))
        return QuantileTrainingStats(
            loss=stats["loss"], q_mean=stats["q_mean"], epsilon=self.policy.eps, grad_norm=stats["grad_norm"]
        )
