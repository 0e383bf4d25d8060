"""The default experiments of the algorithms: the one place where their settings are written down.

Each entry is a default experiment as the registry hands it out (every section but ``algorithm.name``);
``tshtrain config NAME`` prints it with every other key filled in. The example scripts read their
settings from here (``tshtrain.config.default_experiment(NAME)``) and ``examples/configs/*.yaml`` are
generated from here (``python scripts/generate_example_configs.py``); tests check both. These are the
settings behind the results in docs/algorithms.md: change them there and here together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_DEVICE = "auto"
"""the ``device`` of an experiment that sets none: CUDA when ``torch.cuda.is_available()``, else CPU"""


def _cartpole(num_training_envs: int = 8, num_test_envs: int = 8) -> dict[str, Any]:
    return {"id": "CartPole-v1", "num_training_envs": num_training_envs, "num_test_envs": num_test_envs}


def _pendulum() -> dict[str, Any]:
    return {"id": "Pendulum-v1", "num_training_envs": 1, "num_test_envs": 10}


_DQN_EXAMPLE_RUN = "runs/dqn-cartpole"
"""where ``examples/configs/dqn_cartpole.yaml`` writes; its buffer is a dataset of the offline examples"""
_SAC_EXAMPLE_RUN = "runs/sac-pendulum"
"""where ``examples/configs/sac_pendulum.yaml`` writes; its buffer is a dataset of the offline examples"""


def _saves_dataset(output_dir: str) -> dict[str, Any]:
    """The example-file extras of an online example whose replay buffer another example learns from."""
    return {"output_dir": output_dir, "buffer": {"save_on_exit": True}}


def _dataset(output_dir: str) -> dict[str, Any]:
    return {"path": f"{output_dir}/buffer"}


_PENDULUM_OFF_POLICY_TRAINER: dict[str, Any] = {
    "max_epochs": 19,
    "epoch_num_steps": 1000,
    "collection_step_num_env_steps": 1,
    "update_step_num_gradient_steps_per_sample": 1.0,
    "batch_size": 256,
    "test_step_num_episodes": 10,
    "stop_score": -200.0,
}
_PENDULUM_BUFFER: dict[str, Any] = {"size": 20_000, "prefill_env_steps": 1000}
_OFFLINE_TRAINER: dict[str, Any] = {
    "max_epochs": 5,
    "epoch_num_steps": 1000,
    "batch_size": 256,
    "test_step_num_episodes": 10,
}


def _distributional_cartpole() -> dict[str, Any]:
    """The C51 / QR-DQN / IQN / Rainbow setup of Tianshou's tests (test/discrete/test_c51.py, ...) and of
    tests/learning/test_learning_distributional.py: four ReLU layers of 128, gamma 0.9, 3-step returns,
    target copies every 320 gradient steps, epsilon 0.1 to 0.01 over 50k env steps, 8 env steps and one
    gradient step of 64 per training step, up to 10 epochs of 8000 env steps, stop at 195. Rainbow's
    dueling noisy network is the ``rainbow`` network's default; its prioritized replay is
    ``buffer.prioritized: true`` (off here, as in Tianshou's test and the learning test). The prefill is
    512 random env steps (the learning test collects them with the policy)."""
    return {
        "env": _cartpole(8, 10),
        "algorithm": {
            "params": {"gamma": 0.9, "n_step": 3, "target_update_freq": 320},
            "network": {"hidden_sizes": [128, 128, 128, 128]},
            "exploration": {"eps_start": 0.1, "eps_end": 0.01, "eps_decay_env_steps": 50_000},
        },
        "trainer": {
            "max_epochs": 10,
            "epoch_num_steps": 8000,
            "collection_step_num_env_steps": 8,
            "update_step_num_gradient_steps_per_sample": 0.125,
            "batch_size": 64,
            "test_step_num_episodes": 10,
            "stop_score": 195.0,
        },
        "buffer": {"size": 20_000, "prefill_env_steps": 512},
    }


def _trust_region_cartpole(params: Mapping[str, Any]) -> dict[str, Any]:
    """NPG / TRPO with the setup of Tianshou's NPG / TRPO tests and of
    tests/learning/test_learning_npg_trpo.py: 64-64 tanh actor and critic, 16 training envs, 2048 env
    steps per collection step, one mini-batch of the whole rollout, 2 repetitions, up to 9 epochs of
    10,240 env steps (about 100k), stop at 475; every linear layer initialised orthogonally (the
    network's ``orthogonal_init``, on by default)."""
    return {
        "env": _cartpole(16, 10),
        "algorithm": {"params": dict(params), "network": {"hidden_sizes": [64, 64], "activation": "tanh"}},
        "trainer": {
            "max_epochs": 9,
            "epoch_num_steps": 10_240,
            "collection_step_num_env_steps": 2048,
            "batch_size": None,
            "update_step_num_repetitions": 2,
            "test_step_num_episodes": 10,
            "stop_score": 475.0,
        },
    }


DEFAULTS: dict[str, Mapping[str, Any]] = {
    "ppo": {
        "env": _cartpole(),
        "algorithm": {
            "params": {
                "lr": 1e-3,
                "lr_schedule": "linear",
                "clip_range": 0.2,
                "clip_schedule": "linear",
                "gamma": 0.98,
                "gae_lambda": 0.8,
                "ent_coef": 0.0,
            },
            "network": {"hidden_sizes": [64, 64], "activation": "tanh"},
        },
        "trainer": {
            "max_epochs": 25,
            "epoch_num_steps": 4096,
            "collection_step_num_env_steps": 256,
            "batch_size": 256,
            "update_step_num_repetitions": 20,
            "test_step_num_episodes": 10,
            "stop_score": 475.0,
        },
    },
    "a2c": {
        "env": _cartpole(),
        "algorithm": {
            "params": {
                "lr": 1e-3,
                "lr_schedule": "linear",
                "gamma": 0.99,
                "gae_lambda": 1.0,  # n-step returns: with 5 steps per env, lambda matters little
                "ent_coef": 0.0,
                "advantage_normalization": False,
            }
        },
        "trainer": {
            "max_epochs": 20,
            "epoch_num_steps": 10_000,
            "collection_step_num_env_steps": 40,
            "batch_size": None,
            "update_step_num_repetitions": 1,
            "test_step_num_episodes": 10,
            "stop_score": 475.0,
        },
    },
    "reinforce": {
        "env": _cartpole(),
        "algorithm": {"params": {"lr": 1e-3, "gamma": 0.99}},
        "trainer": {
            "max_epochs": 20,
            "epoch_num_steps": 10_000,
            "collection_step_num_env_steps": None,
            "collection_step_num_episodes": 16,
            "batch_size": None,
            "test_step_num_episodes": 10,
            "stop_score": 195.0,
        },
        "buffer": {"size": 20_000},
    },
    "dqn": {
        "env": _cartpole(1, 10),
        "algorithm": {
            "params": {
                "lr": 2.3e-3,
                "gamma": 0.99,
                "target_update_freq": 128,
                "is_double": False,
                "max_grad_norm": 10.0,
            },
            "network": {"hidden_sizes": [256, 256]},
            "exploration": {"eps_start": 1.0, "eps_end": 0.04, "eps_decay_env_steps": 8000},
        },
        "trainer": {
            "max_epochs": 38,
            "epoch_num_steps": 2560,
            "collection_step_num_env_steps": 256,
            "update_step_num_gradient_steps_per_sample": 0.5,
            "batch_size": 64,
            "test_step_num_episodes": 10,
            "stop_score": 475.0,
        },
        "buffer": {"size": 100_000, "prefill_env_steps": 1000},
    },
    "npg": _trust_region_cartpole({"gamma": 0.99}),
    "trpo": _trust_region_cartpole({"gamma": 0.99, "max_kl": 0.005}),
    "c51": _distributional_cartpole(),
    "qrdqn": _distributional_cartpole(),
    "iqn": _distributional_cartpole(),
    "rainbow": _distributional_cartpole(),
    "ddpg": {
        "env": _pendulum(),
        "algorithm": {
            "params": {"actor_lr": 1e-3, "critic_lr": 1e-3},
            "network": {"hidden_sizes": [256, 256], "num_critics": 1},
        },
        "trainer": _PENDULUM_OFF_POLICY_TRAINER,
        "buffer": _PENDULUM_BUFFER,
    },
    "td3": {
        "env": _pendulum(),
        "algorithm": {
            "params": {"actor_lr": 1e-3, "critic_lr": 1e-3},
            "network": {"hidden_sizes": [256, 256]},
        },
        "trainer": _PENDULUM_OFF_POLICY_TRAINER,
        "buffer": _PENDULUM_BUFFER,
    },
    "sac": {
        "env": _pendulum(),
        "algorithm": {
            "params": {"actor_lr": 1e-3, "critic_lr": 1e-3, "alpha_lr": 1e-3},
            "network": {"hidden_sizes": [256, 256]},
        },
        "trainer": _PENDULUM_OFF_POLICY_TRAINER,
        "buffer": _PENDULUM_BUFFER,
    },
    "redq": {  # tests/learning/test_learning_redq_iql.py (Tianshou's test_redq.py with 4 critics)
        "env": {"id": "Pendulum-v1", "num_training_envs": 8, "num_test_envs": 10},
        "algorithm": {
            "params": {"actor_lr": 1e-4, "critic_lr": 1e-3, "alpha": 0.2, "subset_size": 2, "actor_delay": 3},
            "network": {"hidden_sizes": [64, 64], "num_critics": 4},
        },
        "trainer": {
            "max_epochs": 5,
            "epoch_num_steps": 5000,
            "collection_step_num_env_steps": 8,
            "update_step_num_gradient_steps_per_sample": 3.0,
            "batch_size": 64,
            "test_step_num_episodes": 10,
            "stop_score": -250.0,
        },
        "buffer": {"size": 20_000, "prefill_env_steps": 1000},
    },
    "discrete_sac": {
        "env": _cartpole(10, 10),
        "algorithm": {
            "params": {
                "actor_lr": 1e-4,
                "critic_lr": 1e-3,
                "gamma": 0.95,
                "alpha": 0.05,
                "auto_alpha": False,
                "n_step": 3,
            },
            "network": {"hidden_sizes": [64, 64]},
        },
        "trainer": {
            "max_epochs": 5,
            "epoch_num_steps": 10_000,
            "collection_step_num_env_steps": 10,
            "update_step_num_gradient_steps_per_sample": 0.1,
            "batch_size": 64,
            "test_step_num_episodes": 10,
            "stop_score": 180.0,
        },
        "buffer": {"size": 20_000},
    },
    "bc": {
        "env": _cartpole(),
        "algorithm": {"params": {"lr": 1e-3}},
        "trainer": {
            "max_epochs": 3,
            "epoch_num_steps": 1000,
            "batch_size": 64,
            "test_step_num_episodes": 20,
        },
        "dataset": _dataset(_DQN_EXAMPLE_RUN),
    },
    "cql": {
        "env": _pendulum(),
        "algorithm": {
            "params": {
                "actor_lr": 1e-4,
                "critic_lr": 3e-4,
                "cql_weight": 5.0,
                "num_sampled_actions": 5,
            },
            "network": {"hidden_sizes": [256, 256]},
        },
        "trainer": _OFFLINE_TRAINER,
        "dataset": _dataset(_SAC_EXAMPLE_RUN),
    },
    "td3_bc": {
        "env": _pendulum(),
        "algorithm": {"params": {"alpha": 2.5}, "network": {"hidden_sizes": [256, 256]}},
        "trainer": _OFFLINE_TRAINER,
        "dataset": _dataset(_SAC_EXAMPLE_RUN),
    },
    "iql": {  # tests/learning/test_learning_redq_iql.py: beta 0.3 (the paper's 3.0 scored 0.22 here)
        "env": _pendulum(),
        "algorithm": {"params": {"beta": 0.3}, "network": {"hidden_sizes": [256, 256]}},
        "trainer": _OFFLINE_TRAINER,
        "dataset": _dataset(_SAC_EXAMPLE_RUN),
    },
    # Tianshou's test_bcq.py networks and bar (-1100); its batch of 32 and 500 steps per epoch reached only
    # -1221.4 on the SAC example's 4,000-transition buffer (seed 0), batch 256 and 1000 steps -981.8 / -943.1
    # (seeds 0 / 1, best of 5 epochs)
    "bcq": {
        "env": _pendulum(),
        "algorithm": {"network": {"hidden_sizes": [64], "vae_hidden_sizes": [32, 32]}},
        "trainer": {**_OFFLINE_TRAINER, "stop_score": -1100.0},
        "dataset": _dataset(_SAC_EXAMPLE_RUN),
    },
    "discrete_crr": {  # Tianshou's test_discrete_crr.py (tests/learning/test_learning_bcq_crr.py)
        "env": _cartpole(8, 10),
        "algorithm": {
            "params": {"lr": 7e-4, "gamma": 0.99, "target_update_freq": 320},
            "network": {"hidden_sizes": [64, 64]},
        },
        "trainer": {**_OFFLINE_TRAINER, "batch_size": 64, "stop_score": 180.0},
        "dataset": _dataset(_DQN_EXAMPLE_RUN),
    },
    "discrete_cql": {
        "env": _cartpole(8, 10),
        "algorithm": {
            "params": {"lr": 1e-3, "target_update_freq": 200, "cql_weight": 1.0},
            "network": {"hidden_sizes": [128, 128]},
        },
        "trainer": {**_OFFLINE_TRAINER, "batch_size": 64},
        "dataset": _dataset(_DQN_EXAMPLE_RUN),
    },
}
"""the default experiment of each algorithm, by its experiment-file name"""

EXAMPLE_EXTRAS: dict[str, Mapping[str, Any]] = {
    "dqn": _saves_dataset(_DQN_EXAMPLE_RUN),
    "sac": _saves_dataset(_SAC_EXAMPLE_RUN),
}
"""what an example experiment file sets beyond its default experiment (``AlgorithmSpec.example_extras``)"""


MINIGRID_EXAMPLE: dict[str, Any] = {
    "algorithm": {
        "name": "ppo",
        "params": {"lr": 1e-3, "gamma": 0.99, "gae_lambda": 0.95, "ent_coef": 0.01, "clip_range": 0.2},
        "network": {
            "hidden_sizes": [64],
            "activation": "tanh",
            "encoder": {
                "type": "cnn",
                "channels": [16, 32, 64],
                "kernel_sizes": [2, 2, 2],
                "strides": [1, 1, 1],
                "features": 64,
            },
        },
    },
    "env": {
        "id": "tshtrain.env.minigrid:MiniGrid-Empty-5x5-v0",
        "num_training_envs": 8,
        "num_test_envs": 4,
        "wrappers": [
            {
                "name": "gymnasium.wrappers.FilterObservation",
                "kwargs": {"filter_keys": ["image", "direction"]},
            },
            {"name": "tshtrain.env.minigrid.StretchImage"},
        ],
    },
    "trainer": {
        "max_epochs": 15,
        "epoch_num_steps": 2048,
        "collection_step_num_env_steps": 512,
        "batch_size": 256,
        "update_step_num_repetitions": 4,
        "test_step_num_episodes": 4,
        "stop_score": 0.9,
    },
}
"""PPO on MiniGrid-Empty-5x5-v0 with Dict observations (image + direction) and a small CNN: every seed
of 0-4 reaches the optimal test return 0.955 within 15k env steps (tests/learning/test_minigrid.py)"""

_ATARI_ENV: dict[str, Any] = {
    "id": "tshtrain.env.atari:ALE/Breakout-v5",
    "kwargs": {"frameskip": 1},  # AtariPreprocessing skips the frames (ALE must not)
    "wrappers": [
        {
            "name": "gymnasium.wrappers.AtariPreprocessing",
            "kwargs": {"frame_skip": 4, "screen_size": 84, "noop_max": 30, "terminal_on_life_loss": False},
        },
        {"name": "gymnasium.wrappers.FrameStackObservation", "kwargs": {"stack_size": 4}},
    ],
}
"""Breakout with Gymnasium's Atari preprocessing (84x84 grayscale, 4 frames per step, up to 30 no-ops at
the start) and the last 4 frames stacked: observations Box(0, 255, (4, 84, 84), uint8), the Nature CNN by
``encoder: auto``; the same wrappers as ``tshtrain.env.atari.atari_wrappers()``"""
_NATURE_CNN: dict[str, Any] = {
    "type": "cnn",
    "channels": [32, 64, 64],
    "kernel_sizes": [8, 4, 3],
    "strides": [4, 2, 1],
    "features": 512,
}

PPO_ATARI_EXAMPLE: dict[str, Any] = {
    "algorithm": {
        "name": "ppo",
        "params": {
            "lr": 2.5e-4,
            "lr_schedule": "linear",
            "clip_range": 0.1,
            "clip_schedule": "linear",
            "gamma": 0.99,
            "gae_lambda": 0.95,
            "ent_coef": 0.01,
            "vf_coef": 0.5,
            "max_grad_norm": 0.5,
        },
        "network": {"hidden_sizes": [], "activation": "relu", "encoder": _NATURE_CNN},
    },
    "env": {**_ATARI_ENV, "num_training_envs": 8, "num_test_envs": 4},
    "trainer": {
        "max_epochs": 100,
        "epoch_num_steps": 100_352,
        "collection_step_num_env_steps": 1024,
        "batch_size": 256,
        "update_step_num_repetitions": 4,
        "test_step_num_episodes": 4,
    },
}
"""PPO on Breakout with rl-zoo's Atari hyperparameters (8 envs x 128 steps, 4 epochs of 4 mini-batches,
lr 2.5e-4 and clip 0.1 both decayed linearly, entropy 0.01): 10M env steps (40M frames) in 100 epochs"""

DQN_ATARI_EXAMPLE: dict[str, Any] = {
    "algorithm": {
        "name": "dqn",
        "params": {
            "lr": 1e-4,
            "gamma": 0.99,
            "target_update_freq": 1000,
            "is_double": False,
            "huber_loss": True,
            "max_grad_norm": 10.0,
        },
        "network": {"hidden_sizes": [], "activation": "relu", "encoder": _NATURE_CNN},
        "exploration": {"eps_start": 1.0, "eps_end": 0.01, "eps_decay_env_steps": 1_000_000},
    },
    "env": {**_ATARI_ENV, "num_training_envs": 8, "num_test_envs": 4},
    "trainer": {
        "max_epochs": 100,
        "epoch_num_steps": 100_000,
        "collection_step_num_env_steps": 32,
        "update_step_num_gradient_steps_per_sample": 0.125,
        "batch_size": 32,
        "test_step_num_episodes": 4,
    },
    "buffer": {"size": 100_000, "prefill_env_steps": 100_000},
}
"""DQN on Breakout with rl-zoo's Atari hyperparameters (replay of 100k transitions filled with 100k random
steps first, target network every 1000 gradient steps, lr 1e-4, one gradient step of 32 per 4 env steps,
epsilon 1 -> 0.01 over the first 10% of the 10M env steps). The buffer holds obs and obs_next as uint8:
about 5.6 GB"""

_SIMPLE_SPREAD_ENV: dict[str, Any] = {
    "type": "pettingzoo",
    "id": "mpe2.simple_spread_v3",
    "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": False},
    "num_training_envs": 16,
    "num_test_envs": 8,
    "agent_id": True,
}
"""MPE simple_spread with 3 agents (25 steps per episode, 5 discrete actions), a parallel PettingZoo env"""
_SIMPLE_SPREAD_PPO: dict[str, Any] = {
    "name": "ppo",
    "params": {
        "lr": 3e-4,
        "lr_schedule": "constant",
        "clip_schedule": "constant",
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "ent_coef": 0.01,
        "max_grad_norm": 0.5,
    },
    "network": {"hidden_sizes": [64, 64], "activation": "tanh"},
}
_SIMPLE_SPREAD_TRAINER: dict[str, Any] = {
    "max_epochs": 50,
    "epoch_num_steps": 16_000,
    "collection_step_num_env_steps": 1600,  # 100 steps of 16 envs: 4800 transitions of the 3 agents
    "batch_size": 800,
    "update_step_num_repetitions": 10,
    "test_step_num_episodes": 16,
    "stop_score": None,
}

DQN_TICTACTOE_EXAMPLE: dict[str, Any] = {
    "algorithm": {
        "name": "dqn",
        "params": {"lr": 1e-3, "gamma": 0.9, "target_update_freq": 200, "n_step": 1, "max_grad_norm": 10.0},
        "network": {"hidden_sizes": [128, 128]},
        "exploration": {"eps_start": 1.0, "eps_end": 0.05, "eps_decay_env_steps": 20_000},
    },
    "env": {
        "type": "pettingzoo",
        "id": "pettingzoo.classic.tictactoe_v3",
        "num_training_envs": 8,
        "num_test_envs": 10,
    },
    "agents": {
        "layout": "independent",
        "members": {"player_1": {"policy": "random"}},
        "return_reduction": "agent:player_2",
    },
    "trainer": {
        "max_epochs": 20,
        "epoch_num_steps": 5000,
        "collection_step_num_env_steps": 64,
        "update_step_num_gradient_steps_per_sample": 0.25,
        "batch_size": 64,
        "test_step_num_episodes": 50,
        "stop_score": None,
    },
    "buffer": {"size": 50_000, "prefill_env_steps": 1000},
}
"""DQN (player_2, moving second) against a uniformly random player_1 in tic-tac-toe: turn-based (AEC),
illegal moves masked; the test score is player_2's mean return (+1 win, -1 loss)"""

TASK_EXAMPLES: dict[str, tuple[str, Mapping[str, Any]]] = {
    "dqn_tictactoe": (
        "DQN against a random player in PettingZoo tic-tac-toe: independent learners, action masks (needs "
        "tshtrain[pettingzoo])",
        DQN_TICTACTOE_EXAMPLE,
    ),
    "ippo_simple_spread": (
        "IPPO on MPE simple_spread (3 agents): one PPO shared by the agents, which see their one-hot id "
        "(needs tshtrain[pettingzoo])",
        {
            "algorithm": _SIMPLE_SPREAD_PPO,
            "env": _SIMPLE_SPREAD_ENV,
            "agents": {"layout": "shared"},
            "trainer": _SIMPLE_SPREAD_TRAINER,
        },
    ),
    "mappo_simple_spread": (
        "MAPPO on MPE simple_spread (3 agents): a shared PPO whose critic reads the global state (needs "
        "tshtrain[pettingzoo])",
        {
            "algorithm": {
                **_SIMPLE_SPREAD_PPO,
                "network": {"hidden_sizes": [64, 64], "centralised_critic": True},
            },
            "env": {**_SIMPLE_SPREAD_ENV, "global_state": True},
            "agents": {"layout": "shared"},
            "trainer": _SIMPLE_SPREAD_TRAINER,
        },
    ),
    "mappo_vmas_balance": (
        "MAPPO on VMAS balance (4 agents, one row per agent): a shared PPO with a centralised critic, 256 "
        "batched torch worlds",
        {
            "algorithm": {
                "name": "ppo",
                "params": {
                    "lr": 3e-4,
                    "lr_schedule": "constant",
                    "clip_schedule": "constant",
                    "gamma": 0.99,
                    "gae_lambda": 0.95,
                    "clip_range": 0.2,
                    "ent_coef": 0.0,
                    "max_grad_norm": 1.0,
                },
                "network": {
                    "hidden_sizes": [64, 64],
                    "activation": "tanh",
                    "init_log_std": -0.5,
                    "centralised_critic": True,
                },
            },
            "env": {
                "type": "vmas",
                "id": "balance",
                "kwargs": {"n_agents": 4, "max_episode_steps": 100},
                "num_training_envs": 256,
                "num_test_envs": 32,
                "agent_layout": "columns",
                "agent_id": True,
                "global_state": True,
            },
            "agents": {"layout": "shared"},
            "trainer": {
                "max_epochs": 10,
                # env steps count worlds (4 agent transitions each): 32 steps of the 256 worlds per
                # collection step (32768 transitions per update), 4 updates per epoch
                "epoch_num_steps": 32_768,
                "collection_step_num_env_steps": 8192,
                "batch_size": 4096,
                "update_step_num_repetitions": 5,
                "test_step_num_episodes": 32,
                "stop_score": None,
            },
        },
    ),
    "ppo_cartpole_scopes": (
        "Two PPO agents side by side on CartPole-v1 (agent scopes: sub-envs 0-3 and 4-7 of one vector env)",
        {
            "algorithm": {"name": "ppo"},
            "env": {"id": "CartPole-v1", "num_training_envs": 8, "num_test_envs": 8},
            "agents": {"layout": "scopes", "agents_scope": [4, 4]},
        },
    ),
    "ppo_vmas_navigation": (
        "PPO on VMAS navigation (2 agents, one joint policy), 1024 batched torch envs whose data never "
        "leaves torch",
        {
            "algorithm": {
                "name": "ppo",
                "params": {
                    "lr": 3e-4,
                    "lr_schedule": "constant",
                    "clip_schedule": "constant",
                    "gamma": 0.99,
                    "gae_lambda": 0.95,
                    "clip_range": 0.2,
                    "ent_coef": 0.0,
                    "max_grad_norm": 1.0,
                },
                "network": {"hidden_sizes": [64, 64], "activation": "tanh", "init_log_std": -0.5},
            },
            "env": {
                "type": "vmas",
                "id": "navigation",
                "kwargs": {"n_agents": 2, "collisions": False, "max_episode_steps": 100},
                "num_training_envs": 1024,
                "num_test_envs": 64,
            },
            "trainer": {
                "max_epochs": 8,
                "epoch_num_steps": 131_072,
                "collection_step_num_env_steps": 32_768,
                "batch_size": 8192,
                "update_step_num_repetitions": 5,
                "test_step_num_episodes": 64,
                "stop_score": 1.7,
            },
        },
    ),
    "ppo_minigrid_empty": (
        "PPO on MiniGrid-Empty-5x5-v0: Dict observations (image + direction), a CNN encoder (needs minigrid)",
        MINIGRID_EXAMPLE,
    ),
    "ppo_atari_breakout": (
        "PPO on Atari Breakout (ALE/Breakout-v5): Atari preprocessing, 4 stacked frames, the Nature CNN "
        "(needs tshtrain[atari])",
        PPO_ATARI_EXAMPLE,
    ),
    "dqn_atari_breakout": (
        "DQN on Atari Breakout (ALE/Breakout-v5): Atari preprocessing, 4 stacked frames, the Nature CNN "
        "(needs tshtrain[atari]; the 100k buffer takes about 5.6 GB)",
        DQN_ATARI_EXAMPLE,
    ),
}
"""example experiment files for tasks beyond each algorithm's default one: file stem -> (summary, the
experiment as its file states it); ``examples/configs/<stem>.yaml`` is generated from it"""
