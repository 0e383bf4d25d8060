"""Behaviour cloning: supervised imitation of the actions stored in a dataset (offline; online imitation from
a buffer a collector fills is :mod:`tshtrain.algorithm.algos.imitation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from typing_extensions import override

from tshtrain.algorithm.algos.imitation import imitation_loss
from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OfflineAlgorithm,
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
from tshtrain.data.buffer import BaseReplayBuffer


@dataclass(frozen=True, kw_only=True)
class BCParams:
    """Hyperparameters of :class:`BehaviorCloning`."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate"""

    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the gradient step after k gradient steps (e.g.
    ``LinearSchedule(num_update_steps=<gradient steps of the run>)``); None: constant learning rates"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class BCTrainingStats(TrainingStats):
    """Statistics of behaviour-cloning gradient steps."""

    loss: float = 0.0
    """cross entropy (discrete) or mean squared error (continuous) to the dataset's actions"""


@final
class BehaviorCloning(OfflineAlgorithm[Policy, BCTrainingStats]):
    """Behaviour cloning for Discrete actions (a :class:`CategoricalPolicy`, cross entropy on the logits)
    and Box actions (a :class:`DeterministicActorPolicy`, squared error in the policy's [-1, 1] action
    space, i.e. on the stored actions)."""

    def __init__(
        self,
        *,
        policy: CategoricalPolicy | DeterministicActorPolicy,
        params: BCParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
    ):
        super().__init__(policy=policy)
        self.obs_normalization = ObsNormalization("BehaviorCloning", obs_normalizer, {"policy": policy})
        self.params = params or BCParams()
        self.optim = make_adam(policy.parameters(), lr=self.params.lr)
        self.register_components({"optim": self.optim})
        self.lrs = ScheduledLearningRates(self.params.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def process_buffer(self, buffer: BaseReplayBuffer) -> None:
        """Fit the observation normaliser (if any) to the dataset's observations."""
        self.obs_normalization.fit(buffer)

    @override
    def update(
        self, buffer: BaseReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> BCTrainingStats:
        self.lrs.begin_update()
        batch = hooks.on_sampled_batch(buffer.sample(batch_size)).to_torch(self.policy.device)
        policy = self.policy
        assert isinstance(policy, CategoricalPolicy | DeterministicActorPolicy)  # the constructor's type
        loss = imitation_loss(policy, batch.obs, batch.act)
        optimizer_step(self.optim, "optim", {"imitation loss": loss}, hooks, zero_grad_first=False)
        loss_value = loss.detach()
        check_finite_loss("BehaviorCloning", "imitation loss", loss_value)
        return BCTrainingStats(loss=float(loss_value))
