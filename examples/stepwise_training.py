"""Step-wise and manual training: drive DQN on CartPole one env step at a time and interleave your own
code, with the same counters, logging, callbacks and events as ``trainer.run()``.

What it shows:

* ``EnvStepDriver(trainer).step()`` (skrl-style driving, ``tshtrain.adapters.skrl``) steps the training
  envs once; the env step that completes a collection step also runs the rest of the training step
  (update, logs, callbacks, events, the epoch's test step). A run driven so equals ``run()`` with the
  same seeds (a contract test checks it).
* custom code between env steps (here: episode lengths as episodes end), between training steps (a
  manual event fired from your own code, a look at the epoch), and callbacks / events that run inside
  the loop (early stopping, episode-end domain randomisation of the pole length); the learning-rate
  schedule is DQN's own ``lr_schedule``.
* ``trainer.close()`` at the end: on_run_end callbacks and events, logger closed (``run()`` does this itself).

Run: python examples/stepwise_training.py [--seed 0] [--max-epochs 5]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from tshtrain.adapters import EventContext, EventManager, EventUnit, Every, Manual, OnEpisodeEnd
from tshtrain.adapters.skrl import EnvStepDriver
from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, LinearSchedule, QValuePolicy, mlp
from tshtrain.callbacks import EarlyStopping
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import InfoStats, OffPolicyTrainer, OffPolicyTrainerParams, TrainerOptions


def randomize_pole_length(rng: np.random.Generator) -> Callable[[EventContext], None]:
    """An episode-end event: a new pole length for every sub-env whose episode just ended (domain
    randomisation through the envs themselves; the next episode already runs with it)."""

    def event(ctx: EventContext) -> None:
        assert ctx.collector is not None and ctx.env_ids is not None
        env = ctx.collector.env
        assert isinstance(env, gym.vector.SyncVectorEnv)
        for i in ctx.env_ids:
            cartpole = env.envs[int(i)].unwrapped
            cartpole.length = float(rng.uniform(0.45, 0.55))  # type: ignore[attr-defined]
            cartpole.polemass_length = cartpole.masspole * cartpole.length  # type: ignore[attr-defined]

    return event


def train(seed: int = 0, max_epochs: int = 5, epoch_num_steps: int = 2000, verbose: bool = True) -> InfoStats:
    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env("CartPole-v1", 4), make_vector_env("CartPole-v1", 4)
    policy = QValuePolicy(
        mlp(4, 2, (64, 64)),
        train_envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.05, num_env_steps=5_000),
        seed=seed,
    )
    # the learning rate decays linearly to a tenth over the run's gradient steps: collection steps of 16
    # env steps, each followed by 16 * 0.25 = 4 gradient steps
    num_gradient_steps = max_epochs * -(-epoch_num_steps // 16) * 4
    schedule = LinearSchedule(num_update_steps=num_gradient_steps, end_factor=0.1)
    algorithm = DQN(policy=policy, params=DQNParams(lr=1e-3, target_update_freq=100, lr_schedule=schedule))
    buffer = VectorReplayBuffer(20_000, 4, seed=seed)
    training = Collector(policy, train_envs, buffer, exploration_noise=True, seed=seed)
    training.collect(n_step=256, random=True)  # warm up the buffer before the run
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=max_epochs,
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=16,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=64,
        test_step_num_episodes=8,
        stop_fn=lambda score: score >= 195,
        verbose=verbose,
        show_progress=False,
    )
    trainer = OffPolicyTrainer(algorithm, params, TrainerOptions(close_envs=True))

    # callbacks and events run at their points of the loop, whichever way it is driven
    trainer.add_callback(EarlyStopping("test/score", patience=3))
    rng = np.random.default_rng(seed)
    events = EventManager("train")  # EmbodiChain's event manager, a callback (tshtrain.adapters)
    trainer.add_callback(events, name="events")
    events.register("randomize", randomize_pole_length(rng), trigger=OnEpisodeEnd())
    snapshots: list[int] = []
    events.register("snapshot", lambda ctx: snapshots.append(ctx.counters.env_step), trigger=Manual())
    events.register(
        "progress",
        lambda ctx: print(f"  [event] {ctx.counters.env_step} env steps") if verbose else None,
        trigger=Every(2000, unit=EventUnit.ENV_STEP),
    )

    trainer.reset()  # counters to zero, on_run_start callbacks, initial test step
    episode_lengths: list[int] = []
    num_training_steps = 0
    driver = EnvStepDriver(trainer)
    while not trainer.done:
        result = driver.step()  # one vector step: 4 env steps
        # --- your own code between env steps: e.g. watch episodes end as they happen
        episode_lengths.extend(result.collect_stat.lens.tolist())
        if result.training_step is None:
            continue
        # --- your own code between training steps
        num_training_steps += 1
        if num_training_steps % 100 == 0:
            events.trigger("snapshot")  # fire an event by hand
        if result.training_step.epoch_stats is not None and verbose:
            stats = result.training_step.epoch_stats
            print(
                f"epoch {stats.epoch}: lr {algorithm.optim.param_groups[0]['lr']:.2e}, "
                f"gradient steps {stats.info_stat.gradient_step}, snapshots at {snapshots[-3:]}"
            )
    trainer.close()  # on_run_end callbacks and events, envs closed (close_envs), logger closed
    if verbose:
        print(f"{len(episode_lengths)} training episodes, the last ten lasted {episode_lengths[-10:]} steps")
    return trainer.info_stats()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=5)
    args = parser.parse_args()
    info = train(seed=args.seed, max_epochs=args.max_epochs)
    print(
        f"best test return {info.best_reward:.1f} at epoch {info.best_epoch}, {info.train_step} env steps, "
        f"stop: {info.stop_reason} {info.stop_detail or ''}"
    )


if __name__ == "__main__":
    main()
