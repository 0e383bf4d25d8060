"""A saved algorithm state checked against the live algorithm before anything is applied.

:func:`check_algorithm_state` compares the state read from a checkpoint with the live algorithm's
``state_dict()``: tensors must have the same shapes (networks built as in the run that saved), and every
optimizer's ``param_groups`` must hold hyperparameters of the kind the live optimizer has (a finite number
where it has a number, ``True``/``False`` where it has a flag, ...), no key it does not have, and no
missing number. A NaN or string learning rate would otherwise load, and fail (or train on garbage) later.
Each problem is one ``ValueError`` naming the key (``algorithm.optim.param_groups[0].lr``), the value
and what is allowed. Nothing is changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from tshtrain.errors import short_repr

_MAX_TEXT = 200
"""the longest string hyperparameter accepted (e.g. LBFGS's ``line_search_fn``)"""


def check_algorithm_state(current: Mapping[str, Any], saved: Any, where: str = "algorithm") -> None:
    """Raise ``ValueError`` where ``saved`` does not fit ``current`` (see the module docstring)."""
    _check(current, saved, where)


def _check(current: Any, saved: Any, where: str) -> None:
    """Keys present on one side only are left to the components' own ``load_state_dict`` (optimizer
    state appears with the first step), whose failure is rolled back."""
    if isinstance(current, torch.Tensor):
        if not isinstance(saved, torch.Tensor) or saved.shape != current.shape:
            shape = tuple(saved.shape) if isinstance(saved, torch.Tensor) else type(saved).__name__
            raise ValueError(f"{where} is {shape} in the checkpoint, {tuple(current.shape)} here")
    elif isinstance(current, Mapping):
        if not isinstance(saved, Mapping):
            raise ValueError(f"{where} is a {type(saved).__name__} in the checkpoint, a mapping here")
        if _is_optimizer_state(current):
            _check_param_groups(current["param_groups"], saved.get("param_groups"), f"{where}.param_groups")
        for key, value in current.items():
            if key in saved:
                _check(value, saved[key], f"{where}.{key}")
    elif isinstance(current, list | tuple) and isinstance(saved, list | tuple):
        if len(current) != len(saved):
            raise ValueError(f"{where} has {len(saved)} entries in the checkpoint, {len(current)} here")
        for i, (value, other) in enumerate(zip(current, saved, strict=True)):
            _check(value, other, f"{where}.{i}")


def _is_optimizer_state(state: Mapping[str, Any]) -> bool:
    groups = state.get("param_groups")
    return "state" in state and isinstance(groups, list) and all(isinstance(g, Mapping) for g in groups)


def _check_param_groups(current: list[Mapping[str, Any]], saved: Any, where: str) -> None:
    if not isinstance(saved, list | tuple) or len(saved) != len(current):
        raise ValueError(
            f"{where} is {short_repr(saved)} in the checkpoint; this optimizer has {len(current)} "
            f"parameter groups"
        )
    for i, (group, other) in enumerate(zip(current, saved, strict=True)):
        here = f"{where}[{i}]"
        if not isinstance(other, Mapping):
            raise ValueError(f"{here} is {short_repr(other)}; allowed: a mapping of hyperparameters")
        for key, value in other.items():
            if key not in group:
                name = key if isinstance(key, str) else short_repr(key)
                raise ValueError(
                    f"{here}.{name} is not a hyperparameter of this optimizer (it has "
                    f"{', '.join(sorted(map(str, group)))})"
                )
            _check_hyperparameter(group[key], value, f"{here}.{key}")
        for key, value in group.items():  # a flag torch's __setstate__ defaults; a number it does not
            if key not in other and _is_number(value):
                raise ValueError(f"{here} has no {key!r}; this optimizer needs a finite number there")


def _check_hyperparameter(current: Any, saved: Any, where: str) -> None:
    """``saved`` must be of the kind of ``current`` (the live optimizer's value)."""
    allowed = ""
    if where.endswith(".params"):
        ok = isinstance(saved, list | tuple) and all(_is_int(v) for v in saved)
        allowed = "a list of parameter indices"
    elif isinstance(current, bool):
        ok, allowed = isinstance(saved, bool), "True or False"
    elif _is_number(current):
        ok, allowed = _is_finite(saved), "a finite number (int or float)"
    elif current is None:
        ok, allowed = saved is None or isinstance(saved, bool), "None, True or False"
    elif isinstance(current, str):
        ok, allowed = (
            isinstance(saved, str) and len(saved) <= _MAX_TEXT,
            f"a string of at most {_MAX_TEXT} chars",
        )
    elif isinstance(current, list | tuple) and all(_is_number(v) for v in current):
        ok = isinstance(saved, list | tuple) and len(saved) == len(current) and all(map(_is_finite, saved))
        allowed = f"{len(current)} finite numbers"
    elif isinstance(current, torch.Tensor):
        ok = isinstance(saved, torch.Tensor) and saved.shape == current.shape and bool(saved.isfinite().all())
        allowed = f"a finite tensor of shape {tuple(current.shape)}"
    else:
        ok = True  # a kind this check does not know: left to the optimizer's load_state_dict (rolled back)
    if not ok:
        shown = (
            short_repr(saved)
            if not isinstance(saved, torch.Tensor)
            else f"a tensor of shape {tuple(saved.shape)}"
        )
        raise ValueError(f"{where} is {shown}; allowed: {allowed}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) < 2**63  # a larger int does not convert to a float
    return isinstance(value, float) and math.isfinite(value)
