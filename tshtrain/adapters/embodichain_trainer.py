"""EmbodiChain's trainer as a facade over one tshtrain trainer (docs/from-embodichain.md)::

    facade = EmbodiChainTrainer(algorithm, params)
    facade.event_manager.register("randomize", randomize, trigger=OnEpisodeEnd())
    facade.train(total_timesteps=100_000)
    facade.save_checkpoint()

``train(total_timesteps)`` builds the trainer with the budget ``max_env_steps=total_timesteps`` (and as
many epochs as it needs, so the budget ends the run) and runs it; the run stops at the first vector step
that reaches the budget (the last collection step is cut to fit). ``event_manager`` /
``eval_event_manager`` are :class:`~tshtrain.adapters.embodichain.EventManager` s added to it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, final

from tshtrain.adapters.embodichain import EventManager
from tshtrain.algorithm.base import OffPolicyAlgorithm, OnPolicyAlgorithm
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import (
    InfoStats,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnlineTrainer,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    TrainerOptions,
)
from tshtrain.trainer.params import env_steps_per_epoch


@final
class EmbodiChainTrainer:
    """EmbodiChain's ``Trainer``: ``train(total_timesteps)``, ``save_checkpoint()``, ``global_step``,
    ``event_manager`` / ``eval_event_manager`` (see the module docstring)."""

    def __init__(
        self,
        algorithm: OnPolicyAlgorithm[Any] | OffPolicyAlgorithm[Any],
        params: OnPolicyTrainerParams | OffPolicyTrainerParams,
        *,
        options: TrainerOptions | None = None,
    ):
        """``params``: everything but the budget (collection size, epoch size for test steps, test
        collector, logger as EmbodiChain's ``writer``, checkpoint directory)."""
        self.algorithm = algorithm
        self.params = params
        self.options = options
        self.event_manager = EventManager("train")
        """events on the training envs (EmbodiChain's ``event_manager``)"""
        self.eval_event_manager = EventManager("eval", test_collector=params.test_collector)
        """events of test steps (EmbodiChain's ``eval_event_manager``)"""
        self.trainer: OnlineTrainer[Any, Any] | None = None
        """the tshtrain trainer, built by :meth:`train`"""

    def train(self, total_timesteps: int) -> InfoStats:
        """Train for ``total_timesteps`` env steps (all sub-envs counted) and return the run's InfoStats."""
        if self.trainer is not None:
            raise RuntimeError("EmbodiChainTrainer.train(): this trainer has trained; build a new one.")
        params = self.params
        if isinstance(total_timesteps, bool) or not isinstance(total_timesteps, int) or total_timesteps < 1:
            raise ConfigurationError(f"train(total_timesteps): an int >= 1, got {total_timesteps!r}.")
        changes: dict[str, Any] = {"max_env_steps": total_timesteps}
        if params.collection_step_num_env_steps is not None:
            changes["max_epochs"] = -(-total_timesteps // env_steps_per_epoch(params))
        params = dataclasses.replace(params, **changes)
        trainer: OnlineTrainer[Any, Any]
        if isinstance(params, OnPolicyTrainerParams) and isinstance(self.algorithm, OnPolicyAlgorithm):
            trainer = OnPolicyTrainer(self.algorithm, params, self.options)
        elif isinstance(params, OffPolicyTrainerParams) and isinstance(self.algorithm, OffPolicyAlgorithm):
            trainer = OffPolicyTrainer(self.algorithm, params, self.options)
        else:
            raise TypeError(
                f"EmbodiChainTrainer: {type(self.algorithm).__name__} cannot be trained with "
                f"{type(params).__name__}; on-policy algorithms take OnPolicyTrainerParams, off-policy ones "
                f"OffPolicyTrainerParams."
            )
        trainer.add_callback(self.event_manager, name="event_manager")
        trainer.add_callback(self.eval_event_manager, name="eval_event_manager")
        self.trainer = trainer
        return trainer.run()

    @property
    def global_step(self) -> int:
        """Env steps so far (EmbodiChain's ``global_step``; the trainer's ``counters.env_step``)."""
        return 0 if self.trainer is None else self.trainer.counters.env_step

    def save_checkpoint(self, path: str | Path | None = None) -> Path:
        """Save a checkpoint (``manual-<epoch>-<env_step>`` in ``params.checkpoint.directory`` without a
        path); ``Trainer.save_checkpoint``."""
        if self.trainer is None:
            raise RuntimeError("EmbodiChainTrainer.save_checkpoint(): call train() first.")
        return self.trainer.save_checkpoint(path)
