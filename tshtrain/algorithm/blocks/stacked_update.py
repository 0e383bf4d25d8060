"""One update for K independent copies of an algorithm: their networks stacked along a member axis.

K runs of the same algorithm with different seeds (issue 35: "many seeds at the cost of a few") have
networks of one architecture. For the length of one update, :class:`StackedMembers` copies the K
members' parameters and buffers into tensors with a leading member axis (``torch.func``'s
``stack_module_state``), evaluates a loss written for one member on all K at once
(``torch.func.vmap`` over ``functional_call``: every layer one batched kernel instead of K small
ones), backpropagates the sum of the K losses (member k's parameters only receive member k's
gradient), clips each member's gradient norm on its own (:func:`clip_grad_norm_per_member_`, the
formula of ``torch.nn.utils.clip_grad_norm_`` per member) and takes one fused Adam step over the
stacked tensors with the members' own Adam moments (Adam is element-wise: this is each member's Adam,
the same arithmetic as on its own tensors). :meth:`StackedMembers.write_back` copies parameters,
buffers and Adam state back into the members, which stay ordinary algorithms (checkpoints, evaluation
and resumption per member are unchanged).

No number crosses members: each member's loss, gradient, norm and Adam step depend on its own data
and state only (a test changes one member's data and checks the others bit for bit). Against K
separate updates the results agree to float rounding: batched matrix products sum in another order.

Layer 2: torch, :mod:`tshtrain.algorithm.blocks.ensemble` and :mod:`tshtrain.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.optim.adam import adam as functional_adam

from tshtrain.algorithm.blocks.ensemble import (
    clip_grad_norm_per_member_,
    is_plain_ensemble,
    is_plain_mlp,
    stacked_ensemble_forward,
    stacked_mlp_forward,
)
from tshtrain.errors import ConfigurationError
from tshtrain.functional.targets import polyak_update

_ADAM_KEYS = ("betas", "eps", "weight_decay", "amsgrad", "maximize")
"""the Adam hyper-parameters every member must share (the learning rate may differ per update only
if every member has the same one: it is checked at each step)"""


class _Call(nn.Module):
    """Calls ``fn`` with the networks registered as submodules, so that ``functional_call`` swaps their
    parameters and buffers for one member's slice."""

    def __init__(self, nets: Mapping[str, nn.Module], fn: Callable[..., Any]):
        super().__init__()
        self.nets = nn.ModuleDict(dict(nets))
        self._fn = fn

    def forward(self, *args: Any) -> Any:
        return self._fn(*args)


class StackedForward(nn.Module):
    """A module whose forward is ``fn``: stands in for member 0's network while a loss written for one
    member runs on K members' stacked tensors (see :func:`substituted`)."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self._fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fn(x)


@contextmanager
def substituted(owner: Any, attribute: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """Within the block, ``owner.<attribute>`` (a network) is a :class:`StackedForward` of ``fn``; the
    network is put back after it."""
    network = getattr(owner, attribute)
    setattr(owner, attribute, StackedForward(fn))
    try:
        yield
    finally:
        setattr(owner, attribute, network)


class ParameterHolder(nn.Module):
    """A module holding one parameter (e.g. SAC's ``log_alpha``) under the name ``value``, so that it
    can be stacked with the networks: ``ParameterHolder(p).value is p``."""

    def __init__(self, value: nn.Parameter):
        super().__init__()
        self.value = value

    def forward(self) -> torch.Tensor:
        return self.value


def _signature(module: nn.Module) -> list[tuple[str, tuple[int, ...], torch.dtype, torch.device]]:
    tensors = [*module.named_parameters(), *module.named_buffers()]
    return [(name, tuple(t.shape), t.dtype, t.device) for name, t in tensors]


class StackedMembers:
    """The networks of K members stacked for one update (see the module docstring).

    Args:
        nets: per member, its networks by name (the same names, architectures, shapes, dtypes and
            devices for every member), e.g. ``{"policy": policy, "critic": critic}``.
        optimizers: per member, the ``torch.optim.Adam`` over exactly those networks' trainable
            parameters, or a sequence of Adams that share them out (e.g. SAC's actor, critic and
            temperature optimizers, in one order for every member; :meth:`step` takes the index of the
            one to step).
        owner: names the algorithm in errors.

    Raises:
        ConfigurationError: fewer than one member, networks that differ between members, an optimizer
            that is not Adam, holds other parameters, or whose hyper-parameters or step counts differ
            between members.
    """

    def __init__(
        self,
        nets: Sequence[Mapping[str, nn.Module]],
        optimizers: Sequence[torch.optim.Optimizer | Sequence[torch.optim.Optimizer]],
        *,
        owner: str,
    ):
        if not nets or len(nets) != len(optimizers):
            raise ConfigurationError(
                f"{owner}: a stacked update needs at least one member and one optimizer per member; got "
                f"{len(nets)} members and {len(optimizers)} optimizers."
            )
        self.owner = owner
        self.num_members = len(nets)
        self._members = [_Call(n, _unused) for n in nets]
        reference = _signature(self._members[0])
        for k, member in enumerate(self._members[1:], start=1):
            if _signature(member) != reference:
                raise ConfigurationError(
                    f"{owner}: member {k}'s networks differ from member 0's (parameter names, shapes, dtypes "
                    f"or devices); stacked members must share one architecture."
                )
        self._optimizers = [[o] if isinstance(o, torch.optim.Optimizer) else list(o) for o in optimizers]
        """per member: its optimizers, in one order for every member"""
        stacked_params, stacked_buffers = stack_module_state(self._members)
        self.params: dict[str, torch.Tensor] = stacked_params
        """name -> (K, ...) leaf tensors: the trainable parameters (requiring gradients) and the frozen
        ones (a target network's: no gradients, never stepped)"""
        self.buffers: dict[str, torch.Tensor] = stacked_buffers
        """name -> (K, ...) tensors"""
        self._member_params = [
            {n: p for n, p in m.named_parameters() if p.requires_grad} for m in self._members
        ]
        """per member: name -> its trainable parameters (frozen ones, e.g. a target network's, are
        stacked too but neither stepped nor given gradients)"""
        self._member_frozen = [
            {n: p for n, p in m.named_parameters() if not p.requires_grad} for m in self._members
        ]
        all_names = [n for n, _ in self._members[0].named_parameters(remove_duplicate=False)]
        all_names += [n for n, _ in self._members[0].named_buffers(remove_duplicate=False)]
        self._tied = len(all_names) != len(self.params) + len(self.buffers)
        """whether a tensor appears under two names (e.g. a trunk shared by actor and critic):
        ``functional_call`` must then tie them (slower per call)"""
        self._adam = self._stack_adam_state()
        self._member_tensors = [_tensor_ids(n) for n in nets]
        """per member: the identities of its networks' tensors, in the networks' order"""
        self._tensor_lists = [[*m.parameters(), *m.buffers()] for m in self._members]
        """per member: its tensors (what :meth:`_state_key` reads, without walking the modules)"""
        self._written: list[Any] | None = None
        """the members' state key (:meth:`_state_key`) right after the last :meth:`write_back`; None
        when the stacked tensors may differ from the members' (built, or changed since)"""

    # ------------------------------------------------------------------ Adam state
    def _stack_adam_state(self) -> dict[str, Any]:
        counts = {len(o) for o in self._optimizers}
        if len(counts) > 1:
            raise ConfigurationError(
                f"{self.owner}: the members have different numbers of optimizers ({sorted(counts)}); "
                f"stacked members share their optimizer layout."
            )
        self._owner_of: dict[str, int] = {}
        """trainable parameter name -> the index of the optimizer that steps it"""
        for k in range(self.num_members):
            stepped = self._optimizer_layout(k)
            if k == 0:
                self._owner_of = stepped
            elif stepped != self._owner_of:
                raise ConfigurationError(
                    f"{self.owner}: member {k}'s optimizers share out its parameters differently from "
                    f"member 0's; stacked members share their optimizer layout."
                )
        groups = [[o[i].param_groups[0] for o in self._optimizers] for i in range(len(self._optimizers[0]))]
        for i, member_groups in enumerate(groups):
            self._check_adam_settings(i, member_groups)
        exp_avg, exp_avg_sq, steps = {}, {}, {}
        for name in self._member_params[0]:
            stacked = self.params[name]
            states = [
                self._optimizers[k][self._owner_of[name]].state.get(self._member_params[k][name], {})
                for k in range(self.num_members)
            ]
            step_counts = {float(s["step"]) if s else 0.0 for s in states}
            if len(step_counts) > 1:  # a parameter that never had a gradient has no state, in every member
                raise ConfigurationError(
                    f"{self.owner}: the members' Adam step counts of {name} differ ({sorted(step_counts)}); "
                    f"stacked members update in lockstep."
                )
            if all(states):
                exp_avg[name] = torch.stack([s["exp_avg"] for s in states])
                exp_avg_sq[name] = torch.stack([s["exp_avg_sq"] for s in states])
            else:
                exp_avg[name] = torch.zeros_like(stacked, memory_format=torch.preserve_format)
                exp_avg_sq[name] = torch.zeros_like(stacked, memory_format=torch.preserve_format)
            steps[name] = step_counts.pop()
        device = next(iter(self.params.values())).device if self.params else torch.device("cpu")
        fused = all(p.device.type in ("cpu", "cuda") for p in self.params.values())
        return {
            "exp_avg": exp_avg,
            "exp_avg_sq": exp_avg_sq,
            "steps": {n: torch.tensor(c, dtype=torch.float32, device=device) for n, c in steps.items()},
            "groups": [member_groups[0] for member_groups in groups],
            "fused": fused,
        }

    # ------------------------------------------------------------------ reuse
    def _state_key(self) -> list[Any]:
        """What must not change for the stacked tensors to still equal the members': every member
        tensor's identity, storage, version counter (bumped by every in-place change) and gradient
        flag, the Adam state tensors likewise, and the optimizers' settings besides the learning rate
        (which every step reads afresh)."""
        key: list[Any] = []
        for k, tensors in enumerate(self._tensor_lists):
            for tensor in tensors:
                key.append((id(tensor), tensor.data_ptr(), tensor._version, tensor.requires_grad))
            for optimizer in self._optimizers[k]:
                group = optimizer.param_groups[0]
                key.append((id(optimizer), len(optimizer.state), *(repr(group[n]) for n in _ADAM_KEYS)))
                for state in optimizer.state.values():
                    for value in state.values():
                        if isinstance(value, torch.Tensor):
                            key.append((id(value), value.data_ptr(), value._version))
        return key

    def stands_for(
        self,
        nets: Sequence[Mapping[str, nn.Module]],
        optimizers: Sequence[torch.optim.Optimizer | Sequence[torch.optim.Optimizer]],
    ) -> bool:
        """Whether this stack can serve another update of these members without being built again:
        it was written back (:meth:`write_back`) and nothing changed since, the members' networks hold
        the same tensors under the same names and the optimizers are the same objects (see
        :class:`StackCache`)."""
        if self._written is None or len(nets) != self.num_members:
            return False
        for k, (member_nets, member_optimizers) in enumerate(zip(nets, optimizers, strict=True)):
            listed = (
                [member_optimizers]
                if isinstance(member_optimizers, torch.optim.Optimizer)
                else member_optimizers
            )
            if [id(o) for o in listed] != [id(o) for o in self._optimizers[k]]:
                return False
            if _tensor_ids(member_nets) != self._member_tensors[k]:
                return False
        return self._state_key() == self._written

    def _optimizer_layout(self, k: int) -> dict[str, int]:
        """Member ``k``'s trainable parameter names -> the index of its optimizer that steps each
        (checked: Adam with one group, nothing outside the networks, every trainable parameter held)."""
        trainable = {id(p): n for n, p in self._member_params[k].items()}
        frozen = {id(p) for p in self._member_frozen[k].values()}
        stepped: dict[str, int] = {}
        for i, optimizer in enumerate(self._optimizers[k]):
            if not isinstance(optimizer, torch.optim.Adam) or len(optimizer.param_groups) != 1:
                raise ConfigurationError(
                    f"{self.owner}: member {k}'s optimizer {i} is {type(optimizer).__name__} with "
                    f"{len(optimizer.param_groups)} parameter group(s); a stacked update takes Adam with "
                    f"one group."
                )
            for p in optimizer.param_groups[0]["params"]:
                if id(p) in trainable:
                    name = trainable[id(p)]
                    if name in stepped:
                        raise ConfigurationError(
                            f"{self.owner}: member {k}'s parameter {name} is held by its optimizers "
                            f"{stepped[name]} and {i}; a stacked update steps each parameter once."
                        )
                    stepped[name] = i
                elif id(p) not in frozen:
                    raise ConfigurationError(
                        f"{self.owner}: member {k}'s optimizer {i} holds a parameter outside its stacked "
                        f"networks; a stacked update steps exactly the stacked networks."
                    )
        if len(stepped) != len(trainable):
            raise ConfigurationError(
                f"{self.owner}: member {k}'s optimizers do not hold every trainable parameter of its "
                f"networks; a stacked update steps exactly the stacked networks."
            )
        return stepped

    def _check_adam_settings(self, i: int, member_groups: Sequence[dict[str, Any]]) -> None:
        """The members' optimizer ``i`` share their settings, and they are plain Adam's."""
        for key in _ADAM_KEYS:
            values = {repr(g[key]) for g in member_groups}
            if len(values) > 1:
                raise ConfigurationError(
                    f"{self.owner}: the members' Adam {key} differ ({sorted(values)}); stacked members "
                    f"share their optimizer settings."
                )
        first = member_groups[0]
        if first["amsgrad"] or first["maximize"] or first["weight_decay"]:
            raise ConfigurationError(
                f"{self.owner}: a stacked update runs plain Adam; the members' Adam {i} has amsgrad="
                f"{first['amsgrad']}, maximize={first['maximize']}, weight_decay="
                f"{first['weight_decay']} (allowed: False, False, 0)."
            )

    # ------------------------------------------------------------------ computing
    def vmap(self, fn: Callable[..., Any], *args: Any, in_dims: Sequence[int | None] | None = None) -> Any:
        """``fn(*args)`` evaluated for every member at once: ``fn`` is written for one member and uses
        member 0's networks (as passed to the constructor); each member's call sees its own
        parameters and buffers and its slice of the ``args`` whose ``in_dims`` is 0 (default: all).
        Outputs gain the member axis first."""
        base = _Call(dict(self._members[0].nets.items()), fn)
        dims = tuple(in_dims) if in_dims is not None else (0,) * len(args)
        tied = self._tied

        def one(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], *member_args: Any) -> Any:
            return functional_call(base, (params, buffers), member_args, tie_weights=tied, strict=True)

        return vmap(one, in_dims=(0, 0, *dims))(self.params, self.buffers, *args)

    def stacked_mlp(self, name: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The net ``name`` (a dotted path below the nets, e.g. ``"policy.actor"``) of every member as one
        function of (K, N, in) -> (K, N, out) on the stacked tensors (one ``baddbmm`` per layer:
        :func:`stacked_mlp_forward`, no ``vmap``), or None when the net is not a plain MLP
        (:func:`is_plain_mlp`); gradients reach the stacked parameters."""
        net = self._members[0].nets.get_submodule(name)
        if not isinstance(net, nn.Sequential) or not is_plain_mlp(net):
            return None
        prefix, tensors = f"nets.{name}.", self.params
        needed = [
            f"{prefix}{i}.{w}"
            for i, m in enumerate(net)
            if isinstance(m, nn.Linear)
            for w in ("weight", "bias")
        ]
        if not all(key in tensors for key in needed):  # a tensor shared under another name
            return None

        def forward(x_KNI: torch.Tensor) -> torch.Tensor:
            return stacked_mlp_forward(net, tensors, prefix, x_KNI)

        return forward

    def stacked_ensemble(self, name: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The ensemble network at ``name`` (a dotted path below the nets, e.g. ``"critic.net"``, built
        by :func:`~tshtrain.algorithm.blocks.ensemble.ensemble_mlp`) of every member as one function of
        (K, C, N, in) -> (K, C, N, out) on the stacked tensors: the K members' C-member ensembles as one
        ensemble of K * C (:func:`stacked_ensemble_forward`, no ``vmap``), or None when the network is
        not such an ensemble (:func:`is_plain_ensemble`)."""
        net = self._members[0].nets.get_submodule(name)
        if not isinstance(net, nn.Sequential) or not is_plain_ensemble(net):
            return None
        prefix, tensors = f"nets.{name}.", self.params
        needed = [f"{prefix}{i}.{w}" for i, m in enumerate(net) if m._parameters for w in ("weight", "bias")]
        if not all(key in tensors for key in needed):  # a tensor shared under another name
            return None

        def forward(x_KCNI: torch.Tensor) -> torch.Tensor:
            return stacked_ensemble_forward(net, tensors, prefix, x_KCNI)

        return forward

    def step(self, loss_K: torch.Tensor, max_grad_norm: float | None, optimizer: int = 0) -> torch.Tensor:
        """Differentiate ``loss_K.sum()`` (one loss per member) with respect to the parameters of the
        members' optimizer number ``optimizer`` (the others get no gradient, as if frozen), clip each
        member's gradient norm to ``max_grad_norm`` (None: no clipping) and take one Adam step of that
        optimizer; returns the (K,) gradient norms before clipping."""
        self._written = None
        names = [n for n, i in self._owner_of.items() if i == optimizer]
        params = [self.params[n] for n in names]
        for p in params:
            p.grad = None
        # backward (not autograd.grad): gradients stored as AccumulateGrad stores them, in tensors of
        # their own that the in-place clipping below may scale
        loss_K.sum().backward(inputs=params)  # type: ignore[no-untyped-call]
        clip = float("inf") if max_grad_norm is None else max_grad_norm
        norms_K = clip_grad_norm_per_member_(params, clip, self.num_members)
        self._adam_step(names, optimizer)
        for p in params:
            p.grad = None
        return norms_K

    def _adam_step(self, names: Sequence[str], optimizer: int) -> None:
        adam = self._adam
        lrs = {float(o[optimizer].param_groups[0]["lr"]) for o in self._optimizers}
        if len(lrs) > 1:
            raise ConfigurationError(
                f"{self.owner}: the members' learning rates differ ({sorted(lrs)}); a stacked Adam step "
                f"takes one learning rate."
            )
        group = adam["groups"][optimizer]
        names = [n for n in names if self.params[n].grad is not None]
        if not names:
            return
        with torch.no_grad():
            functional_adam(  # the functional Adam of torch.optim.Adam, with the members' moments
                [self.params[n] for n in names],
                [self.params[n].grad for n in names],  # type: ignore[misc]
                [adam["exp_avg"][n] for n in names],
                [adam["exp_avg_sq"][n] for n in names],
                [],
                [adam["steps"][n] for n in names],
                fused=adam["fused"],
                amsgrad=False,
                beta1=group["betas"][0],
                beta2=group["betas"][1],
                lr=lrs.pop(),
                weight_decay=0.0,
                eps=group["eps"],
                maximize=False,
            )

    @contextmanager
    def frozen(self, name: str) -> Iterator[None]:
        """A block in which the stacked trainable parameters of the net ``name`` need no gradient (as a
        member's own update freezes its critic while the actor's loss goes through it): backward then
        computes no weight gradients for them."""
        prefix = f"nets.{name}."
        params = [p for n, p in self.params.items() if n.startswith(prefix) and p.requires_grad]
        for p in params:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in params:
                p.requires_grad_(True)

    def copy_stacked(self, source: str, target: str) -> None:
        """Copy every member's tensors under the net named ``source`` into those under ``target``
        (the same architecture), e.g. a hard target-network update of all members at once."""
        self.polyak(source, target, 1.0)

    def polyak(self, source: str, target: str, tau: float) -> None:
        """Every member's Polyak update of the net ``target`` towards the net ``source`` by ``tau``,
        as :class:`~tshtrain.algorithm.blocks.polyak.TargetNetwork.update` makes it (parameters by
        ``tau``, buffers copied): ``target <- lerp(target, source, tau)`` element by element, so each
        member's result is bit for bit its own update's."""
        self._written = None
        prefix = f"nets.{target}."
        with torch.no_grad():
            for store, rate in ((self.params, tau), (self.buffers, 1.0)):
                names = [name for name in store if name.startswith(prefix)]
                if names:
                    polyak_update(
                        [store[n] for n in names],
                        [store[f"nets.{source}." + n.removeprefix(prefix)] for n in names],
                        rate,
                    )

    def write_back(self) -> None:
        """Copy the stacked parameters, buffers and Adam state back into the members (the members'
        tensors keep their identity: views of them stay valid)."""
        adam = self._adam
        with torch.no_grad():
            for k, member in enumerate(self._members):
                for name, p in self._member_params[k].items():
                    p.copy_(self.params[name][k])
                    if adam["steps"][name].item() > 0:  # trainable parameters only
                        state = self._optimizers[k][self._owner_of[name]].state[p]
                        if state:
                            state["exp_avg"].copy_(adam["exp_avg"][name][k])
                            state["exp_avg_sq"].copy_(adam["exp_avg_sq"][name][k])
                            state["step"].copy_(adam["steps"][name])
                        else:  # the member's first step: Adam's lazily made state
                            state["step"] = adam["steps"][name].clone()
                            state["exp_avg"] = adam["exp_avg"][name][k].clone()
                            state["exp_avg_sq"] = adam["exp_avg_sq"][name][k].clone()
                for name, p in self._member_frozen[k].items():
                    p.copy_(self.params[name][k])
                for name, b in member.named_buffers():
                    b.copy_(self.buffers[name][k])
        self._written = self._state_key()


class StackCache:
    """The stack of a caller that updates the same members call after call (a seed batch whose SAC or
    DQN seeds take a few gradient steps per training step, stacked multi-agent learners): each call
    reuses the last call's :class:`StackedMembers` while it still stands for the members
    (:meth:`StackedMembers.stands_for`: written back, and no member tensor, Adam state or optimizer
    setting changed since, e.g. by a checkpoint loaded in between), instead of stacking the networks
    and Adam state again. The stacked tensors equal the members' bit for bit then, so a call gives the
    same numbers either way."""

    def __init__(self) -> None:
        self._stack: StackedMembers | None = None
        self.num_builds = 0
        """stacks built so far (calls that could not reuse the last one)"""

    def stack(
        self,
        nets: Sequence[Mapping[str, nn.Module]],
        optimizers: Sequence[torch.optim.Optimizer | Sequence[torch.optim.Optimizer]],
        *,
        owner: str,
    ) -> StackedMembers:
        """The members' stack: the last one if it still stands for them, else a new one."""
        stack = self._stack
        if stack is None or not stack.stands_for(nets, optimizers):
            self._stack = None  # a failing build leaves nothing stale behind
            stack = StackedMembers(nets, optimizers, owner=owner)
            self._stack = stack
            self.num_builds += 1
        return stack


def _tensor_ids(nets: Mapping[str, nn.Module]) -> list[tuple[str, int]]:
    """The networks' tensors by name and identity, in order."""
    return [
        (f"{key}.{name}", id(tensor))
        for key, module in nets.items()
        for name, tensor in (*module.named_parameters(), *module.named_buffers())
    ]


def _unused(*args: Any) -> Any:
    raise AssertionError("StackedMembers: member modules are containers; call vmap(fn, ...)")
