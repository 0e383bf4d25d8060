"""docs/from-embodichain.md, row by row: EmbodiChain's trainer as the seed (000/001) describes it, used
from tshtrain (each test names the rows it exercises)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract._hook_setups import off_policy_trainer, reinforce_trainer
from tshtrain.adapters import EventContext, Every, OnEpisodeEnd, OnReset, OnTestEnd, OnTestStart
from tshtrain.adapters.embodichain_trainer import EmbodiChainTrainer
from tshtrain.checkpoint.params import CheckpointParams
from tshtrain.errors import ConfigurationError
from tshtrain.logger import LogScope, MemoryLogger
from tshtrain.trainer import StopReason


def _facade(**overrides: Any) -> EmbodiChainTrainer:
    trainer = reinforce_trainer(num_envs=4, **overrides)
    return EmbodiChainTrainer(trainer.algorithm, trainer.params)


def test_train_total_timesteps_stops_at_the_budget() -> None:
    """Rows: train(total_timesteps); global_step; the budget is not rounded up to whole epochs."""
    facade = _facade()  # epochs of 64 env steps, collection steps of 32 on 4 envs
    info = facade.train(1000)
    assert info.train_step == facade.global_step == 1000
    assert facade.trainer is not None and facade.trainer.stop_reason is StopReason.MAX_ENV_STEPS
    assert facade.trainer.counters.epoch == 16  # 15 full epochs and the cut one (40 env steps)


def test_budget_not_a_multiple_of_the_envs_ends_at_the_next_vector_step() -> None:
    """Row: the cut of the last collection step is in whole vector steps."""
    trainer = reinforce_trainer(num_envs=4, max_epochs=3, max_env_steps=70)
    assert trainer.run().train_step == 72


def test_events_every_env_step_with_env_ids() -> None:
    """Rows: event manager; events by interval (every env step, every n env steps), by trigger
    (episode end, reset), eval events."""
    facade = _facade(max_epochs=1)
    steps: list[tuple[int, list[int]]] = []
    ended: list[list[int]] = []
    evals: list[str] = []

    def on_step(ctx: EventContext) -> None:
        assert ctx.env_ids is not None
        steps.append((ctx.counters.env_step, ctx.env_ids.tolist()))

    def on_end(ctx: EventContext) -> None:
        assert ctx.env_ids is not None
        ended.append(ctx.env_ids.tolist())

    facade.event_manager.register("every_env_step", on_step, trigger=Every(1))
    facade.event_manager.register("every_40", lambda ctx: None, trigger=Every(40))
    facade.event_manager.register("randomize", on_end, trigger=OnEpisodeEnd())
    facade.event_manager.register("reset", lambda ctx: None, trigger=OnReset())
    facade.eval_event_manager.register("start", lambda ctx: evals.append("start"), trigger=OnTestStart())
    facade.eval_event_manager.register("end", lambda ctx: evals.append("end"), trigger=OnTestEnd())
    facade.train(200)
    assert len(steps) == 50  # 200 env steps = 50 vector steps of 4 envs
    assert [s for s, _ in steps] == list(range(4, 201, 4)) and all(ids == [0, 1, 2, 3] for _, ids in steps)
    assert facade.event_manager.fire_count("every_40") == 5
    assert ended and facade.event_manager.fire_count("reset") == 1
    assert evals.count("start") == evals.count("end") >= 2  # the initial test step and each epoch's


def test_save_checkpoint_without_a_path(tmp_path: Path) -> None:
    """Rows: save_checkpoint(); writer (the logger) records reward, episode length, loss, speed."""
    logger = MemoryLogger()
    facade = _facade(checkpoint=CheckpointParams(directory=tmp_path), logger=logger)
    facade.train(64)
    path = facade.save_checkpoint()
    assert path.parent == tmp_path and path.name.startswith("manual-") and path.is_dir()
    training = logger.records[LogScope.TRAINING][-1][1]
    assert any(k.startswith("returns") for k in training) and any("len" in k for k in training)
    assert logger.records[LogScope.UPDATE] and logger.records[LogScope.TEST]
    bare = reinforce_trainer()
    with pytest.raises(ConfigurationError, match=r"no path given and params\.checkpoint is None"):
        bare.save_checkpoint()


def test_budget_refusals_name_the_fix() -> None:
    """Row: a budget that max_epochs, episode collection or overlapped collection cannot honour."""
    with pytest.raises(ConfigurationError, match="raise max_epochs to >= 2"):
        reinforce_trainer(max_epochs=1, max_env_steps=100)
    with pytest.raises(ConfigurationError, match="cannot be cut"):
        reinforce_trainer(
            max_env_steps=100, collection_step_num_env_steps=None, collection_step_num_episodes=2
        )
    with pytest.raises(ConfigurationError, match="overlap_collection=True collects the next"):
        off_policy_trainer(max_env_steps=30, overlap_collection=True)


def test_off_policy_budget_and_periodic_evaluation() -> None:
    """Rows: periodic evaluation (_eval_once) every epoch; off-policy under a budget."""
    trainer = off_policy_trainer(max_epochs=5, max_env_steps=45)
    info = trainer.run()
    assert info.train_step == 46 and info.test_episode >= 3
