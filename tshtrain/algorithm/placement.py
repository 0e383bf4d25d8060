"""Moving an algorithm's state to a device: what :meth:`tshtrain.algorithm.Algorithm.to` does.

The state is found by walking the algorithm's attributes: its components (modules, optimizers, target
networks, schedulers), and, transitively, the ``nn.Module`` objects and tshtrain objects (blocks such as
``ActorCritic``, ``TargetNetwork``, ``EntropyTemperature``) held as attributes. On the way:

* every ``nn.Module`` is moved with ``module.to(device)`` (parameters stay the same objects, so the
  optimizers keep working; buffers such as normaliser statistics move with them);
* a bare ``nn.Parameter`` attribute (e.g. ``log_alpha``) is moved in place through ``.data``;
* a plain tensor attribute (e.g. a cached loss) is replaced by its copy on the device;
* the state tensors of every optimizer follow their parameter (Adam's ``exp_avg``, ``exp_avg_sq``;
  ``step`` only where torch keeps it on the parameter's device: fused or capturable optimizers);
  a fused Adam on a device without the fused kernel falls back to torch's default implementation;
* every ``torch.Generator`` attribute is replaced by :func:`tshtrain.devices.move_generator` of it (one
  new generator per old one, so generators shared by several owners stay shared).

Lists and dicts are not searched (they hold references to parameters that the modules move). Nothing
changes for what is already on the device, so a CPU run that calls ``to("cpu")`` stays bit-exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

import torch
from torch import nn

from tshtrain.devices import move_generator


def _walked(value: object) -> bool:
    """Whether the walk descends into ``value``: modules and instances of tshtrain classes."""
    if isinstance(value, nn.Module):
        return True
    module = getattr(type(value), "__module__", "")
    return module.startswith("tshtrain.") and hasattr(value, "__dict__") and not isinstance(value, type)


def owned_attributes(roots: Iterable[object]) -> Iterator[tuple[object, str, object]]:
    """``(owner, name, value)`` for every instance attribute of ``roots`` and of the modules and tshtrain
    objects reachable from them through attributes (and submodules), each owner visited once."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or not hasattr(obj, "__dict__"):
            continue
        seen.add(id(obj))
        for name, value in list(vars(obj).items()):
            yield obj, name, value
            if _walked(value):
                stack.append(value)
        if isinstance(obj, nn.Module):
            stack.extend(obj.children())


def _module_on(module: nn.Module, device: torch.device) -> bool:
    return all(t.device == device for t in chain(module.parameters(), module.buffers()))


def _move_module(module: nn.Module, device: torch.device) -> None:
    if _module_on(module, device):
        return
    params = list(module.parameters())
    module.to(device)
    if any(a is not b for a, b in zip(params, module.parameters(), strict=True)):
        raise RuntimeError(  # torch replaces parameters only across incompatible tensor types (e.g. meta)
            f"moving {type(module).__name__} to {device} replaced its parameters; optimizers would "
            f"lose them. Move the algorithm to cpu, cuda or mps."
        )


def _move_parameter(param: nn.Parameter, device: torch.device) -> None:
    if param.device == device:
        return
    param.data = param.data.to(device)
    if param.grad is not None:
        param.grad = param.grad.to(device)


def move_optimizer_state(optimizer: torch.optim.Optimizer, fused_ok: bool) -> None:
    """Move each state tensor of ``optimizer`` to its parameter's device (``step`` too when the group
    is fused or capturable, as torch's ``load_state_dict`` does); with ``fused_ok=False`` turn the
    fused implementation off."""
    for group in optimizer.param_groups:
        if group.get("fused") and not fused_ok:
            group["fused"] = None
        on_device_step = bool(group.get("fused") or group.get("capturable"))
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            for key, value in state.items():
                if not isinstance(value, torch.Tensor) or value.device == param.device:
                    continue
                if key == "step" and not on_device_step:
                    continue  # torch keeps a non-fused step counter on the CPU
                state[key] = value.to(param.device)


def move_to_device(roots: Iterable[object], device: torch.device, *, fused_ok: bool) -> None:
    """Move everything ``roots`` own to ``device`` (see the module docstring); ``fused_ok``: the
    device has a fused Adam kernel."""
    roots = list(roots)
    found = list(owned_attributes(roots))
    optimizers = {
        id(o): o for o in chain(roots, (v for _, _, v in found)) if isinstance(o, torch.optim.Optimizer)
    }
    for module in chain(roots, (value for _, _, value in found)):
        if isinstance(module, nn.Module):
            _move_module(module, device)
    generators: dict[int, torch.Generator] = {}
    for owner, name, value in found:
        if isinstance(value, nn.Parameter):
            _move_parameter(value, device)
        elif isinstance(value, torch.Tensor) and value.device != device:
            setattr(owner, name, value.to(device))
        elif isinstance(value, torch.Generator):
            if id(value) not in generators:
                generators[id(value)] = move_generator(value, device)
            if generators[id(value)] is not value:
                setattr(owner, name, generators[id(value)])
    for optimizer in optimizers.values():
        for group in optimizer.param_groups:
            for param in group["params"]:
                _move_parameter(param, device)
        move_optimizer_state(optimizer, fused_ok)


def owned_devices(roots: Iterable[object]) -> Iterator[tuple[str, torch.device]]:
    """``(description, device)`` of every tensor and generator :func:`move_to_device` would move, and of
    the parameters and buffers of the modules among them (for checks and tests)."""
    for owner, name, value in owned_attributes(roots):
        label = f"{type(owner).__name__}.{name}"
        if isinstance(value, torch.Tensor | torch.Generator):
            yield label, value.device
        if isinstance(value, nn.Module):
            for key, tensor in chain(value.named_parameters(), value.named_buffers()):
                yield f"{label}.{key}", tensor.device
