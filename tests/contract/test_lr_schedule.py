"""The one way to schedule learning rates: ``lr_schedule`` in the algorithm's params.

Every algorithm with optimizers takes it; at the start of its k-th ``update`` call (0-based: update
steps on-policy, gradient steps off-policy and offline) every optimizer's learning rate is its
configured rate times ``schedule.factor(k)``; the count is saved with the algorithm, and without a
schedule nothing changes (no component, the rates untouched)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.contract import test_off_policy_algorithms as off_policy
from tests.contract import test_offline_algorithms as offline
from tests.contract._hook_setups import bc_trainer, reinforce_trainer
from tshtrain.algorithm import Algorithm, LinearSchedule
from tshtrain.algorithm.blocks.lr_schedule import optimizers_in

SCHEDULE = LinearSchedule(num_update_steps=4)
CASES = [(spec, off_policy._buffer) for spec in off_policy.SPECS[:1] + off_policy.SPECS[2:]] + [
    (spec, offline._buffer) for spec in offline.SPECS
]


def _rates(algorithm: Algorithm[Any]) -> list[float]:
    return [group["lr"] for optim in optimizers_in(algorithm.components()) for group in optim.param_groups]


def _updates(algorithm: Any, buffer: Any, n: int) -> None:
    if hasattr(algorithm, "process_buffer"):
        algorithm.process_buffer(buffer)
    for _ in range(n):
        algorithm.update(buffer, 16)


@pytest.mark.parametrize(("spec", "make_buffer"), CASES, ids=[spec.name for spec, _ in CASES])
def test_every_optimizer_follows_the_schedule_over_gradient_steps(spec: Any, make_buffer: Any) -> None:
    algorithm = spec.make(0, **dict(spec.kwargs), lr_schedule=SCHEDULE)
    base = _rates(algorithm)
    assert len(base) >= 1
    buffer = make_buffer(spec.env_id, 0)
    _updates(algorithm, buffer, 3)  # the third gradient step used factor(2) = 0.5
    assert _rates(algorithm) == pytest.approx([0.5 * lr for lr in base])
    state = algorithm.state_dict()
    assert state["lr_schedule"] == {"num_updates": 3}

    restored = spec.make(1, **dict(spec.kwargs), lr_schedule=SCHEDULE)
    restored.load_state_dict(state)
    restored.update(buffer, 16)  # the fourth: factor(3) = 0.25
    assert _rates(restored) == pytest.approx([0.25 * lr for lr in base])


@pytest.mark.parametrize(("spec", "make_buffer"), CASES[:2], ids=[spec.name for spec, _ in CASES[:2]])
def test_without_a_schedule_the_rates_and_the_state_are_untouched(spec: Any, make_buffer: Any) -> None:
    algorithm = spec.make(0, **dict(spec.kwargs))
    base = _rates(algorithm)
    _updates(algorithm, make_buffer(spec.env_id, 0), 2)
    assert _rates(algorithm) == base and "lr_schedule" not in algorithm.state_dict()


def test_reinforce_and_bc_in_a_real_run() -> None:
    from tshtrain.algorithm import BCParams, BehaviorCloning, Reinforce, ReinforceParams
    from tshtrain.trainer import OfflineTrainer, OnPolicyTrainer

    setup = reinforce_trainer()  # 4 update steps
    params = ReinforceParams(lr=1e-2, lr_schedule=LinearSchedule(num_update_steps=8))
    reinforce = Reinforce(policy=setup.algorithm.policy, params=params, seed=0)
    OnPolicyTrainer(reinforce, setup.params).run()
    assert reinforce.optim.param_groups[0]["lr"] == pytest.approx(1e-2 * (1 - 3 / 8))

    offline_setup = bc_trainer()  # 6 gradient steps
    schedule = LinearSchedule(num_update_steps=12, end_factor=0.5)
    bc = BehaviorCloning(
        policy=offline_setup.algorithm.policy, params=BCParams(lr=1e-2, lr_schedule=schedule)
    )
    OfflineTrainer(bc, offline_setup.params).run()
    assert bc.optim.param_groups[0]["lr"] == pytest.approx(1e-2 * (1 - 0.5 * 5 / 12))


def test_a2c_and_ppo_set_the_rate_from_their_update_step_count() -> None:
    from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams, mlp
    from tshtrain.env import make_vector_env

    space = make_vector_env("CartPole-v1", 1).single_action_space
    policy = CategoricalPolicy(mlp(4, 2, (8,)), space, seed=0)
    ppo = PPO(policy=policy, critic=mlp(4, 1, (8,)), params=PPOParams(lr=1e-3, lr_schedule=SCHEDULE))
    assert "lr_schedule" not in ppo.components()  # saved as the update-step count, as before
    ppo.ac.num_update_steps = 2
    assert ppo.ac.lrs.apply(ppo.ac.num_update_steps) == 0.5
    assert ppo.ac.optim.param_groups[0]["lr"] == pytest.approx(5e-4)
    assert isinstance(ppo.ac.optim, torch.optim.Optimizer)
