"""Many seeds at the cost of a few: K independent runs of one experiment trained side by side in one
process, their updates computed in one pass over stacked networks (issue 35).

Each seed is an ordinary trainer that you build as for a run of its own: its own algorithm, envs,
collectors, buffers, generators, callbacks, logger, run directory and checkpoints. :class:`SeedBatch`
runs them together. Each trainer runs in a thread of its own, but never two at once: the batch hands
control from one to the next, so every seed's steps happen in the order its own run would take them,
and the run is as deterministic as a single one. When a seed reaches its update it pauses; once every
seed still training has paused there, the batch computes all their updates at once
(:meth:`tshtrain.algorithm.PPO.stacked_update`, :meth:`tshtrain.algorithm.DQN.stacked_update`,
:meth:`tshtrain.algorithm.SAC.stacked_update`: the
networks stacked along a member axis, one batched forward and backward, each member's gradient clipped
and Adam-stepped on its own) and the seeds go on.
A seed that stops (its ``stop_fn``, ``max_epochs``, ``max_env_steps``) leaves the batch: the next
stacked updates are computed without it.

Collection is stepped in lockstep too: a seed's collector pauses at its collection as at its update,
and the batch runs the waiting seeds' collection loops one vector step of each in turn
(:func:`tshtrain.algorithm.blocks.lockstep.run_lockstep`), their policies' networks evaluated in one
stacked pass per vector step; the sampling, exploration noise, env steps, buffers and counters stay
each seed's own. That applies to the collectors (:class:`~tshtrain.data.Collector`) whose policy
:func:`~tshtrain.algorithm.blocks.lockstep.acting_network` can stack (PPO's categorical policy, DQN's
Q policy, with MLP networks), and to a training collector only when its collection step takes at
least :data:`LOCKSTEP_MIN_VECTOR_STEPS` vector steps (a pause costs two thread hand-offs per seed,
more than the stacked pass saves on one step). ``lockstep_collection=False`` collects each seed on
its own.

Nothing crosses seeds: member k's update reads member k's rollout, parameters and Adam state only;
its result equals ``algorithm.update(rollout)`` of a run of its own to float rounding (batched matrix
products sum in another order).

What a seed batch takes: on-policy trainers of :class:`~tshtrain.algorithm.PPO` with the same
``PPOParams``, architecture, ``batch_size`` and ``update_step_num_repetitions``, or off-policy trainers
of :class:`~tshtrain.algorithm.DQN` or of :class:`~tshtrain.algorithm.SAC` with the same params,
architecture, ``batch_size``, ``update_step_num_gradient_steps_per_sample`` and
``collection_step_num_env_steps``. Refused with a one-line error: callbacks with update hooks,
``overlap_collection``, PPO's ``compile_loss``, ``recompute_advantage``, ``return_scaling``,
``desired_kl`` and per-network clipping, DQN's and SAC's ``obs_normalizer``.

Layer 5: the trainers and the algorithms.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, final

import torch
from typing_extensions import override

from tshtrain.algorithm import DQN, PPO, SAC
from tshtrain.algorithm.base import Algorithm, TrainingStats
from tshtrain.algorithm.blocks.lockstep import LockstepJob, acting_network, run_lockstep
from tshtrain.algorithm.blocks.stacked_update import StackCache
from tshtrain.data.batch import AnyRolloutBatch
from tshtrain.data.collector import ActingLoop, Collector, run_loop
from tshtrain.data.collector_base import AnyReplayBuffer, CollectedEpisodes
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OffPolicyTrainer, OnPolicyTrainer
from tshtrain.trainer.callbacks import CollectedBatch
from tshtrain.trainer.dispatch import CallbackSet
from tshtrain.trainer.params import OffPolicyTrainerParams, OnPolicyTrainerParams
from tshtrain.trainer.stats import InfoStats
from tshtrain.trainer.steps import DelegatingStep, StepStrategy, UpdatePart

LOCKSTEP_MIN_VECTOR_STEPS = 4
"""a training collector is stepped in lockstep only if its collection step takes at least this many
vector steps (test collectors collect episodes: always)"""


class SeedBatchAbortedError(RuntimeError):
    """Raised inside a seed's run when another seed of its batch failed (the batch stops every seed)."""


@dataclass
class _Member:
    """One seed's trainer and where its thread stands."""

    index: int
    trainer: OnPolicyTrainer | OffPolicyTrainer
    algorithm: PPO | DQN | SAC
    turn: threading.Event = field(default_factory=threading.Event)
    """set by the batch: the seed's thread may run"""
    paused: threading.Event = field(default_factory=threading.Event)
    """set by the seed's thread: it waits for the batch (at its update, or finished)"""
    pending: AnyRolloutBatch | tuple[AnyReplayBuffer, int] | LockstepJob | None = None
    """what it waits for: an update (PPO's rollout, or DQN's / SAC's (buffer, number of gradient
    steps)) or a collection (its collector's loop); None: it is not waiting"""
    result: list[TrainingStats] | CollectedEpisodes | BaseException | None = None
    """what its update (one record per gradient step for DQN and SAC) or collection returns, or raises"""
    done: bool = False
    info: InfoStats | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def take_result(self) -> list[TrainingStats] | CollectedEpisodes | BaseException | None:
        """The result the batch left for the update this seed waits at (cleared)."""
        result, self.result = self.result, None
        return result


@final
class _MemberStep(DelegatingStep):
    """A seed's step strategy: its update waits for the batch's stacked update."""

    def __init__(self, inner: StepStrategy, batch: SeedBatch, member: _Member):
        super().__init__(inner)
        self._batch, self._member = batch, member

    @override
    def update(
        self, batch: CollectedBatch | None, callbacks: CallbackSet, show_bar: bool
    ) -> list[UpdatePart]:
        assert batch is not None  # online: collected just now
        if callbacks.update_hooks() is not None:
            raise ConfigurationError(
                f"SeedBatch: seed {self._member.index} has callbacks that act inside the update (update "
                f"hooks: on_loss, on_optimizer_step, a stop during the update); a stacked update runs every "
                f"seed's gradient steps at once. Act at training-step level (after_update) instead."
            )
        if batch.rollout is not None:  # on-policy: the rollout, then the buffer is cleared
            try:
                stats = self._batch.await_update(self._member, batch.rollout)
            finally:
                batch.buffer.reset(keep_statistics=True)
        else:  # off-policy: as many gradient steps as OffPolicyStep.update would take
            params = self._member.trainer.params
            assert isinstance(params, OffPolicyTrainerParams)
            u = params.update_step_num_gradient_steps_per_sample
            num_steps = round(u * batch.collect_stat.n_collected_steps) if len(batch.buffer) else 0
            stats = self._batch.await_update(self._member, (batch.buffer, num_steps))
        return [UpdatePart(stat, {}) for stat in stats]


@final
@dataclass(frozen=True)
class _Wrapper:
    batch: SeedBatch
    member: _Member

    def wrap(self, strategy: StepStrategy, algorithm: Algorithm[Any]) -> StepStrategy:
        del algorithm
        return _MemberStep(strategy, self.batch, self.member)


def _checked_algorithms(trainers: Sequence[OnPolicyTrainer | OffPolicyTrainer]) -> list[PPO | DQN | SAC]:
    """The trainers' algorithms, once everything a seed batch needs of them is checked (see
    :class:`SeedBatch`)."""
    if not trainers:
        raise ConfigurationError("SeedBatch: trainers is empty; give one OnPolicyTrainer per seed.")
    on_policy = isinstance(trainers[0], OnPolicyTrainer)
    family = OnPolicyTrainer if on_policy else OffPolicyTrainer
    first_algorithm = getattr(trainers[0], "algorithm", None)
    kinds: tuple[type[PPO | DQN | SAC], ...] = (PPO,) if on_policy else (DQN, SAC)
    kind = type(first_algorithm) if isinstance(first_algorithm, kinds) else kinds[0]
    algorithms: list[PPO | DQN | SAC] = []
    for k, trainer in enumerate(trainers):
        algorithm = getattr(trainer, "algorithm", None)
        if not isinstance(trainer, family) or type(algorithm) is not kind:
            raise ConfigurationError(
                f"SeedBatch: trainers[{k}] is a {type(trainer).__name__} of {type(algorithm).__name__}; "
                f"a seed batch takes OnPolicyTrainer of PPO, or OffPolicyTrainer of DQN or of SAC, all of "
                f"one kind (other algorithms: run the seeds separately)."
            )
        assert isinstance(algorithm, (PPO, DQN, SAC))
        algorithms.append(algorithm)
    first = trainers[0]
    settings = (
        ("batch_size", "update_step_num_repetitions")
        if on_policy
        else ("batch_size", "update_step_num_gradient_steps_per_sample", "collection_step_num_env_steps")
    )
    for k, trainer in enumerate(trainers[1:], start=1):
        if algorithms[k].params != algorithms[0].params:
            raise ConfigurationError(
                f"SeedBatch: trainers[{k}]'s {type(algorithms[k].params).__name__} differ from "
                f"trainers[0]'s; the seeds of a batch share their hyper-parameters."
            )
        for name in settings:
            mine, theirs = getattr(trainer.params, name), getattr(first.params, name)
            if mine != theirs:
                raise ConfigurationError(
                    f"SeedBatch: trainers[{k}].params.{name}={mine!r}, trainers[0]'s is {theirs!r}; the "
                    f"seeds of a batch share their update settings."
                )
    if on_policy:  # options a stacked update does not take: refused now, not at the first update
        PPO.check_stackable([a for a in algorithms if isinstance(a, PPO)])
    else:
        _check_off_policy(algorithms, first)
    for k, trainer in enumerate(trainers):
        if getattr(trainer.params, "overlap_collection", False):
            raise ConfigurationError(
                f"SeedBatch: trainers[{k}].params.overlap_collection=True collects in a background "
                f"thread during the update; a seed batch runs the seeds' steps in turn. Set it to False."
            )
    return algorithms


def _check_off_policy(
    algorithms: Sequence[PPO | DQN | SAC], first: OnPolicyTrainer | OffPolicyTrainer
) -> None:
    """What DQN and SAC seed batches need beyond equal params (see :class:`SeedBatch`)."""
    if isinstance(algorithms[0], DQN):
        DQN.check_stackable([a for a in algorithms if isinstance(a, DQN)])
    else:
        SAC.check_stackable([a for a in algorithms if isinstance(a, SAC)])
    if first.params.collection_step_num_env_steps is None:
        raise ConfigurationError(
            f"SeedBatch: {type(algorithms[0]).__name__} seeds collect by episodes "
            f"(collection_step_num_episodes), so their training steps take different numbers of "
            f"gradient steps; set collection_step_num_env_steps."
        )


class SeedBatch:
    """K trainers (one per seed) trained side by side, their updates stacked (see the module
    docstring).

    Args:
        trainers: one :class:`~tshtrain.trainer.OnPolicyTrainer` of a :class:`~tshtrain.algorithm.PPO`
            per seed, or one :class:`~tshtrain.trainer.OffPolicyTrainer` of a
            :class:`~tshtrain.algorithm.DQN` or of a :class:`~tshtrain.algorithm.SAC` per seed, built as
            for runs of their own and not run yet (a trainer into which a checkpoint was loaded
            continues from it: the way to resume a batch).
        lockstep_collection: step the seeds' collectors in lockstep with one stacked pass of their
            policies' networks per vector step (see the module docstring); False: each seed collects
            on its own.

    Raises:
        ConfigurationError: no trainers, a trainer of another kind, or trainers whose algorithms or
            update settings differ (checked now; architectures at the first update).
    """

    def __init__(
        self, trainers: Sequence[OnPolicyTrainer | OffPolicyTrainer], *, lockstep_collection: bool = True
    ):
        algorithms = _checked_algorithms(trainers)
        self.lockstep_collection = lockstep_collection
        self._members = [_Member(k, t, a) for k, (t, a) in enumerate(zip(trainers, algorithms, strict=True))]
        self._aborted: BaseException | None = None
        self._ran = False
        for member in self._members:
            member.trainer.wrap_strategy(_Wrapper(self, member))
        self.num_stacked_updates = 0
        """stacked updates computed so far"""
        self.stacked_sizes: list[int] = []
        """the number of seeds in each stacked update, in order (fewer once seeds stop)"""
        self._stack_cache = StackCache()
        """DQN's and SAC's stacked networks and Adam state, reused from one training step to the next
        while nothing else changed them (a stack is written back after every stacked update)"""
        self.num_lockstep_collections = 0
        """collections run in lockstep so far (one per pause of the seeds at their collection)"""

    @property
    def trainers(self) -> list[OnPolicyTrainer | OffPolicyTrainer]:
        return [m.trainer for m in self._members]

    @property
    def num_stack_builds(self) -> int:
        """DQN's and SAC's stacks built so far: one while the same seeds train on, one more each time a
        seed leaves or something else changed a seed's networks or Adam state between two training
        steps (a stack is reused otherwise; PPO's updates stack their networks each time)."""
        return self._stack_cache.num_builds

    @property
    def errors(self) -> list[BaseException | None]:
        """Per seed, the error its run ended with (:class:`SeedBatchAbortedError` for the seeds another
        seed's failure or a Ctrl-C stopped), or None."""
        return [m.error for m in self._members]

    def run(self, on_seed_end: Callable[[int, InfoStats], None] | None = None) -> list[InfoStats]:
        """Run every seed to its end; the seeds' final :class:`InfoStats`, in order. ``on_seed_end(k,
        info)`` is called as soon as seed k's run has ended normally (in its thread, in its turn: e.g. to
        write its results while the other seeds train on).

        Raises:
            the first error of any seed (the others are stopped with :class:`SeedBatchAbortedError`, their
            final checkpoints written as a failing run writes them).
        """
        if self._ran:
            raise RuntimeError("SeedBatch.run(): a seed batch runs once; build new trainers to train again.")
        self._ran = True
        threads = [
            threading.Thread(
                target=self._member_main, args=(m, on_seed_end), name=f"seed-batch-{m.index}", daemon=True
            )
            for m in self._members
        ]
        drivers = self._lockstep_collectors() if self.lockstep_collection else []
        for member, thread in zip(self._members, threads, strict=True):
            member.thread = thread
        for thread in threads:
            thread.start()
        flush = all(m.trainer.options.flush_denormal for m in self._members)
        try:
            self._drive(flush)
        except BaseException as error:  # KeyboardInterrupt included: every seed stops
            self._abort(error)
            raise
        finally:
            self._release_all()  # a second Ctrl-C during the abort must not leave a seed waiting
            for thread in threads:
                thread.join()
            for collector in drivers:
                collector.loop_driver = None
        failed = next((m.error for m in self._members if m.error is not None), None)
        if failed is not None:
            raise failed
        return [m.info for m in self._members if m.info is not None]

    def _drive(self, flush: bool) -> None:
        """Give every seed its turn, then run what they wait at (collections in lockstep, stacked
        updates), until every seed has finished."""
        while not all(m.done for m in self._members):
            for member in self._members:
                if not member.done:
                    self._give_turn(member)
            collecting = [m for m in self._members if isinstance(m.pending, LockstepJob)]
            if collecting:
                self._collect(collecting, flush)
            waiting = [m for m in self._members if m.pending is not None]
            if waiting:
                self._stacked_update(waiting, flush)

    # ------------------------------------------------------------------ the seeds' threads
    def _member_main(self, member: _Member, on_end: Callable[[int, InfoStats], None] | None) -> None:
        member.turn.wait()
        member.turn.clear()
        try:
            if self._aborted is not None:
                raise SeedBatchAbortedError(f"seed {member.index}: the batch stopped ({self._aborted!r})")
            member.info = member.trainer.run()
            if on_end is not None:
                on_end(member.index, member.info)
        except BaseException as error:  # handed to the batch, which re-raises the first
            member.error = error
        finally:
            member.done = True
            member.pending = None
            member.paused.set()

    def await_update(
        self, member: _Member, pending: AnyRolloutBatch | tuple[AnyReplayBuffer, int]
    ) -> list[TrainingStats]:
        """In a seed's thread: pause at the update until the batch has computed it (called by the
        seed's step strategy)."""
        result = self._pause(member, pending)
        assert isinstance(result, list)
        return result

    def _await_collection(
        self, member: _Member, collector: Collector, loop: ActingLoop, random: bool
    ) -> CollectedEpisodes:
        """The loop driver of a seed's collector: in the seed's thread, pause until the batch has run
        ``loop`` in lockstep with the other seeds' loops (a collection outside the seed's run, e.g.
        from the main thread, runs on its own)."""
        if threading.current_thread() is not member.thread:
            return run_loop(loop)
        result = self._pause(member, LockstepJob(collector, loop, random))
        assert isinstance(result, CollectedEpisodes)
        return result

    def _pause(
        self, member: _Member, pending: AnyRolloutBatch | tuple[AnyReplayBuffer, int] | LockstepJob
    ) -> list[TrainingStats] | CollectedEpisodes:
        """In a seed's thread: hand ``pending`` to the batch and wait for its result."""
        aborted = self._aborted
        if aborted is not None:  # the batch stopped while this seed ran (Ctrl-C in the main thread)
            raise SeedBatchAbortedError(f"seed {member.index}: the batch stopped ({aborted!r})")
        member.pending, member.result = pending, None
        member.paused.set()
        member.turn.wait()
        member.turn.clear()
        result = member.take_result()
        if isinstance(result, BaseException):
            raise result
        if result is None:  # resumed by an abort that began while this seed was pausing
            raise SeedBatchAbortedError(f"seed {member.index}: the batch stopped ({self._aborted!r})")
        return result

    # ------------------------------------------------------------------ the batch
    def _lockstep_collectors(self) -> list[Collector]:
        """Install the lockstep driver on every seed's collectors that it speeds up (see the module
        docstring); the collectors, to uninstall it after the run."""
        installed: list[Collector] = []
        for member in self._members:
            params = member.trainer.params
            candidates: list[object] = [params.test_collector]
            steps = params.collection_step_num_env_steps
            training = params.training_collector
            if steps is None or steps >= LOCKSTEP_MIN_VECTOR_STEPS * training.num_envs:
                candidates.append(training)
            for collector in candidates:
                if (
                    isinstance(collector, Collector)
                    and collector.loop_driver is None
                    and acting_network(collector.policy) is not None
                ):
                    collector.loop_driver = partial(self._await_collection, member)
                    installed.append(collector)
        return installed

    def _collect(self, collecting: list[_Member], flush: bool) -> None:
        """Run the collections the seeds at ``collecting`` wait at, in lockstep."""
        jobs = []
        for member in collecting:
            assert isinstance(member.pending, LockstepJob)
            jobs.append(member.pending)
            member.pending = None
        if flush:
            torch.set_flush_denormal(True)
        try:
            run_lockstep(jobs)
        except BaseException as error:
            for member in collecting:
                member.result = error
            raise
        finally:
            if flush:
                torch.set_flush_denormal(False)
        self.num_lockstep_collections += 1
        for member, job in zip(collecting, jobs, strict=True):
            member.result = job.result

    def _give_turn(self, member: _Member) -> None:
        """Let ``member`` run until it pauses (at its next update, or finished)."""
        member.paused.clear()
        member.turn.set()
        member.paused.wait()
        if member.error is not None and not isinstance(member.error, SeedBatchAbortedError):
            raise member.error

    def _stacked_update(self, waiting: list[_Member], flush: bool) -> None:
        pending: list[AnyRolloutBatch | tuple[AnyReplayBuffer, int]] = []
        for member in waiting:
            assert member.pending is not None and not isinstance(member.pending, LockstepJob)
            pending.append(member.pending)
            member.pending = None
        if flush:
            torch.set_flush_denormal(True)
        try:
            stats = self._compute(waiting, pending, self._stack_cache)
        except BaseException as error:
            for member in waiting:
                member.result = error
            raise
        finally:
            if flush:
                torch.set_flush_denormal(False)
        self.num_stacked_updates += 1
        self.stacked_sizes.append(len(waiting))
        for member, stat in zip(waiting, stats, strict=True):
            member.result = stat

    @staticmethod
    def _compute(
        waiting: list[_Member],
        pending: list[AnyRolloutBatch | tuple[AnyReplayBuffer, int]],
        cache: StackCache,
    ) -> list[list[TrainingStats]]:
        """The updates of the seeds at ``waiting``: stacked (DQN's and SAC's stacks kept in ``cache``
        from one training step to the next), or the last seed's own update."""
        params = waiting[0].trainer.params
        ppo = [m.algorithm for m in waiting if isinstance(m.algorithm, PPO)]
        if ppo:
            assert isinstance(params, OnPolicyTrainerParams) and len(ppo) == len(waiting)
            rollouts = [x for x in pending if not isinstance(x, tuple)]
            if len(ppo) == 1:  # the last seed training: its own update (bit for bit its own run's)
                return [
                    [
                        ppo[0].update(
                            rollouts[0],
                            batch_size=params.batch_size,
                            num_repetitions=params.update_step_num_repetitions,
                        )
                    ]
                ]
            ppo_stats = PPO.stacked_update(
                ppo,
                rollouts,
                batch_size=params.batch_size,
                num_repetitions=params.update_step_num_repetitions,
            )
            return [[stat] for stat in ppo_stats]
        assert isinstance(params, OffPolicyTrainerParams)
        jobs = [x for x in pending if isinstance(x, tuple)]
        counts = {n for _, n in jobs}
        if len(counts) > 1:
            raise ConfigurationError(
                f"SeedBatch: the seeds' training steps ask for different numbers of gradient steps "
                f"({sorted(counts)}); seeds of a batch collect the same env steps per collection step."
            )
        num_steps = counts.pop()
        buffers = [b for b, _ in jobs]
        if len(waiting) == 1:  # the last seed training: its own gradient steps
            algorithm = waiting[0].algorithm
            assert isinstance(algorithm, (DQN, SAC))
            return [[algorithm.update(buffers[0], params.batch_size) for _ in range(num_steps)]]
        dqn = [m.algorithm for m in waiting if isinstance(m.algorithm, DQN)]
        if dqn:
            return [
                list(s) for s in DQN.stacked_update(dqn, buffers, params.batch_size, num_steps, cache=cache)
            ]
        sac = [m.algorithm for m in waiting if isinstance(m.algorithm, SAC)]
        assert len(sac) == len(waiting)
        return [list(s) for s in SAC.stacked_update(sac, buffers, params.batch_size, num_steps, cache=cache)]

    def _release_all(self) -> None:
        """Let every seed that has not finished run on to its end (a no-op after a normal run): each one
        paused, or about to pause, at an update is stopped there with :class:`SeedBatchAbortedError`."""
        if all(m.done for m in self._members):
            return
        if self._aborted is None:
            self._aborted = SeedBatchAbortedError("the batch stopped")
        for member in self._members:
            if not member.done:
                if not isinstance(member.result, BaseException):
                    member.result = SeedBatchAbortedError(f"seed {member.index}: the batch stopped")
                member.turn.set()

    def _abort(self, error: BaseException) -> None:
        """Stop every seed: those paused at an update get :class:`SeedBatchAbortedError` (or the update's
        error) and unwind through their trainer's failure path."""
        self._aborted = error
        for member in self._members:
            if member.done:
                continue
            if not isinstance(member.result, BaseException):
                member.result = SeedBatchAbortedError(f"seed {member.index}: another seed failed ({error!r})")
            member.pending = None
            member.paused.clear()
            member.turn.set()
            member.paused.wait()

    @override
    def __repr__(self) -> str:
        return f"SeedBatch({len(self._members)} seeds)"
