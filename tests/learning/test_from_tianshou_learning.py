"""The ports of Tianshou 2.0.1's test scripts (examples/from_tianshou/) reach the scripts' own
thresholds on the best mean test return with seed 0 and the scripts' full budgets: DQN and PPO on
CartPole-v1 (195), TD3 and SAC on Pendulum-v1 (-250), and the imitator of test_sac_with_il.py (-300).
Minutes each on one CPU thread: slow tier (``pytest -m slow tests/learning/test_from_tianshou_learning.py``).
The CQL port's learning test is in tests/unit/test_from_tianshou_cql.py."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "from_tianshou"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["from_test_dqn", "from_test_ppo_discrete", "from_test_td3"])
def test_port_reaches_the_scripts_threshold(name: str) -> None:
    torch.set_num_threads(1)
    module = importlib.import_module(name)
    info = module.main(0)
    print(
        f"RESULT {name} seed 0: best test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps"
    )
    assert info.best_reward is not None and info.best_reward >= module.REWARD_THRESHOLD


@pytest.mark.slow
def test_sac_with_il_port_reaches_both_thresholds() -> None:
    torch.set_num_threads(1)
    module = importlib.import_module("from_test_sac_with_il")
    result = module.main(0)
    assert result.il is not None
    print(
        f"RESULT from_test_sac_with_il seed 0: SAC best {result.sac.best_reward:.1f} "
        f"({result.sac.train_step} env steps), imitator best {result.il.best_reward:.1f} "
        f"({result.il.train_step} env steps)"
    )
    assert result.sac.best_reward is not None and result.sac.best_reward >= module.REWARD_THRESHOLD
    assert result.il.best_reward is not None and result.il.best_reward >= module.IL_REWARD_THRESHOLD
