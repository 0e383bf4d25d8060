"""Running observation normalisation as a network layer.

:class:`RunningObsNormalizer` is an ``nn.Module`` placed as the first layer of the actor and of the
critic (the *same* instance in both), so every forward pass, in collection, in test steps and in the
update, sees the same normalisation. Its statistics are buffers (they are in the ``state_dict`` of
every network that contains it) and change only when :meth:`RunningObsNormalizer.update` is called;
:class:`ObsNormalization` calls it for every algorithm that takes ``obs_normalizer=`` (online: after
each update with its batch's observations; offline: once, fitted to the dataset). So, on-policy:

* a collection step and the update that follows it use the same statistics, and the log-probabilities
  an update recomputes for the collected actions are exactly those of the policy that acted;
* test steps use the current statistics and never change them (no separate normaliser for the test
  envs to keep in sync, unlike a normalising env wrapper).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError


@final
class RunningObsNormalizer(nn.Module):
    """``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` with running mean and variance.

    The statistics start at mean 0, variance 1 (the identity map) and are merged with each batch
    given to :meth:`update` (Chan et al.'s parallel algorithm, so the result equals the statistics of
    all observations seen, in float64).
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor
    _shift: torch.Tensor
    _scale: torch.Tensor

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        clip: float = 10.0,
        eps: float = 1e-8,
        device: torch.device | None = None,
    ):
        """Args:
        shape: shape of one observation, e.g. ``env.single_observation_space.shape``.
        clip: normalised observations are clipped to ``[-clip, clip]``.
        eps: added to the variance before the square root.
        device: where the statistics are made (None: torch's default device, like ``nn.Linear``);
            they move with the networks that hold the normaliser.
        """
        super().__init__()
        if not clip > 0:
            raise ConfigurationError(f"RunningObsNormalizer.clip must be > 0, got {clip!r}.")
        if not eps > 0:
            raise ConfigurationError(f"RunningObsNormalizer.eps must be > 0, got {eps!r}.")
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.clip = float(clip)
        self.eps = float(eps)
        self.register_buffer("mean", torch.zeros(self.shape, dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones(self.shape, dtype=torch.float64, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64, device=device))
        self.register_buffer("_shift", torch.zeros(self.shape, device=device), persistent=False)
        self.register_buffer("_scale", torch.ones(self.shape, device=device), persistent=False)
        # torch leaves register_load_state_dict_post_hook unannotated
        self.register_load_state_dict_post_hook(_refresh_after_load)  # type: ignore[no-untyped-call]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised observations (float32), same shape as ``obs``."""
        return ((obs - self._shift) * self._scale).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, obs: torch.Tensor) -> None:
        """Merge a batch of observations, shape (N, *shape), into the statistics."""
        if tuple(obs.shape[1:]) != self.shape:
            raise ConfigurationError(
                f"RunningObsNormalizer.update: observations of shape {tuple(obs.shape[1:])} given to a "
                f"normaliser of shape {self.shape}; build it with the observation space's shape."
            )
        if len(obs) == 0:
            return
        batch = obs.to(torch.float64).reshape(len(obs), *self.shape)
        batch_mean = batch.mean(dim=0)
        batch_var = batch.var(dim=0, unbiased=False)
        batch_count = float(len(batch))
        total = self.count + batch_count
        delta = batch_mean - self.mean
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta.square() * self.count * batch_count / total
        )
        self.mean.add_(delta * batch_count / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)
        self._refresh()

    def _refresh(self) -> None:
        """Recompute the float32 shift and scale used by :meth:`forward` from the statistics."""
        with torch.no_grad():
            self._shift.copy_(self.mean)
            self._scale.copy_(torch.rsqrt(self.var + self.eps))

    @override
    def extra_repr(self) -> str:
        return f"shape={self.shape}, clip={self.clip}, count={int(self.count)}"


def _refresh_after_load(module: nn.Module, incompatible_keys: object) -> None:
    del incompatible_keys
    assert isinstance(module, RunningObsNormalizer)
    module._refresh()


@final
class ObsNormalization:
    """An algorithm's optional ``obs_normalizer``: the one way to normalise observations.

    The normaliser must be the first layer of every network the algorithm trains that reads
    observations (the same instance), and a network that contains a normaliser must have it passed,
    or its statistics would never change. Online algorithms merge the observations of their batches
    after each update (:meth:`update`: the rollout on-policy, the sampled batch off-policy); offline
    algorithms fit it once to the whole dataset in ``process_buffer`` (:meth:`fit`).
    """

    def __init__(
        self, owner: str, normalizer: RunningObsNormalizer | None, networks: Mapping[str, nn.Module]
    ):
        """Args:
        owner: the algorithm's name, for error messages.
        normalizer: the normaliser, or None (no normalisation).
        networks: the networks that read observations, by the names used in error messages.
        """
        check_obs_normalizer(owner, networks, normalizer)
        self.owner = owner
        self.normalizer = normalizer

    def update(self, obs: object) -> None:
        """Merge a batch of raw observations (a tensor) into the statistics (nothing without one)."""
        if self.normalizer is None:
            return
        if not isinstance(obs, torch.Tensor):
            raise UnsupportedSpaceError(f"{self.owner}: obs_normalizer takes array observations.")
        self.normalizer.update(obs)

    def fit(self, buffer: BaseReplayBuffer) -> bool:
        """Set the statistics to those of every observation of ``buffer`` (a dataset); False without a
        normaliser."""
        normalizer = self.normalizer
        if normalizer is None:
            return False
        obs = buffer.sample_all().obs
        if not isinstance(obs, np.ndarray):
            raise UnsupportedSpaceError(f"{self.owner}: obs_normalizer takes array observations.")
        with torch.no_grad():
            normalizer.mean.fill_(0.0)
            normalizer.var.fill_(1.0)
            normalizer.count.fill_(0.0)
        normalizer.update(torch.as_tensor(obs, device=normalizer.mean.device))
        return True


def check_obs_normalizer(
    owner: str, networks: Mapping[str, nn.Module], normalizer: RunningObsNormalizer | None
) -> None:
    """Raise ``ConfigurationError`` unless ``normalizer`` is a layer of every network, and unless a
    network that contains a :class:`RunningObsNormalizer` has it passed."""
    for name, net in networks.items():
        found = [m for m in net.modules() if isinstance(m, RunningObsNormalizer)]
        if normalizer is None and found:
            raise ConfigurationError(
                f"{owner}: the {name} contains a RunningObsNormalizer but obs_normalizer=None, so its "
                f"statistics would never be updated; pass obs_normalizer=<that normaliser>."
            )
        if normalizer is not None and not any(m is normalizer for m in found):
            raise ConfigurationError(
                f"{owner}: obs_normalizer is not a layer of the {name}; put the same instance first in "
                f"every network that reads observations, e.g. nn.Sequential(obs_normalizer, mlp(...))."
            )
