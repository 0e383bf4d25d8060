"""The ports of Tianshou 2.0.1's test scripts (examples/from_tianshou/) reach the scripts' own
thresholds on the best mean test return with seed 0 and the scripts' full budgets: DQN and PPO on
CartPole-v1 (195) and TD3 on Pendulum-v1 (-250). Minutes each on one CPU thread: slow tier
(``pytest -m slow tests/learning/test_from_tianshou_learning.py``). The SAC + imitation port's learning
test (SAC -250, then the imitator -300) is tests/learning/test_sac_with_il.py; the CQL port's is in
tests/unit/test_from_tianshou_cql.py."""

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
