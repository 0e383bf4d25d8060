"""Seed batches collect in lockstep (issue 35): the seeds' ``Collector`` loops step one vector step each
in turn, their policies' networks evaluated in one stacked pass. Each seed still learns what its own run
learns, no number crosses seeds, a lockstep batch resumes bit-exact, and collectors it cannot stack keep
collecting on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tshtrain.algorithm import DQN, PPO
from tshtrain.data import Collector
from tshtrain.seeds import SeedBatch


def built_run(algorithm: str, seed: int, directory: Path, *extra: str) -> Any:
    """PPO (8 gymnasium CartPole envs) or DQN (1 env) on the numpy data path, small networks, built by
    the config system as ``tshtrain train`` builds it."""
    from tshtrain.config import build_run, load_experiment

    common = [
        f"algorithm.name={algorithm}",
        "env.id=CartPole-v1",
        "algorithm.network.hidden_sizes=[16,16]",
        "trainer.stop_score=null",
        "trainer.verbose=false",
        "trainer.show_progress=false",
        "trainer.test_step_num_episodes=3",
        "env.num_test_envs=3",
        "loggers=[]",
        f"seed={seed}",
    ]
    if algorithm == "ppo":
        common += ["trainer.max_epochs=2", "trainer.epoch_num_steps=512", "env.num_training_envs=4"]
    else:
        common += [
            "trainer.max_epochs=2",
            "trainer.epoch_num_steps=256",
            "trainer.collection_step_num_env_steps=64",
            "buffer.prefill_env_steps=64",
            "trainer.batch_size=16",
        ]
    return build_run(load_experiment(None, [*common, *extra]), directory)


def weights(trainer: Any) -> list[torch.Tensor]:
    algorithm = trainer.algorithm
    if isinstance(algorithm, PPO):
        return [p.detach().clone() for p in algorithm.ac.parameters]
    return [p.detach().clone() for p in algorithm.policy.q_net.parameters()]


def runs(algorithm: str, tmp_path: Path, name: str, seeds: range, *extra: str) -> list[Any]:
    return [
        built_run(algorithm, seed, tmp_path / f"{name}-{seed}", "checkpoint.enabled=false", *extra)
        for seed in seeds
    ]


def test_ppo_seeds_collect_in_lockstep_and_learn_what_their_own_runs_learn(tmp_path: Path) -> None:
    solo = runs("ppo", tmp_path, "solo", range(3))
    solo_info = [run.trainer.run() for run in solo]
    batched = runs("ppo", tmp_path, "seed", range(3))
    batch = SeedBatch([run.trainer for run in batched])
    infos = batch.run()
    # every training collection and every test step (the initial one included) ran in lockstep
    collections = infos[0].train_step // batched[0].trainer.params.collection_step_num_env_steps
    assert batch.num_lockstep_collections == collections + 3
    for own, mine, own_info, info in zip(solo, batched, solo_info, infos, strict=True):
        for a, b in zip(weights(own.trainer), weights(mine.trainer), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        assert info.train_step == own_info.train_step
        assert info.best_reward == own_info.best_reward  # the test episodes: the same actions
        own_policy, my_policy = own.trainer.algorithm.policy, mine.trainer.algorithm.policy
        assert torch.equal(own_policy.generator.get_state(), my_policy.generator.get_state())
        # the same actions all along: the envs stand where they stand in the seed's own run
        own_collector, my_collector = (
            own.trainer.params.training_collector,
            mine.trainer.params.training_collector,
        )
        assert (own_collector.obs == my_collector.obs).all()
        assert mine.trainer.params.training_collector.loop_driver is None  # uninstalled after the run
    for run in [*solo, *batched]:
        run.close()


def test_lockstep_and_separate_collection_give_the_same_batch(tmp_path: Path) -> None:
    """Only the network's output in the collection differs (float rounding): the actions, and so the
    whole run, agree with a batch whose seeds collect on their own."""
    results = []
    for lockstep in (True, False):
        batched = runs("ppo", tmp_path, f"lockstep-{lockstep}", range(2))
        batch = SeedBatch([run.trainer for run in batched], lockstep_collection=lockstep)
        batch.run()
        assert (batch.num_lockstep_collections > 0) == lockstep
        results.append([weights(run.trainer) for run in batched])
        for run in batched:
            run.close()
    for mine, theirs in zip(*results, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_no_number_crosses_seeds_in_lockstep(tmp_path: Path) -> None:
    """Seed 1's envs start elsewhere; seeds 0 and 2 end bit for bit where they end without the change."""
    ends = []
    for name, env_seed in (("plain", None), ("moved", 77)):
        batched = runs("ppo", tmp_path, name, range(3))
        if env_seed is not None:
            batched[1].trainer.params.training_collector.reset(seed=env_seed)
        batch = SeedBatch([run.trainer for run in batched])
        batch.run()
        assert batch.num_lockstep_collections > 0
        ends.append([weights(run.trainer) for run in batched])
        for run in batched:
            run.close()
    plain, moved = ends
    for k in (0, 2):
        assert all(torch.equal(a, b) for a, b in zip(plain[k], moved[k], strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(plain[1], moved[1], strict=True))


def test_dqn_seeds_with_one_env_collect_in_lockstep(tmp_path: Path) -> None:
    solo = runs("dqn", tmp_path, "solo", range(3))
    for run in solo:
        run.trainer.run()
    batched = runs("dqn", tmp_path, "seed", range(3))
    batch = SeedBatch([run.trainer for run in batched])
    infos = batch.run()
    assert batch.num_lockstep_collections == 2 * 256 // 64 + 3  # training collections + test steps
    assert batch.num_stack_builds == 1  # one stack serves every training step
    for own, mine, info in zip(solo, batched, infos, strict=True):
        assert isinstance(mine.trainer.algorithm, DQN)
        for a, b in zip(weights(own.trainer), weights(mine.trainer), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        own_collector = own.trainer.params.training_collector
        my_collector = mine.trainer.params.training_collector
        assert isinstance(my_collector, Collector)
        assert own_collector.rng.bit_generator.state == my_collector.rng.bit_generator.state
        assert info.gradient_step == own.trainer.info_stats().gradient_step
    for run in [*solo, *batched]:
        run.close()


def test_short_collection_steps_are_not_paused(tmp_path: Path) -> None:
    """A training collector whose collection step takes fewer than LOCKSTEP_MIN_VECTOR_STEPS vector
    steps collects on its own (a pause would cost more than it saves); the test collector still joins."""
    batched = runs("dqn", tmp_path, "short", range(2), "trainer.collection_step_num_env_steps=2")
    batch = SeedBatch([run.trainer for run in batched])
    batch.run()
    assert batch.num_lockstep_collections == 3  # the test steps only
    for run in batched:
        run.close()


def test_a_lockstep_seed_batch_resumes_bit_exact(tmp_path: Path) -> None:
    every_epoch = ("checkpoint.every_num_epochs=1", "trainer.max_epochs=3")
    straight = [built_run("ppo", seed, tmp_path / f"seed-{seed}", *every_epoch) for seed in range(2)]
    SeedBatch([run.trainer for run in straight]).run()
    resumed = []
    for seed in range(2):
        run = built_run("ppo", seed, tmp_path / f"again-{seed}", *every_epoch)
        (periodic,) = sorted((tmp_path / f"seed-{seed}" / "checkpoints").glob("periodic-000001-*"))
        run.trainer.load_checkpoint(periodic)
        resumed.append(run)
    batch = SeedBatch([run.trainer for run in resumed])
    batch.run()
    assert batch.num_lockstep_collections > 0
    for a, b in zip(straight, resumed, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(weights(a.trainer), weights(b.trainer), strict=True))
    for run in [*straight, *resumed]:
        run.close()
