"""Driving a run one env step at a time (skrl's StepTrainer / manual loop), with the same counters,
logging, hooks, events and callbacks as ``run()``.

``OnlineTrainer.execute_env_step()`` steps every training env once (one vector step). The first env
step of a training step begins it (``training_fn``, opening the epoch); the env step that completes the
collection step's quota (``ceil(collection_step_num_env_steps / num_envs)`` vector steps) finishes it:
the collected vector steps are merged into one collection step and the training step continues exactly
as ``execute_training_step()`` would (batch_process, update, logs, events, ``save_checkpoint_fn``, the
end of the epoch). Because a collector that collects k vector steps one at a time writes the same
buffer rows, draws the same random numbers and finishes the same episodes as one ``collect`` call of k
vector steps, a run driven env step by env step equals ``run()`` with the same seeds. Only env-step
based collection can be driven so (episode-based collection steps end when enough episodes finish).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tshtrain.data.buffer import BufferLayout
from tshtrain.data.stats import CollectStats

if TYPE_CHECKING:
    from tshtrain.trainer.base import TrainingStepResult


@dataclass(frozen=True, kw_only=True)
class CollectedSteps:
    """A collection step gathered env step by env step, handed to the rest of its training step."""

    stat: CollectStats
    """the merged statistics of its vector steps"""
    layout_before: BufferLayout = field(repr=False)
    """the training buffer's write positions before its first vector step"""
    seconds: float
    """wall-clock time spent collecting it"""


@dataclass(frozen=True, kw_only=True)
class EnvStepResult:
    """What one :meth:`~tshtrain.trainer.OnlineTrainer.execute_env_step` did."""

    collect_stat: CollectStats
    """this vector step (num_envs env steps, and the episodes it ended)"""
    num_vector_steps: int
    """vector steps of the current collection step so far (including this one)"""
    training_step: TrainingStepResult | None
    """set when this env step completed its training step"""
