"""Observation encoders: modules that turn one kind of observation into a flat feature vector.

A policy or critic network is ``nn.Sequential(encoder, mlp(encoder.output_dim, ...))``. The encoder
takes the observation tensors as the collector and the buffers hand them over (uint8 images stay uint8
until the network, Discrete observations are integer indices) and does the conversion inside the
network:

=========================================  ==============================================================
observation space                          encoder (built by :func:`obs_encoder`)
=========================================  ==============================================================
``Box`` vector (any other Box)             :class:`FlatEncoder`: flatten, cast to float (optionally an MLP)
``Box`` uint8 image (H, W, C) or (C, H, W) :class:`CnnEncoder`: channels first, scaled by 1/255, convs
``Discrete(n, start)``                     :class:`OneHotEncoder`: one-hot of ``obs - start``
``MultiBinary`` / ``MultiDiscrete``        :class:`FlatEncoder` (the bits / indices as floats)
``Dict`` of the above                      :class:`DictEncoder`: one encoder per key, concatenated
=========================================  ==============================================================

Every encoder has ``output_dim`` (features per observation) and :meth:`Encoder.zero_obs` (a zero batch
of one observation, used to check a network's output size before training).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.blocks.nets import activation_layer, mlp
from tshtrain.constraints import PositiveInt, validate_fields
from tshtrain.data.batch import ObsTensor
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError

_IMAGE_CHANNELS = 4
"""an image axis of at most this many entries is taken for the channel axis"""


class Encoder(nn.Module, ABC):
    """Maps a batch of observations to features of shape (N, ``output_dim``)."""

    output_dim: int
    """features per observation"""
    accepts_dict_obs: bool = False
    """True for encoders that take a dict of tensors (Dict observations)"""

    @abstractmethod
    def zero_obs(self, device: torch.device) -> ObsTensor:
        """A batch of one all-zero observation of the dtype and shape the encoder takes."""


@final
class FlatEncoder(Encoder):
    """Flattens each observation to ``prod(shape)`` floats, optionally followed by an MLP whose last
    layer is activated too (``hidden_sizes=()``: the flat observation itself)."""

    def __init__(
        self,
        shape: Sequence[int],
        hidden_sizes: Sequence[int] = (),
        activation: type[nn.Module] = nn.Tanh,
        *,
        dtype: torch.dtype = torch.float32,
    ):
        """Args:
        shape: shape of one observation.
        hidden_sizes: widths of the MLP layers after flattening; the last one is ``output_dim``.
        activation: activation after every MLP layer.
        dtype: dtype of the zero observation of :meth:`zero_obs` (the stored observation dtype).
        """
        super().__init__()
        self.shape = tuple(int(s) for s in shape)
        self.obs_dtype = dtype
        input_dim = math.prod(self.shape)
        layers: list[nn.Module] = []
        last = input_dim
        for size in hidden_sizes:
            layers += [nn.Linear(last, size), activation_layer(activation)]
            last = size
        self.net = nn.Sequential(*layers)
        self.output_dim = last

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x_NF = obs.reshape(len(obs), -1).to(torch.float32)
        out: torch.Tensor = self.net(x_NF)
        return out

    @override
    def zero_obs(self, device: torch.device) -> torch.Tensor:
        return torch.zeros((1, *self.shape), dtype=self.obs_dtype, device=device)


def mlp_encoder(
    input_dim: int, hidden_sizes: Sequence[int] = (64, 64), activation: type[nn.Module] = nn.Tanh
) -> FlatEncoder:
    """A :class:`FlatEncoder` of ``input_dim`` inputs with an activated MLP of ``hidden_sizes``."""
    return FlatEncoder((input_dim,), hidden_sizes, activation)


@final
class OneHotEncoder(Encoder):
    """Discrete observations (integer indices ``start .. start + n - 1``, shape (N,)) as one-hot
    vectors of ``n`` floats."""

    def __init__(self, n: int, start: int = 0):
        super().__init__()
        if n < 1:
            raise ConfigurationError(f"OneHotEncoder.n must be >= 1, got {n!r}.")
        self.n = int(n)
        self.start = int(start)
        self.output_dim = self.n

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        index_N = obs.reshape(len(obs)).long() - self.start
        return nn.functional.one_hot(index_N, self.n).to(torch.float32)

    @override
    def zero_obs(self, device: torch.device) -> torch.Tensor:
        return torch.full((1,), self.start, dtype=torch.int64, device=device)


@dataclass(frozen=True, kw_only=True)
class CnnSpec:
    """The convolution stack of a :class:`CnnEncoder` (defaults: the Nature DQN network)."""

    channels: tuple[int, ...] = (32, 64, 64)
    """output channels of each convolution"""
    kernel_sizes: tuple[int, ...] = (8, 4, 3)
    """kernel size of each convolution (square kernels)"""
    strides: tuple[int, ...] = (4, 2, 1)
    """stride of each convolution"""
    features: PositiveInt = 512
    """width of the linear layer after the convolutions (the encoder's output_dim)"""

    def __post_init__(self) -> None:
        validate_fields(self)
        lengths = {len(self.channels), len(self.kernel_sizes), len(self.strides)}
        if len(lengths) != 1 or 0 in lengths:
            raise ConfigurationError(
                f"CnnSpec: channels {list(self.channels)}, kernel_sizes {list(self.kernel_sizes)} "
                f"and strides {list(self.strides)} must be non-empty and of one length (an entry per "
                f"convolution)."
            )
        for name in ("channels", "kernel_sizes", "strides"):
            values = getattr(self, name)
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
                raise ConfigurationError(f"CnnSpec.{name} must hold ints >= 1, got {list(values)}.")


NATURE_CNN = CnnSpec()
"""the Nature DQN convolutions (for images of at least 36x36 pixels, e.g. Atari's 84x84)"""
SMALL_IMAGE_CNN = CnnSpec(channels=(16, 32, 64), kernel_sizes=(2, 2, 2), strides=(1, 1, 1), features=64)
"""three 2x2 convolutions of stride 1, for small grids such as MiniGrid's 7x7 views"""
_NATURE_MIN_SIDE = 36
"""the smallest image side the Nature convolutions accept"""


def default_cnn_spec(image_shape_hw: tuple[int, int]) -> CnnSpec:
    """:data:`NATURE_CNN` for images of at least 36x36 pixels, :data:`SMALL_IMAGE_CNN` for smaller ones."""
    return NATURE_CNN if min(image_shape_hw) >= _NATURE_MIN_SIDE else SMALL_IMAGE_CNN


def _conv_out(side: int, kernel: int, stride: int) -> int:
    return (side - kernel) // stride + 1


@final
class CnnEncoder(Encoder):
    """Images (N, H, W, C) (``channels_last``) or (N, C, H, W), of any dtype, scaled by ``scale``
    inside the network: convolutions with ReLU, flatten, Linear to ``spec.features``, ReLU.

    Keep images uint8 in buffers (4x less memory than float32); the cast happens here.
    """

    def __init__(self, obs_shape: Sequence[int], spec: CnnSpec, *, channels_last: bool, scale: float):
        super().__init__()
        shape = tuple(int(s) for s in obs_shape)
        if len(shape) != 3:
            raise ConfigurationError(f"cnn_encoder: obs_shape must be (H, W, C) or (C, H, W), got {shape}.")
        self.obs_shape = shape
        self.channels_last = channels_last
        self.scale = float(scale)
        in_channels, height, width = (shape[2], shape[0], shape[1]) if channels_last else shape
        layers: list[nn.Module] = []
        for out_channels, kernel, stride in zip(spec.channels, spec.kernel_sizes, spec.strides, strict=True):
            next_h, next_w = _conv_out(height, kernel, stride), _conv_out(width, kernel, stride)
            if next_h < 1 or next_w < 1:
                raise ConfigurationError(
                    f"cnn_encoder: a {kernel}x{kernel} convolution of stride {stride} does not fit the "
                    f"{height}x{width} maps of images of shape {shape}; use smaller kernel_sizes / strides "
                    f"(e.g. kernel_sizes [2, 2, 2], strides [1, 1, 1] for small grids)."
                )
            layers += [nn.Conv2d(in_channels, out_channels, kernel, stride), nn.ReLU()]
            in_channels, height, width = out_channels, next_h, next_w
        self.convs = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(in_channels * height * width, spec.features), nn.ReLU())
        self.output_dim = spec.features

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32) * self.scale
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        out: torch.Tensor = self.head(self.convs(x).flatten(1))
        return out

    @override
    def zero_obs(self, device: torch.device) -> torch.Tensor:
        return torch.zeros((1, *self.obs_shape), dtype=torch.uint8, device=device)


def cnn_encoder(
    obs_shape: Sequence[int],
    channels: Sequence[int] = NATURE_CNN.channels,
    kernel_sizes: Sequence[int] = NATURE_CNN.kernel_sizes,
    strides: Sequence[int] = NATURE_CNN.strides,
    features: int = NATURE_CNN.features,
    *,
    channels_last: bool | None = None,
    scale: float = 1.0 / 255.0,
) -> CnnEncoder:
    """A NatureCNN-style image encoder (see :class:`CnnEncoder`).

    Args:
        obs_shape: shape of one image, (H, W, C) or (C, H, W).
        channels, kernel_sizes, strides: one entry per convolution.
        features: width of the final linear layer (``output_dim``).
        channels_last: the images are (H, W, C); None: guessed from ``obs_shape`` (channels last unless
            only the first axis is small enough to be a channel axis, at most 4 entries).
        scale: multiplies the pixels (1/255 maps uint8 pixels into [0, 1]).

    Raises:
        ConfigurationError: mismatched lists, or a convolution larger than its input (the message says
            which and what fits).
    """
    spec = CnnSpec(
        channels=tuple(channels), kernel_sizes=tuple(kernel_sizes), strides=tuple(strides), features=features
    )
    if channels_last is None:
        channels_last = guess_channels_last(tuple(obs_shape))
    return CnnEncoder(obs_shape, spec, channels_last=channels_last, scale=scale)


def guess_channels_last(shape: tuple[int, ...]) -> bool:
    """(H, W, C) unless the last axis is too long to be channels and the first is short enough."""
    return not (shape[-1] > _IMAGE_CHANNELS and shape[0] <= _IMAGE_CHANNELS)


@final
class DictEncoder(Encoder):
    """Dict observations: one encoder per key, features concatenated in the encoders' order."""

    accepts_dict_obs = True

    def __init__(self, encoders: Mapping[str, Encoder]):
        super().__init__()
        if not encoders:
            raise ConfigurationError("DictEncoder needs at least one key.")
        self.encoders = nn.ModuleDict(dict(encoders))
        self.keys = tuple(encoders)
        self.output_dim = sum(e.output_dim for e in encoders.values())

    @override
    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        missing = [key for key in self.keys if key not in obs]
        if missing:
            raise UnsupportedSpaceError(
                f"DictEncoder: the observation has keys {sorted(obs)}, but encoders were built for "
                f"{list(self.keys)} (missing {missing})."
            )
        parts = [self.encoders[key](obs[key]) for key in self.keys]
        return torch.cat(parts, dim=-1)

    @override
    def zero_obs(self, device: torch.device) -> dict[str, torch.Tensor]:
        zeros: dict[str, torch.Tensor] = {}
        for key in self.keys:
            encoder = self.encoders[key]
            assert isinstance(encoder, Encoder)
            value = encoder.zero_obs(device)
            assert isinstance(value, torch.Tensor)  # keys hold array encoders only
            zeros[key] = value
        return zeros


def is_image_space(space: gym.Space[Any]) -> bool:
    """A uint8 Box with three axes: an image, (H, W, C) or (C, H, W)."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def obs_encoder(
    space: gym.Space[Any],
    *,
    cnn: CnnSpec | None = None,
    hidden_sizes: Sequence[int] = (),
    activation: type[nn.Module] = nn.Tanh,
) -> Encoder:
    """The encoder of an observation space (see the module docstring for which space gets which).

    Args:
        space: the env's single observation space.
        cnn: the convolutions of image encoders; None: :func:`default_cnn_spec` of each image's size.
        hidden_sizes: MLP layers of the encoders of vector (non-image, non-Discrete) observations;
            ``()``: the flat observation itself.
        activation: activation of those MLP layers.

    Raises:
        UnsupportedSpaceError: for spaces other than Box, Discrete, MultiDiscrete, MultiBinary and a
            flat Dict of those, naming the key of a Dict space that holds it.
    """
    if isinstance(space, gym.spaces.Dict):
        encoders: dict[str, Encoder] = {}
        for key, sub in space.spaces.items():
            if isinstance(sub, gym.spaces.Dict):
                raise UnsupportedSpaceError(
                    f"obs_encoder: key {key!r} holds a nested Dict ({sub!r}); flatten it with a wrapper."
                )
            try:
                encoders[str(key)] = obs_encoder(
                    sub, cnn=cnn, hidden_sizes=hidden_sizes, activation=activation
                )
            except UnsupportedSpaceError as error:
                raise UnsupportedSpaceError(f"observation key {key!r}: {error}") from None
        return DictEncoder(encoders)
    if isinstance(space, gym.spaces.Discrete):
        return OneHotEncoder(int(space.n), int(space.start))
    if is_image_space(space):
        shape = tuple(int(s) for s in space.shape or ())
        channels_last = guess_channels_last(shape)
        hw = (shape[0], shape[1]) if channels_last else (shape[1], shape[2])
        spec = cnn or default_cnn_spec(hw)
        return CnnEncoder(shape, spec, channels_last=channels_last, scale=1.0 / 255.0)
    if isinstance(space, gym.spaces.Box | gym.spaces.MultiBinary | gym.spaces.MultiDiscrete):
        shape = tuple(int(s) for s in space.shape or ())
        dtype = torch.float32 if isinstance(space, gym.spaces.Box) else torch.int64
        return FlatEncoder(shape, hidden_sizes, activation, dtype=dtype)
    raise UnsupportedSpaceError(
        f"obs_encoder: unsupported observation space {space!r}; encoders exist for Box, Discrete, "
        f"MultiDiscrete, MultiBinary and flat Dict spaces of these (drop other keys with "
        f"gymnasium.wrappers.FilterObservation)."
    )


def encoder_mlp(
    encoder: Encoder,
    output_dim: int,
    hidden_sizes: Sequence[int] = (64, 64),
    activation: type[nn.Module] = nn.Tanh,
) -> nn.Sequential:
    """``nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, hidden_sizes, activation))``: a
    policy or critic network on the encoder's features."""
    return nn.Sequential(encoder, mlp(encoder.output_dim, output_dim, hidden_sizes, activation))


def input_encoder(net: nn.Module) -> Encoder | None:
    """The :class:`Encoder` that takes ``net``'s input: ``net`` itself or the first module of nested
    ``nn.Sequential`` containers; None otherwise."""
    while isinstance(net, nn.Sequential) and len(net) > 0:
        net = net[0]
    return net if isinstance(net, Encoder) else None


def accepts_dict_obs(net: nn.Module) -> bool:
    """True if ``net`` takes a dict of tensors: its input module (see :func:`input_encoder`) or ``net``
    itself has a true ``accepts_dict_obs`` attribute (set it on your own modules that do)."""
    if getattr(net, "accepts_dict_obs", False):
        return True
    while isinstance(net, nn.Sequential) and len(net) > 0:
        net = net[0]
        if getattr(net, "accepts_dict_obs", False):
            return True
    return False
