"""Several collectors stepped in lockstep, their policies' networks evaluated in one stacked pass.

K seeds of one experiment (:class:`tshtrain.seeds.SeedBatch`) each collect with their own collector,
envs, buffer, policy and generators. Their collection loops (:data:`~tshtrain.data.collector.ActingLoop`)
pause just before each vector step's actions; :func:`run_lockstep` runs the K loops one vector step at
a time, and before each round evaluates the members' acting networks on their current observations at
once: the K networks' weights stacked along a member axis, each layer one ``baddbmm``
(:func:`~tshtrain.algorithm.blocks.ensemble.stacked_mlp_forward`, the arithmetic of the stacked
updates). Member k's network then hands member k's slice of that output to its own policy for the
one call the step makes, and everything else of the step is member k's own code on member k's state:
the sampling from its policy's generator, the exploration noise from its collector's generator, its
env step, its buffer writes and counters. Nothing crosses members, and a member's loop takes exactly
the steps its own ``collect`` would; the actions agree with its own run's to float rounding of the
network's output (a stacked matrix product sums in another order).

What is stacked: :class:`~tshtrain.algorithm.CategoricalPolicy` (``actor``) and
:class:`~tshtrain.algorithm.QValuePolicy` (``q_net``) whose network is a plain MLP
(:func:`~tshtrain.algorithm.blocks.ensemble.is_plain_mlp`), acting on float32 array observations.
Other members still step in lockstep, each evaluating its own network. A member whose weights change
during the collection (a callback loading a checkpoint between two vector steps) is re-stacked first.

Layer 3: torch, :mod:`tshtrain.data.collector`, the policies and the stacked layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, final

import numpy as np
import torch
from torch import nn

from tshtrain.algorithm.blocks.ensemble import is_plain_mlp, stacked_mlp_forward
from tshtrain.algorithm.blocks.policies import CategoricalPolicy, QValuePolicy
from tshtrain.data.collector import ActingLoop, Collector
from tshtrain.data.collector_base import CollectedEpisodes


def acting_network(policy: object) -> nn.Sequential | None:
    """The network whose output a policy's actions are drawn from, if :func:`run_lockstep` can stack
    it: a :class:`CategoricalPolicy`'s ``actor`` or a :class:`QValuePolicy`'s ``q_net`` that is a
    plain MLP (exact types: a subclass may act otherwise). None otherwise."""
    if type(policy) is CategoricalPolicy:
        net = policy.actor
    elif type(policy) is QValuePolicy:
        net = policy.q_net
    else:
        return None
    return net if isinstance(net, nn.Sequential) and is_plain_mlp(net) else None


@dataclass(eq=False)
class LockstepJob:
    """One collector's collection loop, run by :func:`run_lockstep`."""

    collector: Collector
    loop: ActingLoop
    random: bool
    """the loop takes random actions (no network is evaluated for it)"""
    result: CollectedEpisodes | Exception | None = None
    """what the loop returned, or the error it raised (set by :func:`run_lockstep`)"""
    _lent: _LentOutput | None = field(default=None, repr=False)


@final
class _LentOutput:
    """Member k's slice of the stacked output, handed to member k's network for one call: installed as
    the network's instance ``forward`` for the length of one vector step. A call whose input does not
    match (or a second call) runs the network itself."""

    def __init__(self, network: nn.Module):
        self.network = network
        self.output: torch.Tensor | None = None
        self._own_forward = type(network).forward.__get__(network)

    def __call__(self, x: Any) -> Any:
        out = self.output
        if out is not None and isinstance(x, torch.Tensor) and x.shape[:-1] == out.shape[:-1]:
            self.output = None
            return out
        return self._own_forward(x)

    def lend(self, output: torch.Tensor) -> None:
        self.output = output
        self.network.__dict__["forward"] = self

    def take_back(self) -> None:
        self.output = None
        self.network.__dict__.pop("forward", None)


@final
class _StackedGroup:
    """Jobs whose acting networks share one architecture, device and observation shape, with the
    running members' weights stacked (stacked again when a member finishes or its weights change)."""

    def __init__(self, jobs: list[LockstepJob], nets: list[nn.Sequential]):
        self.jobs, self.nets = jobs, nets
        self._params = [
            [p for layer in net if isinstance(layer, nn.Linear) for p in (layer.weight, layer.bias)]
            for net in nets
        ]
        self._key: tuple[tuple[int, ...], list[list[int]]] | None = None
        self._tensors: dict[str, torch.Tensor] = {}
        self.device = next(nets[0].parameters()).device

    def _stacked(self, running: tuple[int, ...]) -> dict[str, torch.Tensor]:
        key = (running, [[p._version for p in self._params[k]] for k in running])
        if key != self._key:
            nets = [self.nets[k] for k in running]
            with torch.no_grad():
                self._tensors = {
                    f"{i}.{name}": torch.stack([getattr(net[i], name).detach() for net in nets])
                    for i, layer in enumerate(nets[0])
                    if isinstance(layer, nn.Linear)
                    for name in ("weight", "bias")
                }
            self._key = key
        return self._tensors

    def lend_outputs(self, live: set[LockstepJob]) -> None:
        """Evaluate the running members' networks on their current observations in one pass and lend
        each member its slice (see :class:`_LentOutput`)."""
        running = tuple(k for k, job in enumerate(self.jobs) if job in live)
        if not running:
            return
        tensors = self._stacked(running)
        arrays: list[np.ndarray] = []
        for k in running:
            obs_k = self.jobs[k].collector.obs
            assert isinstance(obs_k, np.ndarray)  # checked when grouped; a collector keeps its obs type
            arrays.append(obs_k)
        obs = np.stack(arrays)
        with torch.inference_mode():
            out = stacked_mlp_forward(self.nets[0], tensors, "", torch.from_numpy(obs).to(self.device))
        for i, k in enumerate(running):
            lent = self.jobs[k]._lent
            assert lent is not None
            lent.lend(out[i])


def _groups(jobs: Sequence[LockstepJob]) -> list[_StackedGroup]:
    """The jobs that can be stacked, grouped by architecture, device and observation shape (groups of
    one are left to evaluate their own network)."""
    by_key: dict[tuple[Any, ...], tuple[list[LockstepJob], list[nn.Sequential]]] = {}
    for job in jobs:
        obs = job.collector.obs
        net = acting_network(job.collector.policy)
        if job.random or net is None or not isinstance(obs, np.ndarray) or obs.dtype != np.float32:
            continue
        shapes = tuple((type(m), tuple(p.shape for p in m.parameters()), m.extra_repr()) for m in net)
        device = next(net.parameters()).device
        dtypes = {p.dtype for p in net.parameters()}
        key = (type(job.collector.policy), shapes, str(device), tuple(sorted(map(str, dtypes))), obs.shape)
        found = by_key.setdefault(key, ([], []))
        found[0].append(job)
        found[1].append(net)
    groups = []
    for members, nets in by_key.values():
        if len(members) > 1:
            for job, net in zip(members, nets, strict=True):
                job._lent = _LentOutput(net)
            groups.append(_StackedGroup(members, nets))
    return groups


def _advance(job: LockstepJob) -> bool:
    """One vector step of ``job``'s loop (up to its next pause); False once the loop has ended (its
    result or error is in ``job.result``)."""
    try:
        next(job.loop)
    except StopIteration as stop:
        job.result = stop.value
        return False
    except Exception as error:  # the member's own error: handed to its run (the others go on)
        job.result = error
        return False
    return True


def run_lockstep(jobs: Sequence[LockstepJob]) -> None:
    """Run every job's loop to its end, one vector step of each in turn, evaluating the stackable
    members' networks in one pass per round (see the module docstring). Each job's ``result`` is its
    loop's return value or the ``Exception`` it raised; anything else (``KeyboardInterrupt``) closes the
    loops still running and propagates."""
    live = {job for job in jobs if _advance(job)}
    order = [job for job in jobs if job in live]
    groups = _groups(order)
    try:
        while live:
            for group in groups:
                group.lend_outputs(live)
            for job in order:
                if job not in live:
                    continue
                try:
                    running = _advance(job)
                finally:
                    if job._lent is not None:
                        job._lent.take_back()
                if not running:
                    live.discard(job)
    finally:  # a stacked pass that failed may have lent outputs to other groups' networks already
        for job in order:
            if job._lent is not None:
                job._lent.take_back()
            if job in live:
                job.loop.close()
