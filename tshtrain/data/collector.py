"""The Collector: runs a policy in a vector env and writes what happens into a replay buffer.

Semantics follow Tianshou:

* ``collect(n_step=n)`` steps all N envs ``ceil(n / N)`` times (``ceil(n / N) * N`` transitions);
  unfinished episodes carry over to the next call.
* ``collect(n_episode=n)`` stores exactly n complete episodes. At most ``n`` envs take part; an env
  that finishes an episode starts another only while fewer than n episodes have been started, so
  no env is favoured for having short episodes. Envs that no longer take part still step (a Gymnasium
  vector env steps all sub-envs at once) but their transitions are dropped. Afterwards all envs are
  reset, so the next call starts fresh episodes.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Generator, Mapping
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from typing_extensions import override

from tshtrain.data.batch import ObsArray
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import (
    BaseCollector,
    CollectedEpisodes,
    CollectorListener,
    EpisodeQuota,
    quiet_episode_env_steps,
    warn_no_episode_end,
)
from tshtrain.data.direct_step import SingleEnvStepper, VectorEnvStepper, direct_stepper, is_finite_step
from tshtrain.data.env_info import EnvInfoAccumulator
from tshtrain.env.multi_agent import ACTION_MASK_KEY
from tshtrain.env.spaces import make_action_checker, sample_actions, sample_legal_actions
from tshtrain.env.vector import failing_sub_env, require_same_step_autoreset
from tshtrain.errors import ConfigurationError, EnvStepError, EpisodeLimitError


class CollectorPolicy(Protocol):
    """What a collector needs from a policy (``tshtrain.algorithm.Policy`` implements it)."""

    def compute_actions(self, obs: ObsArray, *, deterministic: bool) -> np.ndarray:
        """Actions for a batch of observations, as stored in the buffer (before :meth:`map_action`)."""
        ...

    def map_action(self, act: np.ndarray) -> np.ndarray:
        """Stored actions -> actions the env accepts (e.g. scaling of a Box action)."""
        ...

    def map_action_inverse(self, act: np.ndarray) -> np.ndarray:
        """Env actions -> stored actions (used for uniformly random actions)."""
        ...

    def add_exploration_noise(self, act: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Stored actions with exploration noise (epsilon-greedy, Gaussian, ...)."""
        ...


@runtime_checkable
class NoisyActionsPolicy(Protocol):
    """A :class:`CollectorPolicy` that computes its noisy actions in one call
    (``tshtrain.algorithm.Policy.compute_noisy_actions``), which may skip work the noise makes useless;
    the collector then calls it instead of ``compute_actions`` + ``add_exploration_noise``."""

    def compute_noisy_actions(
        self, obs: ObsArray, rng: np.random.Generator, *, deterministic: bool
    ) -> np.ndarray:
        """The same actions as ``add_exploration_noise(compute_actions(obs), rng)``."""
        ...


def _obs_with_final(obs_next: ObsArray, info: Mapping[str, Any], done_idx: np.ndarray) -> ObsArray:
    """A copy of ``obs_next`` whose rows ``done_idx`` hold the episodes' true final observations."""
    final = info["final_obs"]
    if isinstance(obs_next, np.ndarray):
        fixed = obs_next.copy()
        for i in done_idx:
            fixed[i] = final[i]
        return fixed
    fixed_dict = {key: value.copy() for key, value in obs_next.items()}
    for i in done_idx:
        for key, value in final[i].items():
            fixed_dict[key][i] = value
    return fixed_dict


def _select(obs: ObsArray, rows: np.ndarray) -> ObsArray:
    if isinstance(obs, np.ndarray):
        return np.asarray(obs[rows])
    return {key: value[rows] for key, value in obs.items()}


def _as_vector_env(env: object, owner: str = "Collector") -> gym.vector.VectorEnv[Any, Any, Any]:
    """``env`` if it is a Gymnasium vector env; a single (non-vector) ``gymnasium.Env`` wrapped as a
    one-env ``SyncVectorEnv`` in same-step autoreset mode (as Tianshou wraps a single env); a
    :class:`~tshtrain.errors.ConfigurationError` naming what was given for anything else."""
    if isinstance(env, gym.vector.VectorEnv):
        return env
    if isinstance(env, gym.Env):
        single: gym.Env[Any, Any] = env
        return gym.vector.SyncVectorEnv([lambda: single], autoreset_mode=AutoresetMode.SAME_STEP)
    raise ConfigurationError(
        f"{owner}: env must be a gymnasium.vector.VectorEnv (e.g. tshtrain.env.make_vector_env(id, "
        f"num_envs)) or a single gymnasium.Env (wrapped as a one-env vector env), got "
        f"{type(env).__module__}.{type(env).__qualname__}. Tianshou's vector envs (DummyVectorEnv, ...) "
        f"are not Gymnasium vector envs: build the envs with make_vector_env instead."
    )


_NO_ENVS = np.zeros(0, dtype=np.int64)
_NO_LENS = np.zeros(0, dtype=np.int64)


__all__ = ["Collector", "CollectorListener", "CollectorPolicy", "EnvInfoAccumulator"]


ActingLoop = Generator[None, None, CollectedEpisodes]
"""A collection loop of :class:`Collector`: it pauses (yields) just before it computes each vector
step's actions from :attr:`Collector.obs`, and returns what it collected. Run on its own by
:func:`run_loop`; a :attr:`Collector.loop_driver` may run several collectors' loops in lockstep."""

LoopDriver = Callable[["Collector", ActingLoop, bool], CollectedEpisodes]
"""``driver(collector, loop, random)``: runs ``loop`` (of ``collector``; ``random``: it takes random
actions, not the policy's) to its end and returns its result or raises its error (see
:attr:`Collector.loop_driver`)."""


def run_loop(loop: ActingLoop) -> CollectedEpisodes:
    """Run a collection loop to its end on its own (what :class:`Collector` does without a driver)."""
    try:
        while True:
            next(loop)
    except StopIteration as stop:
        result: CollectedEpisodes = stop.value
        return result


class Collector(BaseCollector):
    """Collects transitions from a Gymnasium vector env with a policy (see the module docstring)."""

    buffer: BaseReplayBuffer | None

    def __init__(
        self,
        policy: CollectorPolicy,
        env: gym.vector.VectorEnv[Any, Any, Any] | gym.Env[Any, Any],
        buffer: BaseReplayBuffer | None = None,
        *,
        exploration_noise: bool = False,
        seed: int | None = None,
        check_actions: bool = True,
        check_finite: bool = False,
        info_key: str | None = None,
        direct_step: bool = True,
    ):
        """Args:
        policy: computes actions (a :class:`tshtrain.algorithm.Policy`).
        env: a vector env in same-step autoreset mode (see :func:`tshtrain.env.make_vector_env`), or a
            single (non-vector) ``gymnasium.Env``, which is wrapped as a one-env ``SyncVectorEnv`` in
            that mode (:attr:`env` is then the wrapper; closing it closes your env). The single env is
            what Tianshou scripts often pass to their test collector. Anything else raises
            :class:`~tshtrain.errors.ConfigurationError`.
        buffer: where transitions go; it needs at least ``env.num_envs`` sub-buffers. None: nothing is
            stored (test collectors).
        exploration_noise: apply ``policy.add_exploration_noise`` to the policy's actions.
        seed: seeds the envs (sub-env i gets seed + i) and the collector's generator (random actions,
            exploration noise). The envs are reset here.
        check_actions: check every action batch against the action space (O(N) per vector step).
        check_finite: check the observations and rewards of every reset and vector step for NaN and
            inf before they are stored (O(N * obs size) per vector step); the first one raises
            :class:`~tshtrain.errors.EnvStepError` naming the sub-env, the collector's env step and
            the field (``obs``, ``obs/KEY`` or ``rew``). Off: costs one bool test per vector step.
        info_key: report the numeric scalars the envs put in ``info[info_key]`` (skrl's
            ``environment_info``): their means over the collected env steps are
            ``CollectStats.env_info`` (see :class:`EnvInfoAccumulator`). None: info is not read.
        direct_step: with a plain ``SyncVectorEnv``, step its sub-envs directly instead of calling
            ``env.step`` (:mod:`tshtrain.data.direct_step`): the same transitions, stats, random numbers,
            listener calls and errors for less. One env: a scalar path that costs well under half the
            vector path per env step; several envs (unless ``info_key`` is set): ``env.step`` without
            its info merging and copies. False: always call ``env.step``. See :attr:`uses_direct_step`.
        """
        env = _as_vector_env(env)
        require_same_step_autoreset(env)
        super().__init__(
            num_envs=int(env.num_envs), buffer=buffer, exploration_noise=exploration_noise, info_key=info_key
        )
        self._noisy_policy: NoisyActionsPolicy | None = None
        """:attr:`policy` when it offers ``compute_noisy_actions``, else None"""
        self.policy = policy
        self.env = env
        self.check_actions = check_actions
        self.check_finite = check_finite
        self._vector_steps_this_collect = 0  # counted only with check_finite, for its messages
        self._env_info: EnvInfoAccumulator | None = None
        self.rng = np.random.default_rng(seed)
        """the collector's generator (random actions, exploration noise)"""
        self._check_actions = make_action_checker(env.single_action_space, self.num_envs)
        self._obs: ObsArray = np.zeros(0)
        self._ep_return: np.ndarray = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._ep_stored = np.zeros(self.num_envs, dtype=bool)  # current episode has stored transitions
        stepper = direct_stepper(env, reads_info=info_key is not None) if direct_step else None
        self._single = stepper if isinstance(stepper, SingleEnvStepper) else None
        self._direct = stepper if isinstance(stepper, VectorEnvStepper) else None
        self.loop_driver: LoopDriver | None = None
        """runs this collector's collection loops instead of :func:`run_loop` (None: the collector runs
        them itself). :class:`tshtrain.seeds.SeedBatch` sets it to step several seeds' collectors in
        lockstep, their policies' networks evaluated in one stacked pass"""
        self.reset(reset_buffer=True, reset_stats=True, seed=seed)

    @property
    def uses_direct_step(self) -> bool:
        """True if this collector steps the sub-envs itself (see the ``direct_step`` argument); False if
        it calls ``env.step``."""
        return self._single is not None or self._direct is not None

    # ------------------------------------------------------------------ resetting
    @override
    def reset_env(self, seed: int | None = None) -> None:
        """Reset all envs (new episodes) and the per-env episode accumulators.

        Episodes cut short by the reset end, in the buffer, with their last stored transition marked
        truncated (see :meth:`BaseReplayBuffer.truncate_episodes`).
        """
        if self.buffer is not None and self._ep_stored.any():
            self.buffer.truncate_episodes(np.flatnonzero(self._ep_stored))
        self._ep_stored[:] = False
        if self.listener is not None:
            self.listener.on_env_reset(np.arange(self.num_envs))
        obs, _ = self.env.reset(seed=seed)
        if self.check_finite:
            self._require_finite(obs, None, "after a reset")
        self._obs = obs
        self._ep_return = np.zeros_like(self._ep_return)
        self._ep_len[:] = 0

    # ------------------------------------------------------------------ collecting
    @override
    def _begin_collect(self) -> None:
        self._vector_steps_this_collect = 0
        self._env_info = EnvInfoAccumulator(self.info_key) if self.info_key is not None else None

    def _collected(self, stored: int, returns: np.ndarray, lens: np.ndarray) -> CollectedEpisodes:
        info = self._env_info
        return CollectedEpisodes(
            stored,
            returns,
            lens,
            info.means() if info is not None else {},
            dict(info.counts) if info is not None else {},
        )

    @property
    def policy(self) -> CollectorPolicy:
        """The policy that acts. Assigning another one (overlapped collection acts with a copy of the
        learner's) also decides again whether it offers ``compute_noisy_actions``."""
        return self._policy

    @policy.setter
    def policy(self, policy: CollectorPolicy) -> None:
        self._policy = policy
        self._noisy_policy = policy if isinstance(policy, NoisyActionsPolicy) else None

    def _actions(self, random: bool, deterministic: bool) -> tuple[np.ndarray, np.ndarray]:
        """(stored actions, env actions) for the current observations."""
        if random:
            obs = self._obs
            mask = None if isinstance(obs, np.ndarray) else obs.get(ACTION_MASK_KEY)
            if mask is not None:  # action masks: uniform among the legal actions
                env_act = sample_legal_actions(np.asarray(mask), self.rng)
            else:
                env_act = sample_actions(self.env.single_action_space, self.num_envs, self.rng)
            return self.policy.map_action_inverse(env_act), env_act
        if self.exploration_noise and self._noisy_policy is not None:
            act = self._noisy_policy.compute_noisy_actions(self._obs, self.rng, deterministic=deterministic)
        else:
            act = self.policy.compute_actions(self._obs, deterministic=deterministic)
            if self.exploration_noise:
                act = self.policy.add_exploration_noise(act, self.rng)
        env_act = self._policy.map_action(act)  # (the attribute behind the policy property)
        if self.check_actions:
            self._check_actions(env_act)
        return act, env_act

    def _vector_step(
        self, random: bool, deterministic: bool, active: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step of all envs; stores the rows of ``active`` envs (all if None).

        Returns:
            (indices of envs whose episode ended, their returns, their lengths)
        """
        act, env_act = self._actions(random, deterministic)
        try:
            if self._direct is not None:
                obs_next, rew, terminated, truncated, info = self._direct.step(env_act, self._obs)
            else:
                obs_next, rew, terminated, truncated, info = self.env.step(env_act)
        except Exception as error:  # free unless raised: name the sub-env, keep the exception's type
            error.add_note(self._step_error_note(error))
            raise
        if self.check_finite:
            self._vector_steps_this_collect += 1
            self._require_finite(obs_next, rew, "in the vector step")
        if self._env_info is not None:
            self._env_info.add(info, active)
        done = terminated | truncated
        any_done = bool(done.any())
        done_idx = np.flatnonzero(done) if any_done else _NO_ENVS
        stored_next = _obs_with_final(obs_next, info, done_idx) if any_done else obs_next
        if self._ep_return.ndim != rew.ndim:  # multi-agent rewards: one return per agent
            self._ep_return = np.zeros((self.num_envs, *np.shape(rew)[1:]), dtype=np.float64)
        if self.buffer is not None:
            if active is None:
                np.logical_not(done, out=self._ep_stored)
                self.buffer.add(
                    obs=self._obs,
                    act=act,
                    rew=rew,
                    terminated=terminated,
                    truncated=truncated,
                    obs_next=stored_next,
                )
            else:
                self._ep_stored[active] = ~done[active]
                self.buffer.add(
                    obs=_select(self._obs, active),
                    act=act[active],
                    rew=rew[active],
                    terminated=terminated[active],
                    truncated=truncated[active],
                    obs_next=_select(stored_next, active),
                    env_ids=active,
                )
        self._ep_return += rew
        self._ep_len += 1
        if any_done:
            returns, lens = self._ep_return[done_idx].copy(), self._ep_len[done_idx].copy()
            self._ep_return[done_idx] = 0.0
            self._ep_len[done_idx] = 0
        else:
            returns, lens = self._ep_return[:0], _NO_LENS  # empty: no episode ended
        self._obs = obs_next
        if self.listener is not None:
            self.listener.on_vector_step(done_idx)
        return done_idx, returns, lens

    def _env_step_count(self) -> int:
        """Env steps this collector took (since its stats reset) before the current vector step."""
        return self.num_collected_env_steps + max(self._vector_steps_this_collect - 1, 0) * self.num_envs

    def _step_error_note(self, error: BaseException) -> str:
        stepper = self._single or self._direct
        index = stepper.failed_env if stepper is not None else failing_sub_env(self.env, error)
        who = f"sub-env {index}" if index is not None else "a sub-env (index unknown)"
        return (
            f"raised by the step of {who} of the vector env, in a collect that started after collector "
            f"env step {self.num_collected_env_steps}"
        )

    def _require_finite(self, obs: ObsArray, rew: np.ndarray | None, when: str) -> None:
        """Raise :class:`EnvStepError` at the first NaN / inf in ``obs`` or ``rew`` (None: not checked)."""
        fields = {"obs": obs} if isinstance(obs, np.ndarray) else {f"obs/{k}": v for k, v in obs.items()}
        if rew is not None:
            fields["rew"] = rew
        for field, values in fields.items():
            arr = np.asarray(values)
            if arr.dtype.kind not in "fc" or np.isfinite(arr).all():
                continue
            bad_rows = ~np.isfinite(arr.reshape(len(arr), -1)).all(axis=1)
            index = int(np.flatnonzero(bad_rows)[0])
            kind = "NaN" if np.isnan(arr[index]).any() else "inf"
            step = self._env_step_count()
            value = np.array2string(np.asarray(arr[index]), threshold=8)
            raise EnvStepError(
                f"Collector(check_finite=True): sub-env {index} returned {kind} in {field} {when} after "
                f"collector env step {step} (value {value}); fix "
                f"the env or wrap it (e.g. gymnasium.wrappers.TransformReward / TransformObservation).",
                env_index=index,
                env_step=step,
                field=field,
            )

    @property
    def obs(self) -> ObsArray:
        """The observations the policy acts on at the next vector step."""
        return self._obs

    def _run(self, loop: ActingLoop, random: bool) -> CollectedEpisodes:
        driver = self.loop_driver
        return run_loop(loop) if driver is None else driver(self, loop, random)

    @override
    def _collect_steps(self, num_vector_steps: int, random: bool, deterministic: bool) -> CollectedEpisodes:
        if self._single is not None:
            loop = self._single_loop(
                self._single,
                random,
                deterministic,
                num_steps=num_vector_steps,
                n_episode=None,
                max_env_steps=None,
            )
        else:
            loop = self._steps_loop(num_vector_steps, random, deterministic)
        return self._run(loop, random)

    def _steps_loop(self, num_vector_steps: int, random: bool, deterministic: bool) -> ActingLoop:
        returns: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        for _ in range(num_vector_steps):
            yield
            done_idx, ep_returns, ep_lens = self._vector_step(random, deterministic, None)
            if len(done_idx):
                returns.append(ep_returns)
                lens.append(ep_lens)
        return self._collected(
            num_vector_steps * self.num_envs,
            self._concat(returns),
            np.concatenate(lens or [np.zeros(0, np.int64)]),
        )

    @override
    def _collect_episodes(
        self, n_episode: int, random: bool, deterministic: bool, max_env_steps: int | None
    ) -> CollectedEpisodes:
        if np.any(self._ep_len):  # unfinished episodes from step-based collection: start afresh
            self.reset_env()
        if self._single is not None:
            loop = self._single_loop(
                self._single,
                random,
                deterministic,
                num_steps=None,
                n_episode=n_episode,
                max_env_steps=max_env_steps,
            )
        else:
            loop = self._episodes_loop(n_episode, random, deterministic, max_env_steps)
        return self._run(loop, random)

    def _episodes_loop(
        self, n_episode: int, random: bool, deterministic: bool, max_env_steps: int | None
    ) -> ActingLoop:
        quota = EpisodeQuota(
            n_episode, self.num_envs, owner=f"{type(self).__name__}.collect", max_env_steps=max_env_steps
        )
        returns: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        while quota.running():
            yield
            done_idx, ep_returns, ep_lens = self._vector_step(random, deterministic, quota.step_envs())
            finished = quota.finish(done_idx)
            if finished.any():
                returns.append(ep_returns[finished])
                lens.append(ep_lens[finished])
            if max_env_steps is not None and quota.over_limit(max_env_steps):
                self._episode_limit(n_episode, quota.stored, max_env_steps, quota.active_mask)
        lens_N = np.concatenate(lens or [np.zeros(0, np.int64)])
        return self._collected(quota.stored, self._concat(returns), lens_N)

    def _single_loop(
        self,
        stepper: SingleEnvStepper,
        random: bool,
        deterministic: bool,
        *,
        num_steps: int | None,
        n_episode: int | None,
        max_env_steps: int | None,
    ) -> ActingLoop:
        """The one-env fast path of both collect modes: ``num_steps`` env steps, or (``num_steps`` None)
        ``n_episode`` episodes. Does per env step what :meth:`_vector_step` does, with scalars."""
        if self._obs is not stepper.current:  # after a reset or a restored state: take the obs over
            self._obs = stepper.adopt(self._obs)
        buffer, info_sums, listener = self.buffer, self._env_info, self.listener
        check_finite, actions, step_env = self.check_finite, self._actions, stepper.step
        returns: list[float] = []
        lens: list[int] = []
        ep_return, ep_len = float(self._ep_return[0]), int(self._ep_len[0])
        stored = 0
        done = not self._ep_stored[0]  # of the last step (before the first: what keeps _ep_stored as is)
        quiet = quiet_episode_env_steps()
        num_episodes = -1 if n_episode is None else n_episode  # len(returns) never equals -1
        try:
            while stored != num_steps and len(returns) != num_episodes:
                yield
                act, env_act = actions(random, deterministic)
                try:
                    step = step_env(env_act)
                except Exception as error:
                    error.add_note(self._step_error_note(error))
                    raise
                obs, rew, terminated, truncated = step.obs, step.rew, step.terminated, step.truncated
                if check_finite:
                    self._vector_steps_this_collect += 1
                    if not is_finite_step(obs, rew):
                        self._require_finite(obs, np.array([rew]), "in the vector step")
                if info_sums is not None:
                    info_sums.add_single(step.info, step.final_info)
                if buffer is not None:
                    buffer.add_single(
                        obs=self._obs,
                        act=act,
                        rew=rew,
                        terminated=terminated,
                        truncated=truncated,
                        obs_next=step.stored_next,
                    )
                done = terminated or truncated
                ep_return += rew
                ep_len += 1
                stored += 1
                if done:
                    returns.append(ep_return)
                    lens.append(ep_len)
                    ep_return, ep_len = 0.0, 0
                self._obs = obs
                if listener is not None:
                    listener.on_vector_step(np.zeros(1, np.int64) if done else _NO_ENVS)
                if n_episode is not None and not done and ep_len == quiet:
                    warn_no_episode_end(f"{type(self).__name__}.collect", n_episode, ep_len, max_env_steps)
                if max_env_steps is not None and stored >= max_env_steps and len(returns) != n_episode:
                    self._ep_return[0], self._ep_len[0] = ep_return, ep_len
                    self._episode_limit(n_episode or 0, stored, max_env_steps, np.ones(1, dtype=bool))
        finally:
            self._ep_return[0], self._ep_len[0] = ep_return, ep_len
            self._ep_stored[0] = buffer is not None and not done  # the last step's episode goes on or not
        return self._collected(stored, np.array(returns, dtype=np.float64), np.array(lens, dtype=np.int64))

    def _episode_limit(
        self, n_episode: int, stored: int, max_env_steps: int, active_mask: np.ndarray
    ) -> None:
        """Raise EpisodeLimitError: ``max_env_steps`` were taken and episodes are still running."""
        still = active_mask
        longest = int(self._ep_len[still].max())
        raise EpisodeLimitError(
            f"Collector.collect: {stored} env steps without finishing {n_episode} episodes (max_env_steps="
            f"{max_env_steps}); sub-envs {np.flatnonzero(still)[:8].tolist()} are {longest} steps into their "
            f"episode. An env that never terminates or truncates needs a time limit (e.g. "
            f"gymnasium.wrappers.TimeLimit); or raise the bound."
        )

    def _concat(self, returns: list[np.ndarray]) -> np.ndarray:
        if returns:
            return np.concatenate(returns)
        return np.zeros((0, *self._ep_return.shape[1:]), dtype=np.float64)

    # ------------------------------------------------------------------ the envs
    @override
    def render_env(self) -> None:
        self.env.render()

    @override
    def close_env(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ checkpoints
    @override
    def state_dict(self) -> dict[str, Any]:
        """The collector's own state: generator, current observations, unfinished-episode accumulators
        and counters (torch.save / ``weights_only``-loadable). The envs are separate, see
        :meth:`env_snapshot`; the buffer is saved on its own."""
        obs = self._obs
        return {
            "rng": self.rng.bit_generator.state,
            "obs": torch.from_numpy(obs.copy())
            if isinstance(obs, np.ndarray)
            else {k: torch.from_numpy(np.array(v)) for k, v in obs.items()},
            "ep_return": torch.from_numpy(self._ep_return.copy()),
            "ep_len": torch.from_numpy(self._ep_len.copy()),
            "ep_stored": torch.from_numpy(self._ep_stored.copy()),
            **self._counters_state(),
        }

    @override
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (the envs must be restored with :meth:`restore_env_snapshot`)."""
        self.rng.bit_generator.state = dict(state["rng"])
        obs = state["obs"]
        self._obs = obs.numpy() if isinstance(obs, torch.Tensor) else {k: v.numpy() for k, v in obs.items()}
        self._ep_return = state["ep_return"].numpy().copy()
        self._ep_len = state["ep_len"].numpy().copy()
        self._ep_stored = state["ep_stored"].numpy().copy()
        self._load_counters(state)

    @override
    def env_snapshot(self) -> bytes | None:
        """The sub-envs pickled (in-process ``SyncVectorEnv`` with picklable envs), or None.

        Subprocess vector envs and envs that cannot be pickled give None: a resumed run then resets
        them (unfinished episodes end, marked truncated in the buffer).
        """
        if not isinstance(self.env, gym.vector.SyncVectorEnv):
            return None
        try:
            return pickle.dumps(self.env.envs, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None

    @override
    def restore_env_snapshot(self, snapshot: bytes | None) -> bool:
        """Put pickled sub-envs back (trusted input only: unpickling runs code). With None, or if the
        env is not an in-process ``SyncVectorEnv``, reset the envs instead. Returns True if restored."""
        if snapshot is None or not isinstance(self.env, gym.vector.SyncVectorEnv):
            self.reset_env()
            return False
        envs = pickle.loads(snapshot)  # trusted: the user's own checkpoint
        if len(envs) != self.num_envs:
            raise ConfigurationError(
                f"Collector.restore_env_snapshot: the snapshot holds {len(envs)} envs, the collector has "
                f"{self.num_envs}; build the collector as it was when the checkpoint was saved."
            )
        self.env.envs = envs
        return True
