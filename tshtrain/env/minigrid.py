"""MiniGrid (the ``minigrid`` package: the ``minigrid`` extra) for experiment files and scripts.

Gymnasium does not import ``minigrid`` by itself, so its ``MiniGrid-*`` ids are unknown until something
does. Importing this module registers them, and an experiment file may name it in its env id (it is a
``tshtrain.env`` module, so no ``--allow-module`` is needed)::

    env:
      id: tshtrain.env.minigrid:MiniGrid-Empty-5x5-v0
      wrappers:
        # drop the mission string (a Text space): keep the image and the direction
        - {name: gymnasium.wrappers.FilterObservation, kwargs: {filter_keys: [image, direction]}}
        # spread the image's small integer codes over 0..255 (see StretchImage)
        - {name: tshtrain.env.minigrid.StretchImage}

MiniGrid's observations are a Dict ``{image: Box(0, 255, (7, 7, 3), uint8), direction: Discrete(4),
mission: Text}``; after the wrappers, ``encoder: auto`` builds a CNN for the image and a one-hot vector for
the direction. The reward is ``1 - 0.9 * steps / max_steps`` on reaching the goal, 0 otherwise.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np

from tshtrain.errors import UnsupportedSpaceError

MISSION_FREE_KEYS = ("image", "direction")
"""the observation keys that tshtrain's encoders take (``mission`` is a Text space)"""

try:
    importlib.import_module("minigrid")  # registers the MiniGrid-* env ids with Gymnasium
except ImportError as error:  # pragma: no cover - the minigrid extra
    raise ImportError(
        "tshtrain.env.minigrid needs the minigrid package: pip install 'tshtrain[minigrid]'"
    ) from error


def _channel_factors() -> np.ndarray:
    from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

    maxima = [max(OBJECT_TO_IDX.values()), max(COLOR_TO_IDX.values()), max(STATE_TO_IDX.values())]
    return np.array([255 // m for m in maxima], dtype=np.uint8)


class StretchImage(gym.ObservationWrapper[dict[str, Any], Any, dict[str, Any]]):
    """Spreads the codes of MiniGrid's ``image`` observation over the uint8 range.

    MiniGrid's image is not a picture: each cell holds three small integer codes (object 0..10, colour
    0..5, state 0..2). tshtrain's CNN encoder scales uint8 images by 1/255, which would leave these
    codes below 0.05, and PPO then barely learns (best test return 0.0 after 30k env steps on
    MiniGrid-Empty-5x5-v0, against 0.955 after 6k with the stretched image). This wrapper multiplies
    each channel by ``255 // its largest code`` (25, 51, 127), so the scaled codes lie in [0, 1]; the
    image stays uint8 and the other keys are unchanged.
    """

    def __init__(self, env: gym.Env[dict[str, Any], Any]):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict) or "image" not in space.spaces:
            raise UnsupportedSpaceError(
                f"StretchImage needs a Dict observation space with an 'image' key (MiniGrid's), got "
                f"{space!r}."
            )
        self._factors = _channel_factors()

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation with its image stretched (a new dict; the env's arrays are not modified)."""
        return {**observation, "image": np.asarray(observation["image"], dtype=np.uint8) * self._factors}
