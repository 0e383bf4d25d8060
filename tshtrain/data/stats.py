"""Statistics of collection steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True, kw_only=True)
class SequenceSummaryStats:
    """Mean, std, min and max of a sequence of numbers (all 0 for an empty sequence)."""

    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def from_sequence(cls, values: np.ndarray) -> SequenceSummaryStats:
        """Summarise ``values`` (flattened)."""
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        if flat.size == 0:
            return cls(mean=0.0, std=0.0, min=0.0, max=0.0)
        return cls(
            mean=float(flat.mean()), std=float(flat.std()), min=float(flat.min()), max=float(flat.max())
        )

    def as_scalars(self, prefix: str) -> dict[str, float]:
        """``{prefix/mean: ..., prefix/std: ..., ...}``"""
        return {
            f"{prefix}/mean": self.mean,
            f"{prefix}/std": self.std,
            f"{prefix}/min": self.min,
            f"{prefix}/max": self.max,
        }


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class CollectStats:
    """What one ``Collector.collect`` call gathered."""

    n_collected_steps: int = 0
    """env steps stored (or, without a buffer, taken) in this call"""
    n_collected_episodes: int = 0
    """episodes that ended in this call"""
    returns: np.ndarray = field(default_factory=_empty)
    """undiscounted return of every finished episode, shape (n_collected_episodes,) or, for
    multi-agent rewards, (n_collected_episodes, num_agents)"""
    lens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """length of every finished episode"""
    collect_time: float = 0.0
    """wall-clock seconds spent in the call"""
    env_info: Mapping[str, float] = field(default_factory=dict)
    """mean of each numeric scalar the envs reported under the collector's ``info_key``, over the env
    steps that reported it (empty without an info_key)"""
    env_info_counts: Mapping[str, int] = field(default_factory=dict)
    """how many env steps reported each ``env_info`` scalar (to merge records)"""
    n_stored_transitions: int | None = None
    """transitions written to the buffer when that differs from ``n_collected_steps`` (several agents:
    one per agent whose transition completed); None: the same"""
    agents: tuple[str, ...] = ()
    """the agents' names, one per column of multi-agent ``returns`` (empty: single-agent)"""
    agent_returns: np.ndarray | None = None
    """the per-agent returns (n_collected_episodes, num_agents) after :meth:`with_return_reduction`
    reduced ``returns`` to one number per episode (None otherwise); logged per agent"""

    @property
    def returns_stat(self) -> SequenceSummaryStats:
        """Summary of the per-episode returns (multi-agent returns are averaged over agents first;
        use :meth:`with_return_reduction` to choose another reduction)."""
        returns = self.returns if self.returns.ndim <= 1 else self.returns.mean(axis=-1)
        return SequenceSummaryStats.from_sequence(returns)

    @property
    def stored_transitions(self) -> int:
        """Transitions written to the buffer (:attr:`n_stored_transitions`, else ``n_collected_steps``)."""
        return self.n_collected_steps if self.n_stored_transitions is None else self.n_stored_transitions

    @property
    def lens_stat(self) -> SequenceSummaryStats:
        """Summary of the per-episode lengths."""
        return SequenceSummaryStats.from_sequence(self.lens)

    @property
    def collect_speed(self) -> float:
        """Env steps per second of this call (0 if nothing was timed)."""
        return self.n_collected_steps / self.collect_time if self.collect_time > 0 else 0.0

    def with_return_reduction(self, reduce: Callable[[np.ndarray], np.ndarray]) -> CollectStats:
        """A copy whose (num_episodes, num_agents) returns are reduced to (num_episodes,)."""
        if self.returns.ndim <= 1:
            return self
        return replace(self, returns=np.asarray(reduce(self.returns)), agent_returns=self.returns)

    def with_agents(self, agents: tuple[str, ...]) -> CollectStats:
        """A copy whose multi-agent returns are named ``agents`` (one per column)."""
        return replace(self, agents=tuple(agents))

    @property
    def per_agent_returns(self) -> np.ndarray | None:
        """The (n_collected_episodes, num_agents) returns of a multi-agent collection, reduced or not
        (None for single-agent stats)."""
        if self.agent_returns is not None:
            return self.agent_returns
        return self.returns if self.returns.ndim == 2 else None

    def as_scalars(self) -> dict[str, float]:
        """Flat scalars for loggers."""
        scalars = {
            "n_collected_steps": float(self.n_collected_steps),
            "n_collected_episodes": float(self.n_collected_episodes),
            "collect_time": self.collect_time,
            "collect_speed": self.collect_speed,
        }
        if self.n_collected_episodes:
            scalars.update(self.returns_stat.as_scalars("returns"))
            scalars.update(self.lens_stat.as_scalars("lens"))
            per_agent = self.per_agent_returns
            if per_agent is not None:
                names = self.agents or tuple(f"agent_{i}" for i in range(per_agent.shape[1]))
                for i, name in enumerate(names):
                    scalars[f"returns/{name}/mean"] = float(per_agent[:, i].mean())
        scalars.update({f"env_info/{name}": value for name, value in self.env_info.items()})
        return scalars


def merge_collect_stats(stats: list[CollectStats]) -> CollectStats:
    """One record for several collection steps: counts and times summed, episodes concatenated."""
    if not stats:
        return CollectStats()
    return CollectStats(
        n_collected_steps=sum(s.n_collected_steps for s in stats),
        n_collected_episodes=sum(s.n_collected_episodes for s in stats),
        returns=np.concatenate([s.returns for s in stats]),
        lens=np.concatenate([s.lens for s in stats]),
        collect_time=sum(s.collect_time for s in stats),
        env_info=_merge_env_info(stats),
        env_info_counts=_merge_env_info_counts(stats),
        n_stored_transitions=sum(s.stored_transitions for s in stats)
        if any(s.n_stored_transitions is not None for s in stats)
        else None,
        agents=next((s.agents for s in stats if s.agents), ()),
        agent_returns=np.concatenate([s.agent_returns for s in stats if s.agent_returns is not None])
        if any(s.agent_returns is not None for s in stats)
        else None,
    )


def _merge_env_info_counts(stats: list[CollectStats]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for stat in stats:
        for name, count in stat.env_info_counts.items():
            counts[name] = counts.get(name, 0) + count
    return counts


def _merge_env_info(stats: list[CollectStats]) -> dict[str, float]:
    """The count-weighted means of the records' env_info scalars."""
    sums: dict[str, float] = {}
    for stat in stats:
        for name, mean in stat.env_info.items():
            sums[name] = sums.get(name, 0.0) + mean * stat.env_info_counts.get(name, 1)
    counts = _merge_env_info_counts(stats)
    return {name: total / max(counts.get(name, 1), 1) for name, total in sums.items()}
