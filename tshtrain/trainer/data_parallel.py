"""What a trainer does differently on one rank of a data-parallel run (``TrainerOptions.distributed``).

The loop stays the trainer's; at a few named points it asks this helper (docs/scaling.md):

* **Start** (:meth:`DataParallel.attach`): rank 0's weights and module buffers are broadcast, and every
  optimizer's parameters get a gradient hook that averages the gradient over the ranks as soon as
  backward accumulated it (:meth:`DistributedContext.install_gradient_averaging`), so that gradient
  clipping and the optimizer step see the averaged gradient. Modules are not wrapped: state-dict keys
  and checkpoints stay those of one process.
* **Collection** (:meth:`DataParallel.merge`): each rank collects with its own envs; the collection
  step's statistics are gathered, so ``env_step``, episodes, epochs, the off-policy gradient-step count
  and the training returns are those of all ranks together (one process with N x the envs).
* **Test steps** run on rank 0 only; rank 0's result (statistics, best result, stop) is broadcast
  (:meth:`DataParallel.share_test_step`).
* **Stop**: after every training step the ranks agree whether (and why) training ends
  (:meth:`DataParallel.agree_on_stop`), so a callback that stops on one rank stops all.
* **Checkpoints**: rank 0 writes where one process would; rank ``r > 0`` writes a complete checkpoint
  of its own (its collector, envs, buffer and RNGs; the replicated weights again) under
  ``<directory>/rank<r>/`` with the same name (:meth:`DataParallel.rank_path`). Resuming needs the
  same number of ranks (the manifest records it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, final

import numpy as np
import torch

from tshtrain.algorithm.base import Algorithm
from tshtrain.data.stats import CollectStats, merge_collect_stats
from tshtrain.distributed import DistributedContext
from tshtrain.trainer.checkpoint_params import CheckpointParams
from tshtrain.trainer.run_state import BestResult, RunState
from tshtrain.trainer.stats import StopReason


@final
class DataParallel:
    """A trainer's part of a data-parallel run (see the module docstring)."""

    def __init__(self, context: DistributedContext):
        self.context = context
        self._remove_hooks: list[Any] = []

    @property
    def is_main(self) -> bool:
        """True on rank 0."""
        return self.context.is_main

    def describe(self) -> dict[str, int]:
        """What a checkpoint's manifest records of the run's ranks (checked on load)."""
        return {"world_size": self.context.world_size, "rank": self.context.rank}

    def attach(self, algorithm: Algorithm[Any]) -> None:
        """Make the weights rank 0's and average every optimizer's gradients over the ranks."""
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
        self._own_action_noise(algorithm)

    def _own_action_noise(self, algorithm: Algorithm[Any]) -> None:
        """Rank ``r > 0`` draws its own action noise: its policy's generator is reseeded from
        (its seed, r). Seeded alike, every rank would sample its actions from the same uniform draws
        (correlated exploration, unlike one process whose envs each get their own draws). Rank 0 keeps
        its generator, so a 1-rank run is unchanged; a checkpoint restores each rank's generator."""
        if self.is_main:
            return
        generator = getattr(algorithm.policy, "generator", None)
        if isinstance(generator, torch.Generator):
            mixed = np.random.SeedSequence([generator.initial_seed(), self.context.rank])
            generator.manual_seed(int(mixed.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)))

    def detach(self) -> None:
        """Remove the gradient hooks."""
        for remove in self._remove_hooks:
            remove()
        self._remove_hooks.clear()

    def merge(self, stat: CollectStats) -> CollectStats:
        """All ranks' statistics of this collection step as one (collect time: the slowest rank's)."""
        stats: list[CollectStats] = self.context.all_gather_object(stat)
        merged = merge_collect_stats(stats)
        return dataclasses.replace(merged, collect_time=max(s.collect_time for s in stats))

    def share_test_step(self, state: RunState, stat: CollectStats | None) -> CollectStats:
        """Rank 0 sends its test step's statistics, best result and stop; the other ranks take them."""
        sent = (stat, state.best, state.done, state.stop_reason, state.stop_detail)
        got: tuple[CollectStats, BestResult, bool, StopReason | None, str | None]
        got = self.context.broadcast_object(sent if self.is_main else None)
        test_stat, best, done, reason, detail = got
        if not self.is_main:
            state.best = best
            if done and reason is not None:
                state.finish(reason, detail)
        return test_stat

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

    def rank_path(self, path: str | Path) -> Path:
        """Where this rank reads or writes the checkpoint that rank 0 keeps at ``path``."""
        path = Path(path)
        return path if self.is_main else path.parent / f"rank{self.context.rank}" / path.name

    def checkpoint_params(self, params: CheckpointParams) -> CheckpointParams:
        """This rank's automatic checkpoints: rank 0's directory, else ``<directory>/rank<r>``."""
        if self.is_main:
            return params
        directory = Path(params.directory) / f"rank{self.context.rank}"
        return dataclasses.replace(params, directory=str(directory), save_best=False)
