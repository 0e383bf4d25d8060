"""Distributional Q-networks and their losses: categorical (C51, Rainbow), quantile (QR-DQN) and
implicit quantile (IQN) value distributions.

Every network here maps observations to expected Q-values in ``forward`` (shape (N, num_actions)), so
a :class:`~tshtrain.algorithm.QValuePolicy` acts greedily on it (with epsilon-greedy exploration) as it
does for DQN; the algorithms read the distribution through the extra methods (``log_probs``,
``quantiles``). Shape letters: N batch, A actions, Z atoms, Q predicted quantiles, T target samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import final

import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.base import module_device
from tshtrain.algorithm.blocks.noisy import NoisyLinear
from tshtrain.errors import ConfigurationError


def categorical_projection(
    returns_N: torch.Tensor, discounts_N: torch.Tensor, next_probs_NZ: torch.Tensor, support_Z: torch.Tensor
) -> torch.Tensor:
    """Project the distribution of ``returns + discounts * Z'`` (``Z'`` on ``support_Z`` with
    probabilities ``next_probs_NZ``) back onto ``support_Z`` (Bellemare et al. 2017, Algorithm 1).

    Each shifted atom, clamped to ``[v_min, v_max]``, gives its mass to its two neighbouring atoms in
    proportion to closeness; rows of the result sum to the rows of ``next_probs_NZ``. Returns (N, Z).
    """
    v_min, v_max = support_Z[0], support_Z[-1]
    delta = (v_max - v_min) / (support_Z.numel() - 1)
    shifted_NZ = (returns_N.unsqueeze(-1) + discounts_N.unsqueeze(-1) * support_Z).clamp(v_min, v_max)
    # weight of target atom j (dim 1) from shifted atom k (dim 2): max(0, 1 - |Tz_k - z_j| / delta)
    closeness_NZZ = (1 - (shifted_NZ.unsqueeze(1) - support_Z.view(1, -1, 1)).abs() / delta).clamp(0, 1)
    return (closeness_NZZ * next_probs_NZ.unsqueeze(1)).sum(-1)


def quantile_huber_loss(
    pred_NQ: torch.Tensor, target_NT: torch.Tensor, taus_NQ: torch.Tensor, kappa: float = 1.0
) -> torch.Tensor:
    """Quantile regression loss with Huber threshold ``kappa`` (Dabney et al. 2018a, eq. 10), per sample:
    ``sum_q mean_t |tau_q - 1{u < 0}| * huber_kappa(u) / kappa`` with ``u = target_t - pred_q``.

    ``taus_NQ``: the quantile fraction each prediction estimates (broadcastable to (N, Q)). Returns (N,).
    """
    u_NQT = target_NT.unsqueeze(1) - pred_NQ.unsqueeze(2)
    huber_NQT = F.huber_loss(
        pred_NQ.unsqueeze(2).expand_as(u_NQT),
        target_NT.unsqueeze(1).expand_as(u_NQT),
        reduction="none",
        delta=kappa,
    )
    weight_NQT = (taus_NQ.unsqueeze(-1) - (u_NQT.detach() < 0).to(u_NQT.dtype)).abs()
    return (weight_NQT * huber_NQT / kappa).mean(dim=2).sum(dim=1)


def _linear(in_features: int, out_features: int, noisy_sigma0: float | None) -> nn.Module:
    if noisy_sigma0 is None:
        return nn.Linear(in_features, out_features)
    return NoisyLinear(in_features, out_features, noisy_sigma0)


def _stack(sizes: Sequence[int], noisy_sigma0: float | None, *, last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(_linear(sizes[i], sizes[i + 1], noisy_sigma0))
        if last_activation or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _trunk(input_dim: int, hidden_sizes: Sequence[int], owner: str) -> nn.Sequential:
    if not hidden_sizes:
        raise ConfigurationError(f"{owner}: hidden_sizes must name at least one layer, got ().")
    return _stack([input_dim, *hidden_sizes], None, last_activation=True)


@final
class CategoricalQNet(nn.Module):
    """A value distribution on a fixed support of ``num_atoms`` atoms from ``v_min`` to ``v_max``
    (C51, Rainbow). ``forward`` gives the expected Q-values ``sum_z p(z) z``.

    ``features`` maps observations to h; ``advantage_head`` maps h to (N, A * Z) logits; with a
    ``value_head`` (h -> (N, Z)) the logits are dueling: ``V + A - mean_a A`` per atom.
    """

    support: torch.Tensor

    def __init__(
        self,
        features: nn.Module,
        advantage_head: nn.Module,
        *,
        num_actions: int,
        num_atoms: int = 51,
        v_min: float = -10.0,
        v_max: float = 10.0,
        value_head: nn.Module | None = None,
    ):
        super().__init__()
        if num_atoms < 2:
            raise ConfigurationError(f"CategoricalQNet.num_atoms must be an int >= 2, got {num_atoms!r}.")
        if not v_min < v_max:
            raise ConfigurationError(
                f"CategoricalQNet: v_min must be < v_max, got v_min={v_min!r}, v_max={v_max!r}."
            )
        self.features = features
        self.advantage_head = advantage_head
        self.value_head = value_head
        self.num_actions = num_actions
        self.num_atoms = num_atoms
        device = module_device(features)  # the net's device; the buffer follows it in .to()
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms, device=device))

    def log_probs(self, obs: torch.Tensor) -> torch.Tensor:
        """log p(z | o, a), shape (N, A, Z)."""
        h: torch.Tensor = self.features(obs)
        adv: torch.Tensor = self.advantage_head(h)
        logits_NAZ = adv.view(-1, self.num_actions, self.num_atoms)
        if self.value_head is not None:
            value: torch.Tensor = self.value_head(h)
            logits_NAZ = value.view(-1, 1, self.num_atoms) + logits_NAZ - logits_NAZ.mean(dim=1, keepdim=True)
        return torch.log_softmax(logits_NAZ, dim=-1)

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return (self.log_probs(obs).exp() * self.support).sum(-1)


def categorical_mlp(
    input_dim: int,
    num_actions: int,
    hidden_sizes: Sequence[int] = (128, 128),
    *,
    num_atoms: int = 51,
    v_min: float = -10.0,
    v_max: float = 10.0,
    dueling: bool = False,
    head_hidden_sizes: Sequence[int] = (),
    noisy_sigma0: float | None = None,
) -> CategoricalQNet:
    """A :class:`CategoricalQNet` of ReLU MLPs: a trunk with ``hidden_sizes``, then an advantage head (and
    with ``dueling`` a value head) with ``head_hidden_sizes`` and a linear output. With ``noisy_sigma0``
    (Rainbow's default: :data:`~tshtrain.algorithm.blocks.noisy.NOISY_SIGMA0`) the head layers are
    :class:`~tshtrain.algorithm.blocks.noisy.NoisyLinear` (the trunk stays deterministic, as in
    Tianshou's Rainbow test)."""
    trunk = _trunk(input_dim, hidden_sizes, "categorical_mlp")
    head = [hidden_sizes[-1], *head_hidden_sizes]
    advantage = _stack([*head, num_actions * num_atoms], noisy_sigma0, last_activation=False)
    value = _stack([*head, num_atoms], noisy_sigma0, last_activation=False) if dueling else None
    return CategoricalQNet(
        trunk,
        advantage,
        num_actions=num_actions,
        num_atoms=num_atoms,
        v_min=v_min,
        v_max=v_max,
        value_head=value,
    )


@final
class QuantileQNet(nn.Module):
    """``num_quantiles`` quantiles of the return per action at the fixed fractions
    ``tau_hat_q = (2q + 1) / (2 num_quantiles)`` (QR-DQN); ``forward`` gives their mean."""

    tau_hat: torch.Tensor

    def __init__(self, net: nn.Module, *, num_actions: int, num_quantiles: int = 200):
        """Args:
        net: observation -> (N, num_actions * num_quantiles).
        num_actions: A.
        num_quantiles: Q (>= 2).
        """
        super().__init__()
        if num_quantiles < 2:
            raise ConfigurationError(
                f"QuantileQNet.num_quantiles must be an int >= 2, got {num_quantiles!r}."
            )
        self.net = net
        self.num_actions = num_actions
        self.num_quantiles = num_quantiles
        quantiles_Q = torch.arange(num_quantiles, dtype=torch.float32, device=module_device(net))
        self.register_buffer("tau_hat", (quantiles_Q + 0.5) / num_quantiles)

    def quantiles(self, obs: torch.Tensor) -> torch.Tensor:
        """theta_q(o, a), shape (N, A, Q)."""
        out: torch.Tensor = self.net(obs)
        return out.view(-1, self.num_actions, self.num_quantiles)

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.quantiles(obs).mean(-1)


def quantile_mlp(
    input_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (128, 128), *, num_quantiles: int = 200
) -> QuantileQNet:
    """A :class:`QuantileQNet` on a ReLU MLP."""
    trunk = _trunk(input_dim, hidden_sizes, "quantile_mlp")
    return QuantileQNet(
        nn.Sequential(trunk, nn.Linear(hidden_sizes[-1], num_actions * num_quantiles)),
        num_actions=num_actions,
        num_quantiles=num_quantiles,
    )


@final
class ImplicitQuantileNet(nn.Module):
    """Quantile function ``Z_tau(o, a)`` for any fraction tau (IQN, Dabney et al. 2018b):
    ``head(features(o) * phi(tau))`` with the cosine embedding
    ``phi(tau)_j = ReLU(sum_{i<n} cos(pi i tau) w_ij + b_j)``.

    ``forward`` (acting) averages the quantiles at ``num_policy_quantiles`` equally spaced fractions
    ``(k + 0.5) / K``: a deterministic estimate of the mean, with no random numbers drawn while acting.
    """

    cos_freqs: torch.Tensor
    policy_taus: torch.Tensor

    def __init__(
        self,
        features: nn.Module,
        head: nn.Module,
        *,
        feature_dim: int,
        num_cosines: int = 64,
        num_policy_quantiles: int = 32,
    ):
        """Args:
        features: observation -> (N, feature_dim).
        head: (..., feature_dim) -> (..., num_actions).
        feature_dim: width of the features.
        num_cosines: n of the cosine embedding.
        num_policy_quantiles: K, fractions averaged by ``forward``.
        """
        super().__init__()
        for name, value in (("num_cosines", num_cosines), ("num_policy_quantiles", num_policy_quantiles)):
            if value < 1:
                raise ConfigurationError(f"ImplicitQuantileNet.{name} must be an int >= 1, got {value!r}.")
        self.features = features
        self.head = head
        self.embedding = nn.Sequential(nn.Linear(num_cosines, feature_dim), nn.ReLU())
        device = module_device(features)
        self.register_buffer(
            "cos_freqs", math.pi * torch.arange(num_cosines, dtype=torch.float32, device=device)
        )
        policy_K = torch.arange(num_policy_quantiles, dtype=torch.float32, device=device)
        self.register_buffer("policy_taus", (policy_K + 0.5) / num_policy_quantiles)

    def quantiles(self, obs: torch.Tensor, taus_NT: torch.Tensor) -> torch.Tensor:
        """Z_tau(o, a) at the fractions ``taus_NT`` (N, T), shape (N, A, T)."""
        h_NH: torch.Tensor = self.features(obs)
        phi_NTH: torch.Tensor = self.embedding(torch.cos(taus_NT.unsqueeze(-1) * self.cos_freqs))
        out_NTA: torch.Tensor = self.head(h_NH.unsqueeze(1) * phi_NTH)
        return out_NTA.transpose(1, 2)

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        n = obs.shape[0]
        return self.quantiles(obs, self.policy_taus.expand(n, -1)).mean(-1)


def iqn_mlp(
    input_dim: int,
    num_actions: int,
    hidden_sizes: Sequence[int] = (128, 128),
    *,
    num_cosines: int = 64,
    num_policy_quantiles: int = 32,
) -> ImplicitQuantileNet:
    """An :class:`ImplicitQuantileNet` of ReLU MLPs: a trunk with ``hidden_sizes``, the product with the
    tau embedding at its last width, then a head Linear -> ReLU -> Linear to the actions."""
    trunk = _trunk(input_dim, hidden_sizes, "iqn_mlp")
    width = hidden_sizes[-1]
    head = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, num_actions))
    return ImplicitQuantileNet(
        trunk, head, feature_dim=width, num_cosines=num_cosines, num_policy_quantiles=num_policy_quantiles
    )
