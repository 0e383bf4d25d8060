"""DQN (Mnih et al. 2015) with a target network and, optionally, double Q-learning (van Hasselt 2016)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, final

import torch
import torch.nn.functional as F
from typing_extensions import override

from tshtrain.algorithm.base import OffPolicyAlgorithm, Stateful, TrainingStats, check_finite_loss, make_adam
from tshtrain.algorithm.policies import QValuePolicy
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.prioritized import BasePrioritizedBuffer
from tshtrain.errors import ConfigurationError, require_positive


@dataclass(frozen=True, kw_only=True)
class DQNParams:
    """Hyperparameters of :class:`DQN`."""

    lr: float = 1e-3
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor in [0, 1]"""
    target_update_freq: int = 500
    """gradient steps between two hard copies of the online network into the target network"""
    is_double: bool = True
    """double Q-learning: the online network picks the next action, the target network values it"""
    huber_loss: bool = True
    """Huber (smooth L1) instead of squared TD error"""
    max_grad_norm: float | None = None
    """clip the gradient norm to this value (None: no clipping)"""

    def __post_init__(self) -> None:
        require_positive("DQNParams", "lr", self.lr)
        require_positive("DQNParams", "target_update_freq", self.target_update_freq)
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigurationError(f"DQNParams.gamma must lie in [0, 1], got {self.gamma!r}.")
        if self.max_grad_norm is not None:
            require_positive("DQNParams", "max_grad_norm", self.max_grad_norm)


@dataclass(frozen=True, kw_only=True)
class DQNTrainingStats(TrainingStats):
    """Statistics of DQN gradient steps."""

    loss: float = 0.0
    """TD loss"""
    q_mean: float = 0.0
    """mean Q(o, a) of the sampled transitions"""
    epsilon: float = 0.0
    """the exploration epsilon at the time of the step"""


@final
class DQN(OffPolicyAlgorithm[QValuePolicy]):
    """Deep Q-learning on a :class:`QValuePolicy` (epsilon-greedy exploration through the collector's
    ``exploration_noise=True``). With a prioritized buffer, TD errors update the priorities and the
    loss is weighted by the importance weights."""

    def __init__(self, *, policy: QValuePolicy, params: DQNParams | None = None):
        super().__init__(policy=policy)
        self.params = params or DQNParams()
        self.target_q_net = copy.deepcopy(policy.q_net)
        self.target_q_net.requires_grad_(False)
        self.optim = make_adam(policy.q_net.parameters(), lr=self.params.lr)
        self.num_gradient_steps = 0

    @override
    def components(self) -> dict[str, Stateful]:
        return {"policy": self.policy, "target_q_net": self.target_q_net, "optim": self.optim}

    @override
    def extra_state(self) -> dict[str, Any]:
        return {"num_gradient_steps": self.num_gradient_steps}

    @override
    def load_extra_state(self, state: Any) -> None:
        self.num_gradient_steps = int(state.get("num_gradient_steps", 0))

    @override
    def update(self, buffer: BaseReplayBuffer, batch_size: int) -> TrainingStats:
        sample = buffer.sample(batch_size)
        batch = sample.to_torch(self.policy.device)
        q_all = self.policy.q_values(batch.obs)
        q = q_all.gather(1, batch.act.long().unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            q_next_target = self.target_q_net(batch.obs_next)
            if self.params.is_double:
                next_act = self.policy.q_values(batch.obs_next).argmax(dim=-1, keepdim=True)
            else:
                next_act = q_next_target.argmax(dim=-1, keepdim=True)
            q_next = q_next_target.gather(1, next_act).squeeze(-1)
            not_terminal = 1.0 - batch.terminated.float()
            target = batch.rew + self.params.gamma * not_terminal * q_next
        td_error = q - target
        if self.params.huber_loss:
            per_sample = F.smooth_l1_loss(q, target, reduction="none")
        else:
            per_sample = td_error.pow(2)
        loss = per_sample.mean() if batch.weight is None else (per_sample * batch.weight).mean()
        self.optim.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        if self.params.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.policy.q_net.parameters(), self.params.max_grad_norm)
        self.optim.step()
        if isinstance(buffer, BasePrioritizedBuffer):
            buffer.update_priorities(sample.indices, td_error.detach().cpu().numpy())
        self.num_gradient_steps += 1
        if self.num_gradient_steps % self.params.target_update_freq == 0:
            self.target_q_net.load_state_dict(self.policy.q_net.state_dict())
        loss_value = loss.detach()
        check_finite_loss("DQN", "TD loss", loss_value)
        return DQNTrainingStats(
            loss=float(loss_value), q_mean=float(q.detach().mean()), epsilon=self.policy.eps
        )
