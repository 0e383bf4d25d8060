"""Tianshou's test/continuous/test_sac_with_il.py, through its one port
(examples/from_tianshou/from_test_sac_with_il.py, settings in its docstring): SAC learns Pendulum-v1,
then an :class:`OffPolicyImitation` policy learns online from the buffer the SAC collector keeps filling
(emptied first, as Tianshou's ``train_collector.reset()`` does) and is tested on its own.

``test_sac_with_il_tiny`` runs the port with a tiny budget in CI and checks that the imitator moves
towards the expert; the ``slow`` test asserts the script's own thresholds (seed 1, Tianshou's default).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "from_tianshou"


def _port() -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module("from_test_sac_with_il")


@pytest.mark.learning
def test_sac_with_il_tiny() -> None:
    """The port end to end with a tiny budget (1,200 env steps per part): the imitator learns the
    expert's actions."""
    torch.set_num_threads(1)
    result = _port().main(0, budget_scale=0.05, max_epochs=1)
    assert result.il is not None and result.il_gap_before is not None and result.il_gap_after is not None
    assert result.sac.train_step == 1200 and result.il.train_step == 1200
    assert result.il.gradient_step == 1200  # one gradient step per env step (Tianshou's default)
    # seed 0: 0.087 -> 0.015 (the expert is a weak 1,200-step SAC; the gap is to its deterministic actions)
    assert result.il_gap_after < 0.5 * result.il_gap_before


@pytest.mark.learning
@pytest.mark.slow
def test_sac_with_il_reaches_the_scripts_thresholds() -> None:
    """The script's settings and thresholds: SAC >= -250, then the imitator >= -300 (100 test episodes)."""
    torch.set_num_threads(1)
    port = _port()
    result = port.main(1)
    assert result.il is not None
    print(
        f"RESULT sac_with_il seed=1 sac_best={result.sac.best_reward:.1f} "
        f"sac_env_steps={result.sac.train_step} il_best={result.il.best_reward:.1f} "
        f"il_env_steps={result.il.train_step} gap={result.il_gap_before:.3f}->{result.il_gap_after:.3f}",
        flush=True,
    )
    assert result.sac.best_reward >= port.REWARD_THRESHOLD
    assert result.il.best_reward >= port.IL_REWARD_THRESHOLD
