"""Settings shared by default experiments, and the example experiments of tasks beyond each algorithm's
default one (``TASK_EXAMPLES``).

Each algorithm's default experiment is written in its spec, next to its builder, in its family's module
of :mod:`tshtrain.config.algos`; ``tshtrain config NAME`` prints it with every other key filled in. The
example scripts read their settings from there (``tshtrain.config.default_experiment(NAME)``) and
``examples/configs/*.yaml`` are generated from the specs and from here (``python
scripts/generate_example_configs.py``); tests check both. These are the settings behind the results in
docs/algorithms.md: change them there and in the spec together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_DEVICE = "auto"
"""the ``device`` of an experiment that sets none: CUDA when ``torch.cuda.is_available()``, else CPU"""


def cartpole_env(num_training_envs: int = 8, num_test_envs: int = 8) -> dict[str, Any]:
    """The ``env`` section of CartPole-v1 with these sub-env counts."""
    return {"id": "CartPole-v1", "num_training_envs": num_training_envs, "num_test_envs": num_test_envs}


def pendulum_env() -> dict[str, Any]:
    """The ``env`` section of Pendulum-v1: one training env, ten test envs."""
    return {"id": "Pendulum-v1", "num_training_envs": 1, "num_test_envs": 10}


DQN_EXAMPLE_RUN = "runs/dqn-cartpole"
"""where ``examples/configs/dqn_cartpole.yaml`` writes; its buffer is a dataset of the offline examples"""
SAC_EXAMPLE_RUN = "runs/sac-pendulum"
"""where ``examples/configs/sac_pendulum.yaml`` writes; its buffer is a dataset of the offline examples"""


def saves_dataset(output_dir: str) -> dict[str, Any]:
    """The example-file extras of an online example whose replay buffer another example learns from."""
    return {"output_dir": output_dir, "buffer": {"save_on_exit": True}}


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
        "params": {
            "lr": 1e-3,
            "lr_schedule": "linear",  # to 0 over the run's gradient steps
            "gamma": 0.9,
            "target_update_freq": 200,
            "n_step": 3,
            "is_double": True,
            "max_grad_norm": None,
        },
        "network": {"hidden_sizes": [128, 128], "activation": "relu"},
        "exploration": {"eps_start": 1.0, "eps_end": 0.05, "eps_decay_env_steps": 30_000},  # learner moves
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
        "max_epochs": 15,
        "epoch_num_steps": 10_000,
        "collection_step_num_env_steps": 64,
        "update_step_num_gradient_steps_per_sample": 0.25,
        "batch_size": 64,
        "test_step_num_episodes": 50,
        "stop_score": None,
    },
    "buffer": {"size": 50_000, "prefill_env_steps": 1000},
}
"""DQN (player_2, moving second) against a uniformly random player_1 in tic-tac-toe: turn-based (AEC),
illegal moves masked; the test score is player_2's mean return (+1 win, -1 loss). The settings of the
results table in docs/multi_agent.md (tests/learning/test_tictactoe_learning.py's ``FULL``)"""

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
    "mappo_speaker_listener_groups": (
        "MAPPO per agent group on MPE simple_speaker_listener: the speaker (3 words) and the listener (5 "
        "moves) see and do different things, each group has its own PPO (needs tshtrain[pettingzoo])",
        {
            "algorithm": {
                **_SIMPLE_SPREAD_PPO,
                "network": {"hidden_sizes": [64, 64], "centralised_critic": True},
            },
            "env": {
                "type": "pettingzoo",
                "id": "mpe2.simple_speaker_listener_v4",
                "kwargs": {"max_cycles": 25, "continuous_actions": False},
                "num_training_envs": 16,
                "num_test_envs": 8,
                "agent_id": True,
                "global_state": True,
                "groups": "auto",
            },
            "agents": {"layout": "groups"},
            "trainer": {
                **_SIMPLE_SPREAD_TRAINER,
                "max_epochs": 20,
                "update_step_num_repetitions": 5,
            },
        },
    ),
    "mappo_vmas_balance": (
        "MAPPO on VMAS balance (4 agents, one row per agent): a shared PPO with a centralised critic, 60 "
        "batched torch worlds, settings close to BenchMARL's MAPPO (examples/multi_agent/mappo_vmas.py)",
        {
            "algorithm": {
                "name": "ppo",
                "params": {
                    "lr": 5e-5,
                    "lr_schedule": "constant",
                    "clip_schedule": "constant",
                    "gamma": 0.99,
                    "gae_lambda": 0.9,
                    "clip_range": 0.2,
                    "vf_coef": 1.0,
                    "ent_coef": 0.0,
                    "max_grad_norm": 5.0,
                    "adam_eps": 1e-6,
                },
                "network": {
                    "hidden_sizes": [256, 256],
                    "activation": "tanh",
                    "init_log_std": 0.0,
                    "centralised_critic": True,
                },
            },
            "env": {
                "type": "vmas",
                "id": "balance",
                "kwargs": {"n_agents": 4, "max_episode_steps": 100},
                "num_training_envs": 60,
                "num_test_envs": 32,
                "agent_layout": "columns",
                "agent_id": True,
                "global_state": True,
            },
            "agents": {"layout": "shared"},
            "trainer": {
                # env steps count worlds (4 agent transitions each): one 100-step episode of the 60 worlds
                # per collection step (24,000 transitions), 45 passes over it in mini-batches of 1,600
                # transitions (400 env steps): 675 gradient steps; 3 collection steps per epoch, 11 epochs
                # (198,000 env steps); the test envs run full 100-step episodes
                "max_epochs": 11,
                "epoch_num_steps": 18_000,
                "collection_step_num_env_steps": 6000,
                "batch_size": 1600,
                "update_step_num_repetitions": 45,
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
