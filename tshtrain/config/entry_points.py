"""Which code an experiment file may make tshtrain import: an allow-list.

An experiment file (or a run's ``config.yaml``) names env wrappers (``env.wrappers[].name``) and may
name an env id of the form ``"module:EnvId-v0"``, which Gymnasium imports. A file from a stranger
must not run code on ``train`` or ``eval``, so a module named by a file is imported only when it is
allowed: Gymnasium's wrappers (``gymnasium.wrappers``) and tshtrain's own env helpers (``tshtrain.env``)
always, and the modules the user names themselves: ``--allow-module MODULE`` on the command line or
``allowed_modules=[...]`` in Python (a module allows its submodules too). Plain registered env ids
(``"CartPole-v1"``) are not imports: the packages installed in the environment registered them.
"""

from __future__ import annotations

from collections.abc import Collection

from tshtrain.errors import ExperimentError, short_repr

BUILTIN_MODULES: tuple[str, ...] = ("gymnasium.wrappers", "tshtrain.env")
"""modules any experiment file may name"""


def is_allowed(module: str, allowed_modules: Collection[str]) -> bool:
    """True if ``module`` is, or is inside, a built-in or user-allowed module."""
    return any(module == m or module.startswith(m + ".") for m in (*BUILTIN_MODULES, *allowed_modules))


def require_allowed(module: str, *, where: str, name: str, allowed_modules: Collection[str]) -> None:
    """Raise ExperimentError unless ``module`` (named by ``name`` at ``where``) may be imported."""
    if is_allowed(module, allowed_modules):
        return
    raise ExperimentError(
        f"{where}: {short_repr(name)} would import the module {short_repr(module)}, and an experiment file "
        f"may import only {', '.join(BUILTIN_MODULES)} and the modules you allow. If you trust this file, "
        f"allow it with `--allow-module {module}` (tshtrain train / eval) or "
        f"allowed_modules=[{module!r}] in Python."
    )


def wrapper_module(name: str) -> tuple[str, str]:
    """``("package.module", "Wrapper")`` of a wrapper path ``package.module.Wrapper`` or
    ``package.module:Wrapper``."""
    module, sep, attr = name.partition(":")
    if not sep:
        module, _, attr = name.rpartition(".")
    return module, attr


def env_id_module(env_id: str) -> str | None:
    """The module an env id ``"module:EnvId-v0"`` makes Gymnasium import (None for a plain id)."""
    module, sep, _ = env_id.partition(":")
    return module if sep else None
