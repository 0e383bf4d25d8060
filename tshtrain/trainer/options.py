"""How a run behaves, not *what* it trains (skrl's trainer options; progress bars are
``TrainerParams.show_progress``): ``Trainer(algorithm, params, options=TrainerOptions(...))``."""

from __future__ import annotations

from dataclasses import dataclass

from tshtrain.constraints import PositiveInt, validate_fields
from tshtrain.devices import resolve_device
from tshtrain.errors import ConfigurationError
from tshtrain.trainer.steps import StrategyWrapper


@dataclass(frozen=True, kw_only=True)
class TrainerOptions:
    """How a run behaves around the training itself."""

    test_deterministic: bool | None = None
    """test steps act deterministically (True) or sample actions (False); None: the policy's own
    ``deterministic_eval``"""
    render_every_num_env_steps: PositiveInt | None = None
    """call ``training_collector.env.render()`` after the vector step that brings the training env
    steps to a multiple of this (counted as num_envs per vector step); None: headless, never render.
    Build the envs with ``render_mode="human"`` to watch, or use an event to keep ``rgb_array`` frames"""
    close_envs: bool = False
    """close the training and test collectors' envs when the run ends, normally or by an exception
    (``run()``), or when ``close()`` is called. Off by default: the envs belong to the collectors you
    built and may be used after the run (e.g. to evaluate the trained policy)"""
    flush_denormal: bool = True
    """treat denormal floats as zero on the CPU (``torch.set_flush_denormal``) while the trainer works:
    set on the thread that runs each training and test step, cleared when the run ends (``close()``).
    Adam's state and small gradients drift into the denormal range, where CPU arithmetic is many times
    slower (docs/benchmarks.md); values below 1.2e-38 become 0, which changes no result worth keeping.
    False: the trainer leaves the flag alone (e.g. when you set it yourself)"""
    retain_freed_memory: bool = True
    """keep freed CPU memory in the process for the next tensors of the same size instead of giving it
    back to the kernel (:func:`tshtrain.cpu_memory.keep_freed_memory`, glibc only): set once when the run
    starts, for the rest of the process. Large-batch CPU updates otherwise pay the kernel's page faults
    and zeroing for every batch-sized tensor (about a tenth of a PPO update's CPU time at 4,096 VMAS
    envs, docs/gpu.md). Skipped when the environment sets the allocator (``MALLOC_*``, ``glibc.malloc``
    tunables, a preloaded jemalloc/tcmalloc/mimalloc). False: the trainer leaves the allocator alone"""
    device: str | None = None
    """move the algorithm there when the trainer is built (``Algorithm.to``): ``auto`` (CUDA when
    available, else CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; None: leave the algorithm where it
    is. Collected batches are moved to the algorithm's device once per sample (docs/gpu.md)"""
    distributed: StrategyWrapper | None = None
    """this process's rank of a data-parallel run, ``DataParallel(DistributedContext.from_env())`` under
    ``torchrun`` (:mod:`tshtrain.parallel`): gradients averaged over the ranks, counters and training
    statistics summed over them, test steps, logging and progress on rank 0 (docs/scaling.md); None: one
    process"""

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.distributed is not None and not callable(getattr(self.distributed, "wrap", None)):
            raise ConfigurationError(
                f"TrainerOptions.distributed must wrap the step strategy (tshtrain.parallel.DataParallel("
                f"context)), got {type(self.distributed).__name__}."
            )
        if self.device is not None:
            try:
                resolve_device(self.device)
            except ConfigurationError as error:
                raise ConfigurationError(f"TrainerOptions.device: {error}") from None
