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
)
from tshtrain.algorithm.blocks.distributional import CategoricalQNet, categorical_projection
from tshtrain.algorithm.blocks.offpolicy import ReplaySample
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.q_learning import HardTargetQLearner
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
    """The update of C51 and Rainbow on one :class:`CategoricalQNet`: the cross-entropy step through a
    :class:`HardTargetQLearner` (target network, Adam, hard target copies, priority updates)."""

    def __init__(self, net: CategoricalQNet, params: C51Params, name: str):
        self.net = net
        self.params = params
        self.name = name
        self.q = HardTargetQLearner(net, params)
        """the target network, Adam and the gradient-step counter (the algorithm registers its components)"""
        self.target_net = categorical_net(self.q.target.net, name)

    def sample(self, buffer: AnyReplayBuffer, batch_size: int, hooks: UpdateHooks) -> ReplaySample:
        """Begin an update (its learning rate) with a batch with n-step returns from ``buffer``."""
        return self.q.begin_update(buffer, batch_size, hooks, self.net.support.device)

    def step(
        self, buffer: AnyReplayBuffer, batch: ReplaySample, hooks: UpdateHooks, epsilon: float
    ) -> C51TrainingStats:
        """One gradient step on ``batch`` (sampled from ``buffer``, whose priorities it updates)."""
        p = self.params
        td = categorical_td(self.net, self.target_net, batch, is_double=p.is_double)
        stats = self.q.prioritized_step(
            self.name,
            buffer,
            batch,
            hooks,
            loss_N=td.cross_entropy_N,
            q_N=td.q_N,
            max_grad_norm=p.max_grad_norm,
        )
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
        self.register_components(self.learner.q.components())

    @override
    def extra_state(self) -> dict[str, Any]:
        return self.learner.q.extra_state()

    @override
    def load_extra_state(self, state: Any) -> None:
        self.learner.q.load_extra_state(state)

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> C51TrainingStats:
        batch = self.learner.sample(buffer, batch_size, hooks)
        return self.learner.step(buffer, batch, hooks, self.policy.eps)
