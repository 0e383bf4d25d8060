"""One gradient step with the update hooks at their documented points, shared by every algorithm."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from tshtrain.algorithm.base import UpdateHooks


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    name: str,
    losses: Mapping[str, torch.Tensor],
    hooks: UpdateHooks,
    *,
    minimise: torch.Tensor | None = None,
    zero_grad_first: bool = True,
    params: Iterable[torch.Tensor] | None = None,
    clip_groups: Sequence[Sequence[torch.Tensor]] | None = None,
    max_grad_norm: float | None = None,
    foreach: bool | None = None,
) -> torch.Tensor | None:
    """``zero_grad`` -> ``hooks.on_loss(losses)`` -> backward -> optional clipping -> ``step`` ->
    ``hooks.on_optimizer_step(name, optimizer)``.

    Args:
        optimizer: the optimizer to step.
        name: its key in ``Algorithm.components()``, passed to ``hooks.on_optimizer_step``.
        losses: the losses reported to ``hooks.on_loss`` (name -> scalar tensor).
        hooks: the update hooks of this update.
        minimise: the loss to backpropagate; None: the single entry of ``losses``.
        zero_grad_first: zero the gradients before ``on_loss`` (else right after it); algorithms
            keep the order they were written with, which a hook that stops training can observe.
        params: the parameters whose gradient norm is clipped (``params`` or ``clip_groups`` is
            required with ``max_grad_norm``).
        clip_groups: instead of ``params``, groups of parameters whose gradient norms are clipped
            each on its own (e.g. actor and critic); the returned norm is the norm over all groups.
        max_grad_norm: clip the gradient norm of ``params`` to this value; None: no clipping.
        foreach: passed to ``torch.nn.utils.clip_grad_norm_``.

    Returns:
        The gradient norm before clipping, or None without clipping.
    """
    if minimise is None:
        (minimise,) = losses.values()
    if zero_grad_first:
        optimizer.zero_grad(set_to_none=True)
        hooks.on_loss(losses)
    else:
        hooks.on_loss(losses)
        optimizer.zero_grad(set_to_none=True)
    minimise.backward()  # type: ignore[no-untyped-call]  # torch's backward is not annotated
    grad_norm: torch.Tensor | None = None
    if max_grad_norm is not None and clip_groups is not None:
        norms = [torch.nn.utils.clip_grad_norm_(g, max_grad_norm, foreach=foreach) for g in clip_groups]
        grad_norm = torch.linalg.vector_norm(torch.stack(norms))
    elif max_grad_norm is not None:
        assert params is not None, "optimizer_step: max_grad_norm needs params"
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=foreach)
    optimizer.step()
    hooks.on_optimizer_step(name, optimizer)
    return grad_norm
