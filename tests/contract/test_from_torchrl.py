"""docs/from-torchrl.md, row by row: TorchRL's trainer as the seed (003) describes it, used from tshtrain
(each test names the rows it exercises)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.contract._hook_setups import off_policy_trainer, reinforce_trainer
from tshtrain.adapters import HookRegistry
from tshtrain.callbacks import BatchSubSampler, ClearCudaCache, CountFramesLog, LogScalar, RewardNormalizer
from tshtrain.data import TransitionBatch
from tshtrain.errors import ConfigurationError
from tshtrain.logger import CsvLogger, LogScope, MemoryLogger, MLflowLogger, TensorboardLogger, WandbLogger

SEED_ORDER = [
    "batch_process",
    "pre_steps_log",
    "pre_optim_steps",
    "process_optim_batch",
    "post_loss",
    "optimizer",
    "post_optim",
    "post_optim_log",
    "post_steps",
    "post_steps_log",
]


def test_every_hook_point_of_the_seed_runs_in_the_seeds_order() -> None:
    """Rows: the nested loop; the 10 hook points (by TorchRL's names); register_op."""
    trainer = off_policy_trainer(max_epochs=1, test_collector=None)  # 2 training steps, 2 gradient steps
    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    seen: list[str] = []
    for point in SEED_ORDER:

        def op(*args: Any, point: str = point) -> None:
            seen.append(point)

        hooks.register_op(point, op, name=f"op_{point}")
    trainer.run()
    optim = ["process_optim_batch", "post_loss", "optimizer", "post_optim", "post_optim_log"]
    one_step = [*SEED_ORDER[:3], *optim, *optim, *SEED_ORDER[-2:]]
    assert seen == one_step * 2


def test_register_op_calls_no_argument_points_without_arguments() -> None:
    """Row: pre_optim_steps / post_optim / post_steps take no argument in TorchRL."""
    trainer = reinforce_trainer(max_epochs=1, test_collector=None)
    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    calls: list[str] = []
    hooks.register_op("pre_optim_steps", lambda: calls.append("pre"))
    hooks.register_op("post_optim", lambda: calls.append("optim"), name="post_optim_op")
    hooks.register_op("post_steps", lambda: calls.append("post"), name="post_steps_op")
    hooks.register_op("batch_process", lambda batch: batch, name="identity")  # returns the batch
    trainer.run()
    assert calls == ["pre", "optim", "post"] * 2


def test_log_pbar_marks_the_dict_for_the_progress_bar_and_is_not_logged() -> None:
    """Rows: log hooks return a dict or None; the "log_pbar" key."""
    logger = MemoryLogger()
    trainer = reinforce_trainer(max_epochs=1, logger=logger, test_collector=None)
    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    hooks.register_op(
        "pre_steps_log", lambda stat: {"steps": float(stat.n_collected_steps), "log_pbar": True}
    )
    hooks.register_op("post_steps_log", lambda summary: {"quiet": 1.0, "log_pbar": False}, name="quiet")
    hooks.register_op("post_optim_log", lambda step: None, name="nothing")
    trainer.run()
    records = [data for _, data in logger.records[LogScope.TRAINING]]
    assert records and all(r["steps"] == 32.0 and r["quiet"] == 1.0 for r in records)
    assert not any("log_pbar" in r for r in records)
    assert set(trainer.callbacks.progress) == {"steps"}


class CustomHook:
    """The seed's TrainerHookBase example, as a TorchRL user writes it."""

    def __init__(self) -> None:
        self.counter = 0

    def register(self, trainer: HookRegistry, name: str) -> None:
        trainer.register_module(self, "custom_hook")
        trainer.register_op("post_optim_log", self)

    def state_dict(self) -> dict[str, int]:
        return {"counter": self.counter}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self.counter = state_dict["counter"]

    def __call__(self, batch: Any) -> dict[str, Any] | None:
        self.counter += 1
        if self.counter % 2 == 1:
            return {"value": float(self.counter), "log_pbar": False}
        return None


def test_custom_hook_registers_itself_and_its_state_is_checkpointed(tmp_path: Path) -> None:
    """Rows: custom hooks (register / register_module / register_op / state_dict); checkpoints
    (save_trainer / load_from_file, the torch backend)."""
    trainer = reinforce_trainer(max_epochs=1, test_collector=None)
    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    hook = CustomHook()
    hook.register(hooks, "custom_hook")
    trainer.run()
    assert hook.counter == 2  # one optimizer step per update step, 2 training steps
    path = trainer.save_checkpoint(tmp_path / "ckpt", backend="torch")
    fresh = reinforce_trainer(max_epochs=1, test_collector=None)
    fresh_hooks = HookRegistry()
    fresh.add_callback(fresh_hooks, name="hooks")
    restored = CustomHook()
    restored.register(fresh_hooks, "custom_hook")
    fresh.load_checkpoint(path)
    assert restored.counter == 2


def test_aliases_and_optimizer_stage_are_refused_where_tshtrain_refuses_others() -> None:
    """Row: unknown stages still fail at registration, naming TorchRL's accepted names."""
    hooks = HookRegistry()
    with pytest.raises(ConfigurationError, match="'pre_optim_steps' and 'post_steps' are accepted"):
        hooks.register_op("post_everything", lambda: None)


def test_ready_made_hooks_have_equivalents() -> None:
    """Rows: BatchSubSampler, ClearCudaCache, CountFramesLog, LogScalar, RewardNormalizer (callbacks),
    OptimizerHook / UpdateWeights / SelectKeys / ReplayBufferTrainer / LogValidationReward (not needed:
    the algorithm steps its optimizers, the collector runs the algorithm's own policy, batches have fixed
    typed fields, the off-policy trainer samples its replay buffer, test steps log the test return)."""
    logger = MemoryLogger()
    trainer = off_policy_trainer(max_epochs=1, logger=logger)
    for callback in (
        BatchSubSampler(4, seed=0),
        ClearCudaCache(),
        CountFramesLog(frame_skip=4),
        LogScalar(log_pbar=True),
        RewardNormalizer(),
    ):
        trainer.add_callback(callback)
    trainer.run()
    training = [data for _, data in logger.records[LogScope.TRAINING]]
    assert training[-1]["frames"] == 4.0 * 20 and "r_training" in training[-1]
    assert "r_training_std" in training[-1] and "r_training" in trainer.callbacks.progress
    # UpdateWeights: nothing to sync, the collector acts with the algorithm's policy object
    assert trainer.params.training_collector.policy is trainer.algorithm.policy
    # SelectKeys: a TransitionBatch has fixed fields
    assert {f.name for f in dataclasses.fields(TransitionBatch)} >= {"obs", "act", "rew", "obs_next"}
    # LogValidationReward: every test step writes a test record with the test returns
    assert logger.records[LogScope.TEST]
    # OptimizerHook: the algorithm steps its optimizer; the optimizer stage sees each step
    assert isinstance(trainer.algorithm.optim, torch.optim.Optimizer)


def test_loggers_of_the_seed_exist() -> None:
    """Rows: CSVLogger, MLFlowLogger, TensorboardLogger, WandbLogger."""
    assert all(isinstance(c, type) for c in (CsvLogger, MLflowLogger, TensorboardLogger, WandbLogger))
