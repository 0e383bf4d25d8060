"""The offline contract (tests/contract/test_offline_algorithms.py) for BCQ and discrete CRR: the same
test bodies run on these algorithms' specs (a tiny epoch on the OfflineTrainer, state_dict round trips,
same seed -> same run, NaN losses raise, update hooks), plus their pinned validation errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from tests.contract import test_offline_algorithms as contract
from tshtrain.algorithm import (
    BCQ,
    BCQParams,
    BCQPolicy,
    CategoricalPolicy,
    ConditionalVAE,
    DiscreteCRR,
    DiscreteCRRParams,
    Perturbation,
    QEnsemble,
    mlp,
)
from tshtrain.errors import ConfigurationError

HIDDEN = contract.HIDDEN
Spec = contract.Spec


def _bcq(seed: int, **kw: Any) -> BCQ:
    torch.manual_seed(seed)
    policy = BCQPolicy(
        perturbation=Perturbation.from_sizes(3, 1, HIDDEN),
        vae=ConditionalVAE(3, 1, HIDDEN),
        critic=QEnsemble(3, 1, HIDDEN),
        action_space=contract._space("Pendulum-v1"),
        num_forward_sampled_actions=4,
        seed=seed,
    )
    return BCQ(policy=policy, params=BCQParams(**{"num_sampled_actions": 3, **kw}), seed=seed)


def _discrete_crr(seed: int, **kw: Any) -> DiscreteCRR:
    torch.manual_seed(seed)
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN, nn.ReLU), contract._space("CartPole-v1"), seed=seed)
    return DiscreteCRR(policy=policy, critic=mlp(4, 2, HIDDEN, nn.ReLU), params=DiscreteCRRParams(**kw))


SPECS = [
    Spec("BCQ", "Pendulum-v1", _bcq),
    Spec("BCQ-lmbda1", "Pendulum-v1", _bcq, (("lmbda", 1.0), ("num_sampled_actions", 1))),
    Spec("DiscreteCRR", "CartPole-v1", _discrete_crr, loss_name="loss"),
    Spec(
        "DiscreteCRR-target-binary-nstep",
        "CartPole-v1",
        _discrete_crr,
        (("target_update_freq", 2), ("policy_improvement", "binary"), ("n_step", 3)),
        "loss",
    ),
]
IDS = [s.name for s in SPECS]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_one_tiny_epoch_on_the_offline_trainer(spec: Spec) -> None:
    contract.test_one_tiny_epoch_on_the_offline_trainer(spec)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_state_dict_round_trip_gives_the_same_actions_and_the_same_next_update(spec: Spec) -> None:
    contract.test_state_dict_round_trip_gives_the_same_actions_and_the_same_next_update(spec)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_same_seed_gives_the_same_run(spec: Spec) -> None:
    contract.test_same_seed_gives_the_same_run(spec)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_a_nan_loss_raises_naming_the_algorithm_and_the_loss(spec: Spec) -> None:
    contract.test_a_nan_loss_raises_naming_the_algorithm_and_the_loss(spec)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_update_hooks_see_every_sample_and_every_loss(spec: Spec) -> None:
    contract.test_update_hooks_see_every_sample_and_every_loss(spec)


def test_bcq_steps_every_optimizer_it_registers() -> None:
    algorithm = _bcq(0)
    hooks = contract._RecordingHooks()
    hooks.components = algorithm.components()
    algorithm.update(contract._buffer("Pendulum-v1", 0), 16, hooks=hooks)
    assert hooks.optimizer_steps == ["vae_optim", "critic_optim", "actor_optim"]
    assert hooks.losses == ["vae loss", "critic loss", "actor loss"]


def test_discrete_crr_refreshes_its_targets_every_target_update_freq_steps() -> None:
    algorithm = _discrete_crr(0, target_update_freq=3)
    assert algorithm.target_critic is not None
    buffer = contract._buffer("CartPole-v1", 0)
    synced = []
    for _ in range(6):
        algorithm.update(buffer, 16)
        online, target = algorithm.critic.state_dict(), algorithm.target_critic.state_dict()
        synced.append(all(torch.equal(online[k], target[k]) for k in online))
    assert synced == [False, False, True, False, False, True]
    assert "target_critic" in algorithm.components() and "target_actor" in algorithm.components()
    assert "target_critic" not in _discrete_crr(0).components()  # target_update_freq=0: none


def test_discrete_crr_optimises_a_shared_trunk_once() -> None:
    trunk = mlp(4, 8, (), nn.ReLU)
    actor, critic = nn.Sequential(trunk, nn.ReLU(), nn.Linear(8, 2)), nn.Sequential(trunk, nn.Linear(8, 2))
    policy = CategoricalPolicy(actor, contract._space("CartPole-v1"), seed=0)
    algorithm = DiscreteCRR(policy=policy, critic=critic)
    (group,) = algorithm.optim.param_groups
    assert len(group["params"]) == 6  # trunk 2 + actor head 2 + critic head 2
    algorithm.update(contract._buffer("CartPole-v1", 0), 16)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: BCQParams(lmbda=1.5), r"^BCQParams.lmbda must be a number in \[0, 1\], got 1.5"),
        (
            lambda: BCQParams(num_sampled_actions=0),
            r"^BCQParams.num_sampled_actions must be an int >= 1, got 0",
        ),
        (lambda: BCQParams(vae_lr=0.0), r"^BCQParams.vae_lr must be a finite number > 0, got 0.0"),
        (lambda: BCQParams(tau=0.0), r"^BCQParams.tau must be a number in \(0, 1\], got 0.0"),
        (
            lambda: Perturbation(nn.Linear(4, 1), phi=-0.1),
            r"^Perturbation.phi must be a number in \[0, 2\], got -0.1",
        ),
        (
            lambda: BCQPolicy(
                perturbation=Perturbation.from_sizes(3, 1, HIDDEN),
                vae=ConditionalVAE(3, 2, HIDDEN),
                critic=QEnsemble(3, 1, HIDDEN),
                action_space=contract._space("Pendulum-v1"),
            ),
            r"^BCQPolicy: the vae generates 2 action dimensions, the action space has 1",
        ),
        (
            lambda: BCQPolicy(
                perturbation=Perturbation.from_sizes(3, 1, HIDDEN),
                vae=ConditionalVAE(3, 1, HIDDEN),
                critic=QEnsemble(3, 1, HIDDEN),
                action_space=contract._space("Pendulum-v1"),
                num_forward_sampled_actions=0,
            ),
            r"^BCQPolicy.num_forward_sampled_actions must be >= 1, got 0",
        ),
        (lambda: ConditionalVAE(3, 1, ()), r"^ConditionalVAE.hidden_sizes must name at least one layer"),
        (
            lambda: DiscreteCRRParams(policy_improvement="softmax"),  # type: ignore[arg-type]  # the error
            r"^DiscreteCRRParams.policy_improvement must be one of \['exp', 'binary', 'all'\], got 'softmax'",
        ),
        (
            lambda: DiscreteCRRParams(beta=0.0),
            r"^DiscreteCRRParams.beta must be a finite number > 0, got 0.0",
        ),
        (
            lambda: DiscreteCRRParams(min_q_weight=-1.0),
            r"^DiscreteCRRParams.min_q_weight must be a finite number >= 0, got -1.0",
        ),
        (
            lambda: DiscreteCRRParams(target_update_freq=-1),
            r"^DiscreteCRRParams.target_update_freq must be an int >= 0, got -1",
        ),
    ],
)
def test_hyperparameter_validation(build: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()
