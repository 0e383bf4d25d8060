"""Noisy networks (Fortunato et al. 2018): linear layers with learned, factorised Gaussian weight noise.

How the noise is drawn (and why resume stays bit-exact):

- :class:`NoisyLinear` holds its current noise in two buffers (``eps_in``, ``eps_out``); it never draws
  random numbers itself. In training mode (``module.training``, the default) it uses
  ``mu + sigma * noise``; in eval mode the mean weights ``mu`` only.
- The owners draw fresh noise with :func:`resample_noise` from a seeded ``torch.Generator`` before each
  use: :class:`NoisyQPolicy` before every stochastic action (from its ``noise_generator``), the algorithm
  (Rainbow) before the forward passes of each gradient step (from its own ``generator``). Both generators
  are attributes of the policy / algorithm, so their states are saved in every checkpoint
  (``Algorithm.state_dict``), and the noise buffers are saved with the network weights.
- Deterministic actions (test steps, ``deterministic=True``) switch the network to eval mode for the call:
  no noise, no random numbers drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import final

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import Policy, module_device, seeded_generator
from tshtrain.algorithm.blocks.policies import QValuePolicy
from tshtrain.data.batch import ObsTensor
from tshtrain.errors import ConfigurationError

NOISY_SIGMA0 = 0.1
"""the one default initial noise scale ``sigma0`` of noisy layers (``NoisyLinear``, Rainbow's
``algorithm.network.noisy_sigma0``). The paper's value for factorised noise is 0.5 (Fortunato et al.
2018, section 3.2); 0.1 is Tianshou's Rainbow test's ``noisy_std``, which the rainbow default experiment
(``tshtrain config rainbow``), examples/distributional_cartpole.py and
tests/learning/test_learning_distributional.py use and whose results docs/algorithms.md reports.
Pass ``sigma0=0.5`` for the paper's setting."""


@final
class NoisyLinear(nn.Module):
    """``y = (mu_W + sigma_W * (eps_out eps_in^T)) x + mu_b + sigma_b * eps_out`` in training mode,
    ``y = mu_W x + mu_b`` in eval mode (factorised Gaussian noise, Fortunato et al. 2018, section 3.2).

    The noise buffers start at zero (the layer acts as its mean until :func:`resample_noise` is called).
    """

    eps_in: torch.Tensor
    eps_out: torch.Tensor

    def __init__(
        self,
        in_features: int,
        out_features: int,
        sigma0: float = NOISY_SIGMA0,
        *,
        device: torch.device | str | None = None,
    ):
        """Args:
        in_features: input width.
        out_features: output width.
        sigma0: initial noise scale; ``sigma`` starts at ``sigma0 / sqrt(in_features)`` (default:
            :data:`NOISY_SIGMA0`; the paper: 0.5).
        device: where the parameters and noise buffers live (None: torch's default, as ``nn.Linear``).
        """
        super().__init__()
        if not (sigma0 >= 0 and math.isfinite(sigma0)):
            raise ConfigurationError(f"NoisyLinear.sigma0 must be a finite number >= 0, got {sigma0!r}.")
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features)
        self.mu_weight = nn.Parameter(
            torch.empty(out_features, in_features, device=device).uniform_(-bound, bound)
        )
        self.mu_bias = nn.Parameter(torch.empty(out_features, device=device).uniform_(-bound, bound))
        self.sigma_weight = nn.Parameter(
            torch.full((out_features, in_features), sigma0 * bound, device=device)
        )
        self.sigma_bias = nn.Parameter(torch.full((out_features,), sigma0 * bound, device=device))
        self.register_buffer("eps_in", torch.zeros(in_features, device=device))
        self.register_buffer("eps_out", torch.zeros(out_features, device=device))

    @override
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.linear(x, self.mu_weight, self.mu_bias)
        weight = self.mu_weight + self.sigma_weight * torch.outer(self.eps_out, self.eps_in)
        bias = self.mu_bias + self.sigma_bias * self.eps_out
        return F.linear(x, weight, bias)

    @torch.no_grad()
    def resample(self, generator: torch.Generator) -> None:
        """Draw new factorised noise ``f(x) = sign(x) sqrt(|x|)``, ``x ~ N(0, 1)``, from ``generator``."""
        for buf in (self.eps_in, self.eps_out):
            x = torch.randn(buf.shape, generator=generator, device=buf.device, dtype=buf.dtype)
            buf.copy_(x.sign() * x.abs().sqrt())

    @override
    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


def noisy_layers(module: nn.Module) -> list[NoisyLinear]:
    """The :class:`NoisyLinear` layers of ``module``, in module order."""
    return [m for m in module.modules() if isinstance(m, NoisyLinear)]


def resample_noise(module: nn.Module, generator: torch.Generator) -> None:
    """New noise for every :class:`NoisyLinear` of ``module`` (in module order, from ``generator``)."""
    for layer in noisy_layers(module):
        layer.resample(generator)


@contextmanager
def noise_off(module: nn.Module) -> Iterator[None]:
    """Inside the block ``module`` is in eval mode (noisy layers use their mean weights)."""
    was_training = module.training
    module.train(False)
    try:
        yield
    finally:
        module.train(was_training)


@final
class NoisyQPolicy(Policy):
    """A :class:`QValuePolicy` over a network with :class:`NoisyLinear` layers.

    Stochastic actions (training collection) draw new noise for every call from ``noise_generator``
    and then act like the wrapped policy (greedy, plus its epsilon-greedy exploration noise if its
    schedule is nonzero); deterministic actions (test steps) use the mean weights.
    """

    def __init__(self, q_policy: QValuePolicy, *, seed: int | None = None):
        """Args:
        q_policy: the greedy / epsilon-greedy policy over the noisy network (``q_policy.q_net``).
            Pass ``EpsilonSchedule(start=0.0, end=0.0)`` to explore by the noise alone.
        seed: seeds ``noise_generator`` (and this policy's own generator).
        """
        if not noisy_layers(q_policy.q_net):
            raise ConfigurationError(
                "NoisyQPolicy: q_policy.q_net has no NoisyLinear layer; build it with noisy layers "
                f"(e.g. categorical_mlp(..., noisy_sigma0={NOISY_SIGMA0})) or use the QValuePolicy directly."
            )
        device = module_device(q_policy.q_net)
        super().__init__(
            action_space=q_policy.action_space, deterministic_eval=True, seed=seed, device=device
        )
        self.q_policy = q_policy
        self.noise_generator = seeded_generator(None if seed is None else seed + 1, device)
        """the generator of the acting noise (saved in checkpoints with the policy's generators)"""

    @property
    def q_net(self) -> nn.Module:
        """The noisy Q-network (that of the wrapped policy)."""
        return self.q_policy.q_net

    @property
    def eps(self) -> float:
        """The wrapped policy's current training epsilon."""
        return self.q_policy.eps

    def q_values(self, obs: ObsTensor) -> torch.Tensor:
        """Q(o, .) with the network's current noise, shape (N, num_actions)."""
        return self.q_policy.q_values(obs)

    @override
    def actions(self, obs: ObsTensor, *, deterministic: bool) -> torch.Tensor:
        if deterministic:
            with noise_off(self.q_net):
                return self.q_policy.actions(obs, deterministic=True)
        resample_noise(self.q_net, self.noise_generator)
        return self.q_policy.actions(obs, deterministic=False)

    @override
    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        self.q_policy.legal_actions = self.legal_actions
        return self.q_policy.add_exploration_noise(act, rng)

    @override
    def add_exploration_noise_torch(self, act: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        self.q_policy.legal_actions_torch = self.legal_actions_torch
        return self.q_policy.add_exploration_noise_torch(act, generator)
