"""Shared pieces of off-policy updates: sampling with (n-step) targets, stats, parameter checks.

Every off-policy algorithm regresses towards ``returns + discounts * V(obs_next)``, where for n-step
returns (see :mod:`tshtrain.functional.targets`) ``returns`` sums up to n discounted rewards along the
episode, ``discounts`` is ``gamma^m`` (0 if the chain ended in a terminal state) and ``obs_next`` is
the observation after the chain's last transition. With ``n_step = 1`` this is the usual
``r + gamma * (1 - terminated) * V(o')``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias, TypeGuard

import numpy as np
import torch

from tshtrain.algorithm.base import NO_UPDATE_HOOKS, UpdateHooks, check_finite_loss
from tshtrain.data.batch import ObsTensor, TorchTransitionBatch, array_to_torch, obs_to_torch
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.data.prioritized import BasePrioritizedBuffer
from tshtrain.data.tensor_buffer import TensorReplayBuffer
from tshtrain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class ReplaySample:
    """A sampled batch of N transitions, ready for a TD update (tensors on the algorithm's device)."""

    obs: ObsTensor
    """o_t"""
    act: torch.Tensor
    """a_t as stored (Box actions in [-1, 1])"""
    returns: torch.Tensor
    """shape (N,): sum_{k<m} gamma^k r_{t+k}"""
    discounts: torch.Tensor
    """shape (N,): gamma^m * (1 - terminated_{t+m-1}), the factor of the bootstrap value"""
    obs_next: ObsTensor
    """o_{t+m}, the observation to bootstrap from"""
    weight: torch.Tensor | None
    """importance-sampling weights (prioritized buffers), else None"""
    indices: np.ndarray | torch.Tensor
    """flat buffer indices of the sampled transitions (for priority updates); a tensor on a
    :class:`~tshtrain.data.TensorReplayBuffer`'s device when sampled from one"""


def sample_replay(
    buffer: AnyReplayBuffer,
    batch_size: int,
    *,
    gamma: float,
    n_step: int,
    device: torch.device,
    hooks: UpdateHooks = NO_UPDATE_HOOKS,
) -> ReplaySample:
    """Sample ``batch_size`` transitions and compute their n-step returns and discounts
    (:meth:`~tshtrain.data.buffer.BaseReplayBuffer.nstep_targets`, vectorised).

    The sample goes through ``hooks.on_sampled_batch`` first (the algorithm's update hooks). With
    ``n_step > 1`` the following transitions of each chain are read from the buffer itself. A
    :class:`~tshtrain.data.TensorReplayBuffer` is sampled and its targets computed with tensor ops on
    its device (hooks see a :class:`~tshtrain.data.TorchTransitionBatch`); nothing goes to numpy.

    Without hooks, a numpy buffer that samples uniformly is sampled with
    :meth:`~tshtrain.data.BaseReplayBuffer.sample_torch`: the same indices and values, gathered into
    staging tensors allocated once (on the CPU the returned tensors are overwritten by the next sample
    of the same buffer and batch size: use them within the update).
    """
    if hooks is NO_UPDATE_HOOKS and _plain_numpy_buffer(buffer):
        staged = buffer.sample_torch(batch_size, device, gamma=gamma, n_step=n_step)
        return ReplaySample(
            obs=staged.obs,
            act=staged.act,
            returns=staged.returns,
            discounts=staged.discounts,
            obs_next=staged.obs_next,
            weight=None,
            indices=staged.indices,
        )
    if isinstance(buffer, TensorReplayBuffer):
        return _sample_tensor_replay(
            buffer, batch_size, gamma=gamma, n_step=n_step, device=device, hooks=hooks
        )
    batch = hooks.on_sampled_batch(buffer.sample(batch_size))
    if isinstance(batch, TorchTransitionBatch):
        raise TypeError(
            f"sample_replay: an on_sampled_batch callback turned the numpy batch of {type(buffer).__name__} "
            f"into a TorchTransitionBatch; return a TransitionBatch (or None) for numpy buffers."
        )
    if n_step == 1:
        returns = batch.rew
        discounts = np.where(batch.terminated, np.float32(0.0), np.float32(gamma))
        obs_next = batch.obs_next
    else:
        targets = buffer.nstep_targets(batch.indices, n_step=n_step, gamma=gamma)
        returns, discounts, obs_next = targets.returns, targets.discounts, targets.obs_next
    return ReplaySample(
        obs=obs_to_torch(batch.obs, device),
        act=array_to_torch(batch.act, device),
        returns=array_to_torch(returns, device),
        discounts=array_to_torch(discounts, device),
        obs_next=obs_to_torch(obs_next, device),
        weight=None if batch.weight is None else array_to_torch(batch.weight, device),
        indices=batch.indices,
    )


SampleScope: TypeAlias = Callable[[], AbstractContextManager[object]]
"""a block in which one member of a stacked update samples (e.g. a multi-agent learner's columns of a
shared buffer: ``lambda: buffer.column_scope(columns)``)"""


def sample_members(
    buffers: Sequence[AnyReplayBuffer],
    sample: Callable[[int, AnyReplayBuffer], ReplaySample],
    scopes: Sequence[SampleScope] | None = None,
) -> list[ReplaySample]:
    """Member k's ``sample(k, buffers[k])`` for every member of a stacked update, in member order (the
    order their own updates would sample in), each inside ``scopes[k]()`` if given. When members share a
    buffer, each sample's tensors are copied before the next member samples: a buffer's staged tensors
    are overwritten by its next sample (:meth:`~tshtrain.data.BaseReplayBuffer.sample_torch`).

    Raises:
        ConfigurationError: some samples carry importance weights (a prioritized buffer) and some not.
    """
    shared = len({id(b) for b in buffers}) < len(buffers)
    samples = []
    for k, buffer in enumerate(buffers):
        with scopes[k]() if scopes is not None else nullcontext():
            drawn = sample(k, buffer)
        samples.append(_copied(drawn) if shared else drawn)
    if len({s.weight is not None for s in samples}) > 1:
        raise ConfigurationError(
            "stacked update: some members' buffers are prioritized and some are not; stacked members "
            "share their buffer kind."
        )
    return samples


def check_stackable_members(owner: str, members: Sequence[Any], gradient_steps: Callable[[Any], int]) -> None:
    """What every stacked off-policy update (``DQN.stacked_update``, ``SAC.stacked_update``) requires of
    its members, refused in one line naming ``owner``: equal params, no ``obs_normalizer`` (not stacked
    yet), equal ``gradient_steps(member)`` (members update in lockstep)."""
    first = members[0]
    for k, member in enumerate(members):
        if member.params != first.params:
            raise ConfigurationError(
                f"{owner}: member {k}'s {type(member.params).__name__} differ from member 0's; stacked "
                f"seeds share their hyper-parameters."
            )
        if member.obs_normalization.normalizer is not None:
            raise ConfigurationError(
                f"{owner}: an obs_normalizer is not available for stacked seeds; drop it or run the "
                f"seeds separately."
            )
        if gradient_steps(member) != gradient_steps(first):
            raise ConfigurationError(
                f"{owner}: the members' gradient-step counts differ (member {k}: {gradient_steps(member)}, "
                f"member 0: {gradient_steps(first)}); stacked seeds update in lockstep."
            )


def stack_obs(observations: Sequence[ObsTensor]) -> ObsTensor:
    """The members' observations stacked along a new first (member) axis; Dict observations key by key."""
    first = observations[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(observations)  # type: ignore[arg-type]
    return {key: torch.stack([obs[key] for obs in observations]) for key in first}  # type: ignore[index]


def _copied(sample: ReplaySample) -> ReplaySample:
    def clone(obs: ObsTensor) -> ObsTensor:
        if isinstance(obs, torch.Tensor):
            return obs.clone()
        return {key: value.clone() for key, value in obs.items()}

    return ReplaySample(
        obs=clone(sample.obs),
        act=sample.act.clone(),
        returns=sample.returns.clone(),
        discounts=sample.discounts.clone(),
        obs_next=clone(sample.obs_next),
        weight=None if sample.weight is None else sample.weight.clone(),
        indices=sample.indices.copy() if isinstance(sample.indices, np.ndarray) else sample.indices.clone(),
    )


def _plain_numpy_buffer(buffer: AnyReplayBuffer) -> TypeGuard[BaseReplayBuffer]:
    """True for numpy buffers that sample as :class:`~tshtrain.data.BaseReplayBuffer` does (not the
    prioritized or HER buffers): :meth:`~tshtrain.data.BaseReplayBuffer.sample_torch` draws what
    ``sample`` would draw for them. Decided once per buffer class."""
    kind = type(buffer)
    plain = _PLAIN_BUFFER_TYPES.get(kind)
    if plain is None:
        plain = _PLAIN_BUFFER_TYPES[kind] = issubclass(kind, BaseReplayBuffer) and all(
            getattr(kind, name) is getattr(BaseReplayBuffer, name)
            for name in ("sample", "get", "sample_indices", "_draw_indices", "nstep_targets", "next_index")
        )
    return plain


_PLAIN_BUFFER_TYPES: dict[type, bool] = {}


def _sample_tensor_replay(
    buffer: TensorReplayBuffer,
    batch_size: int,
    *,
    gamma: float,
    n_step: int,
    device: torch.device,
    hooks: UpdateHooks,
) -> ReplaySample:
    processed = hooks.on_sampled_batch(buffer.sample(batch_size))
    if not isinstance(processed, TorchTransitionBatch):
        raise TypeError(
            "sample_replay: an on_sampled_batch callback turned the tensor batch of a TensorReplayBuffer "
            "into a numpy TransitionBatch; return a TorchTransitionBatch (or None) on the torch path."
        )
    batch = processed.to_torch(device)
    if n_step == 1:
        returns = batch.rew.to(torch.float32)
        discounts = (~batch.terminated).to(torch.float32) * float(np.float32(gamma))
        obs_next = batch.obs_next
    else:
        if processed.indices is None:
            raise TypeError("sample_replay: n_step > 1 needs the sampled batch's indices; keep them set.")
        targets = buffer.nstep_targets(processed.indices, n_step=n_step, gamma=gamma)
        returns, discounts = targets.returns.to(device), targets.discounts.to(device)
        obs_next = _obs_to(targets.obs_next, device)
    indices = processed.indices
    return ReplaySample(
        obs=batch.obs,
        act=batch.act,
        returns=returns,
        discounts=discounts,
        obs_next=obs_next,
        weight=batch.weight,
        indices=indices if indices is not None else torch.zeros(0, dtype=torch.int64, device=device),
    )


def _obs_to(obs: ObsTensor, device: torch.device) -> ObsTensor:
    if isinstance(obs, torch.Tensor):
        return obs.to(device)
    return {key: value.to(device) for key, value in obs.items()}


def host_scalars(
    algorithm: str, scalars: Mapping[str, torch.Tensor], *, losses: Collection[str]
) -> dict[str, float]:
    """The scalars of one update as floats, in one host transfer. Raises
    :class:`~tshtrain.errors.NonFiniteLossError` naming ``algorithm`` and the loss if one of
    ``losses`` (names in ``scalars``, e.g. ``"critic loss"``) is NaN or infinite."""
    values: list[float] = torch.stack([t.detach().float() for t in scalars.values()]).tolist()
    named = dict(zip(scalars, values, strict=True))
    for name in losses:
        if not math.isfinite(named[name]):
            check_finite_loss(algorithm, name, scalars[name])
    return named


class TDLoss(NamedTuple):
    """A critic regression: the loss to minimise and the TD errors of every critic."""

    loss: torch.Tensor
    """sum over critics of the (importance-weighted) mean squared TD error"""
    td_errors: torch.Tensor
    """Q_i(o, a) - y, shape (num_critics, N)"""


def td_loss(q_MN: torch.Tensor, target_N: torch.Tensor, weight_N: torch.Tensor | None) -> TDLoss:
    """Squared-error regression of each critic's ``q_MN`` towards ``target_N``, weighted by the
    importance weights of a prioritized buffer."""
    td_MN = q_MN - target_N
    sq_MN = td_MN.pow(2) if weight_N is None else td_MN.pow(2) * weight_N
    return TDLoss(loss=sq_MN.mean(dim=1).sum(), td_errors=td_MN)


def takes_priorities(buffer: AnyReplayBuffer) -> bool:
    """True if :func:`update_priorities` writes to ``buffer`` (a prioritized buffer): an update may
    skip computing TD errors that only serve as priorities otherwise."""
    return isinstance(buffer, BasePrioritizedBuffer)


def update_priorities(
    buffer: AnyReplayBuffer, indices: np.ndarray | torch.Tensor, td_MN: torch.Tensor
) -> None:
    """With a prioritized buffer, set the sampled transitions' priorities to their absolute TD errors
    (averaged over the critics); otherwise do nothing."""
    if isinstance(buffer, BasePrioritizedBuffer):  # takes_priorities, narrowed for mypy
        assert isinstance(indices, np.ndarray)  # sampled from that numpy buffer
        buffer.update_priorities(indices, td_MN.detach().abs().mean(dim=0).cpu().numpy())


@contextmanager
def frozen(params: Sequence[torch.nn.Parameter]) -> Iterator[None]:
    """Turn off ``requires_grad`` of ``params`` inside the block (e.g. the critics' weights while the
    actor's loss backpropagates through them: the input gradients are needed, the weight gradients
    are not computed)."""
    for param in params:
        param.requires_grad_(False)
    try:
        yield
    finally:
        for param in params:
            param.requires_grad_(True)
