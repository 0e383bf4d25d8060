"""Online imitation learning: behaviour cloning on the replay buffer another policy fills while training.

Tianshou's ``OffPolicyImitationLearning``: the training collector acts with an *expert* (any
:class:`~tshtrain.algorithm.Policy`, e.g. a trained SAC actor), its transitions go to the replay
buffer, and each gradient step regresses the imitating policy onto a sample of the stored actions.
The test collector runs the imitating policy. With :class:`~tshtrain.trainer.OffPolicyTrainer`
the buffer keeps growing while the imitator learns; for a fixed dataset use
:class:`~tshtrain.algorithm.BehaviorCloning` with the ``OfflineTrainer``.

The loss is the one of :class:`BehaviorCloning` (:func:`imitation_loss`): cross entropy on the
logits of a :class:`CategoricalPolicy` (Discrete actions), squared error of a
:class:`DeterministicActorPolicy`'s ``tanh`` output to the stored actions (Box actions, in the
policy's [-1, 1] action space).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import torch
import torch.nn.functional as F
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OffPolicyAlgorithm,
    Policy,
    TrainingStats,
    UpdateHooks,
    check_finite_loss,
    make_adam,
)
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.policies import CategoricalPolicy, DeterministicActorPolicy
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import PositiveFloat, validate_fields
from tshtrain.data.batch import ObsTensor
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.errors import ConfigurationError


def imitation_loss(
    policy: CategoricalPolicy | DeterministicActorPolicy, obs: ObsTensor, act: torch.Tensor
) -> torch.Tensor:
    """The behaviour-cloning loss of ``policy`` on stored actions ``act`` (shape (N,) or (N, A)):
    cross entropy of the logits (Discrete), mean squared error of ``tanh(actor(obs))`` (Box)."""
    if isinstance(policy, CategoricalPolicy):
        return F.cross_entropy(policy.logits(obs), act.long())
    return F.mse_loss(policy.mean_actions(obs), act.float())


def check_imitation_policy(owner: str, policy: object) -> None:
    """Raise ``ConfigurationError`` unless ``policy`` is a policy :func:`imitation_loss` can train."""
    if not isinstance(policy, CategoricalPolicy | DeterministicActorPolicy):
        raise ConfigurationError(
            f"{owner}: policy is a {type(policy).__name__}; imitation trains a CategoricalPolicy (Discrete "
            f"actions) or a DeterministicActorPolicy (Box actions)."
        )


@dataclass(frozen=True, kw_only=True)
class OffPolicyImitationParams:
    """Hyperparameters of :class:`OffPolicyImitation` (Tianshou's ``il_lr`` is ``lr``)."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate of the imitating policy"""

    lr_schedule: Schedule | None = None
    """multiplies the learning rate by schedule.factor(k) in the gradient step after k gradient steps (e.g.
    ``LinearSchedule(num_update_steps=<gradient steps of the run>)``); None: a constant learning rate"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class OffPolicyImitationTrainingStats(TrainingStats):
    """Statistics of online imitation gradient steps."""

    loss: float = 0.0
    """cross entropy (discrete) or mean squared error (continuous) to the stored actions"""


@final
class OffPolicyImitation(OffPolicyAlgorithm[Policy, OffPolicyImitationTrainingStats]):
    """Behaviour cloning from a replay buffer that a training collector fills online (see the module
    docstring); the off-policy counterpart of :class:`~tshtrain.algorithm.BehaviorCloning`.

    Each :meth:`update` is one Adam step of the imitating policy on ``batch_size`` sampled
    transitions. Prioritized buffers are sampled by their priorities, which this algorithm leaves
    unchanged (the loss is not importance-weighted).
    """

    def __init__(
        self,
        *,
        policy: CategoricalPolicy | DeterministicActorPolicy,
        params: OffPolicyImitationParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        """Args:
        policy: the imitating policy: a :class:`CategoricalPolicy` (Discrete actions) or a
            :class:`DeterministicActorPolicy` (Box actions). The training collector usually runs
            another policy (the expert).
        params: hyperparameters.
        obs_normalizer: the :class:`RunningObsNormalizer` that is the policy's first layer; updated
            after every update with its batch's observations.

        Raises:
            ConfigurationError: another kind of policy.
        """
        check_imitation_policy("OffPolicyImitation", policy)
        super().__init__(policy=policy)
        self.obs_normalization = ObsNormalization("OffPolicyImitation", obs_normalizer, {"policy": policy})
        self.params = params or OffPolicyImitationParams()
        self.optim = make_adam(policy.parameters(), lr=self.params.lr)
        self.register_components({"optim": self.optim})
        self.lrs = ScheduledLearningRates(self.params.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> OffPolicyImitationTrainingStats:
        self.lrs.begin_update()
        policy = self.policy
        assert isinstance(policy, CategoricalPolicy | DeterministicActorPolicy)  # checked in __init__
        batch = hooks.on_sampled_batch(buffer.sample(batch_size)).to_torch(policy.device)
        loss = imitation_loss(policy, batch.obs, batch.act)
        optimizer_step(self.optim, "optim", {"imitation loss": loss}, hooks, zero_grad_first=False)
        loss_value = loss.detach()
        check_finite_loss("OffPolicyImitation", "imitation loss", loss_value)
        self.obs_normalization.update(batch.obs)
        return OffPolicyImitationTrainingStats(loss=float(loss_value))
