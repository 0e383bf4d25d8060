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
    ConditionalVAE,
    Perturbation,
    QEnsemble,
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


SPECS = [
    Spec("BCQ", "Pendulum-v1", _bcq),
    Spec("BCQ-lmbda1", "Pendulum-v1", _bcq, (("lmbda", 1.0), ("num_sampled_actions", 1))),
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
    ],
)
def test_hyperparameter_validation(build: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()
