"""Tianshou's test/continuous/test_sac_with_il.py, ported: SAC on Pendulum-v1 to a best mean test return
of -250, then an imitator that learns online from the SAC agent's collector, to -300.

The script's SAC settings, kept: Tianshou's default continuous actor (``ContinuousActorProbabilistic``
on a 128-128 ReLU ``Net``, ``unbounded=True``, ``conditioned_sigma=False``: a state-independent log
standard deviation, a learned parameter starting at 0), twin 128-128 ReLU critics, Adam with lr 1e-3
(actor and critics), gamma 0.99, tau 0.005, 3-step returns, automatic temperature (target entropy
-1, log alpha starting at 0, lr 3e-4); a 20000-transition buffer over 10 training envs, 10 epochs of
24000 env steps, 10 env steps and 1 gradient step (0.1 per env step) of batch 128 per training step,
100 test episodes, ``test_in_training`` and the threshold -250 on the best test return
(``stop_fn_on_best_score=True``). Tianshou's seed default is 1.

The script's imitation part, kept: ``OffPolicyImitation`` (Tianshou's ``OffPolicyImitationLearning``)
with a deterministic 128-128 ReLU actor and lr 1e-3; the SAC training collector is reset (which, as in
Tianshou, empties its buffer) and keeps collecting with the SAC policy while the imitator learns; the
imitator is tested on one env (100 episodes per test step); 10 epochs of 24000 env steps (the version of
the script this follows passes ``epoch_num_steps`` to the imitation trainer; its ``il_step_per_epoch``
of 500 is parsed but unused), 10 env steps and 10 gradient
steps of batch 128 per training step, ``test_in_training`` and the threshold -300 (the script lowers
its goal by 50 for Pendulum). Tianshou's imitation actor is ``max_action * tanh`` clipped to [-1, 1]
and scaled; tshtrain's ``DeterministicActorPolicy`` is ``tanh`` scaled, which cannot saturate exactly.
That difference does not matter here (a short experiment: a tanh imitator trained on 5,000 fresh expert
steps returned -140.6, the clipped ``2 * tanh`` one -191.4, the expert -140.4). The reset does: the same
imitator trained on the SAC run's own buffer (its training history) returned -1149.0.

This is the one port of the script: tests/unit/test_from_tianshou_ports.py and
tests/learning/test_sac_with_il.py run :func:`main` (a tiny budget in CI, the script's in the slow tier).

Run: python examples/from_tianshou/from_test_sac_with_il.py [--seed 1] [--budget-scale 1.0] [--skip-il]
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass

import gymnasium as gym
import torch
from torch import nn

from tshtrain.algorithm import (
    SAC,
    DeterministicActorPolicy,
    OffPolicyImitation,
    OffPolicyImitationParams,
    QEnsemble,
    SACParams,
    TanhGaussianPolicy,
    mlp,
)
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams

TASK = "Pendulum-v1"
REWARD_THRESHOLD = -250.0
"""Tianshou's threshold for the SAC part (on the best mean test return)"""
IL_REWARD_THRESHOLD = REWARD_THRESHOLD - 50.0
"""Tianshou's threshold for the imitation part (the script lowers its goal by 50 for Pendulum)"""
NUM_TRAINING_ENVS = 10
NUM_TEST_ENVS = 100
EPOCH_NUM_STEPS = 24000


class StateIndependentSigmaActor(nn.Module):
    """``obs -> [mean, log_std]`` with ``log_std`` one learned parameter per action dimension, the same
    for every observation (Tianshou's ``conditioned_sigma=False``), as :class:`TanhGaussianPolicy` takes
    it."""

    def __init__(self, mean_net: nn.Module, act_dim: int, init_log_std: float = 0.0):
        super().__init__()
        self.mean_net = mean_net
        self.log_std = nn.Parameter(torch.full((act_dim,), init_log_std))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        mean_NA: torch.Tensor = self.mean_net(obs)
        return torch.cat([mean_NA, self.log_std.expand_as(mean_NA)], dim=-1)


@dataclass(frozen=True)
class SACWithILResult:
    """The statistics of the script's two runs."""

    sac: InfoStats
    """the SAC run (``best_reward``: what the script asserts >= -250)"""
    il: InfoStats | None
    """the imitation run (``best_reward``: what the script asserts >= -300); None with ``skip_il``"""
    il_gap_before: float | None = None
    """the untrained imitator's mean squared distance to the expert's deterministic actions (in the
    [-1, 1] scale) on the observations of the imitation run's buffer; None with ``skip_il``"""
    il_gap_after: float | None = None
    """the same for the trained imitator"""
    il_num_transitions: int | None = None
    """transitions in the buffer after the imitation run: only the imitation run's own (the reset emptied
    it); None with ``skip_il``"""


def imitation_gap(imitator: DeterministicActorPolicy, expert: TanhGaussianPolicy, obs: torch.Tensor) -> float:
    """Mean squared distance of ``imitator``'s actions to ``expert``'s deterministic ones on ``obs``
    (the stored actions are the expert's noisy samples, so this is the gap to what it imitates)."""
    with torch.inference_mode():
        gap = imitator.actions(obs, deterministic=True) - expert.actions(obs, deterministic=True)
    return float(gap.pow(2).mean())


def main(
    seed: int = 1,
    budget_scale: float = 1.0,
    *,
    max_epochs: int = 10,
    skip_il: bool = False,
    verbose: bool = False,
) -> SACWithILResult:
    """Train SAC, then (unless ``skip_il``) the imitator; ``budget_scale`` multiplies the env steps per
    epoch and the test episodes (1.0: the script's)."""
    num_test_envs = max(1, round(NUM_TEST_ENVS * budget_scale))
    epoch_num_steps = max(10 * NUM_TRAINING_ENVS, round(EPOCH_NUM_STEPS * budget_scale))
    torch.manual_seed(seed)
    train_envs = make_vector_env(TASK, NUM_TRAINING_ENVS)
    test_envs = make_vector_env(TASK, num_test_envs)
    actor = StateIndependentSigmaActor(mlp(3, 1, (128, 128), nn.ReLU), act_dim=1)
    policy = TanhGaussianPolicy(actor, train_envs.single_action_space, seed=seed)
    params = SACParams(
        actor_lr=1e-3,
        critic_lr=1e-3,
        gamma=0.99,
        tau=0.005,
        n_step=3,
        alpha=1.0,  # exp(log_alpha = 0)
        auto_alpha=True,
        alpha_lr=3e-4,
    )
    algorithm = SAC(policy=policy, critic=QEnsemble(3, 1, (128, 128)), params=params)
    training_collector = Collector(
        policy, train_envs, VectorReplayBuffer(20000, NUM_TRAINING_ENVS, seed=seed), seed=seed
    )
    try:
        sac_info = OffPolicyTrainer(
            algorithm,
            OffPolicyTrainerParams(
                training_collector=training_collector,
                test_collector=Collector(policy, test_envs, seed=seed + NUM_TRAINING_ENVS),
                max_epochs=max_epochs,
                epoch_num_steps=epoch_num_steps,
                collection_step_num_env_steps=10,
                update_step_num_gradient_steps_per_sample=0.1,
                batch_size=128,
                test_step_num_episodes=num_test_envs,
                stop_fn=lambda score: score >= REWARD_THRESHOLD,
                stop_fn_on_best_score=True,
                test_in_training=True,
                show_progress=False,
                verbose=verbose,
            ),
        ).run()
        if skip_il:
            return SACWithILResult(sac=sac_info, il=None)
        torch.manual_seed(seed)
        il_policy = DeterministicActorPolicy(
            mlp(3, 1, (128, 128), nn.ReLU), train_envs.single_action_space, seed=seed
        )
        il_algorithm = OffPolicyImitation(policy=il_policy, params=OffPolicyImitationParams(lr=1e-3))
        il_test_collector = Collector(
            il_policy, gym.make(TASK), seed=seed + NUM_TRAINING_ENVS + NUM_TEST_ENVS
        )
        untrained = copy.deepcopy(il_policy)
        training_collector.reset()  # as Tianshou's: new episodes, an empty buffer
        il_info = OffPolicyTrainer(
            il_algorithm,
            OffPolicyTrainerParams(
                training_collector=training_collector,  # still SAC's policy: the expert
                test_collector=il_test_collector,
                max_epochs=max_epochs,
                epoch_num_steps=epoch_num_steps,
                collection_step_num_env_steps=10,
                update_step_num_gradient_steps_per_sample=1.0,  # Tianshou's default
                batch_size=128,
                test_step_num_episodes=num_test_envs,
                stop_fn=lambda score: score >= IL_REWARD_THRESHOLD,
                stop_fn_on_best_score=True,
                test_in_training=True,
                show_progress=False,
                verbose=verbose,
            ),
        ).run()
        il_test_collector.env.close()
        buffer = training_collector.buffer
        assert buffer is not None
        obs = buffer.sample(min(4096, len(buffer))).to_torch().obs
        assert isinstance(obs, torch.Tensor)
        return SACWithILResult(
            sac=sac_info,
            il=il_info,
            il_gap_before=imitation_gap(untrained, policy, obs),
            il_gap_after=imitation_gap(il_policy, policy, obs),
            il_num_transitions=len(buffer),
        )
    finally:
        train_envs.close()
        test_envs.close()


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget-scale", type=float, default=1.0)
    parser.add_argument("--skip-il", action="store_true")
    args = parser.parse_args()
    result = main(args.seed, args.budget_scale, skip_il=args.skip_il, verbose=True)
    print(f"seed {args.seed}: SAC best {result.sac.best_reward:.1f} (threshold {REWARD_THRESHOLD})")
    if result.il is not None:
        print(
            f"seed {args.seed}: imitator best {result.il.best_reward:.1f} (threshold {IL_REWARD_THRESHOLD})"
        )


if __name__ == "__main__":
    _cli()
