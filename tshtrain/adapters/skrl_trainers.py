"""skrl's trainers as facades over one tshtrain trainer (docs/from-skrl.md).

``SequentialTrainer(algorithm, params, cfg={...}).train()`` runs the whole budget; ``StepTrainer``'s
``train()`` / ``eval()`` run one timestep each. A timestep is skrl's: one vector step, i.e. one env step
of every sub-env. skrl's ``cfg`` keys become tshtrain's params and options (:class:`SkrlConfig`):

===============================  =====================================================================
skrl ``cfg`` key                 tshtrain
===============================  =====================================================================
``timesteps``                    ``params.max_env_steps = timesteps * num_envs`` and as many epochs as
                                 that needs (the budget ends the run, not the epochs)
``headless`` (False)             ``options.render_every_num_env_steps = render_interval * num_envs``;
                                 True: None (never render)
``render_interval`` (1)          timesteps between two renders
``disable_progressbar`` (False)  ``params.show_progress = not disable_progressbar`` (None: only on a
                                 terminal, as in skrl)
``close_environment_at_exit``    the training and test envs are closed when the program exits
(True)                           (``atexit``), as skrl does
``stochastic_evaluation``        ``options.test_deterministic = not stochastic_evaluation``
(False)
===============================  =====================================================================

The trainer itself is ``facade.trainer``: its callbacks, counters, checkpoints are the ones to use.
"""

from __future__ import annotations

import atexit
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from tshtrain.adapters.skrl import EnvStepDriver, EnvStepResult
from tshtrain.algorithm.base import OffPolicyAlgorithm, OnPolicyAlgorithm
from tshtrain.data.collector_base import BaseCollector
from tshtrain.data.stats import CollectStats, merge_collect_stats
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


@dataclass(frozen=True, kw_only=True)
class SkrlConfig:
    """skrl's trainer ``cfg``, checked (see the module docstring for what each key becomes)."""

    timesteps: int | None = None
    """vector steps to train for; None: the params' own budget (``max_epochs`` / ``max_env_steps``)"""
    headless: bool = False
    """do not render (skrl renders by default: build the envs with a ``render_mode``)"""
    render_interval: int = 1
    """timesteps between two renders when not headless"""
    disable_progressbar: bool | None = False
    """no progress bar; None: a bar only on a terminal"""
    close_environment_at_exit: bool = True
    """close the envs when the program exits"""
    stochastic_evaluation: bool = False
    """evaluate with sampled actions instead of deterministic ones"""

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any] | None) -> SkrlConfig:
        """Parse skrl's ``cfg`` dict; ConfigurationError names an unknown key and the known ones."""
        cfg = dict(cfg or {})
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(cfg) - set(known))
        if unknown:
            raise ConfigurationError(
                f"skrl cfg: unknown keys {unknown}; the keys tshtrain maps are {known} (docs/from-skrl.md "
                f"says where the others went)."
            )
        config = cls(**cfg)
        for name in ("timesteps", "render_interval"):
            value = getattr(config, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"skrl cfg: {name} must be an int >= 1, got {value!r}.")
        return config


def build_skrl_trainer(
    algorithm: OnPolicyAlgorithm[Any] | OffPolicyAlgorithm[Any],
    params: OnPolicyTrainerParams | OffPolicyTrainerParams,
    config: SkrlConfig,
    options: TrainerOptions | None = None,
) -> OnlineTrainer[Any, Any]:
    """The tshtrain trainer a skrl trainer with ``config`` stands for (see the module docstring)."""
    num_envs = params.training_collector.num_envs
    changes: dict[str, Any] = {"show_progress": _show_progress(config.disable_progressbar)}
    if config.timesteps is not None:
        budget = config.timesteps * num_envs
        changes["max_env_steps"] = budget
        if params.collection_step_num_env_steps is not None:
            changes["max_epochs"] = -(-budget // env_steps_per_epoch(params))
    params = dataclasses.replace(params, **changes)
    options = dataclasses.replace(
        options if options is not None else TrainerOptions(),
        render_every_num_env_steps=None if config.headless else config.render_interval * num_envs,
        test_deterministic=not config.stochastic_evaluation,
    )
    if config.close_environment_at_exit:
        for collector in (params.training_collector, params.test_collector):
            if collector is not None:
                atexit.register(collector.close_env)
    if isinstance(params, OnPolicyTrainerParams) and isinstance(algorithm, OnPolicyAlgorithm):
        return OnPolicyTrainer(algorithm, params, options)
    if isinstance(params, OffPolicyTrainerParams) and isinstance(algorithm, OffPolicyAlgorithm):
        return OffPolicyTrainer(algorithm, params, options)
    raise TypeError(
        f"skrl trainers: {type(algorithm).__name__} cannot be trained with {type(params).__name__}; "
        f"on-policy algorithms take OnPolicyTrainerParams, off-policy ones OffPolicyTrainerParams."
    )


def _show_progress(disable: bool | None) -> bool | None:
    return None if disable is None else not disable


@final
class EvalStepper:
    """skrl's step-wise evaluation: one vector step of the test collector per :meth:`step`, acting as
    test steps do (deterministically unless ``stochastic_evaluation``); the envs are reset before the
    first step, then episodes run on across calls (same-step autoreset)."""

    def __init__(self, trainer: OnlineTrainer[Any, Any]):
        collector: BaseCollector | None = trainer.params.test_collector
        if collector is None:
            raise ConfigurationError(
                f"skrl eval: {type(trainer.params).__name__}.test_collector is None; evaluation steps the "
                f"test collector's envs, so pass test_collector=..."
            )
        self._trainer, self._collector = trainer, collector
        self._started = False
        self.num_timesteps = 0
        """evaluation timesteps taken"""

    def step(self) -> CollectStats:
        """One vector step of the test envs; its statistics (the episodes it ended among them)."""
        options = self._trainer.options
        deterministic = options.test_deterministic
        if deterministic is None:
            deterministic = bool(self._trainer.algorithm.policy.deterministic_eval)
        stat = self._collector.collect(
            n_step=self._collector.num_envs,
            deterministic=deterministic,
            reset_before_collect=not self._started,
        )
        self._started = True
        self.num_timesteps += 1
        return stat


def _check_timestep(given: int | None, expected: int, what: str) -> None:
    if given is not None and given != expected:
        raise ConfigurationError(
            f"{what}(timestep={given}): the timestep is the trainer's count, {expected} for this call; pass "
            f"None (or that number)."
        )


@final
class SequentialTrainer:
    """skrl's SequentialTrainer: ``train()`` runs the whole budget, ``eval()`` ``timesteps`` evaluation
    timesteps (see the module docstring)."""

    def __init__(
        self,
        algorithm: OnPolicyAlgorithm[Any] | OffPolicyAlgorithm[Any],
        params: OnPolicyTrainerParams | OffPolicyTrainerParams,
        cfg: Mapping[str, Any] | None = None,
        *,
        options: TrainerOptions | None = None,
    ):
        self.cfg = SkrlConfig.from_cfg(cfg)
        self.trainer = build_skrl_trainer(algorithm, params, self.cfg, options)
        """the tshtrain trainer"""

    def train(self) -> InfoStats:
        """Train until the budget (``timesteps``) or another stop; ``trainer.run()``."""
        return self.trainer.run()

    def eval(self) -> CollectStats:
        """``timesteps`` evaluation timesteps (ConfigurationError without ``timesteps``); their merged
        statistics."""
        if self.cfg.timesteps is None:
            raise ConfigurationError(
                "SequentialTrainer.eval() runs cfg['timesteps'] timesteps; set timesteps."
            )
        stepper = EvalStepper(self.trainer)
        return merge_collect_stats([stepper.step() for _ in range(self.cfg.timesteps)])


@final
class StepTrainer:
    """skrl's StepTrainer: each ``train()`` / ``eval()`` call is one timestep (see the module
    docstring); ``close()`` ends the run as ``run()`` would."""

    def __init__(
        self,
        algorithm: OnPolicyAlgorithm[Any] | OffPolicyAlgorithm[Any],
        params: OnPolicyTrainerParams | OffPolicyTrainerParams,
        cfg: Mapping[str, Any] | None = None,
        *,
        options: TrainerOptions | None = None,
    ):
        self.cfg = SkrlConfig.from_cfg(cfg)
        self.trainer = build_skrl_trainer(algorithm, params, self.cfg, options)
        """the tshtrain trainer"""
        self._driver = EnvStepDriver(self.trainer)
        self._eval: EvalStepper | None = None
        self.timestep = 0
        """training timesteps taken"""

    def train(self, timestep: int | None = None, timesteps: int | None = None) -> EnvStepResult:
        """One training timestep (``EnvStepDriver.step()``); the training step completes (update, epoch,
        test step) on the timestep that fills its collection step. ``timestep`` / ``timesteps``: skrl's
        arguments, which must agree with the trainer's count and ``cfg['timesteps']`` if given.

        Raises:
            RuntimeError: the budget is spent (the run ended).
        """
        _check_timestep(timestep, self.timestep + 1, "StepTrainer.train")
        self._check_timesteps(timesteps)
        result = self._driver.step()
        self.timestep += 1
        return result

    def eval(self, timestep: int | None = None, timesteps: int | None = None) -> CollectStats:
        """One evaluation timestep on the test envs (:class:`EvalStepper`); its statistics."""
        if self._eval is None:
            self._eval = EvalStepper(self.trainer)
        _check_timestep(timestep, self._eval.num_timesteps + 1, "StepTrainer.eval")
        self._check_timesteps(timesteps)
        return self._eval.step()

    def close(self) -> None:
        """End the run (``trainer.close()``: on_run_end, logger closed)."""
        self.trainer.close()

    def _check_timesteps(self, timesteps: int | None) -> None:
        if timesteps is not None and timesteps != self.cfg.timesteps:
            raise ConfigurationError(
                f"StepTrainer: timesteps={timesteps} differs from cfg['timesteps']={self.cfg.timesteps}, "
                f"which set the run's budget; pass None."
            )
