"""DQN (Mnih et al. 2015) with a target network and, optionally, double Q-learning (van Hasselt 2016),
n-step returns (Sutton 1988; Hessel et al. 2018), dueling heads (Wang et al. 2016) and prioritized
replay (Schaul et al. 2016, through a prioritized buffer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.nets import activation_layer
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    ReplaySample,
    SampleScope,
    check_stackable_members,
    sample_members,
    stack_obs,
    takes_priorities,
    update_priorities,
)
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.polyak import TargetNetwork
from tshtrain.algorithm.blocks.q_learning import HardTargetQLearner, weighted_mean
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.algorithm.blocks.stacked_update import StackCache, StackedMembers
from tshtrain.algorithm.pending_stats import gradient_step_stats, resolve_stats
from tshtrain.constraints import PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class DQNParams:
    """Hyperparameters of :class:`DQN`."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    target_update_freq: PositiveInt = 500
    """gradient steps between two hard copies of the online network into the target network"""
    is_double: bool = True
    """double Q-learning: the online network picks the next action, the target network values it"""
    huber_loss: bool = True
    """Huber (smooth L1) instead of squared TD error"""
    max_grad_norm: PositiveFloat | None = None
    """clip the gradient norm to this value (None: no clipping)"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the gradient step after k gradient steps (e.g.
    ``LinearSchedule(num_update_steps=<gradient steps of the run>)``); None: constant learning rates"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class DQNTrainingStats(TrainingStats):
    """Statistics of DQN gradient steps."""

    loss: float = 0.0
    """TD loss"""
    q_mean: float = 0.0
    """mean Q(o, a) of the sampled transitions"""
    epsilon: float = 0.0
    """the exploration epsilon at the time of the step"""
    grad_norm: float = 0.0
    """gradient norm before clipping (0 when max_grad_norm is None: not computed)"""


@final
class DuelingQNet(nn.Module):
    """Dueling Q-network: ``Q(o, a) = V(h) + A(h, a) - mean_a' A(h, a')`` with ``h = features(o)``."""

    def __init__(self, features: nn.Module, value_head: nn.Module, advantage_head: nn.Module):
        """Args:
        features: shared trunk, observation -> h.
        value_head: h -> V, shape (N, 1).
        advantage_head: h -> A, shape (N, num_actions).
        """
        super().__init__()
        self.features = features
        self.value_head = value_head
        self.advantage_head = advantage_head

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h: torch.Tensor = self.features(obs)
        value: torch.Tensor = self.value_head(h)
        advantage: torch.Tensor = self.advantage_head(h)
        return value + advantage - advantage.mean(dim=-1, keepdim=True)


def _layers(sizes: Sequence[int], activation: type[nn.Module], *, last_activation: bool) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if last_activation or i < len(sizes) - 2:
            layers.append(activation_layer(activation))
    return layers


def dueling_mlp(
    input_dim: int,
    num_actions: int,
    hidden_sizes: Sequence[int] = (128, 128),
    head_hidden_sizes: Sequence[int] = (),
    activation: type[nn.Module] = nn.ReLU,
) -> DuelingQNet:
    """A :class:`DuelingQNet` of MLPs: a trunk with ``hidden_sizes`` (activation after each layer),
    and value / advantage heads with ``head_hidden_sizes`` each, then a linear output."""
    if not hidden_sizes:
        raise ConfigurationError("dueling_mlp: hidden_sizes must name at least one layer, got ().")
    trunk = nn.Sequential(*_layers([input_dim, *hidden_sizes], activation, last_activation=True))
    head = [hidden_sizes[-1], *head_hidden_sizes]
    value = nn.Sequential(*_layers([*head, 1], activation, last_activation=False))
    advantage = nn.Sequential(*_layers([*head, num_actions], activation, last_activation=False))
    return DuelingQNet(trunk, value, advantage)


@torch.no_grad()
def q_learning_target(
    policy: QValuePolicy, target_q_net: TargetNetwork, sample: ReplaySample, *, is_double: bool
) -> torch.Tensor:
    """``R + D * Q_targ(o', a')`` with ``a' = argmax Q(o', .)`` of the online network (double
    Q-learning) or of the target network (DQN, discrete CQL)."""
    q_next_target: torch.Tensor = target_q_net.net(sample.obs_next)
    chooser = policy.q_values(sample.obs_next) if is_double else q_next_target
    next_act = chooser.argmax(dim=-1, keepdim=True)
    return sample.returns + sample.discounts * q_next_target.gather(1, next_act).squeeze(-1)


@final
class DQN(OffPolicyAlgorithm[QValuePolicy, DQNTrainingStats]):
    """Deep Q-learning on a :class:`QValuePolicy` (epsilon-greedy exploration through the collector's
    ``exploration_noise=True``). With a prioritized buffer, TD errors update the priorities and the
    loss is weighted by the importance weights."""

    def __init__(
        self,
        *,
        policy: QValuePolicy,
        params: DQNParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        super().__init__(policy=policy)
        self.obs_normalization = ObsNormalization("DQN", obs_normalizer, {"policy": policy})
        self.params = params or DQNParams()
        self.learner = HardTargetQLearner(policy.q_net, self.params)
        """the target network, Adam and the gradient-step counter"""
        self.target_q_net = self.learner.target
        self.optim = self.learner.optim
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
    ) -> DQNTrainingStats:
        p = self.params
        batch = self.learner.begin_update(buffer, batch_size, hooks, self.policy.device)
        q = self.policy.q_values(batch.obs).gather(1, batch.act.long().unsqueeze(-1)).squeeze(-1)
        target = q_learning_target(self.policy, self.target_q_net, batch, is_double=p.is_double)
        if p.huber_loss and batch.weight is None:
            loss = F.smooth_l1_loss(q, target)
        else:
            per_sample = (
                F.smooth_l1_loss(q, target, reduction="none") if p.huber_loss else (q - target).pow(2)
            )
            loss = weighted_mean(per_sample, batch.weight)
        grad_norm = self.learner.gradient_step(
            {"TD loss": loss}, hooks, max_grad_norm=p.max_grad_norm, foreach=True
        )
        stats = gradient_step_stats(
            DQNTrainingStats,
            "DQN",
            {"loss": loss, "q_mean": q.detach().mean(), "grad_norm": grad_norm},
            losses={"loss": "TD loss"},
            deferred=self.defers_stats,
            epsilon=self.policy.eps,
        )
        if takes_priorities(buffer):  # the TD errors serve only as priorities
            update_priorities(buffer, batch.indices, (q - target).detach().unsqueeze(0))
        self.obs_normalization.update(batch.obs)
        return stats

    @staticmethod
    def check_stackable(members: Sequence[DQN]) -> None:
        """Refuse members that :meth:`stacked_update` cannot update together (one line, naming why).

        Raises:
            ConfigurationError: differing params or gradient-step counts, or an ``obs_normalizer``.
        """
        _check_stackable(members)

    @staticmethod
    def stacked_update(
        members: Sequence[DQN],
        buffers: Sequence[AnyReplayBuffer],
        batch_size: int,
        num_steps: int,
        *,
        scopes: Sequence[SampleScope] | None = None,
        cache: StackCache | None = None,
    ) -> list[list[DQNTrainingStats]]:
        """``num_steps`` gradient steps of K independent DQN runs (seeds) at once: member k samples
        from ``buffers[k]`` with its own generator, as its own :meth:`update` would, and the TD losses
        of all members are evaluated and stepped on their stacked online and target networks
        (:class:`~tshtrain.algorithm.blocks.stacked_update.StackedMembers`); target copies, priorities
        and step counts per member as in :meth:`update`. Per member, the statistics of each step. The
        same learning as ``num_steps`` calls of ``members[k].update`` to float rounding. ``scopes``:
        member k samples inside ``scopes[k]()`` (a multi-agent learner's columns of a shared buffer).
        ``cache``: reuse the stack of the last call made with this cache while it still stands for the
        members (:class:`~tshtrain.algorithm.blocks.stacked_update.StackCache`).

        Raises:
            ConfigurationError: members whose params or gradient-step counts differ, or with an
                ``obs_normalizer`` (not stacked yet).
        """
        if not members or num_steps == 0:
            return [[] for _ in members]
        first = members[0]
        _check_stackable(members)
        p, device = first.params, first.policy.device
        nets = [{"q_net": m.policy.q_net, "target": m.target_q_net.net} for m in members]
        optimizers = [m.optim for m in members]
        stack = (
            StackedMembers(nets, optimizers, owner="DQN")
            if cache is None
            else cache.stack(nets, optimizers, owner="DQN")
        )

        loss_of = _stacked_loss_function(first, stack)

        stats: list[list[DQNTrainingStats]] = [[] for _ in members]
        for _ in range(num_steps):
            samples = sample_members(
                buffers,
                lambda k, b: members[k].learner.begin_update(b, batch_size, NO_UPDATE_HOOKS, device),
                scopes,
            )
            fields: tuple[Any, ...] = (  # Dict observations stay dicts (the vmap path takes them)
                stack_obs([s.obs for s in samples]),
                torch.stack([s.act for s in samples]),
                torch.stack([s.returns for s in samples]),
                torch.stack([s.discounts for s in samples]),
                stack_obs([s.obs_next for s in samples]),
            )
            if samples[0].weight is not None:
                fields += (torch.stack([s.weight for s in samples]),)  # type: ignore[misc]
            loss_K, q_mean_K, td_KN = loss_of(fields)
            norms_K = stack.step(loss_K, p.max_grad_norm)
            if p.max_grad_norm is None:  # as update(): not computed, reported as 0
                norms_K = torch.zeros_like(norms_K)
            for member in members:
                member.learner.num_gradient_steps += 1
            if first.learner.num_gradient_steps % p.target_update_freq == 0:
                stack.copy_stacked("q_net", "target")
            for k, (member, buffer) in enumerate(zip(members, buffers, strict=True)):
                if takes_priorities(buffer):
                    update_priorities(buffer, samples[k].indices, td_KN[k].unsqueeze(0))
                stats[k].append(
                    gradient_step_stats(
                        DQNTrainingStats,
                        "DQN",
                        {"loss": loss_K[k], "q_mean": q_mean_K[k], "grad_norm": norms_K[k]},
                        losses={"loss": "TD loss"},
                        deferred=True,
                        epsilon=member.policy.eps,
                    )
                )
        stack.write_back()
        resolve_stats([stat for member_stats in stats for stat in member_stats])
        return stats


TDTerms = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""(loss, mean Q of the taken actions, TD errors), reduced over the last axis (the batch)"""


def _td_terms(q: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, huber: bool) -> TDTerms:
    """DQN.update's loss (Huber or squared, importance-weighted with ``weight``), per member when the
    tensors have a member axis first."""
    per_sample = F.smooth_l1_loss(q, target, reduction="none") if huber else (q - target).pow(2)
    loss = (per_sample if weight is None else per_sample * weight).mean(dim=-1)
    return loss, q.detach().mean(dim=-1), (q - target).detach()


def _stacked_loss_function(
    first: DQN, stack: StackedMembers
) -> Callable[[tuple[torch.Tensor, ...]], TDTerms]:
    """The members' TD terms from stacked (obs, act, returns, discounts, obs_next[, weight]): on plain
    MLP Q-networks one ``baddbmm`` per layer on the stacked weights; otherwise the one-member loss
    (written for ``first``'s networks) under ``vmap``."""
    p = first.params
    q_stacked, target_stacked = stack.stacked_mlp("q_net"), stack.stacked_mlp("target")

    def member_loss(fields: tuple[torch.Tensor, ...]) -> TDTerms:
        obs, act, returns, discounts, obs_next, *rest = fields
        weight = rest[0] if rest else None  # importance weights of prioritized buffers
        sample = ReplaySample(
            obs=obs,
            act=act,
            returns=returns,
            discounts=discounts,
            obs_next=obs_next,
            weight=weight,
            indices=act,  # unused by the target (priorities are updated outside, per member)
        )
        q = first.policy.q_values(obs).gather(1, act.long().unsqueeze(-1)).squeeze(-1)
        target = q_learning_target(first.policy, first.target_q_net, sample, is_double=p.is_double)
        return _td_terms(q, target, weight, p.huber_loss)

    def stacked_loss(fields: tuple[torch.Tensor, ...]) -> TDTerms:
        assert q_stacked is not None and target_stacked is not None
        obs, act, returns, discounts, obs_next, *rest = fields
        q = q_stacked(obs).gather(-1, act.long().unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():  # as q_learning_target: no gradient reaches the target
            q_next_target = target_stacked(obs_next)
            chooser = q_stacked(obs_next) if p.is_double else q_next_target
            next_act = chooser.argmax(dim=-1, keepdim=True)
            target = returns + discounts * q_next_target.gather(-1, next_act).squeeze(-1)
        return _td_terms(q, target, rest[0] if rest else None, p.huber_loss)

    if q_stacked is not None and target_stacked is not None:
        return lambda fields: (
            stacked_loss(fields) if isinstance(fields[0], torch.Tensor) else stack.vmap(member_loss, fields)
        )
    return lambda fields: stack.vmap(member_loss, fields)


def _check_stackable(members: Sequence[DQN]) -> None:
    """Refuse DQN members that cannot update in one stacked pass (see ``DQN.stacked_update``)."""
    check_stackable_members("DQN.stacked_update", members, lambda m: m.learner.num_gradient_steps)
