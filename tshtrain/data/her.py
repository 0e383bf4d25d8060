"""Hindsight experience replay (Andrychowicz et al. 2017), "future" strategy, relabelled when sampled.

A HER buffer stores goal-conditioned transitions unchanged: Dict observations with the keys
``achieved_goal`` and ``desired_goal`` (and usually ``observation``), as gymnasium-robotics envs and
:class:`~tshtrain.env.BitFlippingEnv` produce them. Each sampled transition ``t`` is relabelled with
probability ``k / (k + 1)`` (``k = num_future_goals``: k relabelled goals per real goal): its desired
goal becomes the goal achieved after a step ``t' >= t`` of the same episode (``t'`` uniform over the
stored rest of the episode, so goals never come from another episode or another env), in ``obs`` and
``obs_next`` alike, and its reward is recomputed by ``compute_reward_fn(achieved_goal, desired_goal,
info)`` on the achieved goal of ``obs_next``. ``terminated`` / ``truncated`` are kept as stored: use envs
that end episodes by time limit only (as gymnasium-robotics envs do).

The storage is never written by relabelling, so saving, loading, checkpoints and resumed runs see
exactly what was collected; the relabel draws come from the buffer's own generator (:attr:`rng`, part
of :meth:`sampler_state`), so a resumed run relabels as the uninterrupted one would. n-step targets of
the batch just sampled (:meth:`nstep_targets` with its indices) use the relabelled goal along the whole
chain: rewards recomputed, bootstrap observation relabelled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, final

import numpy as np
from typing_extensions import override

from tshtrain.data.batch import ObsArray, TransitionBatch
from tshtrain.data.buffer import BaseReplayBuffer, BufferLayout, NStepTargets
from tshtrain.errors import ConfigurationError, require_positive
from tshtrain.functional.targets import nstep_indices, nstep_returns

ACHIEVED_GOAL_KEY = "achieved_goal"
"""The observation key of the goal the agent has reached."""
DESIRED_GOAL_KEY = "desired_goal"
"""The observation key of the goal the agent is asked to reach."""

__all__ = [
    "ACHIEVED_GOAL_KEY",
    "DESIRED_GOAL_KEY",
    "BaseHERBuffer",
    "GoalRewardFn",
    "HERRelabel",
    "HERReplayBuffer",
    "HERVectorReplayBuffer",
]


class GoalRewardFn(Protocol):
    """The env's reward of reaching ``achieved_goal`` when ``desired_goal`` was asked, vectorised over
    the leading axis: arrays of shape ``(N, *goal_shape)`` in, rewards of shape ``(N,)`` out.
    gymnasium-robotics envs' ``env.unwrapped.compute_reward`` has this signature; the buffer stores
    no infos and passes an empty dict."""

    def __call__(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Mapping[str, Any], /
    ) -> np.ndarray: ...


@dataclass(frozen=True, kw_only=True)
class HERRelabel:
    """The relabelling of N sampled transitions (what :meth:`BaseHERBuffer.draw_relabel` drew)."""

    indices: np.ndarray
    """shape (N,): the flat indices of the sampled transitions"""
    relabelled: np.ndarray
    """shape (N,), bool: True where the desired goal was replaced"""
    future_indices: np.ndarray
    """shape (N,): the transition (same episode, same column, not earlier) whose ``obs_next`` achieved
    goal is the new desired goal; equals ``indices`` where not relabelled"""
    desired_goal: np.ndarray
    """shape (N, *goal_shape): the desired goal of each transition after relabelling"""


class BaseHERBuffer(BaseReplayBuffer):
    """HER on top of the column layout of :class:`~tshtrain.data.BaseReplayBuffer`; use
    :class:`HERReplayBuffer` or :class:`HERVectorReplayBuffer`."""

    def __init__(
        self,
        *,
        column_capacity: int,
        num_columns: int,
        compute_reward_fn: GoalRewardFn,
        num_future_goals: float,
        seed: int | np.random.Generator | None,
    ):
        super().__init__(column_capacity=column_capacity, num_columns=num_columns, seed=seed)
        cls = type(self).__name__
        if not callable(compute_reward_fn):
            raise ConfigurationError(
                f"{cls}.compute_reward_fn must be callable (e.g. env.unwrapped.compute_reward), got "
                f"{compute_reward_fn!r}."
            )
        if not (math.isfinite(num_future_goals) and num_future_goals >= 0):
            raise ConfigurationError(
                f"{cls}.num_future_goals must be a finite number >= 0 (relabelled goals per real goal; "
                f"0 disables relabelling), got {num_future_goals!r}."
            )
        self.compute_reward_fn = compute_reward_fn
        """recomputes rewards of relabelled transitions"""
        self.num_future_goals = float(num_future_goals)
        """k: relabelled goals per real goal"""
        self._last_relabel: HERRelabel | None = None

    @property
    def relabel_probability(self) -> float:
        """``k / (k + 1)``: the probability that a sampled transition gets a future goal."""
        return self.num_future_goals / (self.num_future_goals + 1.0)

    # ------------------------------------------------------------------ checks at the earliest point
    def _check_goal_fields(self, names: set[str], what: str) -> None:
        needed = {f"obs/{ACHIEVED_GOAL_KEY}", f"obs/{DESIRED_GOAL_KEY}"}
        if not needed <= names:
            keys = sorted(name.split("/", 1)[1] for name in names if name.startswith("obs/"))
            shown = f"Dict keys {keys}" if keys else "an array observation"
            raise ConfigurationError(
                f"{type(self).__name__}: {what} has {shown}; HER needs Dict observations with the keys "
                f"{ACHIEVED_GOAL_KEY!r} and {DESIRED_GOAL_KEY!r} (and usually 'observation'), as "
                f"goal-conditioned envs give them."
            )

    @override
    def _allocate(self, fields: Mapping[str, np.ndarray], num_rows: int) -> None:
        self._check_goal_fields(set(fields), "the first added transition")
        achieved = fields[f"obs/{ACHIEVED_GOAL_KEY}"].shape[1:]
        desired = fields[f"obs/{DESIRED_GOAL_KEY}"].shape[1:]
        if achieved != desired:
            raise ConfigurationError(
                f"{type(self).__name__}: {ACHIEVED_GOAL_KEY!r} has shape {achieved} but "
                f"{DESIRED_GOAL_KEY!r} has shape {desired}; relabelling puts one in place of the other."
            )
        super()._allocate(fields, num_rows)

    @override
    def restore(self, arrays: Mapping[str, np.ndarray], layout: BufferLayout) -> None:
        if arrays:  # an empty saved buffer has no fields yet
            self._check_goal_fields(set(arrays), "the loaded buffer")
        super().restore(arrays, layout)
        self._last_relabel = None

    @override
    def reset(self, *, keep_statistics: bool = False) -> None:
        super().reset(keep_statistics=keep_statistics)
        self._last_relabel = None

    # ------------------------------------------------------------------ relabelling
    def episode_steps_left(self, indices: np.ndarray) -> np.ndarray:
        """Stored transitions of the same episode after each of ``indices``: the number of
        :meth:`next_index` steps to the episode's last stored transition (its end, or the newest
        transition of its column while it runs), 0 for that transition itself.

        An episode's rows follow each other in its column, so this reads the done flags of the rows
        ahead in blocks (32 rows, doubling), all chains at once: a few vectorised reads even for long
        episodes, never a Python loop over samples.
        """
        cap = self.column_capacity
        rows_N, cols_N = np.divmod(np.asarray(indices, dtype=np.int64), self.num_columns)
        to_newest_N = (self._ring.newest_rows_E()[cols_N] - rows_N) % cap
        left_N = to_newest_N.copy()  # no episode end before the newest row: the episode still runs
        active = np.flatnonzero(to_newest_N > 0)
        start, width = 0, 32
        while len(active):
            offsets_B = np.arange(start, min(start + width, cap))
            flat_AB = ((rows_N[active, None] + offsets_B) % cap) * self.num_columns + cols_N[active, None]
            ends_AB = self._flat["terminated"][flat_AB] | self._flat["truncated"][flat_AB]
            ends_AB &= offsets_B <= to_newest_N[active, None]
            found_A = ends_AB.any(axis=1)
            left_N[active[found_A]] = offsets_B[ends_AB[found_A].argmax(axis=1)]
            start += len(offsets_B)
            active = active[~found_A & (to_newest_N[active] >= start)]
            width *= 2
        return left_N

    def draw_relabel(self, indices: np.ndarray) -> HERRelabel:
        """Draw which of the transitions at ``indices`` get a future goal and which one (two uniform
        draws per transition from :attr:`rng`, relabelled or not, so the stream stays aligned)."""
        num = len(indices)
        relabelled_N = self.rng.random(num) < self.relabel_probability
        uniform_N = self.rng.random(num)
        offset_N = np.zeros(num, dtype=np.int64)  # only relabelled transitions look ahead
        left_M = self.episode_steps_left(indices[relabelled_N])
        offset_N[relabelled_N] = np.floor(uniform_N[relabelled_N] * (left_M + 1)).astype(np.int64)
        rows_N, cols_N = np.divmod(indices, self.num_columns)
        future_N = ((rows_N + offset_N) % self.column_capacity) * self.num_columns + cols_N
        stored_goal = self._flat[f"obs/{DESIRED_GOAL_KEY}"][indices]
        future_goal = self._flat[f"obs_next/{ACHIEVED_GOAL_KEY}"][future_N]
        mask = relabelled_N.reshape(-1, *([1] * (stored_goal.ndim - 1)))
        return HERRelabel(
            indices=np.asarray(indices),
            relabelled=relabelled_N,
            future_indices=future_N,
            desired_goal=np.where(mask, future_goal, stored_goal),
        )

    def goal_rewards(self, achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
        """``compute_reward_fn`` of the given goals as float32 of shape (N,), checked."""
        num = len(achieved_goal)
        rew = np.asarray(self.compute_reward_fn(achieved_goal, desired_goal, {}), dtype=np.float32)
        if rew.shape != (num,):
            raise ConfigurationError(
                f"{type(self).__name__}.compute_reward_fn returned shape {rew.shape} for {num} goals; it "
                f"must return one reward per row, shape ({num},)."
            )
        return rew

    def _with_goal(self, obs: ObsArray, desired_goal: np.ndarray) -> dict[str, np.ndarray]:
        assert not isinstance(obs, np.ndarray)  # checked when the buffer was allocated
        return {**obs, DESIRED_GOAL_KEY: desired_goal}

    def relabelled_batch(self, relabel: HERRelabel) -> TransitionBatch:
        """The stored transitions of ``relabel.indices`` with the drawn goals and recomputed rewards."""
        batch = self.get(relabel.indices)
        rew = batch.rew.copy()
        mask = relabel.relabelled
        if mask.any():
            achieved = self._flat[f"obs_next/{ACHIEVED_GOAL_KEY}"][relabel.indices[mask]]
            rew[mask] = self.goal_rewards(achieved, relabel.desired_goal[mask])
        return TransitionBatch(
            obs=self._with_goal(batch.obs, relabel.desired_goal),
            act=batch.act,
            rew=rew,
            terminated=batch.terminated,
            truncated=batch.truncated,
            obs_next=self._with_goal(batch.obs_next, relabel.desired_goal.copy()),  # not shared with obs
            indices=relabel.indices,
        )

    @override
    def sample(self, batch_size: int) -> TransitionBatch:
        """A uniform random batch of transitions, relabelled (see the module docstring)."""
        relabel = self.draw_relabel(self.sample_indices(batch_size))
        self._last_relabel = relabel
        return self.relabelled_batch(relabel)

    @override
    def nstep_targets(self, indices: np.ndarray, *, n_step: int, gamma: float) -> NStepTargets:
        """n-step targets; for the indices of the batch :meth:`sample` returned last, along the
        relabelled goal (every reward of the chain recomputed, the bootstrap observation relabelled).
        Other indices get the stored goals and rewards."""
        relabel = self._last_relabel
        if relabel is None or not np.array_equal(relabel.indices, indices):
            return super().nstep_targets(indices, n_step=n_step, gamma=gamma)
        require_positive(type(self).__name__ + ".nstep_targets", "n_step", n_step)
        indices_KN, valid_KN = nstep_indices(indices, self.next_index, n_step)
        rew_KN = self._flat["rew"][indices_KN]
        mask = relabel.relabelled
        if mask.any():
            chain_KM = indices_KN[:, mask]
            achieved = self._flat[f"obs_next/{ACHIEVED_GOAL_KEY}"][chain_KM.reshape(-1)]
            goal = np.repeat(relabel.desired_goal[mask][None], n_step, axis=0)
            rew_KN[:, mask] = self.goal_rewards(achieved, goal.reshape(-1, *goal.shape[2:])).reshape(
                chain_KM.shape
            )
        returns, gamma_pow = nstep_returns(rew_KN, valid_KN, gamma)
        last_N = indices_KN[-1]
        return NStepTargets(
            returns=returns,
            discounts=gamma_pow * ~self._flat["terminated"][last_N],
            obs_next=self._with_goal(self._obs_from("obs_next", last_N), relabel.desired_goal),
        )


@final
class HERReplayBuffer(BaseHERBuffer):
    """A single circular HER buffer of ``size`` transitions (one env)."""

    def __init__(
        self,
        size: int,
        compute_reward_fn: GoalRewardFn,
        *,
        num_future_goals: float = 4.0,
        seed: int | np.random.Generator | None = None,
    ):
        """Args:
        size: maximum number of transitions; the oldest are overwritten when full.
        compute_reward_fn: the env's reward of (achieved goal, desired goal, info), vectorised
            (see :class:`GoalRewardFn`); a callable, never a name.
        num_future_goals: k, relabelled goals per real goal: a sampled transition is relabelled with
            probability k / (k + 1). Tianshou's ``future_k=K`` relabels with probability 1 - 1/K,
            which is ``num_future_goals=K - 1``.
        seed: seed or generator for sampling and relabelling.
        """
        super().__init__(
            column_capacity=size,
            num_columns=1,
            compute_reward_fn=compute_reward_fn,
            num_future_goals=num_future_goals,
            seed=seed,
        )


@final
class HERVectorReplayBuffer(BaseHERBuffer):
    """``buffer_num`` HER sub-buffers (one per env) sharing ``total_size``; goals are taken from the
    same sub-buffer (env) and episode only."""

    def __init__(
        self,
        total_size: int,
        buffer_num: int,
        compute_reward_fn: GoalRewardFn,
        *,
        num_future_goals: float = 4.0,
        seed: int | np.random.Generator | None = None,
    ):
        """Args:
        total_size: total number of transitions; each sub-buffer holds total_size // buffer_num.
        buffer_num: number of sub-buffers, at least the number of envs that add to it.
        compute_reward_fn: see :class:`HERReplayBuffer`.
        num_future_goals: see :class:`HERReplayBuffer`.
        seed: seed or generator for sampling and relabelling.
        """
        require_positive("HERVectorReplayBuffer", "buffer_num", buffer_num)
        if total_size < buffer_num:
            raise ConfigurationError(
                f"HERVectorReplayBuffer.total_size={total_size} is smaller than buffer_num={buffer_num}; "
                f"each sub-buffer needs room for at least one transition."
            )
        super().__init__(
            column_capacity=total_size // buffer_num,
            num_columns=buffer_num,
            compute_reward_fn=compute_reward_fn,
            num_future_goals=num_future_goals,
            seed=seed,
        )
