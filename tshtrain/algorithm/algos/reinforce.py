"""REINFORCE (Williams 1992): the policy gradient with Monte-Carlo returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import torch
from typing_extensions import override

from tshtrain.algorithm.base import (
    NO_UPDATE_HOOKS,
    OnPolicyAlgorithm,
    TrainingStats,
    UpdateHooks,
    check_finite_loss,
    make_adam,
    seeded_generator,
)
from tshtrain.algorithm.blocks.lr_schedule import ScheduledLearningRates, optimizers_in
from tshtrain.algorithm.blocks.normalization import ObsNormalization, RunningObsNormalizer
from tshtrain.algorithm.blocks.onpolicy import (
    ActorPolicy,
    float_obs,
    index_obs,
    minibatches,
    rollout_to_torch,
)
from tshtrain.algorithm.blocks.optim import optimizer_step
from tshtrain.algorithm.blocks.schedules import Schedule, check_schedule
from tshtrain.constraints import PositiveFloat, UnitFloat, validate_fields
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.functional.returns import discounted_returns_torch


@dataclass(frozen=True, kw_only=True)
class ReinforceParams:
    """Hyperparameters of :class:`Reinforce`."""

    lr: PositiveFloat = 1e-3
    """Adam learning rate"""
    gamma: UnitFloat = 0.99
    """discount factor in [0, 1]"""
    return_standardization: bool = True
    """standardise the returns of each rollout to mean 0, std 1 (a baseline that lowers variance)"""

    lr_schedule: Schedule | None = None
    """multiplies every learning rate by schedule.factor(k) in the update step after k update steps (e.g.
    ``LinearSchedule(num_update_steps=<update steps of the run>)``); None: constant learning rates"""

    def __post_init__(self) -> None:
        validate_fields(self)
        check_schedule(self, "lr_schedule", self.lr_schedule)


@dataclass(frozen=True, kw_only=True)
class ReinforceTrainingStats(TrainingStats):
    """Statistics of a REINFORCE update."""

    loss: float = 0.0
    """mean policy-gradient loss over the mini-batches"""


@final
class Reinforce(OnPolicyAlgorithm[ActorPolicy, ReinforceTrainingStats]):
    """REINFORCE for Discrete, Box, MultiDiscrete and MultiBinary actions (a
    :data:`~tshtrain.algorithm.blocks.onpolicy.ActorPolicy`: categorical, Gaussian, multi-categorical or
    Bernoulli).

    Returns are computed over the rollout without bootstrapping: the last step of an unfinished episode
    is treated as its end, so collect whole episodes (``collection_step_num_episodes``) for unbiased
    returns.
    """

    def __init__(
        self,
        *,
        policy: ActorPolicy,
        params: ReinforceParams | None = None,
        obs_normalizer: RunningObsNormalizer | None = None,
        seed: int | None = None,
    ):
        super().__init__(policy=policy)
        self.obs_normalization = ObsNormalization("Reinforce", obs_normalizer, {"policy": policy})
        self.params = params or ReinforceParams()
        self.optim = make_adam(policy.parameters(), lr=self.params.lr)
        self.rng = seeded_generator(seed, policy.device)
        self.register_components({"optim": self.optim})
        self.lrs = ScheduledLearningRates(self.params.lr_schedule, optimizers_in(self.components()))
        self.register_components(self.lrs.components())

    @override
    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> ReinforceTrainingStats:
        self.lrs.begin_update()
        data = rollout_to_torch(rollout, self.policy.device)
        returns_TE = discounted_returns_torch(data.rew, data.terminated, data.boundary, self.params.gamma)
        valid = data.valid
        returns_N = returns_TE[valid]
        if self.params.return_standardization and len(returns_N) > 1:
            returns_N = (returns_N - returns_N.mean()) / (returns_N.std() + 1e-8)
        obs_N = float_obs(index_obs(data.obs, valid))
        act_N = data.act[valid]
        losses: list[torch.Tensor] = []
        for idx in minibatches(len(returns_N), batch_size, num_repetitions, self.rng):
            logp_act, _ = self.policy.log_prob_entropy(index_obs(obs_N, idx), act_N[idx])
            loss = -(logp_act * returns_N[idx]).mean()
            optimizer_step(self.optim, "optim", {"policy loss": loss}, hooks, zero_grad_first=False)
            losses.append(loss.detach())
        mean_loss = torch.stack(losses).mean()
        check_finite_loss("Reinforce", "policy loss", mean_loss)
        self.obs_normalization.update(obs_N)
        return ReinforceTrainingStats(loss=float(mean_loss), num_gradient_steps=len(losses))
