"""The contestants of ``bench_e2e.py``: the same training, built with tshtrain, by hand, with
Stable-Baselines3 and with Tianshou 2.0.1.

A builder takes ``(make_env, seed, num_env_steps)``, constructs everything (untimed) and returns
``(run, act)``: ``run()`` is the timed training, ``act(obs_batch)`` the trained policy's deterministic
actions (for the untimed evaluation afterwards). ``make_env`` builds one env wrapped by the
benchmark's episode recorder; every contestant builds all its envs with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import hand_loops
import numpy as np
import torch
from library_runs import sb3_run_act, tianshou_envs, tianshou_run, tshtrain_off_policy_run
from torch import nn

EnvFactory = Callable[[], gym.Env[Any, Any]]
ActFn = Callable[[np.ndarray], np.ndarray]
Run = Callable[[], None]
Builder = Callable[[EnvFactory, int, int], tuple[Run, ActFn]]

HAND = "hand loop"
"""the plain hand loop (torch.optim.Adam with its defaults): the first reference of the ratios"""
HAND_FUSED = "hand, fused"
"""the hand loop given what tshtrain uses, fused Adam and flushed denormals: the second reference"""


def hand_builder(loop: Callable[..., ActFn]) -> Builder:
    """A :mod:`hand_loops` loop as a builder: the run is ``loop(make_env, seed=..., num_env_steps=...)``
    (a hand loop builds its envs and networks inside it, timed); ``act`` is the trained loop's. With
    ``flush_denormal=True`` bound, the loop runs with ``torch.set_flush_denormal(True)`` (what tshtrain's
    trainer does by default, ``TrainerOptions.flush_denormal``): how much of a gap is that one flag."""

    def build(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
        trained: list[ActFn] = []

        def run() -> None:
            trained.append(loop(make_env, seed=seed, num_env_steps=num_env_steps))

        def act(obs: np.ndarray) -> np.ndarray:
            return trained[0](obs)

        return run, act

    return build


# ============================================================================================ PPO
PPO_NUM_ENVS = 8
PPO_ROLLOUT = 256  # 32 env steps per env
PPO_ENV_STEPS = 391 * PPO_ROLLOUT  # 100,096: the first multiple of 256 >= 100k (what SB3 does)
PPO_SETTINGS = (
    "Settings (rl-zoo's CartPole-v1 PPO): 8 sync envs, 32 env steps per env per rollout (256), one "
    "mini-batch of 256, 20 epochs (20 gradient steps per update), gamma 0.98, GAE lambda 0.8, Adam lr "
    "1e-3 and clip range 0.2 both decaying linearly to 0, no entropy bonus, value loss weight 0.5, "
    "gradient norm clipped to 0.5, advantages standardised per mini-batch, separate 64-64 tanh actor and "
    "critic, bootstrapping at truncations. Differences the libraries do not let us remove: Tianshou "
    "keeps the clip range constant (it has no clip schedule); SB3 initialises the networks "
    "orthogonally and uses Adam eps 1e-5 (its defaults; the others use torch's default init and eps "
    "1e-8). The hand loop samples from `torch.distributions.Categorical` and uses plain `torch.optim."
    "Adam`; tshtrain uses fused Adam and no distribution objects."
)


def _ppo_epochs(num_env_steps: int) -> tuple[int, int]:
    """(epochs, env steps per epoch): 23 x 17 rollouts for the full budget, else one rollout an epoch."""
    num_updates = num_env_steps // PPO_ROLLOUT
    return (23, 17 * PPO_ROLLOUT) if num_updates == 391 else (num_updates, PPO_ROLLOUT)


def _ppo_tshtrain(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from tshtrain.algorithm import PPO, CategoricalPolicy, LinearSchedule, PPOParams, mlp
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

    torch.manual_seed(seed)
    envs = make_vector_env(make_env, PPO_NUM_ENVS)
    num_updates = num_env_steps // PPO_ROLLOUT
    epochs, steps_per_epoch = _ppo_epochs(num_env_steps)
    policy = CategoricalPolicy(mlp(4, 2, (64, 64)), envs.single_action_space, seed=seed)
    params = PPOParams(
        lr=1e-3,
        lr_schedule=LinearSchedule(num_update_steps=num_updates),
        clip_range=0.2,
        clip_schedule=LinearSchedule(num_update_steps=num_updates),
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
    )
    algorithm = PPO(policy=policy, critic=mlp(4, 1, (64, 64)), params=params, seed=seed)
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=Collector(
                policy, envs, VectorReplayBuffer(PPO_ROLLOUT, PPO_NUM_ENVS), seed=seed
            ),
            max_epochs=epochs,
            epoch_num_steps=steps_per_epoch,
            collection_step_num_env_steps=PPO_ROLLOUT,
            batch_size=256,
            update_step_num_repetitions=20,
            verbose=False,
            show_progress=False,
        ),
    )

    def run() -> None:
        trainer.run()
        envs.close()

    def act(obs: np.ndarray) -> np.ndarray:
        return policy.compute_actions(obs, deterministic=True)

    return run, act


def _ppo_sb3(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([make_env] * PPO_NUM_ENVS)
    model = SB3PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        learning_rate=lambda progress: 1e-3 * progress,
        clip_range=lambda progress: 0.2 * progress,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return sb3_run_act(model, env, num_env_steps)


def _ppo_tianshou(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from tianshou.algorithm import PPO
    from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory, LRSchedulerFactoryLinear
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.trainer import OnPolicyTrainerParams
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic

    envs = tianshou_envs(make_env, PPO_NUM_ENVS, seed)
    epochs, steps_per_epoch = _ppo_epochs(num_env_steps)
    actor = DiscreteActor(
        preprocess_net=Net(state_shape=4, hidden_sizes=[64, 64], activation=nn.Tanh),
        action_shape=2,
        softmax_output=False,
    )
    critic = DiscreteCritic(preprocess_net=Net(state_shape=4, hidden_sizes=[64, 64], activation=nn.Tanh))
    optim = AdamOptimizerFactory(lr=1e-3).with_lr_scheduler_factory(
        LRSchedulerFactoryLinear(
            max_epochs=epochs, epoch_num_steps=steps_per_epoch, collection_step_num_env_steps=PPO_ROLLOUT
        )
    )
    policy = DiscreteActorPolicy(actor=actor, action_space=envs.action_space[0], deterministic_eval=True)
    algorithm = PPO(
        policy=policy,
        critic=critic,
        optim=optim,
        eps_clip=0.2,
        vf_coef=0.5,
        ent_coef=0.0,
        max_grad_norm=0.5,
        gae_lambda=0.8,
        gamma=0.98,
        advantage_normalization=True,
    )
    collector = Collector(algorithm, envs, VectorReplayBuffer(PPO_ROLLOUT, PPO_NUM_ENVS))
    params = OnPolicyTrainerParams(
        training_collector=collector,
        max_epochs=epochs,
        epoch_num_steps=steps_per_epoch,
        collection_step_num_env_steps=PPO_ROLLOUT,
        batch_size=256,
        update_step_num_repetitions=20,
        verbose=False,
        show_progress=False,
    )

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = actor(obs)
            return logits.argmax(-1).numpy()

    return tianshou_run(algorithm, params, envs), act


PPO_CONTESTANTS: dict[str, Builder] = {
    "tshtrain": _ppo_tshtrain,
    HAND: hand_builder(hand_loops.ppo_cartpole),
    "hand loop+FTZ": hand_builder(functools.partial(hand_loops.ppo_cartpole, flush_denormal=True)),
    HAND_FUSED: hand_builder(
        functools.partial(hand_loops.ppo_cartpole, flush_denormal=True, fused_adam=True)
    ),
    "SB3": _ppo_sb3,
    "Tianshou": _ppo_tianshou,
}

# ============================================================================================ DQN
DQN_PREFILL = 1000
DQN_ROUND = 256  # env steps per collection step; 128 gradient steps follow each
DQN_ROUNDS = 192
DQN_ENV_STEPS = DQN_PREFILL + DQN_ROUNDS * DQN_ROUND  # 50,152
DQN_EPS_STEPS = 8000
DQN_SETTINGS = (
    "Settings (rl-zoo's CartPole-v1 DQN): one env, 1,000 uniformly random env steps first, then 192 "
    "rounds of 256 epsilon-greedy env steps each followed by 128 gradient steps (batch 64) on the Huber "
    "loss; replay buffer 100k; gamma 0.99; Adam lr 2.3e-3; 256-256 ReLU Q-network; target network "
    "copied from the online one once per round (rl-zoo: every 10 env steps, which only happens during "
    "collection); no double Q-learning; gradient norm clipped to 10; epsilon from 1.0 to 0.04 over the "
    "first 8,000 epsilon-greedy env steps; truncations bootstrap. Differences: SB3 runs rl-zoo's "
    "settings as written (`learning_starts=1000`, `exploration_fraction=0.16` of the budget, i.e. its "
    "8,000 steps include the random ones; its first update comes after 1,024 steps); Tianshou's DQN has "
    "no gradient clipping."
)


def _dqn_epochs(num_env_steps: int) -> tuple[int, int]:
    """(epochs, rounds per epoch): 12 x 16 rounds for the full budget, else one round an epoch."""
    rounds = (num_env_steps - DQN_PREFILL) // DQN_ROUND
    return (12, 16) if rounds == DQN_ROUNDS else (rounds, 1)


def _dqn_tshtrain(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from tshtrain.algorithm import DQN, DQNParams, EpsilonSchedule, QValuePolicy, mlp
    from tshtrain.data import Collector, ReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OffPolicyTrainerParams

    torch.manual_seed(seed)
    envs = make_vector_env(make_env, 1)
    epochs, rounds_per_epoch = _dqn_epochs(num_env_steps)
    policy = QValuePolicy(
        mlp(4, 2, (256, 256), nn.ReLU),
        envs.single_action_space,
        eps_schedule=EpsilonSchedule(start=1.0, end=0.04, num_env_steps=DQN_EPS_STEPS),
        seed=seed,
    )
    params = DQNParams(
        lr=2.3e-3, gamma=0.99, target_update_freq=128, is_double=False, huber_loss=True, max_grad_norm=10.0
    )
    algorithm = DQN(policy=policy, params=params)
    collector = Collector(policy, envs, ReplayBuffer(100_000, seed=seed), exploration_noise=True, seed=seed)
    trainer_params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=epochs,
        epoch_num_steps=rounds_per_epoch * DQN_ROUND,
        collection_step_num_env_steps=DQN_ROUND,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=64,
        verbose=False,
        show_progress=False,
    )

    def act(obs: np.ndarray) -> np.ndarray:
        return policy.compute_actions(obs, deterministic=True)

    return tshtrain_off_policy_run(algorithm, trainer_params, envs, DQN_PREFILL), act


def _dqn_sb3(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from stable_baselines3 import DQN as SB3DQN
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([make_env])
    model = SB3DQN(
        "MlpPolicy",
        env,
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=DQN_PREFILL,
        gamma=0.99,
        target_update_interval=10,
        train_freq=DQN_ROUND,
        gradient_steps=128,
        exploration_fraction=DQN_EPS_STEPS / num_env_steps,
        exploration_final_eps=0.04,
        policy_kwargs={"net_arch": [256, 256]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return sb3_run_act(model, env, num_env_steps)


def _dqn_tianshou(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from tianshou.algorithm import DQN
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net

    envs = tianshou_envs(make_env, 1, seed)
    epochs, rounds_per_epoch = _dqn_epochs(num_env_steps)
    net = Net(state_shape=4, action_shape=2, hidden_sizes=[256, 256])
    policy = DiscreteQLearningPolicy(model=net, action_space=envs.action_space[0], eps_training=1.0)
    algorithm = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=2.3e-3),
        gamma=0.99,
        target_update_freq=128,
        is_double=False,
        huber_loss_delta=1.0,
    )
    collector = Collector(algorithm, envs, VectorReplayBuffer(100_000, 1), exploration_noise=True)

    def set_eps(epoch: int, env_step: int) -> None:
        del epoch
        policy.set_eps_training(1.0 + (0.04 - 1.0) * min(1.0, env_step / DQN_EPS_STEPS))

    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=epochs,
        epoch_num_steps=rounds_per_epoch * DQN_ROUND,
        collection_step_num_env_steps=DQN_ROUND,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=64,
        training_fn=set_eps,
        verbose=False,
        show_progress=False,
    )

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            q, _ = net(obs)
            return q.argmax(-1).numpy()

    return tianshou_run(algorithm, params, envs, DQN_PREFILL), act


_dqn_hand_loop = functools.partial(hand_loops.dqn_cartpole, prefill_env_steps=DQN_PREFILL)
DQN_CONTESTANTS: dict[str, Builder] = {
    "tshtrain": _dqn_tshtrain,
    HAND: hand_builder(_dqn_hand_loop),
    "hand loop+FTZ": hand_builder(functools.partial(_dqn_hand_loop, flush_denormal=True)),
    HAND_FUSED: hand_builder(functools.partial(_dqn_hand_loop, flush_denormal=True, fused_adam=True)),
    "SB3": _dqn_sb3,
    "Tianshou": _dqn_tianshou,
}

# ============================================================================================ SAC
SAC_PREFILL = 1000
SAC_ENV_STEPS = 20_000
SAC_SETTINGS = (
    "Settings (rl-zoo's Pendulum-v1 SAC, with SB3's SAC defaults): one env, 1,000 uniformly random env "
    "steps first (rl-zoo: `learning_starts=100`; 1,000 here as in tshtrain's example, for every "
    "contestant), then one gradient step per env step (19,000), batch 256, Adam lr 1e-3 for actor, "
    "critics and alpha, gamma 0.99, tau 0.005, twin 256-256 ReLU critics, a 256-256 ReLU tanh-Gaussian "
    "actor, automatic entropy tuning from alpha 1 with target entropy -1, replay buffer 20k (holds every "
    "transition). Test return: mean over 10 episodes with the mean action."
)


def _sac_epochs(num_env_steps: int) -> tuple[int, int]:
    """(epochs, env steps per epoch) after the random ones: 19 x 1,000 for the full budget."""
    train_steps = num_env_steps - SAC_PREFILL
    return (19, 1000) if train_steps == 19_000 else (1, train_steps)


def _sac_tshtrain(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from tshtrain.algorithm import SAC, QEnsemble, SACParams, TanhGaussianPolicy, mlp
    from tshtrain.data import Collector, ReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OffPolicyTrainerParams

    torch.manual_seed(seed)
    envs = make_vector_env(make_env, 1)
    epochs, epoch_steps = _sac_epochs(num_env_steps)
    policy = TanhGaussianPolicy(mlp(3, 2, (256, 256), nn.ReLU), envs.single_action_space, seed=seed)
    critic = QEnsemble(3, 1, (256, 256), num_critics=2)
    params = SACParams(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, gamma=0.99, tau=0.005)
    algorithm = SAC(policy=policy, critic=critic, params=params)
    collector = Collector(policy, envs, ReplayBuffer(20_000, seed=seed), seed=seed)
    trainer_params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=epochs,
        epoch_num_steps=epoch_steps,
        collection_step_num_env_steps=1,
        update_step_num_gradient_steps_per_sample=1.0,
        batch_size=256,
        verbose=False,
        show_progress=False,
    )

    def act(obs: np.ndarray) -> np.ndarray:
        return policy.map_action(policy.compute_actions(obs, deterministic=True))

    return tshtrain_off_policy_run(algorithm, trainer_params, envs, SAC_PREFILL), act


def _sac_sb3(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from stable_baselines3 import SAC as SB3SAC
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([make_env])
    model = SB3SAC(
        "MlpPolicy",
        env,
        learning_rate=1e-3,
        buffer_size=20_000,
        learning_starts=SAC_PREFILL,
        batch_size=256,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto",
        policy_kwargs={"net_arch": [256, 256]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return sb3_run_act(model, env, num_env_steps)


def _sac_tianshou(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ActFn]:
    from tianshou.algorithm import SAC
    from tianshou.algorithm.modelfree.sac import AutoAlpha, SACPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.continuous import ContinuousActorProbabilistic, ContinuousCritic

    envs = tianshou_envs(make_env, 1, seed)
    epochs, epoch_steps = _sac_epochs(num_env_steps)
    actor = ContinuousActorProbabilistic(
        preprocess_net=Net(state_shape=3, hidden_sizes=[256, 256]),
        action_shape=1,
        unbounded=True,
        conditioned_sigma=True,
    )

    def critic() -> ContinuousCritic:
        return ContinuousCritic(
            preprocess_net=Net(state_shape=3, action_shape=1, hidden_sizes=[256, 256], concat=True)
        )

    policy = SACPolicy(actor=actor, action_space=envs.action_space[0])
    algorithm = SAC(
        policy=policy,
        policy_optim=AdamOptimizerFactory(lr=1e-3),
        critic=critic(),
        critic_optim=AdamOptimizerFactory(lr=1e-3),
        critic2=critic(),
        critic2_optim=AdamOptimizerFactory(lr=1e-3),
        tau=0.005,
        gamma=0.99,
        alpha=AutoAlpha(target_entropy=-1.0, log_alpha=0.0, optim=AdamOptimizerFactory(lr=1e-3)),
    )
    collector = Collector(algorithm, envs, VectorReplayBuffer(20_000, 1), exploration_noise=True)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        max_epochs=epochs,
        epoch_num_steps=epoch_steps,
        collection_step_num_env_steps=1,
        update_step_num_gradient_steps_per_sample=1.0,
        batch_size=256,
        verbose=False,
        show_progress=False,
    )

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            (mu, _), _ = actor(obs)
            return (torch.tanh(mu) * 2.0).numpy()

    return tianshou_run(algorithm, params, envs, SAC_PREFILL), act


_sac_hand_loop = functools.partial(hand_loops.sac_pendulum, prefill_env_steps=SAC_PREFILL)
SAC_CONTESTANTS: dict[str, Builder] = {
    "tshtrain": _sac_tshtrain,
    HAND: hand_builder(_sac_hand_loop),
    "hand loop+FTZ": hand_builder(functools.partial(_sac_hand_loop, flush_denormal=True)),
    HAND_FUSED: hand_builder(functools.partial(_sac_hand_loop, flush_denormal=True, fused_adam=True)),
    "SB3": _sac_sb3,
    "Tianshou": _sac_tianshou,
}
