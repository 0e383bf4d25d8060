"""Discrete conservative Q-learning (Kumar et al. 2020, CQL(H) on a DQN), for Discrete actions (offline).

The Q-network regresses towards the (double) DQN target and is pushed down on all actions and up on
the dataset's action,

    loss = TD loss + cql_weight * mean( logsumexp_a Q(o, a) - Q(o, a_data) ).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import torch
import torch.nn.functional as F
from typing_extensions import override

from tshtrain.algorithm.algos.dqn import q_learning_target
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
    TrainingStats,
    UpdateHooks,
)
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.offpolicy import (
    host_scalars,
)
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.algorithm.blocks.q_learning import HardTargetQLearner
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import NonNegativeFloat, PositiveFloat, PositiveInt, UnitFloat, validate_fields
from tshtrain.data.buffer import BaseReplayBuffer


@dataclass(frozen=True, kw_only=True)
class DiscreteCQLParams:
    """Hyperparameters of :class:`DiscreteCQL`."""

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
    cql_weight: NonNegativeFloat = 1.0
    """weight of the conservative penalty logsumexp_a Q(o, a) - Q(o, a_data); 0 is plain DQN on the
    dataset, 0.5 to 4 is usual"""
    n_step: PositiveInt = 1
    """transitions summed in the TD target before bootstrapping (stops early at episode ends)"""

    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the gradient step after k gradient steps (e.g.
    ``LinearSchedule(num_update_steps=<gradient steps of the run>)``); None: constant learning rates"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class DiscreteCQLTrainingStats(TrainingStats):
    """Statistics of discrete CQL gradient steps."""

    loss: float = 0.0
    """TD loss + cql_weight * cql_penalty"""
    td_loss: float = 0.0
    """TD loss alone"""
    cql_penalty: float = 0.0
    """mean logsumexp_a Q(o, a) - Q(o, a_data), unweighted"""
    q_mean: float = 0.0
    """mean Q(o, a_data) of the sampled transitions"""


def discrete_conservative_penalty(q_NA: torch.Tensor, act_N: torch.Tensor) -> torch.Tensor:
    """``mean_N( logsumexp_a Q(o, a) - Q(o, a_data) )``."""
    q_data_N = q_NA.gather(1, act_N.long().unsqueeze(-1)).squeeze(-1)
    return (torch.logsumexp(q_NA, dim=-1) - q_data_N).mean()


@final
class DiscreteCQL(OfflineAlgorithm[QValuePolicy, DiscreteCQLTrainingStats]):
    """CQL(H) on a :class:`QValuePolicy`: a (double) DQN update plus the conservative penalty (see the
    module docstring); the target network is a hard copy every ``target_update_freq`` steps."""

    def __init__(
        self,
        *,
        policy: QValuePolicy,
        params: DiscreteCQLParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        super().__init__(policy=policy)
        self.obs_normalization = ObsNormalization("DiscreteCQL", obs_normalizer, {"policy": policy})
        self.params = params or DiscreteCQLParams()
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
        self.learner.load_extra_state(state, required=True)

    @override
    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        """Fit the observation normaliser (if any) to the dataset's observations."""
        if self.obs_normalization.fit(buffer):
            self.target_q_net.hard_update()  # the targets take the statistics too

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> DiscreteCQLTrainingStats:
        p = self.params
        batch = self.learner.begin_update(buffer, batch_size, hooks, self.policy.device)
        q_NA = self.policy.q_values(batch.obs)
        q = q_NA.gather(1, batch.act.long().unsqueeze(-1)).squeeze(-1)
        target = q_learning_target(self.policy, self.target_q_net, batch, is_double=p.is_double)
        td = F.smooth_l1_loss(q, target) if p.huber_loss else F.mse_loss(q, target)
        penalty = discrete_conservative_penalty(q_NA, batch.act)
        loss = td + p.cql_weight * penalty
        self.learner.gradient_step({"loss": loss}, hooks)
        stats = host_scalars(
            "DiscreteCQL",
            {"loss": loss, "td loss": td, "cql penalty": penalty, "q_mean": q.mean()},
            losses=("loss",),
        )
        return DiscreteCQLTrainingStats(
            loss=stats["loss"],
            td_loss=stats["td loss"],
            cql_penalty=stats["cql penalty"],
            q_mean=stats["q_mean"],
        )
