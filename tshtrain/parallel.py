"""Data-parallel learners: one rank of a run (``TrainerOptions(distributed=DataParallel(context))``),
a wrapper of the trainer's step strategy.

The loop stays the trainer's and knows nothing of ranks; :class:`DataParallelStep` changes what the
strategy's parts mean on a rank (docs/scaling.md):

* **Start**: rank 0's weights and module buffers are broadcast, and every optimizer's parameters get a
  gradient hook that averages the gradient over the ranks as soon as backward accumulated it
  (:meth:`DistributedContext.install_gradient_averaging`), so that gradient clipping and the optimizer
  step see the averaged gradient. Modules are not wrapped: state-dict keys and checkpoints stay those
  of one process. Rank ``r > 0`` draws its own action noise (its policy's generator is reseeded from
  (its seed, r)).
* **Collection** (:meth:`collect`): each rank collects with its own envs; the collection step's
  statistics are gathered, so ``env_step``, episodes, epochs, the off-policy gradient-step count and the
  training returns are those of all ranks together (one process with N x the envs).
* **Test steps** (:meth:`test`) run on rank 0 only; rank 0's result (statistics, best result, stop) is
  broadcast.
* **Stop** (:meth:`agree_on_stop`): after every training step the ranks agree whether (and why)
  training ends, so a callback that stops on one rank stops all.
* **Checkpoints**: rank 0 writes where one process would; rank ``r > 0`` writes a complete checkpoint
  of its own (its collector, envs, buffer and RNGs; the replicated weights again) under
  ``<directory>/rank<r>/`` with the same name (:meth:`checkpoint_path`). Resuming needs the same number
  of ranks (the manifest records it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, final

import numpy as np
import torch
from typing_extensions import override

from tshtrain.algorithm.base import Algorithm
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.distributed import DistributedContext
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.callbacks import CollectedBatch
from tshtrain.trainer.run_state import BestResult, RunState
from tshtrain.trainer.stats import StopReason
from tshtrain.trainer.steps import CollectedSteps, DelegatingStep, StepStrategy


@final
class DataParallel:
    """This process's rank of a data-parallel run, for ``TrainerOptions.distributed``: it wraps the
    trainer's step strategy (a :class:`~tshtrain.trainer.steps.StrategyWrapper`)."""

    def __init__(self, context: DistributedContext):
        """``context``: the process group (``DistributedContext.from_env()`` under ``torchrun``)."""
        if not isinstance(context, DistributedContext):
            raise ConfigurationError(
                f"DataParallel: context must be a tshtrain.distributed.DistributedContext, got "
                f"{type(context).__name__}."
            )
        self.context = context

    def wrap(self, strategy: StepStrategy, algorithm: Algorithm[Any]) -> StepStrategy:
        """``strategy`` as this rank's."""
        return DataParallelStep(strategy, self.context, algorithm)


@final
class DataParallelStep(DelegatingStep):
    """``inner`` as one rank of a data-parallel run (see the module docstring)."""

    def __init__(self, inner: StepStrategy, context: DistributedContext, algorithm: Algorithm[Any]):
        super().__init__(inner)
        self.context = context
        self.is_main = context.is_main
        self._remove_hooks: list[Any] = []
        self._attach(algorithm)

    # ------------------------------------------------------------------ what a rank does differently
    @override
    def collect(self, collected: CollectedSteps | None, env_steps_left: int | None = None) -> CollectedBatch:
        """This rank's collection step, with the statistics of all ranks' (collect time: the slowest)."""
        batch = self.inner.collect(collected, env_steps_left)
        stats: list[CollectStats] = self.context.all_gather_object(batch.collect_stat)
        merged = merge_collect_stats(stats)
        merged = dataclasses.replace(merged, collect_time=max(s.collect_time for s in stats))
        return dataclasses.replace(batch, collect_stat=merged)

    @override
    def test(self, run: Callable[[], CollectStats], state: RunState) -> CollectStats:
        """Rank 0 runs the test step and sends its statistics, best result and stop; the others take them."""
        stat = run() if self.is_main else None
        sent = (stat, state.best, state.done, state.stop_reason, state.stop_detail)
        got: tuple[CollectStats, BestResult, bool, StopReason | None, str | None]
        got = self.context.broadcast_object(sent if self.is_main else None)
        test_stat, best, done, reason, detail = got
        if not self.is_main:
            state.best = best
            if done and reason is not None:
                state.finish(reason, detail)
        return test_stat

    @override
    def agree_on_stop(self, state: RunState) -> None:
        """End training on every rank if it ended on one (the lowest such rank's reason wins)."""
        self.context.raise_if_peer_failed()
        votes: list[tuple[bool, StopReason | None, str | None]] = self.context.all_gather_object(
            (state.done, state.stop_reason, state.stop_detail)
        )
        for done, reason, detail in votes:
            if done and reason is not None:
                state.finish(reason, detail)
                return

    @override
    def describe(self) -> dict[str, int]:
        return {"world_size": self.context.world_size, "rank": self.context.rank}

    @override
    def close(self) -> None:
        for remove in self._remove_hooks:
            remove()
        self._remove_hooks.clear()

    @override
    def report_failure(self, error: BaseException) -> None:
        self.context.report_failure(error)

    # ------------------------------------------------------------------ start
    def _attach(self, algorithm: Algorithm[Any]) -> None:
        """Make the weights rank 0's, average every optimizer's gradients over the ranks, and give rank
        ``r > 0`` its own action noise (seeded alike, every rank would explore alike)."""
        components = algorithm.components().values()
        tensors: list[torch.Tensor] = []
        for component in components:
            if isinstance(component, torch.nn.Module):
                tensors.extend(component.parameters())
                tensors.extend(component.buffers())
        self.context.broadcast_tensors(dict.fromkeys(tensors))
        params = [
            p
            for component in components
            if isinstance(component, torch.optim.Optimizer)
            for group in component.param_groups
            for p in group["params"]
        ]
        self._remove_hooks.append(self.context.install_gradient_averaging(params))
        generator = getattr(algorithm.policy, "generator", None)
        if not self.is_main and isinstance(generator, torch.Generator):
            mixed = np.random.SeedSequence([generator.initial_seed(), self.context.rank])
            generator.manual_seed(int(mixed.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)))
