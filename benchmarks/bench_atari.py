"""Atari training throughput: tshtrain vs Stable-Baselines3 vs Tianshou 2.0.1, PPO and DQN on Breakout.

Env steps per second of training (collection and updates together; 4 frames per env step), 8 sync envs,
each contestant with the same envs: ``tshtrain.env.atari.make_atari_env("ALE/Breakout-v5")`` (Gymnasium's
AtariPreprocessing + FrameStackObservation, (4, 84, 84) uint8 frames) in its own in-process vector env
(tshtrain's ``make_vector_env``, SB3's ``DummyVecEnv``, Tianshou's ``DummyVectorEnv``), and the same
networks: the Nature CNN (convolutions 32x8/4, 64x4/2, 64x3/1, Linear 3136->512, ReLU) with a linear
head; PPO's actor and critic each have their own CNN (tshtrain's layout; SB3 with
``share_features_extractor=False``).

* **PPO** (rl-zoo's Atari settings, tshtrain's ``examples/configs/ppo_atari_breakout.yaml``): rollouts
  of 8 envs x 128 steps, 4 epochs of 4 mini-batches of 256, Adam lr 2.5e-4, clip 0.1, entropy 0.01,
  value 0.5, GAE 0.95, gamma 0.99, gradient norm 0.5. One timed run: ``--ppo-rollouts`` rollouts with
  their updates.
* **DQN** (``examples/configs/dqn_atari_breakout.yaml`` but a 20k buffer): ``--dqn-prefill`` uniformly
  random env steps, then ``--dqn-env-steps`` epsilon-greedy env steps with one gradient step (batch 32,
  Huber loss, Adam lr 1e-4) per 4 env steps (2 after each vector step of 8 envs), target network every
  1000 gradient steps.
* ``env only`` (info): the same vector env stepped with random actions, the ceiling.

Torch on one thread; interleaved repetitions, medians and paired ratios (benchmarks/harness.py). Run in
the bench venv (benchmarks/README.md, "Setup", plus ``tshtrain[atari]``). Results:
benchmarks/results/bench_atari.{json,md}.

Usage::

    python benchmarks/bench_atari.py            # about 10-15 minutes on 2 cores
    python benchmarks/bench_atari.py --quick    # a smoke run (JSON only)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness import (  # noqa: E402
    Contestant,
    Goal,
    Run,
    TableResult,
    markdown_table,
    pin_torch_threads,
    print_table,
    run_interleaved,
)
from library_runs import sb3_run_act, tianshou_envs, tianshou_run, tshtrain_off_policy_run  # noqa: E402
from report import run_header, write_json, write_report  # noqa: E402

from tshtrain.env.atari import make_atari_env  # noqa: E402

NUM_ENVS = 8
ENV_ID = "ALE/Breakout-v5"
PPO_ROLLOUT_STEPS = 128  # per env
DQN_BUFFER = 20_000
PACKAGES = ("tshtrain", "torch", "gymnasium", "ale-py", "stable-baselines3", "tianshou", "numpy")
EXAMPLES = ROOT / "examples" / "configs"


def _make_env() -> Any:
    return make_atari_env(ENV_ID)


def _nature_cnn() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, 4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, 2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, 1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(3136, 512),
        nn.ReLU(),
    )


# =============================================================================== tshtrain
def _tshtrain_experiment(stem: str, overrides: list[str]) -> Any:
    from tshtrain.config import load_experiment

    return load_experiment(str(EXAMPLES / f"{stem}.yaml"), overrides)


def ppo_tshtrain(rollouts: int) -> Run:
    from tshtrain.config import build_algorithm
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

    steps = NUM_ENVS * PPO_ROLLOUT_STEPS
    experiment = _tshtrain_experiment(
        "ppo_atari_breakout",
        ["device=cpu", "trainer.max_epochs=1", f"trainer.epoch_num_steps={rollouts * steps}"],
    )
    envs = make_vector_env(_make_env, NUM_ENVS)
    algorithm = build_algorithm(experiment, envs.single_observation_space, envs.single_action_space)
    trainer = OnPolicyTrainer(
        algorithm,  # type: ignore[arg-type]
        OnPolicyTrainerParams(
            training_collector=Collector(algorithm.policy, envs, VectorReplayBuffer(steps, NUM_ENVS), seed=0),
            max_epochs=1,
            epoch_num_steps=rollouts * steps,
            collection_step_num_env_steps=steps,
            batch_size=256,
            update_step_num_repetitions=4,
            verbose=False,
            show_progress=False,
        ),
    )

    def run() -> None:
        trainer.run()
        envs.close()

    return run


def dqn_tshtrain(prefill: int, env_steps: int) -> Run:
    from tshtrain.config import build_algorithm
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OffPolicyTrainerParams

    experiment = _tshtrain_experiment("dqn_atari_breakout", ["device=cpu"])
    envs = make_vector_env(_make_env, NUM_ENVS)
    algorithm = build_algorithm(experiment, envs.single_observation_space, envs.single_action_space)
    collector = Collector(
        algorithm.policy, envs, VectorReplayBuffer(DQN_BUFFER, NUM_ENVS), exploration_noise=True, seed=0
    )
    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=1,
        epoch_num_steps=env_steps,
        collection_step_num_env_steps=NUM_ENVS,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=32,
        verbose=False,
        show_progress=False,
    )
    return tshtrain_off_policy_run(algorithm, params, envs, prefill)


# =============================================================================== SB3
def ppo_sb3(rollouts: int) -> Run:
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([_make_env] * NUM_ENVS)
    model = PPO(
        "CnnPolicy",
        env,
        n_steps=PPO_ROLLOUT_STEPS,
        batch_size=256,
        n_epochs=4,
        learning_rate=lambda progress: 2.5e-4 * progress,
        clip_range=lambda progress: 0.1 * progress,
        ent_coef=0.01,
        vf_coef=0.5,
        gae_lambda=0.95,
        gamma=0.99,
        max_grad_norm=0.5,
        policy_kwargs={"share_features_extractor": False},
        seed=0,
        device="cpu",
        verbose=0,
    )
    return sb3_run_act(model, env, rollouts * NUM_ENVS * PPO_ROLLOUT_STEPS)[0]


def dqn_sb3(prefill: int, env_steps: int) -> Run:
    from stable_baselines3 import DQN
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([_make_env] * NUM_ENVS)
    model = DQN(
        "CnnPolicy",
        env,
        learning_rate=1e-4,
        buffer_size=DQN_BUFFER,
        learning_starts=prefill,
        batch_size=32,
        gamma=0.99,
        train_freq=1,  # one vector step of 8 envs
        gradient_steps=2,  # one gradient step per 4 env steps
        target_update_interval=4000,  # env steps: 1000 gradient steps
        exploration_fraction=0.1,
        exploration_final_eps=0.01,
        max_grad_norm=10.0,
        seed=0,
        device="cpu",
        verbose=0,
    )
    return sb3_run_act(model, env, prefill + env_steps)[0]


# =============================================================================== Tianshou 2.0.1
def _tianshou_cnn(num_outputs: int | None) -> nn.Module:
    from tianshou.utils.net.common import ModuleWithVectorOutput

    class NatureCNN(ModuleWithVectorOutput):
        """The Nature CNN on uint8 frames (scaled by 1/255), Tianshou's (obs, state) -> (out, state)."""

        def __init__(self) -> None:
            super().__init__(num_outputs or 512)
            layers = [_nature_cnn()] + ([nn.Linear(512, num_outputs)] if num_outputs else [])
            self.net = nn.Sequential(*layers)

        def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
            x = torch.as_tensor(obs, dtype=torch.float32) / 255.0
            return self.net(x), state

    return NatureCNN()


def ppo_tianshou(rollouts: int) -> Run:
    from tianshou.algorithm import PPO
    from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory, LRSchedulerFactoryLinear
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.trainer import OnPolicyTrainerParams
    from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic

    envs = tianshou_envs(_make_env, NUM_ENVS, 0)
    steps = NUM_ENVS * PPO_ROLLOUT_STEPS
    actor = DiscreteActor(preprocess_net=_tianshou_cnn(None), action_shape=4, softmax_output=False)
    critic = DiscreteCritic(preprocess_net=_tianshou_cnn(None))
    optim = AdamOptimizerFactory(lr=2.5e-4).with_lr_scheduler_factory(
        LRSchedulerFactoryLinear(
            max_epochs=1, epoch_num_steps=rollouts * steps, collection_step_num_env_steps=steps
        )
    )
    policy = DiscreteActorPolicy(actor=actor, action_space=envs.action_space[0], deterministic_eval=True)
    algorithm = PPO(
        policy=policy,
        critic=critic,
        optim=optim,
        eps_clip=0.1,
        vf_coef=0.5,
        ent_coef=0.01,
        max_grad_norm=0.5,
        gae_lambda=0.95,
        gamma=0.99,
        advantage_normalization=True,
    )
    collector = Collector(algorithm, envs, VectorReplayBuffer(steps, NUM_ENVS))
    params = OnPolicyTrainerParams(
        training_collector=collector,
        max_epochs=1,
        epoch_num_steps=rollouts * steps,
        collection_step_num_env_steps=steps,
        batch_size=256,
        update_step_num_repetitions=4,
        verbose=False,
        show_progress=False,
    )
    return tianshou_run(algorithm, params, envs)


def dqn_tianshou(prefill: int, env_steps: int) -> Run:
    from tianshou.algorithm import DQN
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.trainer import OffPolicyTrainerParams

    envs = tianshou_envs(_make_env, NUM_ENVS, 0)
    net = _tianshou_cnn(4)
    policy = DiscreteQLearningPolicy(model=net, action_space=envs.action_space[0], eps_training=1.0)
    algorithm = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=1e-4),
        gamma=0.99,
        target_update_freq=1000,
        is_double=False,
        huber_loss_delta=1.0,
    )
    collector = Collector(algorithm, envs, VectorReplayBuffer(DQN_BUFFER, NUM_ENVS), exploration_noise=True)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=1,
        epoch_num_steps=env_steps,
        collection_step_num_env_steps=NUM_ENVS,
        update_step_num_gradient_steps_per_sample=0.25,
        batch_size=32,
        verbose=False,
        show_progress=False,
    )
    return tianshou_run(algorithm, params, envs, prefill)


# =============================================================================== env only
def env_only(env_steps: int) -> Run:
    from tshtrain.env import make_vector_env

    envs = make_vector_env(_make_env, NUM_ENVS)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = [rng.integers(4, size=NUM_ENVS) for _ in range(env_steps // NUM_ENVS)]

    def run() -> None:
        for act in actions:
            envs.step(act)
        envs.close()

    return run


# =============================================================================== main
def _table(title: str, contestants: list[Contestant], reps: int, notes: list[str]) -> TableResult:
    rows = run_interleaved(contestants, reps=reps, unit="env steps/s", label=title.split(maxsplit=1)[0])
    table = TableResult(
        title=title,
        unit="env steps/s",
        rows=rows,
        goals=[
            Goal(numerator="tshtrain", denominator="SB3", target=1.0),
            Goal(numerator="tshtrain", denominator="Tianshou", target=1.0),
        ],
        notes=notes,
    )
    print_table(table)
    return table


def _contestants(
    builders: dict[str, Callable[[], Run]], work: int, warmup: dict[str, Callable[[], Run]]
) -> list[Contestant]:
    return [
        Contestant(
            name=name, setup=build, work=work, info_only=name == "env only", warmup_setup=warmup.get(name)
        )
        for name, build in builders.items()
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ppo-rollouts", type=int, default=1, help="rollouts of 1024 env steps per run")
    parser.add_argument("--dqn-prefill", type=int, default=512)
    parser.add_argument("--dqn-env-steps", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="tiny runs, 1 repetition, JSON only")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.dqn_prefill, args.dqn_env_steps = 1, 64, 64
    pin_torch_threads()
    header = run_header(PACKAGES)
    ppo_work = args.ppo_rollouts * NUM_ENVS * PPO_ROLLOUT_STEPS
    dqn_work = args.dqn_prefill + args.dqn_env_steps
    ppo = _table(
        f"PPO on Breakout: training env steps/s, {NUM_ENVS} envs",
        _contestants(
            {
                "tshtrain": lambda: ppo_tshtrain(args.ppo_rollouts),
                "SB3": lambda: ppo_sb3(args.ppo_rollouts),
                "Tianshou": lambda: ppo_tianshou(args.ppo_rollouts),
                "env only": lambda: env_only(ppo_work),
            },
            ppo_work,
            {"env only": lambda: env_only(64)},
        ),
        args.reps,
        [
            f"{args.ppo_rollouts} rollout(s) of {NUM_ENVS}x{PPO_ROLLOUT_STEPS} env steps and their "
            f"updates per run"
        ],
    )
    dqn = _table(
        f"DQN on Breakout: training env steps/s, {NUM_ENVS} envs",
        _contestants(
            {
                "tshtrain": lambda: dqn_tshtrain(args.dqn_prefill, args.dqn_env_steps),
                "SB3": lambda: dqn_sb3(args.dqn_prefill, args.dqn_env_steps),
                "Tianshou": lambda: dqn_tianshou(args.dqn_prefill, args.dqn_env_steps),
                "env only": lambda: env_only(dqn_work),
            },
            dqn_work,
            {
                "tshtrain": lambda: dqn_tshtrain(64, 64),
                "SB3": lambda: dqn_sb3(64, 64),
                "Tianshou": lambda: dqn_tianshou(64, 64),
                "env only": lambda: env_only(64),
            },
        ),
        args.reps,
        [
            f"{args.dqn_prefill} random env steps then {args.dqn_env_steps} epsilon-greedy env steps per "
            f"run, {args.dqn_env_steps // 4} gradient steps of 32"
        ],
    )
    name = "bench_atari_quick" if args.quick else "bench_atari"
    payload = {
        "args": vars(args),
        **header,
        "tables": {"ppo": ppo.to_json(), "dqn": dqn.to_json()},
    }
    json_path = write_json(name, payload)
    print(f"\nwrote {json_path}")
    if args.quick:
        return
    md_path = write_report(
        name,
        "Atari training throughput: tshtrain vs SB3 vs Tianshou 2.0.1 (Breakout, 8 envs)",
        payload,
        [
            "",
            "Written by `benchmarks/bench_atari.py` (its docstring has the settings).",
            "",
            markdown_table(ppo),
            "",
            markdown_table(dqn),
        ],
    )
    print(f"wrote {md_path}")


if __name__ == "__main__":
    main()
