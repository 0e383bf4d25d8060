"""docs/from-skrl.md, row by row: skrl's trainers as the seed (002) describes them, used from tshtrain
(each test names the rows it exercises)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.contract._hook_setups import RandomPolicy, off_policy_trainer, reinforce_trainer
from tshtrain.adapters.skrl import EnvStepDriver
from tshtrain.adapters.skrl_trainers import SequentialTrainer, StepTrainer
from tshtrain.algorithm.multi_agent import scoped_learners
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import StopReason


def _parts(trainer: Any) -> tuple[Any, Any]:
    """The algorithm and params of a prepared test trainer (the facades build their own)."""
    return trainer.algorithm, trainer.params


def test_sequential_trainer_trains_for_cfg_timesteps() -> None:
    """Rows: Sequential trainer train(); cfg timesteps / headless / disable_progressbar;
    close_environment_at_exit; base class train/eval, single_agent_train."""
    algorithm, params = _parts(reinforce_trainer(num_envs=2))
    cfg = {"timesteps": 50, "headless": True, "disable_progressbar": True, "close_environment_at_exit": True}
    facade = SequentialTrainer(algorithm, params, cfg=cfg)
    info = facade.train()
    assert info.train_step == 100  # 50 timesteps of 2 envs
    assert facade.trainer.stop_reason is StopReason.MAX_ENV_STEPS
    assert facade.trainer.params.show_progress is False
    assert facade.trainer.options.render_every_num_env_steps is None
    stat = facade.eval()  # 50 evaluation timesteps on the test envs
    assert stat.n_collected_steps == 50


def test_step_trainer_train_and_eval_one_timestep_each() -> None:
    """Rows: Step trainer train(timestep) / eval(timestep); step-wise evaluation; manual training."""
    algorithm, params = _parts(off_policy_trainer(num_envs=2))
    facade = StepTrainer(algorithm, params, cfg={"timesteps": 12, "headless": True})
    results = [facade.train() for _ in range(12)]
    completed = [r.training_step is not None for r in results]
    assert completed == [False] * 4 + [True] + [False] * 4 + [True, False, True]  # 5 + 5 + the cut 2
    assert facade.trainer.counters.env_step == 24 and facade.trainer.done
    with pytest.raises(RuntimeError, match="Training has ended"):
        facade.train()
    stats = [facade.eval(timestep=t) for t in (1, 2, 3)]
    assert all(s.n_collected_steps == 1 for s in stats)  # the test collector has one env
    with pytest.raises(ConfigurationError, match="timestep is the trainer's count"):
        facade.eval(timestep=9)
    facade.close()


def test_not_headless_renders_every_render_interval() -> None:
    """Rows: headless=False (skrl's default) renders; render_interval."""
    algorithm, params = _parts(reinforce_trainer(num_envs=2))
    facade = SequentialTrainer(algorithm, params, cfg={"timesteps": 8, "render_interval": 2})
    renders: list[int] = []
    collector = facade.trainer.params.training_collector
    collector.render_env = lambda: renders.append(1)  # type: ignore[method-assign]
    facade.train()
    assert facade.trainer.options.render_every_num_env_steps == 4 and len(renders) == 4


def test_stochastic_evaluation_and_unknown_cfg_keys() -> None:
    """Rows: stochastic_evaluation; cfg keys tshtrain does not map are refused by name."""
    algorithm, params = _parts(off_policy_trainer())
    facade = StepTrainer(algorithm, params, cfg={"stochastic_evaluation": True, "headless": True})
    assert facade.trainer.options.test_deterministic is False
    facade.eval()
    policy = facade.trainer.algorithm.policy
    assert isinstance(policy, RandomPolicy) and policy.deterministic_calls[-1] is False
    with pytest.raises(ConfigurationError, match="unknown keys \\['environment_info'\\]"):
        StepTrainer(algorithm, params, cfg={"environment_info": "episode"})


def test_step_driver_is_the_manual_loop() -> None:
    """Row: manual training (a loop of env steps the user writes)."""
    trainer = off_policy_trainer(max_env_steps=30)
    driver = EnvStepDriver(trainer)
    while not trainer.done:
        driver.step()
    assert trainer.counters.env_step == 30


def test_agents_scope_follows_skrl() -> None:
    """Rows: agents_scope (empty: equal split; must cover every env; one agent takes all);
    multi_agent_train."""
    members = [RandomPolicy(_space()) for _ in range(3)]
    spans = [(x.units.start, x.units.stop) for x in scoped_learners([], members, num_envs=8)]
    assert spans == [(0, 2), (2, 4), (4, 8)]
    assert [x.units.stop for x in scoped_learners([3], members[:1], num_envs=8)] == [8]
    with pytest.raises(ConfigurationError, match="covers 6 envs but the vector env has 8"):
        scoped_learners([2, 2, 2], members, num_envs=8)
    with pytest.raises(ConfigurationError, match="cannot share 2 envs"):
        scoped_learners([], members, num_envs=2)


def _space() -> Any:
    import gymnasium as gym

    return gym.spaces.Discrete(2)


def test_timesteps_count_vector_steps() -> None:
    """Row: a timestep is one vector step (num_envs env steps)."""
    algorithm, params = _parts(reinforce_trainer(num_envs=4))
    facade = SequentialTrainer(algorithm, params, cfg={"timesteps": 10, "headless": True})
    assert dataclasses.asdict(facade.cfg)["timesteps"] == 10
    assert facade.trainer.params.max_env_steps == 40
