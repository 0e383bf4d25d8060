"""Typed batches, replay buffers, the Collector and collection statistics."""

from tshtrain.data.batch import (
    AnyRolloutBatch,
    AnyTransitionBatch,
    ObsArray,
    ObsTensor,
    RolloutBatch,
    TensorRolloutBatch,
    TorchTransitionBatch,
    TransitionBatch,
    obs_to_torch,
)
from tshtrain.data.buffer import (
    BaseReplayBuffer,
    BufferLayout,
    ReplayBuffer,
    SavableBuffer,
    VectorReplayBuffer,
)
from tshtrain.data.buffer_io import load_buffer, load_buffer_into, save_buffer
from tshtrain.data.collector import Collector, CollectorPolicy, EnvInfoAccumulator
from tshtrain.data.collector_base import AnyReplayBuffer, BaseCollector, CollectorListener
from tshtrain.data.multi_agent_collector import MultiAgentCollector, MultiAgentCollectorPolicy
from tshtrain.data.prioritized import (
    BasePrioritizedBuffer,
    PrioritizedReplayBuffer,
    PrioritizedVectorReplayBuffer,
    SegmentTree,
)
from tshtrain.data.stats import CollectStats, SequenceSummaryStats, merge_collect_stats
from tshtrain.data.tensor_buffer import TensorReplayBuffer
from tshtrain.data.tensor_collector import TensorCollector, TensorCollectorPolicy

__all__ = [
    "AnyReplayBuffer",
    "AnyRolloutBatch",
    "AnyTransitionBatch",
    "BaseCollector",
    "BasePrioritizedBuffer",
    "BaseReplayBuffer",
    "BufferLayout",
    "CollectStats",
    "Collector",
    "CollectorListener",
    "CollectorPolicy",
    "EnvInfoAccumulator",
    "MultiAgentCollector",
    "MultiAgentCollectorPolicy",
    "ObsArray",
    "ObsTensor",
    "PrioritizedReplayBuffer",
    "PrioritizedVectorReplayBuffer",
    "ReplayBuffer",
    "RolloutBatch",
    "SavableBuffer",
    "SegmentTree",
    "SequenceSummaryStats",
    "TensorCollector",
    "TensorCollectorPolicy",
    "TensorReplayBuffer",
    "TensorRolloutBatch",
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
from tshtrain.data.tianshou_io import load_tianshou_hdf5

__all__ += ["load_tianshou_hdf5", "minari_to_buffer"]

from tshtrain.data.her import (  # noqa: E402 (appended after the minari export)
    BaseHERBuffer,
    GoalRewardFn,
    HERRelabel,
    HERReplayBuffer,
    HERVectorReplayBuffer,
)

__all__ += ["BaseHERBuffer", "GoalRewardFn", "HERRelabel", "HERReplayBuffer", "HERVectorReplayBuffer"]
