"""The math of natural-gradient policy steps (NPG, TRPO), as pure functions.

* :func:`action_distribution` / :func:`mean_kl`: the distribution a policy gives each observation, and
  the mean KL divergence between two of them, in closed form for the four on-policy policies.
* :func:`flat_grad`, :func:`flat_parameters`, :func:`set_flat_parameters`: parameters as one vector.
* :func:`conjugate_gradient`: solves ``F x = b`` for a symmetric positive-definite ``F`` given only
  its matrix-vector products.
* :func:`fisher_vector_product`: the product of the Fisher information matrix (the Hessian of the KL
  at the current parameters) with a vector, by double backpropagation, never forming the matrix.

P below is the number of policy parameters (the length of the flat vector).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

import torch
from torch import nn

from tshtrain.algorithm.blocks.gaussian import GaussianPolicy
from tshtrain.algorithm.blocks.multi_policies import BernoulliPolicy, MultiCategoricalPolicy
from tshtrain.algorithm.blocks.policies import CategoricalPolicy
from tshtrain.data.batch import ObsTensor

ActionDistribution: TypeAlias = tuple[torch.Tensor, ...]
"""The parameters of the action distributions of a batch of observations, per policy kind:
categorical: ``(log_probs_NK,)``; Gaussian: ``(mean_NA, log_std_A)``; multi-categorical:
``(log_probs_NKM,)`` (padding columns -inf); Bernoulli: ``(logits_NB,)``."""

PolicyWithDistribution: TypeAlias = (
    CategoricalPolicy | GaussianPolicy | MultiCategoricalPolicy | BernoulliPolicy
)


def action_distribution(policy: PolicyWithDistribution, obs: ObsTensor) -> ActionDistribution:
    """The parameters of pi(. | obs) (see :data:`ActionDistribution`), differentiable."""
    if isinstance(policy, CategoricalPolicy):
        return (torch.log_softmax(policy.logits(obs), dim=-1),)
    if isinstance(policy, GaussianPolicy):
        return (policy.mean_actions(obs), policy.log_std)
    if isinstance(policy, MultiCategoricalPolicy):
        return (policy.log_probs(obs),)
    return (policy.logits(obs),)


def mean_kl(policy: PolicyWithDistribution, old: ActionDistribution, new: ActionDistribution) -> torch.Tensor:
    """mean over the batch of KL(old || new), both given by :func:`action_distribution` of ``policy``;
    a 0-dim tensor, differentiable in both."""
    if isinstance(policy, GaussianPolicy):
        (mean_old_NA, log_std_old_A), (mean_new_NA, log_std_new_A) = old, new
        var_old_A, var_new_A = torch.exp(2.0 * log_std_old_A), torch.exp(2.0 * log_std_new_A)
        kl_NA = (
            log_std_new_A
            - log_std_old_A
            + (var_old_A + (mean_old_NA - mean_new_NA).square()) / (2.0 * var_new_A)
            - 0.5
        )
        return kl_NA.sum(dim=-1).mean()
    if isinstance(policy, BernoulliPolicy):
        (logits_old_NB,), (logits_new_NB,) = old, new
        p1_old_NB = torch.sigmoid(logits_old_NB)
        log_ratio1_NB = nn.functional.logsigmoid(logits_old_NB) - nn.functional.logsigmoid(logits_new_NB)
        log_ratio0_NB = nn.functional.logsigmoid(-logits_old_NB) - nn.functional.logsigmoid(-logits_new_NB)
        return (p1_old_NB * log_ratio1_NB + (1.0 - p1_old_NB) * log_ratio0_NB).sum(dim=-1).mean()
    (logp_old,), (logp_new,) = old, new
    if isinstance(policy, MultiCategoricalPolicy):
        # padding columns are -inf in both: set them to 0, where p * (log p_old - log p_new) = 1 * 0
        logp_old = logp_old.masked_fill(~policy.component_mask, 0.0)
        logp_new = logp_new.masked_fill(~policy.component_mask, 0.0)
    kl = (logp_old.exp() * (logp_old - logp_new)).reshape(len(logp_old), -1).sum(dim=-1)
    return kl.mean()


def detached(dist: ActionDistribution) -> ActionDistribution:
    """The same distribution parameters without their autograd graph (the fixed "old" distribution)."""
    return tuple(t.detach() for t in dist)


def flat_grad(
    y: torch.Tensor, params: Sequence[nn.Parameter], *, create_graph: bool = False, retain_graph: bool = False
) -> torch.Tensor:
    """d y / d params as one vector, shape (P,); parameters ``y`` does not depend on give zeros. The
    parameters' ``.grad`` fields are not touched. ``create_graph`` keeps ``y``'s graph too (the result is
    differentiated again)."""
    grads = torch.autograd.grad(
        y,
        list(params),
        create_graph=create_graph,
        retain_graph=retain_graph or create_graph,
        allow_unused=True,
    )
    return torch.cat(
        [
            torch.zeros_like(p).reshape(-1) if g is None else g.reshape(-1)
            for g, p in zip(grads, params, strict=True)
        ]
    )


def flat_parameters(params: Sequence[nn.Parameter]) -> torch.Tensor:
    """The parameters' values concatenated into one new vector, shape (P,) (no autograd graph)."""
    return torch.cat([p.detach().reshape(-1) for p in params])


@torch.no_grad()
def set_flat_parameters(params: Sequence[nn.Parameter], flat_P: torch.Tensor) -> None:
    """Copy ``flat_P`` (laid out as :func:`flat_parameters`) into the parameters, in place."""
    start = 0
    for p in params:
        p.copy_(flat_P[start : start + p.numel()].view_as(p))
        start += p.numel()
    assert start == len(flat_P), f"{len(flat_P)} values for {start} parameters"


def conjugate_gradient(
    matrix_vector_product: Callable[[torch.Tensor], torch.Tensor],
    b_P: torch.Tensor,
    *,
    num_iterations: int,
    residual_tol: float = 1e-10,
) -> torch.Tensor:
    """x with ``F x ~ b`` after at most ``num_iterations`` conjugate-gradient iterations from x = 0,
    where ``matrix_vector_product(v) = F v`` for a symmetric positive-definite F. Stops early once the
    squared residual norm is below ``residual_tol`` (one host sync per iteration)."""
    x_P = torch.zeros_like(b_P)
    r_P = b_P.clone()  # the residual b - F x, with x = 0
    p_P = b_P.clone()
    r_dot_r = r_P.dot(r_P)
    for _ in range(num_iterations):
        z_P = matrix_vector_product(p_P)
        alpha = r_dot_r / p_P.dot(z_P)
        x_P = x_P + alpha * p_P
        r_P = r_P - alpha * z_P
        new_r_dot_r = r_P.dot(r_P)
        if bool(new_r_dot_r < residual_tol):
            break
        p_P = r_P + (new_r_dot_r / r_dot_r) * p_P
        r_dot_r = new_r_dot_r
    return x_P


def fisher_vector_product(
    kl_grad_P: torch.Tensor, params: Sequence[nn.Parameter], damping: float
) -> Callable[[torch.Tensor], torch.Tensor]:
    """v -> (H + damping * I) v, where H is the Hessian of the KL at the current parameters (the
    Fisher information matrix) and ``kl_grad_P`` the KL's gradient made with ``create_graph=True``.
    Each product is one backward pass through that graph (kept for the next product)."""

    def product(v_P: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():  # also when called inside no_grad (a step's bookkeeping)
            hv_P = flat_grad((kl_grad_P * v_P).sum(), params, retain_graph=True)
        return hv_P.detach() + damping * v_P

    return product
