"""Run options that are not about *what* to train but how the run behaves (skrl's trainer options).

``Trainer(algorithm, params, options=TrainerOptions(...))``. The progress bar's TTY detection is
``TrainerParams.show_progress`` (None: a bar only when stderr is a terminal).
"""

from __future__ import annotations

from dataclasses import dataclass

from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class TrainerOptions:
    """How a run behaves around the training itself."""

    test_deterministic: bool | None = None
    """test steps act deterministically (True) or sample actions (False); None: the policy's own
    ``deterministic_eval``"""
    render_every_num_env_steps: int | None = None
    """call ``training_collector.env.render()`` after the vector step that brings the training env
    steps to a multiple of this (counted as num_envs per vector step); None: headless, never render.
    Build the envs with ``render_mode="human"`` to watch, or use an event to keep ``rgb_array`` frames"""
    close_envs: bool = False
    """close the training and test collectors' envs when the run ends, normally or by an exception
    (``run()``), or when ``close()`` is called. Off by default: the envs belong to the collectors you
    built and may be used after the run (e.g. to evaluate the trained policy)"""

    def __post_init__(self) -> None:
        render = self.render_every_num_env_steps
        if render is not None and (isinstance(render, bool) or not isinstance(render, int) or render < 1):
            raise ConfigurationError(
                f"TrainerOptions.render_every_num_env_steps must be an int >= 1 or None (headless), got "
                f"{render!r}."
            )
        for name in ("test_deterministic", "close_envs"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "test_deterministic" and value is None):
                raise ConfigurationError(f"TrainerOptions.{name} must be a bool, got {value!r}.")
