"""What the trainer writes: :class:`RunRecorder` advances the run state's counters and timers and writes
the records of ``tshtrain.logger.records`` (training, update, test, info), each when its interval gating
says it is due; ``format_*`` make the lines printed between the bars (test steps, the end of a run)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from tshtrain.algorithm.base import TrainingStats
from tshtrain.data.stats import CollectStats, SequenceSummaryStats
from tshtrain.logger.base import Logger, LogIntervals, LogScope
from tshtrain.logger.console import format_return
from tshtrain.logger.records import LogGate, merge_scalar, update_timing
from tshtrain.trainer.run_state import BestResult, RunState
from tshtrain.trainer.stats import InfoStats
from tshtrain.trainer.steps import UpdatePart


class RunRecorder:
    """The trainer's bookkeeping of one run (see the module docstring)."""

    def __init__(self, logger: Logger, state: RunState, defaults: LogIntervals):
        """Records go to ``logger``, counts to ``state``; ``defaults``: the intervals the logger leaves None
        (the trainer family's)."""
        self.state = state
        self.gate = LogGate(logger, state, defaults)
        self._epoch_start: tuple[int, float] | None = None
        """(env_step, perf_counter) when the open epoch began (None: not seen, e.g. resumed inside it)"""

    def epoch_opened(self) -> None:
        """Mark the start of an epoch (for ``timing/epoch_env_speed``)."""
        self._epoch_start = (self.state.counters.env_step, time.perf_counter())

    def collection(self, stat: CollectStats) -> None:
        """Count a training collection step (``stat`` already reduced to one return per episode)."""
        s = self.state
        s.counters = s.counters.advanced(
            env_step=stat.n_collected_steps, env_episode=stat.n_collected_episodes
        )
        s.timing["collect"] += stat.collect_time
        assert s.epoch is not None
        s.epoch.collect.append(stat)
        s.windows[LogScope.TRAINING].add(stat)

    def training_record(self, stat: CollectStats | None, scalars: Mapping[str, float]) -> None:
        """The ``training`` record of a training step, when due: its collection's statistics (online)
        and what callbacks logged (offline the record has only these, and is skipped without)."""
        env_step = self.state.counters.env_step
        if (stat is None and not scalars) or not self.gate.due(LogScope.TRAINING, env_step):
            return
        data: dict[str, float] = {}
        if stat is not None:
            data = {**stat.as_scalars(), **self.state.windows[LogScope.TRAINING].as_scalars()}
        for key, value in scalars.items():
            merge_scalar(data, key, value, "a log hook")
        self.gate.write(LogScope.TRAINING, env_step, data)

    def update(self, stat: TrainingStats, seconds: float, parts: Sequence[UpdatePart]) -> None:
        """Count an update step and log its parts: each part (off-policy: a gradient step) is a
        candidate record of the update scope at the gradient_step it ends on."""
        s = self.state
        s.timing["update"] += seconds
        assert s.epoch is not None
        s.epoch.training.extend(part.stat for part in parts)
        timing: dict[str, float] | None = None
        start = gradient_step = s.counters.gradient_step
        for part in parts:
            gradient_step += part.stat.num_gradient_steps
            if self.gate.due(LogScope.UPDATE, gradient_step):
                timing = timing or update_timing(stat.num_gradient_steps, seconds)
                data = {"env_step": float(s.counters.env_step), **part.stat.as_scalars(), **timing}
                for key, value in part.scalars.items():
                    merge_scalar(data, key, value, "a post_optim_log hook")
                self.gate.write(LogScope.UPDATE, gradient_step, data)
        s.counters = s.counters.advanced(update_step=1, gradient_step=gradient_step - start)

    def test(self, stat: CollectStats, seconds: float) -> None:
        """Count a test step (``stat`` already reduced) and add its episodes to the test window."""
        s = self.state
        s.timing["test"] += seconds
        s.counters = s.counters.advanced(
            test_env_step=stat.n_collected_steps, test_episode=stat.n_collected_episodes
        )
        s.windows[LogScope.TEST].add(stat)

    def test_record(
        self, stat: CollectStats, score: float, scalars: Mapping[str, float], *, in_training: bool = False
    ) -> None:
        """The ``test`` record of a test step, when due, with what callbacks logged. A test step run by
        ``test_in_training`` (logged at the env step after its training collection) carries
        ``in_training`` = 1.0; the test steps of epochs do not have the key."""
        env_step = self.state.counters.env_step
        if not self.gate.due(LogScope.TEST, env_step):
            return
        data = {**stat.as_scalars(), "score": score, **self.state.windows[LogScope.TEST].as_scalars()}
        if in_training:
            data["in_training"] = 1.0
        for key, value in scalars.items():
            merge_scalar(data, key, value, "a callback")
        self.gate.write(LogScope.TEST, env_step, data)

    def info_record(self, info: InfoStats) -> None:
        """The ``info`` record at the end of an epoch, when due, with ``timing/epoch_env_speed``: the epoch's
        env steps per second of its wall time (left out for an epoch a resumed run entered midway)."""
        epoch = self.state.counters.epoch
        start, self._epoch_start = self._epoch_start, None
        if not self.gate.due(LogScope.INFO, epoch):
            return
        data = info.as_scalars()
        if start is not None:
            seconds = time.perf_counter() - start[1]
            data["timing/epoch_env_speed"] = (info.train_step - start[0]) / seconds if seconds > 0 else 0.0
        self.gate.write(LogScope.INFO, epoch, data)


def format_test_line(
    epoch: int, returns: SequenceSummaryStats, best: BestResult, *, in_training_env_step: int | None = None
) -> str:
    """The line of one test step (Tianshou's words, rounded returns). A test step run by
    ``test_in_training`` (``in_training_env_step``: the env step it ran at) says so after the epoch:
    ``Epoch #3 (test in training, env_step 4096): ...``."""
    best_text = (
        "-"
        if best.reward is None or best.reward_std is None
        else f"{format_return(best.reward)} ± {format_return(best.reward_std)} in #{best.epoch}"
    )
    where = "" if in_training_env_step is None else f" (test in training, env_step {in_training_env_step})"
    return (
        f"Epoch #{epoch}{where}: test_reward: {format_return(returns.mean)} ± {format_return(returns.std)}, "
        f"best_reward: {best_text}"
    )


def format_info_table(info: InfoStats) -> str:
    """A two-column text table of a run's final InfoStats (what ``verbose`` prints at the end)."""

    def number(value: float | None) -> str:
        return "-" if value is None else format_return(value)

    timing = info.timing
    rows = [
        ("stop reason", str(info.stop_reason) if info.stop_reason is not None else "-"),
        *([("  detail", info.stop_detail)] if info.stop_detail else []),
        ("best score", number(info.best_score)),
        ("best reward", f"{number(info.best_reward)} ± {number(info.best_reward_std)}"),
        ("best epoch", "-" if info.best_epoch is None else str(info.best_epoch)),
        ("env steps", str(info.train_step)),
        ("training episodes", str(info.train_episode)),
        ("update steps", str(info.update_step)),
        ("gradient steps", str(info.gradient_step)),
        ("test env steps", str(info.test_step)),
        ("test episodes", str(info.test_episode)),
        ("total time", f"{timing.total_time:.2f} s"),
        ("  training", f"{timing.train_time:.2f} s"),
        ("    collection", f"{timing.train_time_collect:.2f} s"),
        ("    updates", f"{timing.train_time_update:.2f} s"),
        ("  test steps", f"{timing.test_time:.2f} s"),
        ("throughput", f"{timing.env_speed:.0f} env steps/s"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    rule = "-" * max(len(line) for line in lines)
    return "\n".join([rule, "Training finished", rule, *lines, rule])


def format_run_summary(info: InfoStats) -> str:
    """One line on how a run ended (what is logged at the end of a run)."""
    best = "-" if info.best_reward is None else format_return(info.best_reward)
    return (
        f"Training finished ({info.stop_reason}): best_reward {best} in #{info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
