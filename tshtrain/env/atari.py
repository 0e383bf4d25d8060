"""Atari 2600 games (the ``ale-py`` package, the ``atari`` extra) for experiment files and scripts.

``ale-py`` ships the game ROMs in its wheel, but Gymnasium does not know its ``ALE/*`` ids until
``gymnasium.register_envs(ale_py)`` runs. Importing this module does that, so an experiment file may name
it in its env id (a ``tshtrain.env`` module: no ``--allow-module`` needed) and build the usual
preprocessing from Gymnasium's own wrappers::

    env:
      id: tshtrain.env.atari:ALE/Breakout-v5
      kwargs: {frameskip: 1}            # AtariPreprocessing skips frames itself: ALE must not
      wrappers:
        - name: gymnasium.wrappers.AtariPreprocessing
          kwargs: {frame_skip: 4, screen_size: 84, noop_max: 30, terminal_on_life_loss: false}
        - name: gymnasium.wrappers.FrameStackObservation
          kwargs: {stack_size: 4}

The observation is then a ``Box(0, 255, (4, 84, 84), uint8)``: four stacked grayscale frames, channels
first. ``encoder: auto`` builds the Nature DQN CNN for it (an image of at least 36x36 pixels; the first
axis, 4, is taken as channels because the last one, 84, is too long to be), scaling pixels by 1/255.

The ``ALE/*-v5`` ids keep ALE's own defaults: sticky actions (``repeat_action_probability=0.25``), the
minimal action set, 108,000 frames at most per episode (27,000 agent steps at ``frame_skip=4``).
Rewards are the game's (not clipped) and an episode is a whole game (all lives), so a run's returns are
the game scores; ``gymnasium.wrappers.ClipReward`` and ``terminal_on_life_loss: true`` are there for the
DQN-paper protocol. :func:`make_atari_env` builds one env with the same wrappers in Python.

AtariPreprocessing needs OpenCV (``opencv-python-headless``, also in the ``atari`` extra).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym

from tshtrain.errors import require_positive

try:
    _ale_py = importlib.import_module("ale_py")
except ImportError as error:  # pragma: no cover - ale-py is installed with the dev and atari extras
    raise ImportError(
        "tshtrain.env.atari needs the ale-py package (Atari ROMs included): pip install 'tshtrain[atari]'."
    ) from error

gym.register_envs(_ale_py)  # the ALE/* ids

FRAME_SKIP = 4
"""agent steps repeat each action for this many emulator frames (max-pooling the last two)"""
SCREEN_SIZE = 84
"""observations are resized to SCREEN_SIZE x SCREEN_SIZE grayscale"""
STACK_SIZE = 4
"""the last STACK_SIZE processed frames form one observation"""
NOOP_MAX = 30
"""each episode starts with up to NOOP_MAX random no-op steps (a random start state)"""


def atari_wrappers(
    *,
    frame_skip: int = FRAME_SKIP,
    screen_size: int = SCREEN_SIZE,
    stack_size: int = STACK_SIZE,
    noop_max: int = NOOP_MAX,
    terminal_on_life_loss: bool = False,
) -> list[dict[str, Any]]:
    """The ``env.wrappers`` entries of the standard preprocessing, as an experiment file writes them:
    Gymnasium's ``AtariPreprocessing`` then ``FrameStackObservation`` (see the module docstring)."""
    for name, value in (("frame_skip", frame_skip), ("screen_size", screen_size), ("stack_size", stack_size)):
        require_positive("atari_wrappers", name, value)
    return [
        {
            "name": "gymnasium.wrappers.AtariPreprocessing",
            "kwargs": {
                "frame_skip": frame_skip,
                "screen_size": screen_size,
                "noop_max": noop_max,
                "terminal_on_life_loss": terminal_on_life_loss,
            },
        },
        {"name": "gymnasium.wrappers.FrameStackObservation", "kwargs": {"stack_size": stack_size}},
    ]


def make_atari_env(
    env_id: str = "ALE/Breakout-v5",
    *,
    frame_skip: int = FRAME_SKIP,
    screen_size: int = SCREEN_SIZE,
    stack_size: int = STACK_SIZE,
    noop_max: int = NOOP_MAX,
    terminal_on_life_loss: bool = False,
    **make_kwargs: Any,
) -> gym.Env[Any, Any]:
    """One Atari env with the wrappers of :func:`atari_wrappers` (what an experiment file builds).

    Args:
        env_id: an ALE id such as ``"ALE/Breakout-v5"``.
        frame_skip, screen_size, stack_size, noop_max, terminal_on_life_loss: as in
            :func:`atari_wrappers`.
        make_kwargs: further keyword arguments of ``gymnasium.make`` (e.g. ``repeat_action_probability``,
            ``render_mode``); ALE's ``frameskip`` is always 1 (the preprocessing skips frames).
    """
    env = gym.make(env_id, frameskip=1, **make_kwargs)
    wrappers = atari_wrappers(
        frame_skip=frame_skip,
        screen_size=screen_size,
        stack_size=stack_size,
        noop_max=noop_max,
        terminal_on_life_loss=terminal_on_life_loss,
    )
    env = gym.wrappers.AtariPreprocessing(env, **wrappers[0]["kwargs"])
    return gym.wrappers.FrameStackObservation(env, **wrappers[1]["kwargs"])
