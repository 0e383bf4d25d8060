"""A conditional variational auto-encoder of the behaviour policy (Kingma & Welling 2014; used by BCQ,
Fujimoto et al. 2019): it learns ``p(a | s)`` of a dataset and generates actions like the dataset's.

The encoder maps ``(s, a)`` to a diagonal Gaussian over a latent ``z``; the decoder maps ``(s, z)`` to
an action ``tanh(decoder(s, z))`` in [-1, 1] (tshtrain's stored action convention). Generating without
an action draws ``z ~ N(0, I)`` clipped to [-0.5, 0.5] (the BCQ paper's choice, which keeps samples near
the mode). The loss is the reconstruction error plus half the KL divergence to ``N(0, I)``:

    vae_loss = mean (a_rec - a)^2 + 0.5 * mean_{N, latent} ( -log sigma + (sigma^2 + mu^2 - 1) / 2 ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, final

import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.blocks.nets import mlp
from tshtrain.errors import ConfigurationError

LATENT_CLIP = 0.5
"""generated latents are drawn from N(0, I) and clipped to [-LATENT_CLIP, LATENT_CLIP]"""
LOG_STD_MIN = -4.0
"""lower clamp of the encoder's log standard deviation"""
LOG_STD_MAX = 15.0
"""upper clamp of the encoder's log standard deviation"""


class VAEOutput(NamedTuple):
    """What :meth:`ConditionalVAE.forward` returns for a batch of N (obs, act) pairs."""

    reconstruction: torch.Tensor
    """decoded actions (N, act_dim) in [-1, 1]"""
    mean: torch.Tensor
    """mean of the latent Gaussian (N, latent_dim)"""
    std: torch.Tensor
    """standard deviation of the latent Gaussian (N, latent_dim)"""


@final
class ConditionalVAE(nn.Module):
    """``p(a | s)`` as a conditional VAE with MLP encoder and decoder (see the module docstring)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_sizes: Sequence[int] = (750, 750),
        *,
        latent_dim: int | None = None,
        activation: type[nn.Module] = nn.ReLU,
    ):
        """Args:
        obs_dim: flattened observation size.
        act_dim: action size.
        hidden_sizes: hidden widths of the encoder and of the decoder (the paper: 750, 750;
            Tianshou's Pendulum test: 32, 32).
        latent_dim: size of z; None: ``2 * act_dim`` (the paper's and Tianshou's default).
        activation: activation after each hidden layer.
        """
        super().__init__()
        if not hidden_sizes:
            raise ConfigurationError("ConditionalVAE.hidden_sizes must name at least one layer, got ().")
        self.latent_dim = 2 * act_dim if latent_dim is None else latent_dim
        if self.latent_dim < 1:
            raise ConfigurationError(f"ConditionalVAE.latent_dim must be >= 1, got {latent_dim!r}.")
        self.act_dim = act_dim
        encoder = mlp(obs_dim + act_dim, hidden_sizes[-1], hidden_sizes[:-1], activation)
        self.encoder = nn.Sequential(encoder, activation())
        self.mean = nn.Linear(hidden_sizes[-1], self.latent_dim)
        self.log_std = nn.Linear(hidden_sizes[-1], self.latent_dim)
        self.decoder = mlp(obs_dim + self.latent_dim, act_dim, hidden_sizes, activation)

    @override
    def forward(self, obs: torch.Tensor, act: torch.Tensor, generator: torch.Generator) -> VAEOutput:
        """Encode ``(obs, act)``, draw ``z = mu + sigma * eps`` (``eps`` from ``generator``), decode."""
        hidden: torch.Tensor = self.encoder(torch.cat([obs.flatten(1), act.flatten(1)], dim=-1))
        mean: torch.Tensor = self.mean(hidden)
        log_std: torch.Tensor = self.log_std(hidden)
        std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()
        eps = torch.randn(std.shape, generator=generator, device=std.device, dtype=std.dtype)
        return VAEOutput(self.decode(obs, mean + std * eps), mean, std)

    def decode(self, obs: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        """Actions ``tanh(decoder(obs, latent))`` in [-1, 1], shape (N, act_dim)."""
        out: torch.Tensor = self.decoder(torch.cat([obs.flatten(1), latent], dim=-1))
        return torch.tanh(out)

    def generate(self, obs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Actions like the dataset's for ``obs``: decode ``z ~ N(0, I)`` clipped to +-``LATENT_CLIP``."""
        shape = (obs.shape[0], self.latent_dim)
        z = torch.randn(shape, generator=generator, device=obs.device, dtype=obs.dtype)
        return self.decode(obs, z.clamp(-LATENT_CLIP, LATENT_CLIP))


def vae_loss(
    out: VAEOutput, act: torch.Tensor, kl_weight: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, reconstruction loss, KL)``: ``loss = mse(reconstruction, act) + kl_weight * KL`` with
    ``KL = mean over batch and latent of -log sigma + (sigma^2 + mu^2 - 1) / 2``."""
    recon = F.mse_loss(out.reconstruction, act)
    kl = (-out.std.log() + (out.std.pow(2) + out.mean.pow(2) - 1.0) / 2.0).mean()
    return recon + kl_weight * kl, recon, kl
