"""The multi-agent examples (examples/multi_agent/, shown in docs/multi_agent.md) run with a tiny budget
through their command line (``main(argv)``), and build the learner layout they describe."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from tests.extras import need
from tshtrain.algorithm import DQN, PPO, MultiAgentOffPolicy, MultiAgentOnPolicy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "multi_agent"
SCRIPTS = ("agent_scopes", "independent_dqn_vs_random", "mappo_vmas", "shared_ippo_spread")


def _load(stem: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"multi_agent_example_{stem}", EXAMPLES / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_multi_agent_example_is_covered() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.py")} == set(SCRIPTS)
    for stem in SCRIPTS:
        text = (EXAMPLES / f"{stem}.py").read_text(encoding="utf-8")
        assert '"--env-steps"' in text and 'if __name__ == "__main__":' in text, stem


@pytest.mark.integration
def test_independent_dqn_against_a_random_player(capsys: pytest.CaptureFixture[str]) -> None:
    need("pettingzoo", "pettingzoo")
    module = _load("independent_dqn_vs_random")
    wins, losses = module.main(["--env-steps", "200", "--test-episodes", "4", "--eval-games", "6", "--quiet"])
    assert 0.0 <= wins <= 1.0 and 0.0 <= losses <= 1.0 and wins + losses <= 1.0
    assert np.isclose(wins * 6, round(wins * 6))  # rates over the 6 games asked for
    assert "greedy player_2 over 6 games" in capsys.readouterr().out
    algorithm, info = module.train(env_steps=128, test_episodes=2, verbose=False)
    assert isinstance(algorithm, MultiAgentOffPolicy)
    assert [(lr.name, lr.trainable) for lr in algorithm.learners] == [("player_1", False), ("player_2", True)]
    assert isinstance(algorithm.learners[1].algorithm, DQN)
    assert info.train_step == 128 and info.gradient_step > 0  # two collection steps of 64


@pytest.mark.integration
def test_shared_ippo_on_simple_spread() -> None:
    need("mpe2", "pettingzoo")
    module = _load("shared_ippo_spread")
    info = module.main(["--env-steps", "160", "--test-episodes", "1", "--quiet"])
    assert info.train_step == 160  # env steps (of one env each), not the 3 * 160 agent transitions
    assert info.gradient_step > 0


@pytest.mark.integration
def test_mappo_on_vmas_balance() -> None:
    need("vmas", "vmas")
    module = _load("mappo_vmas")
    algorithm, info = module.train(env_steps=32, num_envs=4, test_episodes=1, verbose=False)
    assert isinstance(algorithm, MultiAgentOnPolicy) and len(algorithm.learners) == 1
    assert algorithm.learners[0].units == slice(0, 4)  # one learner shared by the 4 agents
    assert isinstance(algorithm.learners[0].algorithm, PPO)
    assert info.train_step == 32 and info.gradient_step > 0


@pytest.mark.parametrize("update_mode", ["sequential"])
def test_two_ppo_agents_in_scopes_of_one_cartpole_env(update_mode: str) -> None:
    module = _load("agent_scopes")
    torch.manual_seed(0)
    untrained = [module.ppo_agent(k) for k in range(2)]
    algorithm, info = module.train(env_steps=128, update_mode=update_mode, verbose=False)
    assert [(lr.name, lr.units) for lr in algorithm.learners] == [
        ("agent_0", slice(0, 4)),
        ("agent_1", slice(4, 8)),
    ]
    assert set(algorithm.state_dict()) == {"agent_0", "agent_1"}
    for fresh, learner in zip(untrained, algorithm.learners, strict=True):  # both agents were updated
        trained = learner.algorithm.policy.parameters()
        assert any(not torch.equal(a, b) for a, b in zip(fresh.policy.parameters(), trained, strict=True))
    assert info.train_step == 128
    assert module.main(["--env-steps", "64", "--quiet"]).train_step == 64
