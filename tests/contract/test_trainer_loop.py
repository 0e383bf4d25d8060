"""Contract tests of the trainer loop: epoch arithmetic, the initial test step, best tracking, stopping,
test-in-training, what on-/off-policy/offline algorithms receive, the three ways of driving a run, and
``run_training`` dispatch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tshtrain.trainer import (
    EpochStats,
    OfflineTrainer,
    OffPolicyTrainer,
    OnPolicyTrainer,
    StopReason,
    TrainingStepResult,
    run_training,
)

ONLINE_FAMILIES = ["on", "off"]


def _make(kit: Any, family: str, **kwargs: Any) -> Any:
    return {"on": kit.make_on_policy, "off": kit.make_off_policy, "offline": kit.make_offline}[family](
        **kwargs
    )


def _drive_step_wise(trainer: Any) -> list[TrainingStepResult]:
    trainer.reset()
    results = []
    while not trainer.done:
        results.append(trainer.execute_training_step())
    return results


def _scripted(scores: list[float]) -> Any:
    """A compute_score_fn returning ``scores`` in order (one per test step)."""
    pending = list(scores)

    def compute_score(stat: Any) -> float:
        del stat
        return pending.pop(0)

    return compute_score


# ====================================================================== epoch arithmetic


@pytest.mark.parametrize(
    ("num_envs", "n", "s"),
    [(1, 5, 12), (3, 5, 20), (4, 8, 8), (2, 3, 1), (5, 7, 31), (3, 10, 9), (2, 4, 16)],
)
@pytest.mark.parametrize("family", ONLINE_FAMILIES)
def test_online_epoch_arithmetic(family: str, num_envs: int, n: int, s: int, kit: Any) -> None:
    c = math.ceil(n / num_envs) * num_envs
    steps_per_epoch = math.ceil(s / c)
    max_epochs = 3
    calls: list[tuple[int, int]] = []
    setup = _make(
        kit,
        family,
        num_envs=num_envs,
        test_env=None,
        max_epochs=max_epochs,
        epoch_num_steps=s,
        collection_step_num_env_steps=n,
        training_fn=lambda epoch, env_step: calls.append((epoch, env_step)),
    )
    trainer = setup.trainer()
    epochs = list(trainer)

    assert [e.epoch for e in epochs] == [1, 2, 3]
    for i, stats in enumerate(epochs, start=1):
        assert stats.train_collect_stat is not None
        assert stats.train_collect_stat.n_collected_steps == steps_per_epoch * c
        assert stats.info_stat.train_step == i * steps_per_epoch * c
        assert stats.info_stat.update_step == i * steps_per_epoch
        assert stats.test_collect_stat is None
    info = trainer.info_stats()
    assert info.train_step == max_epochs * steps_per_epoch * c
    assert info.update_step == max_epochs * steps_per_epoch
    assert info.stop_reason is StopReason.MAX_EPOCHS
    assert len(calls) == max_epochs * steps_per_epoch
    # the training_fn's env_step advances by exactly c per training step
    assert [env_step for _, env_step in calls] == [k * c for k in range(max_epochs * steps_per_epoch)]
    assert [epoch for epoch, _ in calls] == [k // steps_per_epoch + 1 for k in range(len(calls))]


@pytest.mark.parametrize(("epoch_num_steps", "batch_size"), [(7, 8), (1, 3), (4, 16)])
def test_offline_epoch_is_epoch_num_steps_gradient_steps(
    epoch_num_steps: int, batch_size: int, kit: Any
) -> None:
    setup = kit.make_offline(
        test_env=None, max_epochs=3, epoch_num_steps=epoch_num_steps, batch_size=batch_size
    )
    trainer = setup.trainer()
    epochs = list(trainer)

    assert len(epochs) == 3
    for i, stats in enumerate(epochs, start=1):
        assert stats.train_collect_stat is None
        assert stats.training_stat is not None
        assert stats.training_stat.num_gradient_steps == epoch_num_steps
        assert stats.info_stat.update_step == i * epoch_num_steps
        assert stats.info_stat.gradient_step == i * epoch_num_steps
    assert setup.algorithm.batch_sizes == [batch_size] * (3 * epoch_num_steps)
    # env_step counts the transitions sampled from the dataset (Tianshou's offline semantics)
    assert trainer.info_stats().train_step == 3 * epoch_num_steps * batch_size
    assert setup.algorithm.processed == [setup.buffer]


@pytest.mark.parametrize("family", ONLINE_FAMILIES)
def test_episode_collection_runs_until_epoch_num_steps(family: str, kit: Any) -> None:
    epoch_num_steps = 50
    setup = _make(
        kit,
        family,
        num_envs=3,
        test_env=None,
        max_epochs=3,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_episodes=2,
    )
    results = _drive_step_wise(setup.trainer())

    epochs: list[list[TrainingStepResult]] = [[]]
    for result in results:
        epochs[-1].append(result)
        if result.epoch_stats is not None:
            epochs.append([])
    assert epochs[-1] == []
    epochs.pop()
    assert len(epochs) == 3
    for steps in epochs:
        collected = [r.collect_stat.n_collected_steps for r in steps]  # type: ignore[union-attr]
        assert sum(collected) >= epoch_num_steps
        assert sum(collected[:-1]) < epoch_num_steps  # no training step more than needed
        assert all(r.collect_stat.n_collected_episodes == 2 for r in steps)  # type: ignore[union-attr]
        epoch_stats = steps[-1].epoch_stats
        assert epoch_stats is not None
        assert epoch_stats.train_collect_stat is not None
        assert epoch_stats.train_collect_stat.n_collected_steps == sum(collected)
        assert epoch_stats.train_collect_stat.n_collected_episodes == 2 * len(steps)


# ====================================================================== initial test step, best, stop


def test_initial_test_step_runs_before_training_at_epoch_0(kit: Any) -> None:
    events: list[tuple[str, int, int]] = []
    setup = kit.make_on_policy(
        max_epochs=2,
        epoch_num_steps=10,
        training_fn=lambda epoch, env_step: events.append(("train", epoch, env_step)),
        test_fn=lambda epoch, env_step: events.append(("test", epoch, env_step)),
    )
    trainer = setup.trainer()
    trainer.reset()
    assert events == [("test", 0, 0)]  # reset ran the initial test step, no training yet
    assert trainer.best.epoch == 0
    assert trainer.counters.test_episode == 1
    trainer.reset()  # every reset starts with a fresh initial test step
    assert events == [("test", 0, 0), ("test", 0, 0)]


def test_no_test_collector_means_no_test_steps_and_no_best(kit: Any) -> None:
    setup = kit.make_off_policy(test_env=None, max_epochs=2)
    info = setup.trainer().run()
    assert info.best_score is None
    assert info.best_epoch is None
    assert info.test_episode == 0
    assert info.stop_reason is StopReason.MAX_EPOCHS


def test_best_epoch_can_stay_0(kit: Any) -> None:
    saved: list[Any] = []
    setup = kit.make_on_policy(
        max_epochs=3,
        compute_score_fn=_scripted([5.0, 1.0, 2.0, 4.0]),
        save_best_fn=saved.append,
    )
    info = setup.trainer().run()
    assert info.best_epoch == 0
    assert info.best_score == 5.0
    assert saved == [setup.algorithm]


def test_best_is_strictly_greater_and_save_best_fn_called_on_new_bests_only(kit: Any) -> None:
    scores = [1.0, 3.0, 3.0, 2.0, 5.0, 5.0]  # epochs 0..5
    saved_at: list[int] = []
    holder: dict[str, Any] = {}

    def save_best(algorithm: Any) -> None:
        assert algorithm is holder["setup"].algorithm
        saved_at.append(holder["trainer"].counters.epoch)

    setup = kit.make_on_policy(max_epochs=5, compute_score_fn=_scripted(scores), save_best_fn=save_best)
    holder["setup"] = setup
    trainer = holder["trainer"] = setup.trainer()
    epochs = [e.info_stat.best_epoch for e in trainer]
    info = trainer.info_stats()

    assert saved_at == [0, 1, 4]  # the equal 3.0 at epoch 2 and 5.0 at epoch 5 are not new bests
    assert epochs == [1, 1, 1, 4, 4]
    assert info.best_score == 5.0
    assert info.best_epoch == 4
    assert info.stop_reason is StopReason.MAX_EPOCHS


def test_best_reward_is_the_mean_test_return_and_default_score(kit: Any) -> None:
    # test episodes last exactly 7 steps with reward t + 1: return 28 each
    setup = kit.make_on_policy(
        max_epochs=1,
        test_env=lambda: kit.counting_vector_env([7, 7], ramp=True),
        test_num_envs=2,
        test_step_num_episodes=3,
    )
    info = setup.trainer().run()
    assert info.best_score == 28.0
    assert info.best_reward == 28.0
    assert info.best_reward_std == 0.0
    assert info.test_episode == 2 * 3  # initial test step + one epoch


def test_compute_score_fn_gives_the_score(kit: Any) -> None:
    seen: list[int] = []

    def score(stat: Any) -> float:
        seen.append(stat.n_collected_episodes)
        return -float(stat.lens_stat.mean)  # shorter episodes are better

    setup = kit.make_on_policy(
        max_epochs=1,
        test_env=lambda: kit.counting_vector_env([4], ramp=True),
        test_step_num_episodes=2,
        compute_score_fn=score,
    )
    info = setup.trainer().run()
    assert seen == [2, 2]
    assert info.best_score == -4.0
    assert info.best_reward == 10.0  # the mean return, not the score


def test_stop_fn_after_every_test_step_stops_early(kit: Any) -> None:
    scores_seen: list[float] = []

    def stop(score: float) -> bool:
        scores_seen.append(score)
        return score >= 2.0

    setup = kit.make_on_policy(max_epochs=10, compute_score_fn=_scripted([0.0, 1.0, 2.0, 3.0]), stop_fn=stop)
    trainer = setup.trainer()
    epochs = list(trainer)
    info = trainer.info_stats()

    # the score of every test step after the initial one (epoch 0 scores 0.0 but does not consult stop_fn)
    assert scores_seen == [1.0, 2.0]
    assert [e.epoch for e in epochs] == [1, 2]
    assert info.stop_reason is StopReason.STOP_FN
    assert epochs[-1].info_stat.stop_reason is StopReason.STOP_FN
    assert epochs[0].info_stat.stop_reason is None
    assert info.best_score == 2.0


def test_stop_fn_satisfied_by_the_initial_test_step_does_not_end_before_training(kit: Any) -> None:
    # As in Tianshou: the initial test step (epoch 0) does not consult stop_fn, so an untrained policy
    # that already satisfies it still trains; the epoch-1 test step then stops the run.
    test_epochs: list[int] = []
    stop_scores: list[float] = []

    def stop(score: float) -> bool:
        stop_scores.append(score)
        return True

    setup = kit.make_on_policy(
        max_epochs=3,
        epoch_num_steps=10,
        compute_score_fn=_scripted([0.0, 1.0, 2.0, 3.0]),
        test_fn=lambda epoch, env_step: test_epochs.append(epoch),
        stop_fn=stop,
    )
    trainer = setup.trainer()
    epochs = list(trainer)
    info = trainer.info_stats()

    assert test_epochs == [0, 1]  # the initial test step ran, then the epoch-1 one
    assert stop_scores == [1.0]  # stop_fn was not called with the epoch-0 score (0.0)
    assert [e.epoch for e in epochs] == [1]
    assert info.stop_reason is StopReason.STOP_FN
    assert info.train_step > 0
    assert setup.algorithm.calls != []
    with pytest.raises(RuntimeError, match="Training has ended"):
        trainer.execute_training_step()


def test_max_epochs_gives_max_epochs_reason(kit: Any) -> None:
    setup = kit.make_off_policy(max_epochs=2, stop_fn=lambda score: False)
    info = setup.trainer().run()
    assert info.stop_reason is StopReason.MAX_EPOCHS


def test_stop_reason_is_none_while_running(kit: Any) -> None:
    trainer = kit.make_on_policy(max_epochs=2).trainer()
    trainer.reset()
    assert trainer.stop_reason is None
    assert not trainer.done
    trainer.execute_training_step()
    assert trainer.info_stats().stop_reason is None


# ====================================================================== test in training


def _test_in_training_setup(kit: Any, *, train_len: int, test_len: int, **overrides: Any) -> Any:
    """1 training env (episodes of train_len steps), 1 test env (test_len); returns 1 per step."""
    stop_scores: list[float] = []

    def stop(score: float) -> bool:
        stop_scores.append(score)
        # the initial test step does not consult stop_fn, so the first call is a later one
        return score >= 10

    setup = kit.make_on_policy(
        num_envs=1,
        env=lambda: kit.counting_vector_env([train_len]),
        test_env=lambda: kit.counting_vector_env([test_len]),
        max_epochs=3,
        epoch_num_steps=40,
        collection_step_num_env_steps=10,
        test_in_training=True,
        stop_fn=stop,
        **overrides,
    )
    setup.extra["stop_scores"] = stop_scores
    return setup


def test_test_in_training_stops_when_the_test_step_agrees(kit: Any) -> None:
    test_calls: list[tuple[int, int]] = []
    setup = _test_in_training_setup(
        kit, train_len=15, test_len=20, test_fn=lambda epoch, env_step: test_calls.append((epoch, env_step))
    )
    trainer = setup.trainer()
    results = _drive_step_wise(trainer)

    # step 1 (env steps 0..9) finishes no episode; step 2 finishes one of return 15 -> test step (20)
    # (the initial test step scores 20 but does not consult stop_fn, so training starts)
    assert setup.extra["stop_scores"] == [15.0, 20.0]
    assert test_calls == [(0, 0), (1, 20)]
    assert trainer.stop_reason is StopReason.STOP_FN
    assert len(results) == 2
    assert results[0].training_stat is not None
    assert results[1].training_stat is None  # the update of the stopping training step is skipped
    assert len(setup.algorithm.calls) == 1
    epoch_stats = results[1].epoch_stats
    assert epoch_stats is not None  # the stop closes the epoch ...
    assert epoch_stats.epoch == 1
    assert epoch_stats.test_collect_stat is None  # ... without another test step
    assert trainer.best.score == 20.0


def test_test_in_training_continues_when_the_test_step_disagrees(kit: Any) -> None:
    test_calls: list[tuple[int, int]] = []
    setup = _test_in_training_setup(
        kit, train_len=15, test_len=5, test_fn=lambda epoch, env_step: test_calls.append((epoch, env_step))
    )
    info = setup.trainer().run()

    assert info.stop_reason is StopReason.MAX_EPOCHS
    # 12 training steps of 10 env steps; episodes of 15 end at env steps 15, 30, ..., 120, i.e. in the
    # training steps that end at 20, 30, 50, 60, 80, 90, 110, 120: a test step runs inside each of them
    # (before the epoch's own test step at 40, 80, 120), and none of them stops training.
    assert test_calls == [
        (0, 0),
        (1, 20), (1, 30), (1, 40),
        (2, 50), (2, 60), (2, 80), (2, 80),
        (3, 90), (3, 110), (3, 120), (3, 120),
    ]  # fmt: skip
    assert setup.extra["stop_scores"][:4] == [15.0, 5.0, 15.0, 5.0]  # no initial-test-step score
    assert len(setup.algorithm.calls) == 12  # every update ran


def test_test_in_training_not_run_when_training_returns_do_not_satisfy_stop_fn(kit: Any) -> None:
    test_calls: list[tuple[int, int]] = []
    setup = _test_in_training_setup(
        kit, train_len=5, test_len=20, test_fn=lambda epoch, env_step: test_calls.append((epoch, env_step))
    )
    trainer = setup.trainer()
    epochs = list(trainer)

    assert test_calls == [(0, 0), (1, 40)]  # initial + the first epoch's test step, which stops
    # training returns were checked (not the initial test step's 20), then the epoch's test step ...
    assert setup.extra["stop_scores"] == [5.0, 5.0, 5.0, 5.0, 20.0]
    assert trainer.stop_reason is StopReason.STOP_FN
    assert len(epochs) == 1
    assert len(setup.algorithm.calls) == 4  # ... but no training step was cut short


def test_test_in_training_scores_training_episodes_with_compute_score_fn(kit: Any) -> None:
    setup = _test_in_training_setup(
        kit, train_len=15, test_len=5, compute_score_fn=lambda stat: stat.returns_stat.mean / 5
    )
    setup.trainer().run()
    scores = setup.extra["stop_scores"]
    assert scores[0] == 3.0  # the first training return of 15 scored as 15 / 5 (no initial-test call)
    assert 1.0 in scores  # an epoch's test step: 5 / 5
    assert 15.0 not in scores


def test_test_in_training_is_off_by_default(kit: Any) -> None:
    test_calls: list[int] = []
    setup = kit.make_on_policy(
        num_envs=1,
        env=lambda: kit.counting_vector_env([3]),
        max_epochs=2,
        epoch_num_steps=10,
        stop_fn=lambda score: False,
        test_fn=lambda epoch, env_step: test_calls.append(env_step),
    )
    setup.trainer().run()
    assert test_calls == [0, 10, 20]


# ====================================================================== on-policy


def test_on_policy_gets_the_whole_rollout(kit: Any) -> None:
    lens_before: list[int] = []
    holder: dict[str, Any] = {}
    setup = holder["setup"] = kit.make_on_policy(
        training_fn=lambda epoch, env_step: lens_before.append(len(holder["setup"].buffer)),
        num_envs=3,
        test_env=None,
        max_epochs=2,
        epoch_num_steps=30,
        collection_step_num_env_steps=10,  # 4 vector steps of 3 envs: 12 env steps
        batch_size=5,
        update_step_num_repetitions=3,
    )
    info = setup.trainer().run()

    calls = setup.algorithm.calls
    assert len(calls) == 2 * 3
    for call in calls:
        assert call.shape == (4, 3)
        assert call.num_steps == 12
        assert call.shape[0] * call.shape[1] == 12
        assert call.batch_size == 5
        assert call.num_repetitions == 3
    assert lens_before == [0] * 6  # the buffer is empty before every collection step ...
    assert len(setup.buffer) == 0  # ... and after the last update
    assert info.gradient_step == 6 * math.ceil(12 / 5) * 3
    assert info.update_step == 6


def test_on_policy_batch_size_none_is_passed_through(kit: Any) -> None:
    setup = kit.make_on_policy(test_env=None, max_epochs=1, batch_size=None)
    setup.trainer().run()
    assert {c.batch_size for c in setup.algorithm.calls} == {None}


def test_on_policy_episode_rollouts_hold_exactly_the_collected_steps(kit: Any) -> None:
    setup = kit.make_on_policy(
        num_envs=3, test_env=None, max_epochs=1, epoch_num_steps=60, collection_step_num_episodes=2
    )
    results = _drive_step_wise(setup.trainer())
    calls = setup.algorithm.calls
    assert len(calls) == len(results)
    for call, result in zip(calls, results, strict=True):
        assert result.collect_stat is not None
        assert call.num_steps == result.collect_stat.n_collected_steps
        assert int(call.done.sum()) == 2  # exactly the two collected episodes end in the rollout
    assert len(setup.buffer) == 0


def test_on_policy_episode_returns_are_right_across_buffer_clearing(kit: Any) -> None:
    lengths = [5, 7, 11]  # episodes span several collection steps of 3 vector steps
    setup = kit.make_on_policy(
        num_envs=3,
        env=lambda: kit.counting_vector_env(lengths, ramp=True),
        test_env=None,
        max_epochs=2,
        epoch_num_steps=45,
        collection_step_num_env_steps=9,
    )
    results = _drive_step_wise(setup.trainer())
    reported = np.concatenate([r.collect_stat.returns for r in results])  # type: ignore[union-attr]

    # independent count 1: from the rewards the algorithm received, summed per env across rollouts
    running = np.zeros(3)
    recounted: list[float] = []
    for call in setup.algorithm.calls:
        for t in range(call.shape[0]):
            running += call.rew[t] * call.valid[t]
            for env_id in np.flatnonzero(call.done[t]):
                recounted.append(running[env_id])
                running[env_id] = 0.0
    assert sorted(reported.tolist()) == sorted(recounted)
    # independent count 2: the envs' analytic returns, one per finished episode
    total_steps = 2 * 5 * 9 // 3  # vector steps per env
    expected = [length * (length + 1) / 2 for length in lengths for _ in range(total_steps // length)]
    assert sorted(reported.tolist()) == sorted(expected)
    assert len(reported) == sum(total_steps // length for length in lengths)


# ====================================================================== off-policy


@pytest.mark.parametrize(("ratio", "num_envs", "n"), [(1.0, 2, 6), (0.5, 2, 6), (1.5, 3, 4), (0.3, 1, 5)])
def test_off_policy_takes_round_u_times_n_gradient_steps(
    ratio: float, num_envs: int, n: int, kit: Any
) -> None:
    c = math.ceil(n / num_envs) * num_envs
    setup = kit.make_off_policy(
        num_envs=num_envs,
        test_env=None,
        max_epochs=2,
        epoch_num_steps=2 * c,
        collection_step_num_env_steps=n,
        update_step_num_gradient_steps_per_sample=ratio,
        batch_size=16,
        gradient_steps_per_call=2,
    )
    trainer = setup.trainer()
    info = trainer.run()
    per_step = round(ratio * c)
    assert info.update_step == 4
    assert setup.algorithm.batch_sizes == [16] * (4 * per_step)
    assert info.gradient_step == 2 * 4 * per_step  # the sum of TrainingStats.num_gradient_steps
    # each update sampled from a buffer that already held the new collection step
    assert setup.algorithm.buffer_lens[0] == c


def test_off_policy_epoch_stats_aggregate_every_gradient_step(kit: Any) -> None:
    # episode-based collection: each update step takes a different number of gradient steps
    setup = kit.make_off_policy(
        num_envs=2,
        test_env=None,
        max_epochs=2,
        epoch_num_steps=60,
        collection_step_num_episodes=1,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=4,
    )
    results = _drive_step_wise(setup.trainer())
    losses = setup.algorithm.losses
    counts = [round(0.5 * r.collect_stat.n_collected_steps) for r in results]  # type: ignore[union-attr]
    assert len(set(counts)) > 1, "the test needs update steps of different sizes"

    start = 0
    epoch_bounds: list[tuple[int, int]] = []
    step_losses: list[list[float]] = []
    for result, count in zip(results, counts, strict=True):
        step_losses.append(losses[start : start + count])
        start += count
        training = result.training_stat
        assert training is not None
        assert training.num_gradient_steps == count
        assert training.as_scalars()["loss"] == pytest.approx(float(np.mean(step_losses[-1])))
    assert start == len(losses)

    lo = 0
    for i, result in enumerate(results):
        if result.epoch_stats is not None:
            epoch_bounds.append((lo, i + 1))
            lo = i + 1
    assert len(epoch_bounds) == 2
    for (lo, hi), epoch_result in zip(epoch_bounds, [r for r in results if r.epoch_stats], strict=True):
        epoch_stats = epoch_result.epoch_stats
        assert epoch_stats is not None
        epoch_losses = [x for part in step_losses[lo:hi] for x in part]
        assert epoch_stats.training_stat is not None
        assert epoch_stats.training_stat.num_gradient_steps == sum(counts[lo:hi])
        assert epoch_stats.training_stat.as_scalars()["loss"] == pytest.approx(float(np.mean(epoch_losses)))
        collected = [r.collect_stat for r in results[lo:hi] if r.collect_stat is not None]
        assert len(collected) == hi - lo
        assert epoch_stats.train_collect_stat is not None
        assert epoch_stats.train_collect_stat.n_collected_steps == sum(s.n_collected_steps for s in collected)
        assert epoch_stats.train_collect_stat.n_collected_episodes == sum(
            s.n_collected_episodes for s in collected
        )
        assert epoch_stats.train_collect_stat.n_collected_episodes == hi - lo


# ====================================================================== run / iterate / step-wise


def _epochs_by_iteration(trainer: Any) -> list[EpochStats]:
    return list(trainer)


def _epochs_step_wise(trainer: Any) -> list[EpochStats]:
    return [r.epoch_stats for r in _drive_step_wise(trainer) if r.epoch_stats is not None]


@pytest.mark.parametrize("family", ["on", "off", "offline"])
def test_run_iteration_and_step_wise_driving_agree(family: str, kit: Any) -> None:
    from tshtrain.logger import LogIntervals, MemoryLogger

    def build() -> tuple[Any, Any]:
        logger = MemoryLogger(
            LogIntervals(training_interval=1, test_interval=1, update_interval=1, info_interval=1)
        )
        common: dict[str, Any] = {"seed": 3, "max_epochs": 3, "logger": logger, "test_step_num_episodes": 2}
        if family != "offline":
            common |= {"num_envs": 3, "epoch_num_steps": 25, "collection_step_num_env_steps": 8}
        setup = _make(kit, family, **common)
        return setup.trainer(), logger

    run_trainer, run_logger = build()
    run_info = run_trainer.run()
    iter_trainer, iter_logger = build()
    iter_epochs = _epochs_by_iteration(iter_trainer)
    step_trainer, step_logger = build()
    step_epochs = _epochs_step_wise(step_trainer)

    assert len(iter_epochs) == 3
    assert [kit.epoch_stats_key(e) for e in iter_epochs] == [kit.epoch_stats_key(e) for e in step_epochs]
    for trainer in (iter_trainer, step_trainer):
        assert kit.info_stats_key(trainer.info_stats()) == kit.info_stats_key(run_info)
    assert kit.info_stats_key(iter_epochs[-1].info_stat) == kit.info_stats_key(run_info)
    # run() produced the same per-epoch numbers (seen through its logger)
    for logger in (iter_logger, step_logger):
        for scope, records in run_logger.records.items():
            assert [(s, kit.untimed(d)) for s, d in records] == [
                (s, kit.untimed(d)) for s, d in logger.records[scope]
            ], scope
    assert [s for s, _ in run_logger.records["info"]] == [1, 2, 3]
    assert run_info.best_score is not None


def test_iteration_can_mix_with_step_wise_driving(kit: Any) -> None:
    def build() -> Any:
        return kit.make_on_policy(seed=5, max_epochs=2, epoch_num_steps=20, collection_step_num_env_steps=6)

    reference = [kit.epoch_stats_key(e) for e in build().trainer()]
    trainer = build().trainer()
    trainer.reset()
    first = trainer.execute_training_step()  # part of epoch 1 step-wise ...
    assert first.epoch_stats is None
    mixed = [kit.epoch_stats_key(e) for e in trainer]  # ... the rest by iteration
    assert mixed == reference


def test_iterating_resets_first(kit: Any) -> None:
    test_calls: list[int] = []
    setup = kit.make_on_policy(max_epochs=1, test_fn=lambda epoch, env_step: test_calls.append(epoch))
    assert len(list(setup.trainer())) == 1
    assert test_calls == [0, 1]


def test_execute_epoch_returns_one_epoch(kit: Any) -> None:
    trainer = kit.make_off_policy(
        max_epochs=2, epoch_num_steps=20, collection_step_num_env_steps=10
    ).trainer()
    trainer.reset()
    stats = trainer.execute_epoch()
    assert stats.epoch == 1
    assert stats.info_stat.update_step == 2
    assert not trainer.done


# ====================================================================== request_stop, done


def test_request_stop_ends_the_run_after_the_current_training_step(kit: Any) -> None:
    holder: dict[str, Any] = {}

    def training_fn(epoch: int, env_step: int) -> None:
        if env_step >= 30:
            holder["trainer"].request_stop()

    setup = kit.make_on_policy(
        max_epochs=5, epoch_num_steps=20, collection_step_num_env_steps=10, training_fn=training_fn
    )
    trainer = holder["trainer"] = setup.trainer()
    info = trainer.run()

    assert info.stop_reason is StopReason.REQUESTED
    assert info.train_step == 40  # the training step that asked still collected ...
    assert len(setup.algorithm.calls) == 4  # ... and updated
    with pytest.raises(RuntimeError, match=r"Training has ended \(requested\)"):
        trainer.execute_training_step()


def test_request_stop_between_epochs(kit: Any) -> None:
    trainer = kit.make_off_policy(max_epochs=5).trainer()
    epochs = []
    for stats in trainer:
        epochs.append(stats)
        trainer.request_stop()
    assert len(epochs) == 1
    assert trainer.stop_reason is StopReason.REQUESTED
    assert trainer.info_stats().stop_reason is StopReason.REQUESTED


def test_execute_training_step_after_done_raises(kit: Any) -> None:
    trainer = kit.make_offline(max_epochs=1, epoch_num_steps=2).trainer()
    trainer.run()
    assert trainer.done
    with pytest.raises(RuntimeError, match="Training has ended"):
        trainer.execute_training_step()
    trainer.reset()  # a reset starts over
    assert not trainer.done
    trainer.execute_training_step()


def test_a_second_run_is_refused_and_changes_nothing(kit: Any) -> None:
    """A trainer runs once: a second run() would reset the counters, keep the weights and write into the
    closed logger (issue 15); it is refused, naming what to do instead."""
    setup = kit.make_on_policy(max_epochs=2, epoch_num_steps=10, collection_step_num_env_steps=10)
    trainer = setup.trainer()
    first = trainer.run()
    with pytest.raises(RuntimeError, match=r"run\(\): this trainer's run has ended .* a trainer runs once"):
        trainer.run()
    assert trainer.counters.env_step == first.train_step == 20
    assert len(setup.algorithm.calls) == 2


# ====================================================================== run_training


def test_run_training_dispatches_on_the_algorithm_family(kit: Any) -> None:
    on = kit.make_on_policy(max_epochs=1, epoch_num_steps=10, collection_step_num_env_steps=10)
    off = kit.make_off_policy(max_epochs=1, epoch_num_steps=10, collection_step_num_env_steps=10)
    offline = kit.make_offline(max_epochs=1, epoch_num_steps=3)

    assert run_training(on.algorithm, on.params).update_step == 1
    assert len(on.algorithm.calls) == 1
    assert run_training(off.algorithm, off.params).gradient_step == 10
    assert len(off.algorithm.batch_sizes) == 10
    assert run_training(offline.algorithm, offline.params).update_step == 3
    assert len(offline.algorithm.batch_sizes) == 3
    assert on.trainer_cls is OnPolicyTrainer and off.trainer_cls is OffPolicyTrainer
    assert offline.trainer_cls is OfflineTrainer


@pytest.mark.parametrize(
    ("algorithm_family", "params_family", "pattern"),
    [
        ("on", "off", r"FakeOnPolicy cannot be trained with OffPolicyTrainerParams"),
        ("off", "on", r"FakeOffPolicy cannot be trained with OnPolicyTrainerParams"),
        ("offline", "on", r"FakeOffline cannot be trained with OnPolicyTrainerParams"),
        ("on", "offline", r"FakeOnPolicy cannot be trained with OfflineTrainerParams"),
    ],
)
def test_run_training_rejects_mismatched_pairs(
    algorithm_family: str, params_family: str, pattern: str, kit: Any
) -> None:
    algorithm = _make(kit, algorithm_family).algorithm
    params = _make(kit, params_family).params
    with pytest.raises(TypeError, match=pattern):
        run_training(algorithm, params)


def test_execute_training_step_without_reset_trains_despite_stop_fn_at_the_initial_test_step(
    kit: Any,
) -> None:
    test_epochs: list[int] = []
    setup = kit.make_on_policy(
        max_epochs=3,
        epoch_num_steps=20,
        collection_step_num_env_steps=10,  # 2 training steps per epoch
        test_fn=lambda epoch, env_step: test_epochs.append(epoch),
        stop_fn=lambda score: True,
    )
    trainer = setup.trainer()
    # resets implicitly; the initial test step does not consult stop_fn, so a training step runs
    result = trainer.execute_training_step()
    assert test_epochs == [0]
    assert result.training_stat is not None
    assert len(setup.algorithm.calls) == 1
    assert trainer.info_stats().train_step == 10
    assert trainer.stop_reason is None
    assert not trainer.done
    trainer.execute_training_step()  # completes epoch 1: its test step applies stop_fn
    assert test_epochs == [0, 1]
    assert trainer.stop_reason is StopReason.STOP_FN
    with pytest.raises(RuntimeError, match=r"Training has ended \(stop_fn\)"):
        trainer.execute_training_step()
