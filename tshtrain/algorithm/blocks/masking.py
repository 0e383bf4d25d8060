"""Action masks: networks whose illegal outputs are pushed out of reach.

An env with action masks gives Dict observations with an ``action_mask`` key (shape (num_actions,),
nonzero = legal; see :mod:`tshtrain.env.multi_agent`). :class:`ActionMasked` wraps a network that
maps the other keys to one value per action (Q-values, logits) and sets the values of illegal
actions to :data:`MASKED_VALUE`, so

* a greedy policy never picks an illegal action, and the max over next actions of a Q-learning target
  is a max over legal ones (the mask of ``obs_next`` is stored in the buffer with the observation);
* a categorical policy gives illegal actions probability 0 (``exp(-1e9)`` underflows to 0 in float32);
* exploration noise and random actions stay legal too: :class:`~tshtrain.algorithm.QValuePolicy` and
  the collectors draw among the legal actions of ``obs["action_mask"]``.

A state whose mask has no legal action (an agent whose episode ended) gives the masked value for every
action; such values are only ever multiplied by a zero discount.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from tshtrain.env.multi_agent import ACTION_MASK_KEY
from tshtrain.errors import UnsupportedSpaceError

MASKED_VALUE = -1e9
"""the value an illegal action gets (finite, so that ``0 * value`` stays 0)"""


def without_action_mask(space: gym.Space[Any]) -> gym.Space[Any]:
    """The observation space the wrapped network of :class:`ActionMasked` sees: ``space`` without its
    ``action_mask`` key (a Dict with one key left becomes that key's space)."""
    if not isinstance(space, gym.spaces.Dict) or ACTION_MASK_KEY not in space.spaces:
        raise UnsupportedSpaceError(
            f"ActionMasked needs a Dict observation space with an {ACTION_MASK_KEY!r} key, got {space!r}."
        )
    rest = {key: sub for key, sub in space.spaces.items() if key != ACTION_MASK_KEY}
    if len(rest) == 1:
        return next(iter(rest.values()))
    return gym.spaces.Dict(rest)


def has_action_mask(space: gym.Space[Any]) -> bool:
    """True if observations of ``space`` carry an action mask."""
    return isinstance(space, gym.spaces.Dict) and ACTION_MASK_KEY in space.spaces


class ActionMasked(nn.Module):
    """``net`` on the observation without its mask, illegal outputs set to :data:`MASKED_VALUE`."""

    accepts_dict_obs = True
    """the wrapper takes the Dict observation (see
    :func:`~tshtrain.algorithm.blocks.encoders.accepts_dict_obs`)"""

    def __init__(self, net: nn.Module, *, single_key: str | None = None):
        """Args:
        net: maps the observation without the mask to (N, num_actions) values.
        single_key: when the observation has exactly one other key, pass that key's tensor (not a
            dict) to ``net``; None: pass the dict of the other keys.
        """
        super().__init__()
        self.net = net
        self.single_key = single_key

    @classmethod
    def for_space(cls, net: nn.Module, space: gym.Space[Any]) -> ActionMasked:
        """Wrap ``net`` built on :func:`without_action_mask` of ``space`` (passes a tensor when one key
        is left, as that function's space says)."""
        inner = without_action_mask(space)
        assert isinstance(space, gym.spaces.Dict)
        keys = [key for key in space.spaces if key != ACTION_MASK_KEY]
        return cls(net, single_key=keys[0] if not isinstance(inner, gym.spaces.Dict) else None)

    def forward(self, obs: Mapping[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
        if isinstance(obs, torch.Tensor):  # no mask (e.g. the policies' output-size check): unmasked
            unmasked: torch.Tensor = self.net(obs)
            return unmasked
        mask = obs[ACTION_MASK_KEY]
        if self.single_key is not None:
            out: torch.Tensor = self.net(obs[self.single_key])
        else:
            out = self.net({key: value for key, value in obs.items() if key != ACTION_MASK_KEY})
        return out.masked_fill(mask == 0, MASKED_VALUE)
