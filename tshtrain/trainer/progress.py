"""What the trainer writes between the bars (:mod:`tshtrain.logger.console`): the line of each test
step and the summary table and line at the end of a run."""

from __future__ import annotations

from tshtrain.data.stats import SequenceSummaryStats
from tshtrain.logger.console import format_return
from tshtrain.trainer.run_state import BestResult
from tshtrain.trainer.stats import InfoStats


def format_test_line(
    epoch: int,
    returns: SequenceSummaryStats,
    best: BestResult,
    *,
    in_training_env_step: int | None = None,
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
