"""The ports of Tianshou 2.0.1's test scripts in examples/from_tianshou/, each run with a tiny budget
(seconds); tests/learning/test_from_tianshou_learning.py runs them to the scripts' own thresholds (the
SAC + imitation port: tests/learning/test_sac_with_il.py). The CQL port (and gather_pendulum_data.py)
has its own tests in test_from_tianshou_cql.py."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tshtrain.trainer import InfoStats, StopReason

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "from_tianshou"))

CARTPOLE_RETURNS = (1.0, 500.0)
PENDULUM_RETURNS = (-16.3 * 200, 0.0)  # per-step reward in [-16.3, 0], 200 steps
PORTS = {
    "from_test_dqn": CARTPOLE_RETURNS,
    "from_test_ppo_discrete": CARTPOLE_RETURNS,
    "from_test_td3": PENDULUM_RETURNS,
    "from_test_sac_with_il": PENDULUM_RETURNS,
}


def port(name: str) -> ModuleType:
    return importlib.import_module(name)


def _check(info: InfoStats, returns: tuple[float, float]) -> None:
    low, high = returns
    assert info.best_reward is not None and low <= info.best_reward <= high
    assert info.train_step > 0 and info.gradient_step > 0
    assert info.test_episode > 0
    assert info.stop_reason in (StopReason.MAX_EPOCHS, StopReason.STOP_FN)


@pytest.mark.parametrize("name", [n for n in PORTS if n != "from_test_sac_with_il"])
def test_port_runs_with_a_tiny_budget(name: str) -> None:
    torch.set_num_threads(1)
    info = port(name).main(0, budget_scale=0.01, max_epochs=1)
    assert isinstance(info, InfoStats)
    _check(info, PORTS[name])


def test_sac_with_il_port_runs_both_parts_with_a_tiny_budget() -> None:
    torch.set_num_threads(1)
    result = port("from_test_sac_with_il").main(0, budget_scale=0.01, max_epochs=1)
    _check(result.sac, PENDULUM_RETURNS)
    assert result.il is not None
    _check(result.il, PENDULUM_RETURNS)
    assert result.il.train_step == 240  # its own epoch of 240 env steps, after the collector's reset
    assert result.il.gradient_step == 240  # one gradient step per env step (Tianshou's default)
    # the imitator learns from the expert's fresh steps only: the reset emptied SAC's training history,
    # which (a short experiment, see the port's docstring) is what kept an earlier port's imitator at -744
    assert result.il_num_transitions == 240
    assert port("from_test_sac_with_il").IL_REWARD_THRESHOLD == -300.0


@pytest.mark.parametrize("name", list(PORTS))
def test_port_keeps_the_scripts_threshold(name: str) -> None:
    expected = {
        "from_test_dqn": 195.0,
        "from_test_ppo_discrete": 195.0,
        "from_test_td3": -250.0,
        "from_test_sac_with_il": -250.0,
    }
    assert expected[name] == port(name).REWARD_THRESHOLD


def test_dqn_training_fn_anneals_epsilon_as_the_script_does() -> None:
    eps = port("from_test_dqn").eps_training
    assert eps(0) == eps(10000) == pytest.approx(0.1)
    assert eps(30000) == pytest.approx(0.1 - 0.5 * 0.09)  # halfway through the 40000-step decay
    assert eps(50000) == pytest.approx(0.01)
    assert eps(100000) == pytest.approx(0.01)


def test_dqn_same_seed_same_run() -> None:
    torch.set_num_threads(1)
    dqn = port("from_test_dqn")
    first, second = (dqn.main(3, budget_scale=0.01, max_epochs=1) for _ in range(2))
    assert (first.best_reward, first.train_step, first.gradient_step) == (
        second.best_reward,
        second.train_step,
        second.gradient_step,
    )


def test_ppo_actor_and_critic_share_one_orthogonal_trunk() -> None:
    actor, critic = port("from_test_ppo_discrete").shared_actor_critic()
    assert actor[0] is critic[0]  # one trunk module, as Tianshou's DiscreteActor / DiscreteCritic on one Net
    linears = [m for m in actor.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linears] == [64, 64, 2]
    for m in linears:
        weight = m.weight if m.out_features <= m.in_features else m.weight.T
        eye = torch.eye(weight.shape[0])
        assert torch.allclose(weight @ weight.T, eye, atol=1e-5)  # orthogonal rows (or columns)
        assert torch.count_nonzero(m.bias) == 0


def test_sac_actor_has_a_state_independent_sigma() -> None:
    sac = port("from_test_sac_with_il")
    actor = sac.StateIndependentSigmaActor(torch.nn.Linear(3, 1), act_dim=1)
    out = actor(torch.randn(5, 3, generator=torch.Generator().manual_seed(0))).detach()
    assert out.shape == (5, 2)
    assert torch.equal(out[:, 1], torch.zeros(5))  # log std 0 (sigma 1) for every observation
    assert len({round(float(v), 6) for v in out[:, 0]}) == 5  # means depend on the observation
