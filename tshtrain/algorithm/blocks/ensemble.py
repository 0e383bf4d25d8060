"""Stacked members: K networks of one structure as one network whose parameters have a leading member
axis, so that all K run in one batched matmul per layer (``torch.baddbmm``).

This is the one building block of every ensemble in tshtrain; each layer is :func:`members_linear`.
The twin critics of TD3 / SAC, REDQ's ensemble and discrete SAC's critics are built this way
(:func:`ensemble_mlp`); :func:`stack_mlps` / :func:`unstack_mlp` turn K separately built MLPs into one
such network and back; K independent runs (seed batches, :mod:`tshtrain.seeds`) and K independent
multi-agent learners (``update_mode="stacked"``) are stacked for their updates by
:class:`~tshtrain.algorithm.blocks.stacked_update.StackedMembers`, whose batched forward passes are
:func:`stacked_mlp_forward` (K MLPs) and :func:`stacked_ensemble_forward` (K ensembles of C members as
one of K * C: the twin critics of K SAC seeds are one ensemble of 2K); and
:func:`clip_grad_norm_per_member_` clips each member's gradient norm on its own.

Members never mix: member k's output reads only member k's parameters and input slice, so its
gradients depend only on its own loss term (the loss is a sum over members), and an element-wise
optimizer (Adam, AdamW, SGD) over the stacked parameters is exactly K independent optimizers.
Measured on the CPU (AMD EPYC, torch 2.13, tests/unit/test_ensemble_stacking.py): stacking and
unstacking copy weights bit for bit; changing one member's data leaves every other member's parameters
bit for bit unchanged; the stacked forward of 4-64-64-2 tanh MLPs is within 2.4e-7 of each member's
own (not bit for bit: ``baddbmm`` and ``nn.Linear``'s ``addmm`` sum a 64-input layer's products in
different orders; a 4-input layer gives the same bits); four Adam steps of a PPO actor, stacked against
separate runs, end within 8.7e-6 in float32 (most weights bit-equal; the largest difference where a
gradient is near zero and Adam's ``m / sqrt(v)`` magnifies the last bits) and 1e-14 in float64;
per-member clipping agrees with torch's clipping of each member alone to one float32 ulp.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import final

import torch
from torch import nn
from typing_extensions import override

from tshtrain.algorithm.blocks.nets import activation_layer
from tshtrain.errors import ConfigurationError

ELEMENTWISE_ACTIVATIONS: tuple[type[nn.Module], ...] = (
    nn.CELU,
    nn.ELU,
    nn.GELU,
    nn.Hardshrink,
    nn.Hardsigmoid,
    nn.Hardswish,
    nn.Hardtanh,
    nn.Identity,
    nn.LeakyReLU,
    nn.LogSigmoid,
    nn.Mish,
    nn.ReLU,
    nn.SELU,
    nn.SiLU,
    nn.Sigmoid,
    nn.Softplus,
    nn.Softshrink,
    nn.Softsign,
    nn.Tanh,
    nn.Tanhshrink,
    nn.Threshold,
)
"""parameter-free activations that act on each element alone (and their subclasses, e.g. the builders'
in-place tanh and ``FastTanh``): the modules :func:`stack_mlps` keeps between the linear layers"""


def members_linear(x_MNI: torch.Tensor, weight_MIO: torch.Tensor, bias_M1O: torch.Tensor) -> torch.Tensor:
    """M independent linear layers on an (M, N, in) batch in one batched matrix product,
    ``x_MNI[m] @ weight_MIO[m] + bias_M1O[m]`` for every m: the one piece of arithmetic behind every
    ensemble and every stack of members in tshtrain (:class:`EnsembleLinear`'s twin critics and REDQ
    ensembles, the stacked seeds and multi-agent learners of :func:`stacked_mlp_forward` and
    :func:`stacked_ensemble_forward`)."""
    return torch.baddbmm(bias_M1O, x_MNI, weight_MIO)


@final
class EnsembleLinear(nn.Module):
    """``num_members`` independent linear layers applied to a (members, N, in) batch with one bmm.

    ``weight`` is (members, in, out) (member k's ``nn.Linear.weight`` transposed) and ``bias`` is
    (members, 1, out); ``forward`` is :func:`members_linear`."""

    def __init__(
        self, num_members: int, in_features: int, out_features: int, *, device: torch.device | None = None
    ):
        """``device``: where the weights are made (None: torch's default device, like ``nn.Linear``)."""
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialisation, per member
        self.weight = nn.Parameter(
            torch.empty(num_members, in_features, out_features, device=device).uniform_(-bound, bound)
        )
        self.bias = nn.Parameter(
            torch.empty(num_members, 1, out_features, device=device).uniform_(-bound, bound)
        )

    @override
    def forward(self, x_MNI: torch.Tensor) -> torch.Tensor:
        return members_linear(x_MNI, self.weight, self.bias)

    @property
    def num_members(self) -> int:
        return int(self.weight.shape[0])

    @override
    def extra_repr(self) -> str:
        members, in_features, out_features = self.weight.shape
        return f"num_members={members}, in_features={in_features}, out_features={out_features}"

    @classmethod
    def from_linears(cls, linears: Sequence[nn.Linear]) -> EnsembleLinear:
        """K ``nn.Linear`` layers (with biases, equal sizes, one device and dtype) stacked into one layer;
        member k's weights are copies of ``linears[k]``'s, bit for bit (the global RNG is not used)."""
        names = [f"linears[{k}]" for k in range(len(linears))]
        return _stack_linears(linears, names, "EnsembleLinear.from_linears")

    def member_linear(self, k: int) -> nn.Linear:
        """A copy of member ``k`` as a plain ``nn.Linear`` (the same device and dtype; weights equal bit
        for bit; no storage shared with this layer)."""
        members, in_features, out_features = self.weight.shape
        if not 0 <= k < members:
            raise ConfigurationError(
                f"EnsembleLinear.member_linear: k={k!r} is out of range; allowed 0..{members - 1}."
            )
        linear = nn.Linear(in_features, out_features, device=torch.device("meta"))  # no RNG draw
        linear.weight = nn.Parameter(self.weight[k].detach().t().clone(memory_format=torch.contiguous_format))
        linear.bias = nn.Parameter(self.bias[k, 0].detach().clone())
        return linear


def _stack_linears(linears: Sequence[nn.Module], names: Sequence[str], owner: str) -> EnsembleLinear:
    """:meth:`EnsembleLinear.from_linears`, with ``names[k]`` naming member k in errors."""
    if not linears:
        raise ConfigurationError(f"{owner}: needs at least one nn.Linear, got an empty sequence.")
    checked: list[nn.Linear] = []
    for name, layer in zip(names, linears, strict=True):
        if type(layer) is not nn.Linear:
            raise ConfigurationError(f"{owner}: {name} is {type(layer).__name__}; allowed: nn.Linear.")
        if layer.bias is None:
            raise ConfigurationError(f"{owner}: {name} has bias=False; allowed: nn.Linear with a bias.")
        checked.append(layer)
    first = checked[0]
    for name, layer in zip(names, checked, strict=True):
        for what, mine, theirs in (
            ("in_features", layer.in_features, first.in_features),
            ("out_features", layer.out_features, first.out_features),
            ("device", layer.weight.device, first.weight.device),
            ("dtype", layer.weight.dtype, first.weight.dtype),
            ("bias device", layer.bias.device, first.weight.device),
            ("bias dtype", layer.bias.dtype, first.weight.dtype),
        ):
            if mine != theirs:
                raise ConfigurationError(
                    f"{owner}: {name} has {what} {mine}, {names[0]} has {theirs}; all members must match."
                )
    # made on the meta device: no RNG draw and no allocation; both parameters are replaced
    stacked = EnsembleLinear(len(checked), first.in_features, first.out_features, device=torch.device("meta"))
    stacked.weight = nn.Parameter(torch.stack([layer.weight.detach().t() for layer in checked]))
    stacked.bias = nn.Parameter(torch.stack([layer.bias.detach() for layer in checked]).unsqueeze(1))
    return stacked


def ensemble_mlp(
    num_members: int,
    input_dim: int,
    output_dim: int,
    hidden_sizes: Sequence[int],
    activation: type[nn.Module] = nn.ReLU,
) -> nn.Sequential:
    """``num_members`` independent MLPs as one network, (members, N, input_dim) -> (members, N, output_dim)
    (the input may be expanded from (N, input_dim))."""
    if num_members < 1:
        raise ConfigurationError(f"ensemble_mlp: num_members must be >= 1, got {num_members!r}.")
    sizes = [input_dim, *hidden_sizes, output_dim]
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(EnsembleLinear(num_members, sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation_layer(activation))
    return nn.Sequential(*layers)


def _same_activation(modules: Sequence[nn.Module], position: int) -> nn.Module:
    """A copy of ``modules[0]`` if every member's module at ``position`` is the same element-wise
    activation (type and settings); else a one-line error."""
    first = modules[0]
    for k, module in enumerate(modules):
        where = f"stack_mlps: mlps[{k}][{position}]"
        if not isinstance(module, ELEMENTWISE_ACTIVATIONS) or any(True for _ in module.parameters()):
            raise ConfigurationError(
                f"{where} is {type(module).__name__}; allowed: nn.Linear or a parameter-free "
                f"element-wise activation (tshtrain.algorithm.blocks.ensemble.ELEMENTWISE_ACTIVATIONS)."
            )
        if type(module) is not type(first) or module.extra_repr() != first.extra_repr():
            raise ConfigurationError(
                f"{where} is {module!r}, mlps[0][{position}] is {first!r}; all members must match."
            )
    return copy.deepcopy(first)


def stack_mlps(mlps: Sequence[nn.Sequential]) -> nn.Sequential:
    """K MLPs of one structure (``nn.Linear`` layers with biases and element-wise activations, as
    :func:`tshtrain.algorithm.mlp` builds them) as one network taking (K, N, in) and returning
    (K, N, out): each ``nn.Linear`` becomes an :class:`EnsembleLinear` holding copies of the K layers'
    weights (bit for bit), each activation a copy of the members' common activation module.

    Raises:
        ConfigurationError: the MLPs differ in length, layer sizes, activations, device or dtype, or
            hold a module other than ``nn.Linear`` and the activations of ``ELEMENTWISE_ACTIVATIONS``.
    """
    if not mlps:
        raise ConfigurationError("stack_mlps: needs at least one MLP, got an empty sequence.")
    for k, net in enumerate(mlps):
        if not isinstance(net, nn.Sequential):
            raise ConfigurationError(
                f"stack_mlps: mlps[{k}] is {type(net).__name__}; allowed: nn.Sequential."
            )
        if len(net) != len(mlps[0]):
            raise ConfigurationError(
                f"stack_mlps: mlps[{k}] has {len(net)} modules, mlps[0] has {len(mlps[0])}; "
                f"all members must match."
            )
    if not any(isinstance(m, nn.Linear) for m in mlps[0]):
        raise ConfigurationError("stack_mlps: mlps[0] has no nn.Linear layer; nothing to stack.")
    layers: list[nn.Module] = []
    for i in range(len(mlps[0])):
        column = [net[i] for net in mlps]
        if isinstance(column[0], nn.Linear):
            names = [f"mlps[{k}][{i}]" for k in range(len(mlps))]
            layers.append(_stack_linears(column, names, "stack_mlps"))
        else:
            layers.append(_same_activation(column, i))
    return nn.Sequential(*layers)


def unstack_mlp(net: nn.Sequential, k: int) -> nn.Sequential:
    """Member ``k`` of a stacked network (:func:`stack_mlps`, :func:`ensemble_mlp`) as a plain MLP:
    ``nn.Linear`` layers with copies of member k's weights (bit for bit) and copies of the activations."""
    layers: list[nn.Module] = []
    for i, module in enumerate(net):
        if isinstance(module, EnsembleLinear):
            layers.append(module.member_linear(k))
        elif isinstance(module, ELEMENTWISE_ACTIVATIONS):
            layers.append(copy.deepcopy(module))
        else:
            raise ConfigurationError(
                f"unstack_mlp: net[{i}] is {type(module).__name__}; allowed: EnsembleLinear or an "
                f"element-wise activation (ELEMENTWISE_ACTIVATIONS)."
            )
    return nn.Sequential(*layers)


def stacked_mlp_forward(
    net: nn.Sequential, tensors: Mapping[str, torch.Tensor], prefix: str, x_KNI: torch.Tensor
) -> torch.Tensor:
    """Member k of ``net``'s architecture on ``x_KNI[k]`` for every k at once, with the members' weights
    stacked in ``tensors`` (``f"{prefix}{i}.weight"``: (K, out, in), ``f"{prefix}{i}.bias"``: (K, out), as
    ``torch.func.stack_module_state`` stacks ``nn.Linear`` layers): each layer one ``baddbmm``, as
    :class:`EnsembleLinear` computes it, each activation the members' common module. ``net`` must pass
    :func:`is_plain_mlp`."""
    h = x_KNI
    for i, module in enumerate(net):
        if isinstance(module, nn.Linear):
            weight, bias = tensors[f"{prefix}{i}.weight"], tensors[f"{prefix}{i}.bias"]
            h = members_linear(h, weight.transpose(1, 2), bias.unsqueeze(1))
        else:
            h = module(h)
    return h


def stacked_ensemble_forward(
    net: nn.Sequential, tensors: Mapping[str, torch.Tensor], prefix: str, x_KCNI: torch.Tensor
) -> torch.Tensor:
    """K stacked copies of an ensemble network (:func:`ensemble_mlp`: ``EnsembleLinear`` layers of C
    members and element-wise activations) as one ensemble of K * C members: member (k, c) of
    ``net``'s architecture on ``x_KCNI[k, c]`` for all k and c at once, the copies' weights stacked in
    ``tensors`` (``f"{prefix}{i}.weight"``: (K, C, in, out), ``f"{prefix}{i}.bias"``: (K, C, 1, out), as
    ``torch.func.stack_module_state`` stacks ``EnsembleLinear`` layers). Each layer is one ``baddbmm``
    over the K * C members, the arithmetic of :class:`EnsembleLinear` itself (the K seeds' twin critics
    are one ensemble of 2K critics). ``net`` must pass :func:`is_plain_ensemble`; returns
    (K, C, N, out)."""
    members = x_KCNI.shape[0] * x_KCNI.shape[1]
    h = x_KCNI.reshape(members, *x_KCNI.shape[2:])
    for i, module in enumerate(net):
        if isinstance(module, EnsembleLinear):
            weight, bias = tensors[f"{prefix}{i}.weight"], tensors[f"{prefix}{i}.bias"]
            h = members_linear(h, weight.flatten(0, 1), bias.flatten(0, 1))
        else:
            h = module(h)
    return h.view(*x_KCNI.shape[:2], *h.shape[1:])


def is_plain_ensemble(net: nn.Module) -> bool:
    """Whether ``net`` is an ``nn.Sequential`` of :class:`EnsembleLinear` layers and element-wise
    activations with no buffers, as :func:`ensemble_mlp` builds it: what
    :func:`stacked_ensemble_forward` takes."""
    return (
        isinstance(net, nn.Sequential)
        and not any(True for _ in net.buffers())
        and any(isinstance(m, EnsembleLinear) for m in net)
        and all(isinstance(m, (EnsembleLinear, *ELEMENTWISE_ACTIVATIONS)) for m in net)
    )


def is_plain_mlp(net: nn.Module) -> bool:
    """Whether ``net`` is an ``nn.Sequential`` of ``nn.Linear`` layers with biases and element-wise
    activations (:data:`ELEMENTWISE_ACTIVATIONS`) and no buffers: what :func:`stack_mlps` and
    :func:`stacked_mlp_forward` take."""
    return (
        isinstance(net, nn.Sequential)
        and not any(True for _ in net.buffers())
        and any(isinstance(m, nn.Linear) for m in net)
        and all(
            (isinstance(m, nn.Linear) and m.bias is not None) or isinstance(m, ELEMENTWISE_ACTIVATIONS)
            for m in net
        )
    )


def clip_grad_norm_per_member_(
    params: Sequence[torch.Tensor], max_norm: float, num_members: int
) -> torch.Tensor:
    """Clip each member's gradient norm on its own, in place; returns the (num_members,) norms before
    clipping.

    Every parameter has the member axis first. Member k's norm is the 2-norm over all parameters'
    ``grad[k]``, and member k's gradients are multiplied by ``min(1, max_norm / (norm_k + 1e-6))``:
    ``torch.nn.utils.clip_grad_norm_``'s formula applied to each member as if it were its own model.
    Parameters whose gradient is None are skipped (norms of 0 if none has one).

    Raises:
        ConfigurationError: ``num_members`` < 1, or a parameter's first dim is not ``num_members``.
    """
    if num_members < 1:
        raise ConfigurationError(
            f"clip_grad_norm_per_member_: num_members must be >= 1, got {num_members!r}."
        )
    for i, p in enumerate(params):
        if p.dim() == 0 or p.shape[0] != num_members:
            raise ConfigurationError(
                f"clip_grad_norm_per_member_: params[{i}] has shape {tuple(p.shape)}; its first dim must "
                f"be num_members={num_members} (the member axis)."
            )
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        device = params[0].device if params else None
        return torch.zeros(num_members, device=device)
    with torch.no_grad():
        norms_PM = torch.stack(
            [torch.linalg.vector_norm(g.reshape(num_members, -1), 2.0, dim=1) for g in grads]
        )
        norm_M: torch.Tensor = torch.linalg.vector_norm(norms_PM, 2.0, dim=0)
        coef_M = torch.clamp(float(max_norm) / (norm_M + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef_M.view(num_members, *([1] * (g.dim() - 1))))
    return norm_M
