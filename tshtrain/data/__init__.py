"""Typed batches, replay buffers, the Collector and collection statistics."""

from tshtrain.data.batch import (
    ObsArray,
    ObsTensor,
    RolloutBatch,
    TorchTransitionBatch,
    TransitionBatch,
    obs_to_torch,
)
from tshtrain.data.buffer import BaseReplayBuffer, BufferLayout, ReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer_io import load_buffer, load_buffer_into, save_buffer
from tshtrain.data.collector import Collector, CollectorListener, CollectorPolicy
from tshtrain.data.prioritized import (
    BasePrioritizedBuffer,
    PrioritizedReplayBuffer,
    PrioritizedVectorReplayBuffer,
    SegmentTree,
)
from tshtrain.data.stats import CollectStats, SequenceSummaryStats, merge_collect_stats

__all__ = [
    "BasePrioritizedBuffer",
    "BaseReplayBuffer",
    "BufferLayout",
    "CollectStats",
    "Collector",
    "CollectorListener",
    "CollectorPolicy",
    "ObsArray",
    "ObsTensor",
    "PrioritizedReplayBuffer",
    "PrioritizedVectorReplayBuffer",
    "ReplayBuffer",
    "RolloutBatch",
    "SegmentTree",
    "SequenceSummaryStats",
    "TorchTransitionBatch",
    "TransitionBatch",
    "VectorReplayBuffer",
    "load_buffer",
    "load_buffer_into",
    "merge_collect_stats",
    "obs_to_torch",
    "save_buffer",
]

from tshtrain.data.minari import minari_to_buffer

__all__ += ["minari_to_buffer"]
