"""The hook registry: registration (typed per stage, checked at run time), calling, hook state.

A :class:`HookRegistry` added to a trainer (``trainer.add_callback(hooks)``) runs TorchRL-style hooks at
their stages; :meth:`HookRegistry.register` adds one taking a :class:`HookContext`, and
:meth:`HookRegistry.register_op` / :meth:`HookRegistry.register_module` take TorchRL's hooks as they are
written (``hook.register(hooks, name)`` works on a registry as on TorchRL's trainer). Mistakes are
reported when a hook is registered, never in the middle of a run: an unknown stage, a name already used
at that stage, a hook that cannot be called with one argument, or one whose annotations say it expects
another stage's payload (mypy catches the same through the per-stage overloads).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, TypeVar, overload

import torch
from typing_extensions import override

from tshtrain.adapters.torchrl_stages import (
    IN_UPDATE_STAGES,
    LOG_STAGES,
    STAGE_ALIASES,
    TRANSFORM_STAGES,
    BatchProcessHook,
    HookContext,
    HookScalars,
    HookStage,
    OptimizerStageHook,
    PostLossHook,
    PostOptimHook,
    PostOptimLogHook,
    PostStepsLogHook,
    PostTestHook,
    PostUpdateHook,
    PreStepsLogHook,
    PreTestHook,
    PreUpdateHook,
    ProcessOptimBatchHook,
    SetupHook,
    ShutdownHook,
    StopTraining,
    stage_payload_types,
)
from tshtrain.algorithm.base import TrainingStats
from tshtrain.data.batch import AnyTransitionBatch, numpy_batch
from tshtrain.errors import ConfigurationError
from tshtrain.logger.records import merge_scalar
from tshtrain.trainer.callbacks import (
    Adapter,
    CollectedBatch,
    OptimizerStep,
    RunContext,
    SetupInfo,
    StepSummary,
    TestResult,
)
from tshtrain.trainer.stats import InfoStats

_STAGE_POINTS: dict[HookStage, str] = {
    HookStage.SETUP: "on_run_start",
    HookStage.BATCH_PROCESS: "after_collect",
    HookStage.PRE_STEPS_LOG: "after_collect",
    HookStage.PRE_UPDATE: "before_update",
    HookStage.PROCESS_OPTIM_BATCH: "on_sampled_batch",
    HookStage.POST_LOSS: "on_loss",
    HookStage.OPTIMIZER: "on_optimizer_step",
    HookStage.POST_OPTIM: "on_optimizer_step",
    HookStage.POST_OPTIM_LOG: "on_optimizer_step",
    HookStage.POST_UPDATE: "after_update",
    HookStage.POST_STEPS_LOG: "on_training_step_end",
    HookStage.PRE_TEST: "on_test_start",
    HookStage.POST_TEST: "on_test_end",
    HookStage.SHUTDOWN: "on_run_end",
}
"""the callback point at which each stage's hooks run"""

AnyHook = Callable[[HookContext[Any]], Any]
_T = TypeVar("_T")


def state_owner(hook: object) -> Any | None:
    """The object whose ``state_dict`` / ``load_state_dict`` hold a hook's state: the hook itself, or
    for a bound method the instance it is bound to; None for stateless hooks."""
    for candidate in (hook, getattr(hook, "__self__", None)):
        if callable(getattr(candidate, "state_dict", None)) and callable(
            getattr(candidate, "load_state_dict", None)
        ):
            return candidate
    return None


def _members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union annotation (or the annotation alone)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _runtime_class(annotation: Any) -> type | None:
    """The class an annotation stands for at run time (None: Any, or not checkable)."""
    if annotation is None or annotation is type(None):
        return type(None)
    if annotation is Any or annotation is object:
        return None
    origin = typing.get_origin(annotation)
    cls = origin if origin is not None else annotation
    return cls if isinstance(cls, type) else None


def _accepts(expected: tuple[type, ...], annotation: Any) -> bool:
    """Can a parameter annotated with ``annotation`` take every type in ``expected``?"""
    classes = [_runtime_class(m) for m in _members(annotation)]
    if any(c is None for c in classes):
        return True
    return all(any(issubclass(e, c) for c in classes if c is not None) for e in expected)


def _type_name(annotation: Any) -> str:
    """``CollectStats | None`` rather than ``<class '...CollectStats'> | None``."""
    names = []
    for member in _members(annotation):
        cls = _runtime_class(member)
        names.append("None" if cls is type(None) else getattr(member, "__name__", str(member)))
    return " | ".join(names)


def _hints(hook: Callable[..., Any]) -> dict[str, Any]:
    target: Any = hook if inspect.isfunction(hook) or inspect.ismethod(hook) else type(hook).__call__
    try:
        return typing.get_type_hints(target)
    except Exception:  # unresolvable forward references: nothing to check
        return {}


def check_hook_signature(stage: HookStage, hook: object, name: str) -> None:
    """Raise TypeError unless ``hook`` can be called with the stage's HookContext (see module doc)."""
    where = f"hook {name!r} for stage {stage.value!r}"
    if not callable(hook):
        raise TypeError(f"{where} must be callable, got {type(hook).__name__}.")
    try:
        signature = inspect.signature(hook)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    try:
        signature.bind(None)
    except TypeError:
        raise TypeError(
            f"{where} must take exactly one positional argument, the HookContext, but its signature is "
            f"{signature}; write it as def {name}(ctx: HookContext[...]) -> ..."
        ) from None
    hints = _hints(hook)
    params = list(signature.parameters.values())
    annotation = hints.get(params[0].name) if params else None
    expected = stage_payload_types(stage)
    if annotation is not None and _runtime_class(annotation) not in (None, HookContext):
        raise TypeError(
            f"{where} must take a HookContext, but its parameter is annotated {_type_name(annotation)}."
        )
    args = typing.get_args(annotation) if annotation is not None else ()
    if args and not _accepts(expected, args[0]):
        wanted = " | ".join("None" if e is type(None) else e.__name__ for e in expected)
        raise TypeError(
            f"{where} takes HookContext[{_type_name(args[0])}], but that stage passes "
            f"HookContext[{wanted}]; register it at the stage it was written for."
        )
    _check_return(stage, hints.get("return", Any), where)


def _check_return(stage: HookStage, annotation: Any, where: str) -> None:
    allowed: tuple[type, ...]
    if stage in TRANSFORM_STAGES:
        allowed = (TRANSFORM_STAGES[stage], type(None))
    elif stage in LOG_STAGES:
        allowed = (Mapping, HookScalars, type(None))
    else:
        return
    for member in _members(annotation):
        cls = _runtime_class(member)
        if cls is not None and not issubclass(cls, allowed):
            raise TypeError(
                f"{where} is annotated to return {_type_name(annotation)}; that stage takes "
                f"{' | '.join('None' if a is type(None) else a.__name__ for a in allowed)}."
            )


_NO_ARGUMENT_STAGES = frozenset({HookStage.PRE_UPDATE, HookStage.POST_OPTIM, HookStage.POST_UPDATE})
"""stages whose TorchRL ops take no argument (pre_optim_steps, post_optim, post_steps)"""


def _hook_name(hook: object, name: str | None) -> str:
    """``name``, or the hook's ``__name__`` / class name; a non-empty str."""
    name = name if name is not None else str(getattr(hook, "__name__", type(hook).__name__))
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"HookRegistry.register: name must be a non-empty str, got {name!r}.")
    return name


class _Op:
    """A TorchRL op as a hook: called with the stage's payload, or with no argument."""

    def __init__(self, op: Callable[..., Any], with_payload: bool):
        if not callable(op):
            raise TypeError(f"HookRegistry.register_op: op must be callable, got {type(op).__name__}.")
        self.op, self.with_payload = op, with_payload

    def __call__(self, ctx: HookContext[Any]) -> Any:
        return self.op(ctx.data) if self.with_payload else self.op()


class HookRegistry(Adapter):
    """Hooks by stage, in registration order (see :meth:`register`); to the trainer, one callback:
    ``hooks = HookRegistry(); trainer.add_callback(hooks, name="hooks")``."""

    def __init__(self) -> None:
        self._hooks: dict[HookStage, dict[str, AnyHook]] = {stage: {} for stage in HookStage}
        self._owners: dict[str, Any] = {}

    @override
    def active_points(self) -> Collection[str]:
        return frozenset(_STAGE_POINTS[stage] for stage, hooks in self._hooks.items() if hooks) | (
            {"before_update"} if self._hooks[HookStage.PRE_STEPS_LOG] else set()
        )

    # ------------------------------------------------------------------ registration
    @overload
    def register(
        self, stage: Literal[HookStage.SETUP, "setup"], hook: SetupHook, *, name: str | None = None
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.BATCH_PROCESS, "batch_process"],
        hook: BatchProcessHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.PRE_STEPS_LOG, "pre_steps_log"],
        hook: PreStepsLogHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.PRE_UPDATE, "pre_update", "pre_optim_steps"],
        hook: PreUpdateHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.PROCESS_OPTIM_BATCH, "process_optim_batch"],
        hook: ProcessOptimBatchHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self, stage: Literal[HookStage.POST_LOSS, "post_loss"], hook: PostLossHook, *, name: str | None = None
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.OPTIMIZER, "optimizer"],
        hook: OptimizerStageHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.POST_OPTIM, "post_optim"],
        hook: PostOptimHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.POST_OPTIM_LOG, "post_optim_log"],
        hook: PostOptimLogHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.POST_UPDATE, "post_update", "post_steps"],
        hook: PostUpdateHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self,
        stage: Literal[HookStage.POST_STEPS_LOG, "post_steps_log"],
        hook: PostStepsLogHook,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def register(
        self, stage: Literal[HookStage.PRE_TEST, "pre_test"], hook: PreTestHook, *, name: str | None = None
    ) -> None: ...
    @overload
    def register(
        self, stage: Literal[HookStage.POST_TEST, "post_test"], hook: PostTestHook, *, name: str | None = None
    ) -> None: ...
    @overload
    def register(
        self, stage: Literal[HookStage.SHUTDOWN, "shutdown"], hook: ShutdownHook, *, name: str | None = None
    ) -> None: ...
    def register(self, stage: HookStage | str, hook: Any, *, name: str | None = None) -> None:
        """Register ``hook`` at ``stage`` under ``name``.

        Args:
            stage: a :class:`HookStage` or its value, e.g. ``"post_update"``, or TorchRL's name of it
                (``"pre_optim_steps"``, ``"post_steps"``: :data:`STAGE_ALIASES`).
            hook: a callable taking one :class:`HookContext` (see the stage protocols in
                :mod:`tshtrain.adapters.torchrl_stages`); if it (or, for a bound method, its instance) has
                ``state_dict`` / ``load_state_dict``, its state is saved with checkpoints under ``name``.
            name: unique per stage; default: the hook's ``__name__`` or class name. The same object may
                be registered at several stages under one name (its state is saved once).

        Raises:
            ConfigurationError: unknown stage, duplicate name, or a name already used by another
                stateful hook.
            TypeError: a hook that cannot take the stage's HookContext.
        """
        self._add(self._stage(stage), hook, _hook_name(hook, name), owner=state_owner(hook))

    def register_op(self, dest: HookStage | str, op: Callable[..., Any], *, name: str | None = None) -> None:
        """TorchRL's ``trainer.register_op(dest, op)``: ``op`` is called as TorchRL calls it, with the
        stage's payload (``ctx.data``, see :mod:`tshtrain.adapters.torchrl_stages`; at ``optimizer`` the
        :class:`OptimizerStep` the algorithm took, not TorchRL's losses), or with no argument at
        ``pre_optim_steps`` / ``post_optim`` / ``post_steps``; what it returns is
        used as a hook's return (a batch, scalars with ``log_pbar``, or None). Its state is saved only
        if it is passed to :meth:`register_module` too, as in TorchRL. Extra arguments: bind them with
        ``functools.partial``.
        """
        stage = self._stage(dest)
        self._add(stage, _Op(op, stage not in _NO_ARGUMENT_STAGES), _hook_name(op, name), owner=None)

    def register_module(self, module: Any, name: str) -> None:
        """TorchRL's ``trainer.register_module(module, name)``: save ``module.state_dict()`` with the
        checkpoints under ``name`` (and restore it with ``load_state_dict``)."""
        owner = state_owner(module)
        if owner is None:
            raise TypeError(
                f"HookRegistry.register_module({name!r}): {type(module).__name__} has no state_dict / "
                f"load_state_dict; only modules with state need registering."
            )
        self._claim(name, owner)

    def _add(self, stage: HookStage, hook: Any, name: str, *, owner: Any | None) -> None:
        if name in self._hooks[stage]:
            raise ConfigurationError(
                f"HookRegistry.register: a hook named {name!r} is already registered at stage "
                f"{stage.value!r}; pass another name=..."
            )
        check_hook_signature(stage, hook, name)
        if owner is not None:
            self._claim(name, owner)
        self._hooks[stage][name] = hook
        self.changed()

    def _claim(self, name: str, owner: Any) -> None:
        """Save ``owner``'s state under ``name`` (one owner per name)."""
        known = self._owners.get(name)
        if known is not None and known is not owner:
            raise ConfigurationError(
                f"HookRegistry.register: the name {name!r} already belongs to another stateful hook "
                f"({type(known).__name__}); its state would be saved under the same name. Pass another "
                f"name=..."
            )
        self._owners[name] = owner

    @staticmethod
    def _stage(stage: HookStage | str) -> HookStage:
        if isinstance(stage, str) and stage in STAGE_ALIASES:
            return STAGE_ALIASES[stage]
        try:
            return HookStage(stage)
        except ValueError:
            allowed = ", ".join(repr(s.value) for s in HookStage)
            raise ConfigurationError(
                f"HookRegistry.register: unknown stage {stage!r}; the stages are {allowed} (TorchRL's "
                f"{' and '.join(repr(a) for a in STAGE_ALIASES)} are accepted too)."
            ) from None

    def names(self, stage: HookStage | str) -> list[str]:
        """The names of the hooks at ``stage``, in calling order."""
        return list(self._hooks[self._stage(stage)])

    def has(self, stage: HookStage) -> bool:
        """True if any hook is registered at ``stage``."""
        return bool(self._hooks[stage])

    # ------------------------------------------------------------------ the loop points
    @override
    def on_run_start(self, ctx: RunContext, setup: SetupInfo) -> None:
        self.call(ctx, HookStage.SETUP, setup)

    @override
    def after_collect(self, ctx: RunContext, batch: CollectedBatch) -> CollectedBatch | None:
        stat = batch.collect_stat
        batch = self.transform(ctx, HookStage.BATCH_PROCESS, batch)
        self.log(ctx, HookStage.PRE_STEPS_LOG, stat)
        return batch

    @override
    def before_update(self, ctx: RunContext, batch: CollectedBatch | None) -> None:
        if batch is None:  # offline: the training step starts with its update
            self.log(ctx, HookStage.PRE_STEPS_LOG, None)
        self.call(ctx, HookStage.PRE_UPDATE, batch)

    @override
    def on_sampled_batch(self, ctx: RunContext, batch: AnyTransitionBatch) -> AnyTransitionBatch | None:
        if not self._hooks.get(HookStage.PROCESS_OPTIM_BATCH):
            return None
        return self.transform(
            ctx, HookStage.PROCESS_OPTIM_BATCH, numpy_batch(batch, "process_optim_batch hooks")
        )

    @override
    def on_loss(self, ctx: RunContext, losses: Mapping[str, torch.Tensor]) -> None:
        self.call(ctx, HookStage.POST_LOSS, losses)

    @override
    def on_optimizer_step(self, ctx: RunContext, step: OptimizerStep) -> None:
        self.call(ctx, HookStage.OPTIMIZER, step)
        self.call(ctx, HookStage.POST_OPTIM, step)
        self.log(ctx, HookStage.POST_OPTIM_LOG, step)

    @override
    def after_update(self, ctx: RunContext, stats: TrainingStats) -> None:
        self.call(ctx, HookStage.POST_UPDATE, stats)

    @override
    def on_training_step_end(self, ctx: RunContext, summary: StepSummary) -> None:
        # the stage predates the callback protocol: its hooks see the step not yet counted
        counters = dataclasses.replace(ctx.counters, training_step=ctx.counters.training_step - 1)
        self.log(dataclasses.replace(ctx, counters=counters), HookStage.POST_STEPS_LOG, summary)

    @override
    def on_test_start(self, ctx: RunContext) -> None:
        self.call(ctx, HookStage.PRE_TEST, None)

    @override
    def on_test_end(self, ctx: RunContext, result: TestResult) -> None:
        self.call(ctx, HookStage.POST_TEST, result)

    @override
    def on_run_end(self, ctx: RunContext, info: InfoStats) -> None:
        self.call(ctx, HookStage.SHUTDOWN, info)

    # ------------------------------------------------------------------ calling
    def _context(self, ctx: RunContext, stage: HookStage, name: str, data: object) -> HookContext[Any]:
        def stop(reason: str) -> None:
            ctx.request_stop(f"hook {name!r} ({stage.value}): {reason}")

        return HookContext(stage=stage, name=name, counters=ctx.counters, data=data, stop=stop)

    def _call(self, ctx: RunContext, stage: HookStage, name: str, hook: AnyHook, data: object) -> Any:
        if stage in IN_UPDATE_STAGES:  # a stop must abandon the update: let it propagate, named
            try:
                return hook(self._context(ctx, stage, name, data))
            except StopTraining as stop:
                raise StopTraining(f"hook {name!r} ({stage.value}): {stop.reason}") from None
        try:
            return hook(self._context(ctx, stage, name, data))
        except StopTraining as stop:
            ctx.request_stop(f"hook {name!r} ({stage.value}): {stop.reason}")
            return None

    def call(self, ctx: RunContext, stage: HookStage, data: object) -> None:
        """Call every hook at ``stage`` with ``data``."""
        for name, hook in list(self._hooks[stage].items()):
            self._call(ctx, stage, name, hook, data)

    def transform(self, ctx: RunContext, stage: HookStage, data: _T) -> _T:
        """Chain the hooks of a transform stage: each gets the previous one's result (None: unchanged)."""
        expected = TRANSFORM_STAGES[stage]
        for name, hook in list(self._hooks[stage].items()):
            result = self._call(ctx, stage, name, hook, data)
            if result is None:
                continue
            if not isinstance(result, expected):
                raise TypeError(
                    f"hook {name!r} at stage {stage.value!r} returned {type(result).__name__}; it must "
                    f"return a {expected.__name__} or None."
                )
            data = typing.cast(_T, result)
        return data

    def log(self, ctx: RunContext, stage: HookStage, data: object) -> None:
        """Call the hooks of a log stage; their scalars go to ``ctx.log`` (a name twice is an error)."""
        hooks = self._hooks[stage]
        if not hooks:
            return
        scalars: dict[str, float] = {}
        progress: set[str] = set()
        for name, hook in list(hooks.items()):
            output = self._call(ctx, stage, name, hook, data)
            if output is None:
                continue
            marked: frozenset[str] = frozenset()
            if isinstance(output, HookScalars):
                marked = frozenset(output.progress_bar)
                output = output.scalars
            if not isinstance(output, Mapping):
                raise TypeError(
                    f"hook {name!r} at stage {stage.value!r} returned {type(output).__name__}; log hooks "
                    f"return a Mapping[str, float], HookScalars or None."
                )
            if "log_pbar" in output:  # TorchRL's convention: a flag for the whole dict, not a scalar
                output = dict(output)
                if output.pop("log_pbar"):
                    marked = frozenset(output)
            for key, value in output.items():
                merge_scalar(scalars, key, value, f"hook {name!r}")
                if key in marked:
                    progress.add(key)
        ctx.log(scalars, progress_bar=frozenset(progress))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """``{name: state_dict()}`` of every stateful hook."""
        return {name: owner.state_dict() for name, owner in self._owners.items()}

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Restore :meth:`state_dict`; with ``strict``, the names must match the registered hooks."""
        missing, unexpected = set(self._owners) - set(state), set(state) - set(self._owners)
        if strict and (missing or unexpected):
            raise ConfigurationError(
                f"hook state: for {sorted(missing)} is missing and for "
                f"{sorted(unexpected)} no such stateful hook is registered; register the same hooks under "
                f"the same names as the run that saved it (or pass strict=False)."
            )
        for name, owner in self._owners.items():
            if name in state:
                owner.load_state_dict(state[name])
