"""Typed wrappers around tqdm: one bar per epoch, and a transient bar for long update steps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import tqdm

from tshtrain.algorithm.base import TrainingStats
from tshtrain.trainer.stats import InfoStats


class ProgressBar:
    """An epoch's bar: advances by env steps (online) or training steps (offline); the postfix shows
    env_step, the last training return and the losses of the last update."""

    def __init__(self, total: int, description: str):
        self._bar: tqdm.tqdm[Any] = tqdm.tqdm(total=total, desc=description, dynamic_ncols=True, leave=True)

    def advance(
        self,
        amount: int,
        env_step: int,
        last_return: float | None,
        stat: TrainingStats | None,
        extra: Mapping[str, float] | None = None,
    ) -> None:
        """Move the bar and refresh its postfix (``extra``: scalars log hooks marked for the bar)."""
        postfix: dict[str, str] = {"env_step": str(env_step)}
        if last_return is not None:
            postfix["rew"] = f"{last_return:.2f}"
        if stat is not None:
            for name, value in stat.as_scalars().items():
                if "loss" in name:
                    postfix[name] = f"{value:.3f}"
        for name, value in (extra or {}).items():
            postfix[name] = f"{value:.4g}"
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(amount)

    def close(self) -> None:
        """Close the bar (leaves it on screen)."""
        self._bar.close()


INNER_BAR_MIN_STEPS = 100
"""update steps with at least this many gradient steps get their own (transient) bar"""


def inner_bar(num_steps: int, description: str) -> Iterable[int]:
    """``range(num_steps)`` with a bar below the epoch's bar that disappears when done."""
    return tqdm.tqdm(range(num_steps), desc=description, leave=False, position=1, dynamic_ncols=True)


def format_info_table(info: InfoStats) -> str:
    """A two-column text table of a run's final InfoStats (what ``verbose`` prints at the end)."""

    def number(value: float | None, digits: int = 6) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

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
