"""``tshtrain.seeds.SeedBatch`` (issue 35): K PPO (DQN, SAC) trainers, one per seed, trained side by side
with stacked updates. Each seed learns what its own run learns (to float rounding), no number crosses seeds
(bit for bit), a seed that stops leaves the stacked updates, a seed batch resumes bit-exact from its
seeds' checkpoints, failures stop every seed, and what cannot be batched is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tshtrain.algorithm import A2C, DQN, PPO, SAC, CategoricalPolicy, DQNParams, PPOParams, QValuePolicy, mlp
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.checkpoint import CheckpointParams
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.env import TorchCartPole
from tshtrain.errors import ConfigurationError
from tshtrain.seeds import SeedBatch, SeedBatchAbortedError
from tshtrain.trainer import (
    Callback,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
)

CPU = torch.device("cpu")
STEPS = 64


def ppo_trainer(
    seed: int, *, env_seed: int | None = None, max_epochs: int = 3, **kwargs: Any
) -> OnPolicyTrainer:
    torch.manual_seed(seed)
    env_seed = seed if env_seed is None else env_seed
    train_env = TorchCartPole(4, CPU, seed=env_seed)
    test_env = TorchCartPole(2, CPU, seed=env_seed + 1000)
    policy = CategoricalPolicy(mlp(4, 2, (32, 32)), train_env.single_action_space, seed=seed)
    params = kwargs.pop("ppo", PPOParams(lr=1e-3, max_grad_norm=0.5))
    algorithm = PPO(policy=policy, critic=mlp(4, 1, (32, 32)), params=params, seed=seed)
    trainer_params = OnPolicyTrainerParams(
        training_collector=TensorCollector(
            policy, train_env, TensorReplayBuffer(STEPS, 4, device=CPU, seed=seed), seed=env_seed
        ),
        test_collector=TensorCollector(policy, test_env, seed=seed + 1),
        max_epochs=max_epochs,
        epoch_num_steps=128,
        collection_step_num_env_steps=STEPS,
        batch_size=32,
        verbose=False,
        show_progress=False,
        **{"update_step_num_repetitions": 2, "test_step_num_episodes": 2, **kwargs},
    )
    return OnPolicyTrainer(algorithm, trainer_params)


def weights(trainer: OnPolicyTrainer) -> list[torch.Tensor]:
    algorithm = trainer.algorithm
    assert isinstance(algorithm, PPO)
    return [p.detach().clone() for p in algorithm.ac.parameters]


def test_each_seed_learns_what_its_own_run_learns() -> None:
    solo = [ppo_trainer(seed) for seed in range(3)]
    solo_info = [t.run() for t in solo]
    batch = SeedBatch([ppo_trainer(seed) for seed in range(3)])
    infos = batch.run()
    assert batch.stacked_sizes == [3] * 6  # 3 epochs x 2 collection steps
    for own, batched, own_info, info in zip(solo, batch.trainers, solo_info, infos, strict=True):
        for a, b in zip(weights(own), weights(batched), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        assert info.train_step == own_info.train_step == 3 * 128
        assert info.gradient_step == own_info.gradient_step


def test_a_batch_of_one_is_its_own_run_bit_for_bit() -> None:
    """The last seed training (here the only one) takes its own update: exactly its own run."""
    solo = ppo_trainer(4)
    solo.run()
    batch = SeedBatch([ppo_trainer(4)])
    batch.run()
    assert batch.stacked_sizes == [1] * 6
    assert all(torch.equal(a, b) for a, b in zip(weights(solo), weights(batch.trainers[0]), strict=True))


def test_no_number_crosses_seeds() -> None:
    """Seed 1's envs start elsewhere; seeds 0 and 2 end bit for bit where they end without the change."""
    runs = []
    for env_seed in (1, 77):
        batch = SeedBatch([ppo_trainer(0), ppo_trainer(1, env_seed=env_seed), ppo_trainer(2)])
        batch.run()
        runs.append([weights(t) for t in batch.trainers])
    plain, changed = runs
    for k in (0, 2):
        assert all(torch.equal(a, b) for a, b in zip(plain[k], changed[k], strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(plain[1], changed[1], strict=True))


def test_a_seed_that_stops_leaves_the_stacked_updates() -> None:
    early = ppo_trainer(1, stop_fn=lambda score: True)  # stops at the first test step after training
    batch = SeedBatch([ppo_trainer(0), early, ppo_trainer(2)])
    infos = batch.run()
    assert infos[1].train_step < infos[0].train_step == infos[2].train_step == 3 * 128
    assert batch.stacked_sizes[0] == 3 and batch.stacked_sizes[-1] == 2
    assert len(batch.stacked_sizes) == 6


def test_a_seed_batch_resumes_bit_exact(tmp_path: Path) -> None:
    def make(seed: int, directory: Path | None) -> OnPolicyTrainer:
        checkpoint = None if directory is None else CheckpointParams(directory=directory, every_num_epochs=1)
        return ppo_trainer(seed, max_epochs=4, checkpoint=checkpoint)

    straight = SeedBatch([make(seed, tmp_path / f"seed-{seed}") for seed in range(2)])
    straight.run()
    resumed_trainers = []
    for seed in range(2):
        trainer = make(seed, None)
        (periodic,) = sorted((tmp_path / f"seed-{seed}").glob("periodic-000002-*"))
        trainer.load_checkpoint(periodic)
        resumed_trainers.append(trainer)
    resumed = SeedBatch(resumed_trainers)
    resumed.run()
    assert resumed.stacked_sizes == [2] * 4
    for a_trainer, b_trainer in zip(straight.trainers, resumed.trainers, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(weights(a_trainer), weights(b_trainer), strict=True))


class Boom(Callback):
    def on_epoch_end(self, *args: Any, **kwargs: Any) -> None:
        raise KeyError("boom")


def test_a_failing_seed_stops_every_seed() -> None:
    failing = ppo_trainer(1)
    failing.add_callback(Boom())
    batch = SeedBatch([ppo_trainer(0), failing, ppo_trainer(2)])
    with pytest.raises(KeyError, match="boom"):
        batch.run()
    for trainer in batch.trainers:  # every seed stopped before its end
        assert trainer.counters.env_step < 3 * 128
    assert isinstance(batch.errors[1], KeyError)
    assert all(isinstance(batch.errors[k], SeedBatchAbortedError) for k in (0, 2))


def test_what_cannot_be_batched_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="trainers is empty"):
        SeedBatch([])
    with pytest.raises(ConfigurationError, match="PPOParams differ"):
        SeedBatch([ppo_trainer(0), ppo_trainer(1, ppo=PPOParams(lr=3e-4))])
    with pytest.raises(ConfigurationError, match="update_step_num_repetitions"):
        SeedBatch([ppo_trainer(0), ppo_trainer(1, update_step_num_repetitions=3)])
    kl = PPOParams(lr=1e-3, max_grad_norm=0.5, desired_kl=0.01)
    with pytest.raises(ConfigurationError, match="does not take desired_kl"):  # before any training
        SeedBatch([ppo_trainer(0, ppo=kl), ppo_trainer(1, ppo=kl)])
    torch.manual_seed(0)
    env = TorchCartPole(4, CPU, seed=0)
    policy = CategoricalPolicy(mlp(4, 2, (8,)), env.single_action_space, seed=0)
    a2c = OnPolicyTrainer(
        A2C(policy=policy, critic=mlp(4, 1, (8,))),
        OnPolicyTrainerParams(
            training_collector=TensorCollector(policy, env, TensorReplayBuffer(16, 4, device=CPU), seed=0),
            max_epochs=1,
            epoch_num_steps=16,
            collection_step_num_env_steps=16,
        ),
    )
    with pytest.raises(ConfigurationError, match="OnPolicyTrainer of PPO"):
        SeedBatch([ppo_trainer(0), a2c])


def test_callbacks_inside_the_update_are_refused() -> None:
    class OnLoss(Callback):
        def on_loss(self, *args: Any, **kwargs: Any) -> None:
            pass

    trainer = ppo_trainer(1)
    trainer.add_callback(OnLoss())
    with pytest.raises(ConfigurationError, match="act inside the update"):
        SeedBatch([ppo_trainer(0), trainer]).run()


def test_the_batch_runs_once_and_errors_stop_it(tmp_path: Path) -> None:
    batch = SeedBatch([ppo_trainer(0, max_epochs=1)])
    batch.run()
    with pytest.raises(RuntimeError, match="runs once"):
        batch.run()
    assert issubclass(SeedBatchAbortedError, RuntimeError)


def dqn_trainer(seed: int, *, max_epochs: int = 2, **kwargs: Any) -> OffPolicyTrainer:
    torch.manual_seed(seed)
    train_env = TorchCartPole(4, CPU, seed=seed)
    policy = QValuePolicy(
        mlp(4, 2, (32,)),
        train_env.single_action_space,
        eps_schedule=EpsilonSchedule(num_env_steps=200),
        seed=seed,
    )
    algorithm = DQN(policy=policy, params=DQNParams(lr=1e-3, n_step=3, target_update_freq=20))
    params = OffPolicyTrainerParams(
        training_collector=TensorCollector(
            policy,
            train_env,
            TensorReplayBuffer(2000, 4, device=CPU, seed=seed),
            exploration_noise=True,
            seed=seed,
        ),
        test_collector=TensorCollector(policy, TorchCartPole(2, CPU, seed=seed + 1000), seed=seed + 1),
        max_epochs=max_epochs,
        epoch_num_steps=100,
        collection_step_num_env_steps=20,
        batch_size=32,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
        **kwargs,
    )
    return OffPolicyTrainer(algorithm, params)


def dqn_weights(trainer: OffPolicyTrainer) -> list[torch.Tensor]:
    algorithm = trainer.algorithm
    assert isinstance(algorithm, DQN)
    return [p.detach().clone() for p in algorithm.policy.q_net.parameters()]


def test_dqn_seeds_learn_what_their_own_runs_learn() -> None:
    solo = [dqn_trainer(seed) for seed in range(3)]
    for trainer in solo:
        trainer.run()
    batch = SeedBatch([dqn_trainer(seed) for seed in range(3)])
    infos = batch.run()
    assert batch.stacked_sizes == [3] * 10  # 2 epochs x 5 collection steps of 20 env steps
    for own, batched, info in zip(solo, batch.trainers, infos, strict=True):
        assert isinstance(batched, OffPolicyTrainer)
        for a, b in zip(dqn_weights(own), dqn_weights(batched), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        assert info.gradient_step == own.info_stats().gradient_step == 200


def test_a_mixed_or_overlapping_batch_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="all of one kind"):
        SeedBatch([ppo_trainer(0), dqn_trainer(1)])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="update_step_num_gradient_steps_per_sample"):
        SeedBatch([dqn_trainer(0), dqn_trainer(1, update_step_num_gradient_steps_per_sample=0.5)])


def test_ctrl_c_in_the_main_thread_stops_every_seed() -> None:
    """SIGINT while a seed runs: the batch raises KeyboardInterrupt, and the running seed stops at its
    next update (SeedBatchAbortedError inside it) instead of waiting for a stacked update."""
    import os
    import signal

    class Interrupt(Callback):
        sent = False

        def on_training_step_start(self, *args: Any, **kwargs: Any) -> None:
            if not Interrupt.sent:
                Interrupt.sent = True
                os.kill(os.getpid(), signal.SIGINT)

    interrupted = ppo_trainer(1)
    interrupted.add_callback(Interrupt())
    batch = SeedBatch([ppo_trainer(0), interrupted, ppo_trainer(2)])
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            batch.run()
    finally:
        signal.signal(signal.SIGINT, previous)
    for trainer in batch.trainers:
        assert trainer.counters.env_step < 3 * 128
    assert all(isinstance(error, SeedBatchAbortedError) for error in batch.errors)


def sac_run(seed: int, directory: Path, *extra: str) -> Any:
    """SAC on gymnasium's Pendulum (the numpy data path: gymnasium envs, ``Collector``, a numpy replay
    buffer), small networks, built by the config system as ``tshtrain train`` builds it."""
    from tshtrain.config import build_run, load_experiment

    overrides = [
        "algorithm.name=sac",
        "env.id=Pendulum-v1",
        "algorithm.network.hidden_sizes=[16,16]",
        "buffer.prefill_env_steps=32",
        "trainer.max_epochs=2",
        "trainer.epoch_num_steps=60",
        "trainer.batch_size=16",
        "trainer.test_step_num_episodes=1",
        "env.num_test_envs=1",
        "trainer.stop_score=null",
        "trainer.verbose=false",
        "trainer.show_progress=false",
        "loggers=[]",
        f"seed={seed}",
        *extra,
    ]
    return build_run(load_experiment(None, overrides), directory)


def sac_weights(trainer: Any) -> list[torch.Tensor]:
    algorithm = trainer.algorithm
    assert isinstance(algorithm, SAC)
    nets = [algorithm.policy.actor, algorithm.nets.critic, algorithm.nets.target_critic.net]
    return [p.detach().clone() for net in nets for p in net.parameters()] + [
        algorithm.temperature.log_alpha.detach().clone()
    ]


def test_sac_seeds_on_numpy_envs_learn_what_their_own_runs_learn(tmp_path: Path) -> None:
    solo = [sac_run(seed, tmp_path / f"solo-{seed}", "checkpoint.enabled=false") for seed in range(3)]
    for run in solo:
        run.trainer.run()
    batched = [sac_run(seed, tmp_path / f"seed-{seed}", "checkpoint.enabled=false") for seed in range(3)]
    batch = SeedBatch([run.trainer for run in batched])
    infos = batch.run()
    assert batch.stacked_sizes == [3] * 120  # 2 epochs x 60 collection steps of 1 env step
    assert batch.num_stack_builds == 1  # the stack serves all 120 training steps
    for own, mine, info in zip(solo, batched, infos, strict=True):
        for a, b in zip(sac_weights(own.trainer), sac_weights(mine.trainer), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4)
        assert info.gradient_step == own.trainer.info_stats().gradient_step
    for run in [*solo, *batched]:
        run.close()


def test_a_sac_seed_batch_resumes_bit_exact(tmp_path: Path) -> None:
    every_epoch = ("checkpoint.every_num_epochs=1", "trainer.max_epochs=3")
    straight = [sac_run(seed, tmp_path / f"seed-{seed}", *every_epoch) for seed in range(2)]
    SeedBatch([run.trainer for run in straight]).run()
    resumed = []
    for seed in range(2):
        run = sac_run(seed, tmp_path / f"again-{seed}", *every_epoch)
        (periodic,) = sorted((tmp_path / f"seed-{seed}" / "checkpoints").glob("periodic-000001-*"))
        run.trainer.load_checkpoint(periodic)
        resumed.append(run)
    SeedBatch([run.trainer for run in resumed]).run()
    for a, b in zip(straight, resumed, strict=True):
        assert all(
            torch.equal(x, y) for x, y in zip(sac_weights(a.trainer), sac_weights(b.trainer), strict=True)
        )
    for run in [*straight, *resumed]:
        run.close()
