"""Frozen, keyword-only parameter objects that say what kind of training to run (docs/params.md lists them).

Field names and defaults follow Tianshou 2.x. Every field is validated when the object is built: number
and bool fields against their annotations by :func:`tshtrain.constraints.validate_fields`, the rules that
join several fields below; an error names the field, the value and what to do instead."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tshtrain.algorithm.base import Algorithm
from tshtrain.checkpoint.params import CheckpointParams
from tshtrain.constraints import PositiveFloat, PositiveInt, validate_fields
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector import Collector
from tshtrain.data.collector_base import BaseCollector
from tshtrain.data.stats import CollectStats
from tshtrain.data.tensor_buffer import TensorReplayBuffer
from tshtrain.errors import ConfigurationError
from tshtrain.logger.base import Logger


def _short(value: object) -> str:
    """A readable, address-free rendering of a field value for ``str(params)``."""
    if isinstance(value, BaseCollector):
        return f"{type(value).__name__}(num_envs={value.num_envs})"
    if isinstance(value, BaseReplayBuffer | TensorReplayBuffer):
        return f"{type(value).__name__}(len={len(value)}, capacity={value.capacity})"
    if isinstance(value, functools.partial):
        return f"partial({_short(value.func)})"
    if callable(value):
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        return f"<{name if isinstance(name, str) else type(value).__qualname__}>"
    text = repr(value)  # object.__repr__ (" at 0x"): the type says all there is to say
    return f"<{type(value).__qualname__}>" if " at 0x" in text else text


@dataclass(frozen=True, kw_only=True)
class TrainerParams:
    """Parameters common to every trainer."""

    max_epochs: PositiveInt = 100
    """the (maximum) number of epochs. An epoch is training steps, then one test step: online,
    ceil(epoch_num_steps / c) training steps with c env steps collected per training step, so a full run
    takes max_epochs * ceil(epoch_num_steps / c) * c env steps; offline, epoch_num_steps training steps."""
    epoch_num_steps: PositiveInt = 30000
    """online: env steps to collect per epoch; offline: training (= gradient) steps per epoch"""
    test_collector: BaseCollector | None = None
    """the collector for test steps (a ``Collector``, or a ``TensorCollector`` on the torch path); None:
    no test steps (and no stop_fn / test_fn / save_best_fn)"""
    test_step_num_episodes: PositiveInt = 1
    """episodes per test step"""
    test_step_max_env_steps: PositiveInt | None = 1_000_000
    """a test step that took this many env steps without finishing its episodes raises
    ``EpisodeLimitError`` (an env that never terminates or truncates would hang it); None: no bound"""
    training_fn: Callable[[int, int], None] | None = None
    """called at the beginning of each training step as ``training_fn(epoch, env_step)``"""
    test_fn: Callable[[int, int | None], None] | None = None
    """called at the beginning of each test step as ``test_fn(epoch, env_step)``"""
    stop_fn: Callable[[float], bool] | None = None
    """called with the score of every test step but the initial one (of ``reset()``), the test step just
    run's unless ``stop_fn_on_best_score``; True stops training"""
    stop_fn_on_best_score: bool = False
    """give ``stop_fn`` the best score so far (the initial test step's included) instead of the score of
    the test step just run: Tianshou's code. They differ when an earlier test step (e.g. the initial one)
    met a threshold that the current one misses: Tianshou then stops after the first epoch's test step,
    tshtrain by default only at a test step that meets it itself"""
    compute_score_fn: Callable[[CollectStats], float] | None = None
    """the score of a test step (maximised); None: the mean test return"""
    save_best_fn: Callable[[Algorithm[Any]], None] | None = None
    """called with the algorithm whenever a test step reaches a strictly greater score than before"""
    save_checkpoint_fn: Callable[[int, int, int], str] | None = None
    """called as ``save_checkpoint_fn(epoch, env_step, gradient_step)``, returning the path it wrote,
    whether or not a logger is set: by default after EVERY training step (as Tianshou's reference
    documents it), with ``save_checkpoint_every_num_epochs=n`` at the end of every n-th epoch
    (Tianshou's code calls it once per logger ``save_interval`` epochs, default 1). A function that
    saves a replay buffer wants the interval; for tshtrain's own exact checkpoints use ``checkpoint``
    (:class:`CheckpointParams`) instead"""
    save_checkpoint_every_num_epochs: PositiveInt | None = None
    """call ``save_checkpoint_fn`` only at the end of epochs whose number is a multiple of this (after
    the epoch's test step; Tianshou calls it just before), not after every training step; None: after
    every training step. Tianshou's logger ``save_interval=n`` corresponds to n"""
    resume_from_log: bool = False
    """restore epoch, env_step and gradient_step from the logger's records before training"""
    multi_agent_return_reduction: Callable[[np.ndarray], np.ndarray] | None = None
    """maps per-agent returns (num_episodes, num_agents) to (num_episodes,); None: mean over agents"""
    logger: Logger | None = None
    """where statistics go; None: nothing is logged"""
    verbose: bool = True
    """print one line per test step and a summary table at the end (the lines go to the logger
    ``tshtrain.trainer`` at INFO either way)"""
    show_progress: bool | None = None
    """progress bars; None: only when stderr is a terminal"""
    checkpoint: CheckpointParams | None = None
    """automatic checkpoints (periodic, best, final) and their directory; None: only the ones you
    write with ``Trainer.save_checkpoint`` / ``save_checkpoint_fn``"""

    def __post_init__(self) -> None:
        validate_fields(self)
        owner = type(self).__name__
        if self.test_collector is not None and not isinstance(self.test_collector, BaseCollector):
            raise ConfigurationError(
                f"{owner}.test_collector must be a tshtrain.data.Collector, a TensorCollector or None, got "
                f"{type(self.test_collector).__name__}."
            )
        if self.save_checkpoint_every_num_epochs is not None and self.save_checkpoint_fn is None:
            raise ConfigurationError(
                f"{owner}.save_checkpoint_every_num_epochs={self.save_checkpoint_every_num_epochs} is set "
                f"but save_checkpoint_fn is None; pass save_checkpoint_fn or drop the interval."
            )
        if self.stop_fn_on_best_score and self.stop_fn is None:
            raise ConfigurationError(
                f"{owner}.stop_fn_on_best_score=True is set but stop_fn is None; pass stop_fn or drop it."
            )
        if self.test_collector is None:
            for name in ("stop_fn", "test_fn", "save_best_fn", "compute_score_fn"):
                if getattr(self, name) is not None:
                    raise ConfigurationError(
                        f"{owner}.{name} is set but test_collector is None; {name} acts on test steps, "
                        f"so pass a test_collector or drop {name}."
                    )
        if self.resume_from_log and self.logger is None:
            raise ConfigurationError(
                f"{owner}.resume_from_log=True needs a logger to read the counters from; pass logger=..."
            )
        if self.logger is not None and not isinstance(self.logger, Logger):
            raise ConfigurationError(
                f"{owner}.logger must implement tshtrain.logger.Logger (intervals, write, "
                f"restore_counters, close), got {type(self.logger).__name__}."
            )

    def __str__(self) -> str:
        fields = ((f.name, getattr(self, f.name), f.default) for f in dataclasses.fields(self))
        parts = [f"{name}={_short(v)}" for name, v, default in fields if v is not default and v != default]
        return f"{type(self).__name__}({', '.join(parts)})"


@dataclass(frozen=True, kw_only=True)
class OnlineTrainerParams(TrainerParams):
    """Parameters of trainers that collect their own data.

    Collection size: ``collection_step_num_env_steps`` (default 2048) or ``collection_step_num_episodes``,
    which switches to episode-based collection and sets ``collection_step_num_env_steps`` to None: an
    error if that was given another value than 2048 (both set), as is setting both to None."""

    training_collector: BaseCollector
    """the collector that gathers training data in each training step (a ``Collector``, or a
    ``TensorCollector`` with a ``TensorReplayBuffer`` on the torch path)"""
    collection_step_num_env_steps: PositiveInt | None = 2048
    """env steps per collection step; with N envs, ceil(n / N) * N are collected"""
    collection_step_num_episodes: PositiveInt | None = None
    """episodes per collection step (instead of env steps)"""
    test_in_training: bool = False
    """after each collection step whose finished episodes satisfy stop_fn (scored like a test step, with
    compute_score_fn), run a test step, and stop if the test step satisfies it too"""
    max_env_steps: PositiveInt | None = None
    """a budget in env steps (SB3's ``total_timesteps``, skrl's ``timesteps`` times the number of envs):
    training stops at the first vector step at which ``env_step`` reaches it, closing the epoch there
    (with its test step). The collection step that would cross it is cut to the remaining env steps
    (rounded up to whole vector steps, so a budget that is not a multiple of the number of envs ends up
    to num_envs - 1 env steps later). Needs env-step collection; ``max_epochs`` still bounds the run and
    must not end it first. None: the run is ``max_epochs`` epochs"""

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        if not isinstance(self.training_collector, BaseCollector):
            raise ConfigurationError(
                f"{owner}.training_collector must be a tshtrain.data.Collector, got "
                f"{type(self.training_collector).__name__} (torch-native envs: a TensorCollector)."
            )
        if self.collection_step_num_episodes is not None:
            if self.collection_step_num_env_steps not in (None, 2048):
                raise ConfigurationError(
                    f"{owner}: collection_step_num_env_steps={self.collection_step_num_env_steps} and "
                    f"collection_step_num_episodes={self.collection_step_num_episodes} are both set; "
                    f"set only one of them."
                )
            object.__setattr__(self, "collection_step_num_env_steps", None)
        elif self.collection_step_num_env_steps is None:
            raise ConfigurationError(
                f"{owner}: neither collection_step_num_env_steps nor collection_step_num_episodes is set; "
                f"set one of them."
            )
        if self.test_in_training and self.stop_fn is None:
            raise ConfigurationError(
                f"{owner}.test_in_training=True needs a stop_fn (it decides when to test); pass stop_fn "
                f"or set test_in_training=False."
            )
        _check_env_step_budget(self, owner)
        buffer = self.training_collector.buffer
        steps = self.collection_step_num_env_steps
        if buffer is None:
            raise ConfigurationError(
                f"{owner}.training_collector has no buffer; build it as Collector(policy, env, buffer) "
                f"(or TensorCollector(policy, env, TensorReplayBuffer(...)))."
            )
        if steps is not None:
            rows = -(-steps // self.training_collector.num_envs)
            if rows > buffer.column_capacity:
                raise ConfigurationError(
                    f"{owner}.collection_step_num_env_steps={steps} needs {rows} rows per env but each "
                    f"sub-buffer of the training buffer holds {buffer.column_capacity}; enlarge the buffer "
                    f"to >= {rows * buffer.num_columns} or lower collection_step_num_env_steps."
                )


def env_steps_per_epoch(params: OnlineTrainerParams) -> int:
    """The env steps of a full epoch with env-step collection: ceil(s / c) * c, c = ceil(n / N) * N."""
    steps, num_envs = params.collection_step_num_env_steps, params.training_collector.num_envs
    assert steps is not None, "env-step collection only"
    per_step = -(-steps // num_envs) * num_envs
    return -(-params.epoch_num_steps // per_step) * per_step


def _check_env_step_budget(params: OnlineTrainerParams, owner: str) -> None:
    """``max_env_steps`` needs collection steps of env steps, and ``max_epochs`` must leave room for it."""
    budget, steps = params.max_env_steps, params.collection_step_num_env_steps
    if budget is None:
        return
    if steps is None:
        raise ConfigurationError(
            f"{owner}.max_env_steps={budget} needs env-step collection, but collection_step_num_episodes="
            f"{params.collection_step_num_episodes} collects whole episodes, which cannot be cut to fit the "
            f"budget; set collection_step_num_env_steps instead, or drop max_env_steps."
        )
    per_epoch = env_steps_per_epoch(params)
    if params.max_epochs * per_epoch < budget:
        raise ConfigurationError(
            f"{owner}.max_env_steps={budget} is never reached: max_epochs={params.max_epochs} epochs of "
            f"{per_epoch} env steps end the run at {params.max_epochs * per_epoch}; raise max_epochs to "
            f">= {-(-budget // per_epoch)} (or lower max_env_steps)."
        )


@dataclass(frozen=True, kw_only=True)
class OnPolicyTrainerParams(OnlineTrainerParams):
    """Parameters of :class:`OnPolicyTrainer`."""

    batch_size: PositiveInt | None = 64
    """mini-batch size of the gradient updates; None: the whole rollout in one batch"""
    update_step_num_repetitions: PositiveInt = 1
    """passes over the collected rollout in each update step"""


@dataclass(frozen=True, kw_only=True)
class OffPolicyTrainerParams(OnlineTrainerParams):
    """Parameters of :class:`OffPolicyTrainer`."""

    batch_size: PositiveInt = 64
    """transitions sampled from the buffer for each gradient step"""
    update_step_num_gradient_steps_per_sample: PositiveFloat = 1.0
    """u: after collecting n transitions, round(u * n) gradient steps are taken"""
    overlap_collection: bool = False
    """collect the next collection step in a background thread, with a copy of the policy, while the
    learner takes the gradient steps of the current one (docs/overlap.md); the data then lags the
    learner's weights by 1..max_policy_lag update steps. Needs a numpy ``Collector`` whose policy is
    the algorithm's, on CPU, and a test collector with its own envs"""
    max_policy_lag: PositiveInt = 1
    """with overlap_collection: the learner's weights are pushed to the collecting copy once they are
    this many update steps ahead of it (1: after every update step)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        _check_overlap(self, owner)
        ratio = self.update_step_num_gradient_steps_per_sample
        steps = self.collection_step_num_env_steps
        if steps is None:
            return
        # the collector steps all N envs ceil(n / N) times: c = ceil(n / N) * N transitions arrive
        num_envs = self.training_collector.num_envs
        collected = -(-steps // num_envs) * num_envs
        if round(ratio * collected) == 0:
            # round() rounds half to even, so u = 0.5 / c still gives 0; u = 1 / c gives exactly one
            raise ConfigurationError(
                f"{owner}.update_step_num_gradient_steps_per_sample={ratio} gives round({ratio} * "
                f"{collected}) = 0 gradient steps per collection step of {collected} env steps; raise it "
                f"to at least {1 / collected:.3g} or collect more env steps per collection step."
            )


def _check_overlap(params: OffPolicyTrainerParams, owner: str) -> None:
    """The rules of ``overlap_collection`` / ``max_policy_lag`` (the policy is checked by the trainer)."""
    if not params.overlap_collection:
        if params.max_policy_lag != 1:
            raise ConfigurationError(
                f"{owner}.max_policy_lag={params.max_policy_lag} has no effect without overlapped "
                f"collection; set overlap_collection=True or leave max_policy_lag at 1."
            )
        return
    if params.max_env_steps is not None:
        raise ConfigurationError(
            f"{owner}.overlap_collection=True collects the next collection step during the update, before "
            f"the budget max_env_steps={params.max_env_steps} could cut it; drop one of the two."
        )
    collector = params.training_collector
    if not isinstance(collector, Collector):
        raise ConfigurationError(
            f"{owner}.overlap_collection=True needs a numpy tshtrain.data.Collector as training_collector, "
            f"got {type(collector).__name__} (a TensorCollector's envs already step in batched torch "
            f"kernels, multi-agent collectors are not supported); set overlap_collection=False."
        )
    test = params.test_collector
    if test is not None and (test is collector or getattr(test, "env", None) is collector.env):
        raise ConfigurationError(
            f"{owner}.overlap_collection=True: the test collector shares the training collector's envs "
            f"(the background collection steps them); give the test collector envs of its own."
        )


@dataclass(frozen=True, kw_only=True)
class OfflineTrainerParams(TrainerParams):
    """Parameters of :class:`OfflineTrainer`."""

    buffer: BaseReplayBuffer
    """the dataset: a filled replay buffer"""
    batch_size: PositiveInt = 64
    """transitions sampled from the buffer for each gradient step"""

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        if not isinstance(self.buffer, BaseReplayBuffer):
            raise ConfigurationError(
                f"{owner}.buffer must be a tshtrain replay buffer, got {type(self.buffer).__name__}."
            )
        if len(self.buffer) == 0:
            raise ConfigurationError(
                f"{owner}.buffer is empty; fill it (collect, or tshtrain.data.load_buffer(path)) first."
            )
