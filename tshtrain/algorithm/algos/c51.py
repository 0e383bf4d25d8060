"""C51: categorical distributional Q-learning (Bellemare et al. 2017), with the double-Q action choice,
n-step returns and prioritized replay of :mod:`tshtrain.algorithm.algos.dqn`.

The network (:class:`~tshtrain.algorithm.blocks.distributional.CategoricalQNet`) predicts a distribution
over ``num_atoms`` fixed returns; the target distribution of ``R + D * Z(o', a')`` is projected onto the
same atoms and the loss is the cross-entropy to it. With a prioritized buffer the per-sample
cross-entropy is the new priority (as in Hessel et al. 2018).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, final

import torch
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
    make_adam,
)
from tshtrain.algorithm.blocks.distributional import CategoricalQNet, categorical_projection
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.offpolicy import ReplaySample, host_scalars, sample_replay, update_priorities
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class C51Params:
    """Hyperparameters of :class:`C51` and :class:`~tshtrain.algorithm.Rainbow`. The support
    (``num_atoms``, ``v_min``, ``v_max``) belongs to the network: see
    :func:`~tshtrain.algorithm.categorical_mlp`."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    target_update_freq: PositiveInt = 500
    """gradient steps between two hard copies of the online network into the target network"""
    is_double: bool = True
    """the online network picks the next action, the target network gives its distribution (as
    Tianshou's C51); False: the target network does both"""
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
class C51TrainingStats(TrainingStats):
    """Statistics of C51 / Rainbow gradient steps."""

    loss: float = 0.0
    """cross-entropy to the projected target distribution (importance-weighted with PER)"""
    q_mean: float = 0.0
    """mean expected Q(o, a) of the sampled transitions"""
    epsilon: float = 0.0
    """the exploration epsilon at the time of the step"""
    grad_norm: float = 0.0
    """gradient norm before clipping (0 when max_grad_norm is None: not computed)"""


class CategoricalTD(NamedTuple):
    """Per-sample results of the categorical TD step."""

    cross_entropy_N: torch.Tensor
    """-sum_z target(z) log p(z | o, a), differentiable, shape (N,)"""
    q_N: torch.Tensor
    """expected Q(o, a) of the online network, detached, shape (N,)"""


def categorical_td(
    online: CategoricalQNet, target: CategoricalQNet, sample: ReplaySample, *, is_double: bool
) -> CategoricalTD:
    """Cross-entropy of ``online``'s distribution of the taken actions to the projected target
    distribution of ``R + D * Z_target(o', a')``."""
    assert isinstance(sample.obs, torch.Tensor) and isinstance(sample.obs_next, torch.Tensor)
    with torch.no_grad():
        next_log_probs_NAZ = target.log_probs(sample.obs_next)
        next_probs_NAZ = next_log_probs_NAZ.exp()
        chooser_NA = online(sample.obs_next) if is_double else (next_probs_NAZ * target.support).sum(-1)
        next_act_N = chooser_NA.argmax(dim=-1)
        next_probs_NZ = next_probs_NAZ[torch.arange(len(next_act_N), device=next_act_N.device), next_act_N]
        target_NZ = categorical_projection(sample.returns, sample.discounts, next_probs_NZ, online.support)
    log_probs_NAZ = online.log_probs(sample.obs)
    act_N = sample.act.long()
    log_probs_NZ = log_probs_NAZ[torch.arange(len(act_N), device=act_N.device), act_N]
    cross_entropy_N = -(target_NZ * log_probs_NZ).sum(-1)
    q_N = (log_probs_NZ.detach().exp() * online.support).sum(-1)
    return CategoricalTD(cross_entropy_N, q_N)


def categorical_net(q_net: Any, owner: str) -> CategoricalQNet:
    """``q_net`` if it is a :class:`CategoricalQNet`, else a ConfigurationError naming ``owner``."""
    if not isinstance(q_net, CategoricalQNet):
        raise ConfigurationError(
            f"{owner} needs a policy whose q_net is a CategoricalQNet (e.g. categorical_mlp(...)), got "
            f"{type(q_net).__name__}."
        )
    return q_net


@final
class CategoricalLearner:
    """The update of C51 and Rainbow on one :class:`CategoricalQNet`: target network, Adam, the
    cross-entropy step, hard target copies and priority updates (a component of both algorithms)."""

    def __init__(self, net: CategoricalQNet, params: C51Params, name: str):
        self.net = net
        self.params = params
        self.name = name
        self.target = TargetNetwork(net)
        self.target_net = categorical_net(self.target.net, name)
        self.net_params = list(net.parameters())
        self.optim = make_adam(self.net_params, lr=params.lr)
        self.num_gradient_steps = 0

    def sample(self, buffer: AnyReplayBuffer, batch_size: int, hooks: UpdateHooks) -> ReplaySample:
        """A batch with n-step returns from ``buffer``."""
        p = self.params
        return sample_replay(
            buffer, batch_size, gamma=p.gamma, n_step=p.n_step, device=self.net.support.device, hooks=hooks
        )

    def step(
        self, buffer: AnyReplayBuffer, batch: ReplaySample, hooks: UpdateHooks, epsilon: float
    ) -> C51TrainingStats:
        """One gradient step on ``batch`` (sampled from ``buffer``, whose priorities it updates)."""
        p = self.params
        td = categorical_td(self.net, self.target_net, batch, is_double=p.is_double)
        ce_N = td.cross_entropy_N
        loss = ce_N.mean() if batch.weight is None else (ce_N * batch.weight).mean()
        clipped = optimizer_step(
            self.optim, "optim", {"loss": loss}, hooks, params=self.net_params, max_grad_norm=p.max_grad_norm
        )
        grad_norm = torch.zeros((), device=loss.device) if clipped is None else clipped
        self.num_gradient_steps += 1
        if self.num_gradient_steps % p.target_update_freq == 0:
            self.target.hard_update()
        stats = host_scalars(
            self.name, {"loss": loss, "q_mean": td.q_N.mean(), "grad_norm": grad_norm}, losses=("loss",)
        )
        update_priorities(buffer, batch.indices, ce_N.detach().unsqueeze(0))
        return C51TrainingStats(
            loss=stats["loss"], q_mean=stats["q_mean"], epsilon=epsilon, grad_norm=stats["grad_norm"]
        )


@final
class C51(OffPolicyAlgorithm[QValuePolicy, C51TrainingStats]):
    """Categorical DQN on a :class:`QValuePolicy` whose ``q_net`` is a :class:`CategoricalQNet`
    (greedy on the expected Q-values, epsilon-greedy exploration through the collector's
    ``exploration_noise=True``)."""

    def __init__(self, *, policy: QValuePolicy, params: C51Params | None = None):
        super().__init__(policy=policy)
        self.params = params or C51Params()
        self.learner = CategoricalLearner(categorical_net(policy.q_net, "C51"), self.params, "C51")
        self.register_components({"target_q_net": self.learner.target, "optim": self.learner.optim})
        self.lrs = ScheduledLearningRates(self.params.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"num_gradient_steps": self.learner.num_gradient_steps}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.learner.num_gradient_steps = int(state.get("num_gradient_steps", 0))

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> C51TrainingStats:
        self.lrs.begin_update()
        batch = self.learner.sample(buffer, batch_size, hooks)
        return self.learner.step(buffer, batch, hooks, self.policy.eps)
