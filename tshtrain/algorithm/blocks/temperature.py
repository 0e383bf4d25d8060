"""The entropy temperature alpha of maximum-entropy algorithms (SAC, discrete SAC, REDQ, CQL), fixed or
learned."""

from __future__ import annotations

import math
from typing import Protocol, final

import torch
from torch import nn

from tshtrain.algorithm.base import UpdateHooks, make_adam
from tshtrain.algorithm.blocks.optim import optimizer_step


@final
class EntropyTemperature:
    """``alpha = exp(log_alpha)``; with ``learned=True`` one Adam step per update moves the policy's
    entropy towards ``target_entropy`` (Haarnoja et al. 2018, "automatic entropy tuning").

    The algorithm saves :attr:`optim` as its ``"alpha_optim"`` component and :attr:`log_alpha` in its
    extra state.
    """

    def __init__(
        self, *, alpha: float, learned: bool, lr: float, target_entropy: float, device: torch.device
    ):
        """Args:
        alpha: the constant (``learned=False``) or starting (``learned=True``) temperature, > 0.
        learned: tune alpha by gradient descent on :meth:`loss_from_log_prob` / :meth:`loss_from_entropy`.
        lr: Adam learning rate of ``log_alpha``.
        target_entropy: the entropy the tuning aims at.
        device: where ``log_alpha`` lives.
        """
        self.learned = learned
        self.target_entropy = target_entropy
        self.log_alpha = nn.Parameter(torch.tensor(math.log(alpha), device=device))
        self.log_alpha.requires_grad_(learned)
        self.optim = make_adam([self.log_alpha], lr=lr)

    def value(self) -> torch.Tensor:
        """alpha as a detached 0-dim tensor (no host sync)."""
        return self.log_alpha.detach().exp()

    @property
    def alpha(self) -> float:
        """The current temperature as a float."""
        return float(self.log_alpha.detach().exp())

    def loss_from_log_prob(self, log_prob_N: torch.Tensor) -> torch.Tensor:
        """``-mean(log_alpha * (log pi(a|o) + target_entropy))`` for sampled actions (SAC, CQL)."""
        return -(self.log_alpha * (log_prob_N.detach() + self.target_entropy)).mean()

    def loss_from_entropy(self, entropy: torch.Tensor) -> torch.Tensor:
        """``log_alpha * (H - target_entropy)`` for an exact entropy ``H`` (discrete SAC)."""
        return self.log_alpha * (entropy - self.target_entropy)

    def step(self, loss: torch.Tensor, hooks: UpdateHooks) -> None:
        """One Adam step of ``log_alpha`` on ``loss`` (reported as ``"alpha loss"``)."""
        optimizer_step(self.optim, "alpha_optim", {"alpha loss": loss}, hooks)

    def state(self) -> torch.Tensor:
        """``log_alpha``, detached and copied, for the algorithm's extra state."""
        return self.log_alpha.detach().clone()

    def load_state(self, log_alpha: torch.Tensor) -> None:
        """Restore :meth:`state`."""
        with torch.no_grad():
            self.log_alpha.copy_(log_alpha)


class TemperatureParams(Protocol):
    """What :func:`box_temperature` reads from the params of SAC, REDQ and CQL."""

    @property
    def alpha(self) -> float:
        """the constant or starting temperature"""
        ...

    @property
    def auto_alpha(self) -> bool:
        """tune alpha"""
        ...

    @property
    def alpha_lr(self) -> float:
        """Adam learning rate of log(alpha)"""
        ...

    @property
    def target_entropy(self) -> float | None:
        """the entropy the tuning aims at; None: -(number of action dimensions)"""
        ...


def box_temperature(params: TemperatureParams, *, act_dim: int, device: torch.device) -> EntropyTemperature:
    """The temperature of an algorithm with Box actions of ``act_dim`` dimensions (SAC, REDQ, CQL): a
    ``target_entropy`` of None means ``-act_dim``."""
    target = -float(act_dim) if params.target_entropy is None else params.target_entropy
    return EntropyTemperature(
        alpha=params.alpha,
        learned=params.auto_alpha,
        lr=params.alpha_lr,
        target_entropy=target,
        device=device,
    )
