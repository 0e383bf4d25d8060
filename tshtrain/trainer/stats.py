"""Statistics the trainer returns: per training step (:class:`TrainingStepResult`), per epoch
(:class:`EpochStats`) and for the run (:class:`InfoStats`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

from tshtrain.algorithm.base import TrainingStats
from tshtrain.data.stats import CollectStats


class StopReason(StrEnum):
    """Why a run ended."""

    MAX_EPOCHS = "max_epochs"
    """all max_epochs epochs ran"""
    MAX_ENV_STEPS = "max_env_steps"
    """the env-step budget ``max_env_steps`` was reached"""
    STOP_FN = "stop_fn"
    """stop_fn returned True for a test score"""
    REQUESTED = "requested"
    """``Trainer.request_stop`` was called (by a callback or the user)"""
    HOOK = "hook"
    """a callback, hook or event stopped it (``ctx.request_stop``, ``StopTraining``): see ``stop_detail``"""


@dataclass(frozen=True, kw_only=True)
class TimingStats:
    """Wall-clock seconds, measured with ``time.perf_counter``."""

    total_time: float = 0.0
    """since the start of ``reset`` (including the initial test step)"""
    train_time: float = 0.0
    """in training steps: train_time_collect + train_time_update + test steps run inside training"""
    train_time_collect: float = 0.0
    """in training collection steps"""
    train_time_update: float = 0.0
    """in update steps"""
    test_time: float = 0.0
    """in test steps"""
    env_speed: float = 0.0
    """training env steps (offline: transitions sampled) per second of total_time (SB3's ``time/fps``)"""

    def as_scalars(self) -> dict[str, float]:
        """Flat scalars for loggers (the fields)."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class InfoStats:
    """Counters, best result and timing of a run so far."""

    update_step: int
    """update steps taken"""
    gradient_step: int
    """optimizer steps taken (summed from the updates' TrainingStats.num_gradient_steps)"""
    best_score: float | None
    """best test score (compute_score_fn); None before any test step"""
    best_reward: float | None
    """mean test return of the best test step"""
    best_reward_std: float | None
    """std of the test returns of the best test step"""
    best_epoch: int | None
    """epoch of the best test step (0: the initial test before training)"""
    train_step: int
    """``Counters.env_step`` (Tianshou's name): env steps collected (offline: transitions sampled)"""
    train_episode: int
    """training episodes finished (``Counters.env_episode``)"""
    test_step: int
    """env steps taken in test steps (``Counters.test_env_step``; Tianshou's name)"""
    test_episode: int
    """test episodes finished"""
    timing: TimingStats
    """wall-clock times"""
    stop_reason: StopReason | None
    """why training ended; None while it runs"""
    stop_detail: str | None = None
    """who stopped and why (a callback, hook or event, or ``request_stop(reason)``)"""

    def as_scalars(self) -> dict[str, float]:
        """Flat scalars for loggers (None values left out)."""
        scalars: dict[str, float] = {
            "update_step": float(self.update_step),
            "gradient_step": float(self.gradient_step),
            "env_step": float(self.train_step),
            "train_episode": float(self.train_episode),
            "test_step": float(self.test_step),
            "test_episode": float(self.test_episode),
        }
        for name in ("best_score", "best_reward", "best_reward_std", "best_epoch"):
            value = getattr(self, name)
            if value is not None:
                scalars[name] = float(value)
        scalars.update({f"timing/{k}": v for k, v in self.timing.as_scalars().items()})
        return scalars


@dataclass(frozen=True, kw_only=True)
class EpochStats:
    """What one epoch produced."""

    epoch: int
    """the epoch's number, counting from 1"""
    train_collect_stat: CollectStats | None
    """the epoch's collection steps merged into one record (None offline)"""
    test_collect_stat: CollectStats | None
    """the epoch's test step (None without a test collector)"""
    training_stat: TrainingStats | None
    """the epoch's updates, ``TrainingStats.aggregate``d (off-policy: float fields are means over every
    gradient step); None if there were none"""

    info_stat: InfoStats
    """counters and best result at the end of the epoch"""


@dataclass(frozen=True, kw_only=True)
class TrainingStepResult:
    """What one training step did."""

    collect_stat: CollectStats | None
    """the collection step (None offline)"""
    training_stat: TrainingStats | None
    """the update step (None if it was skipped because training stopped)"""
    epoch_stats: EpochStats | None
    """set when this training step completed an epoch (its test step included)"""
