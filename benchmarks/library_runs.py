"""How a training run starts and ends in each library, shared by the contestants of ``bench_e2e.py``
(``e2e_contestants.py``) and ``bench_atari.py``: what is timed is ``run()``; everything a library
builds before it is not. Tianshou and Stable-Baselines3 are imported by the callers, inside their
builders, so that this module imports without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

Run = Callable[[], None]
ActFn = Callable[[np.ndarray], np.ndarray]


def sb3_run_act(model: Any, env: Any, total_timesteps: int) -> tuple[Run, ActFn]:
    """SB3: ``model.learn`` (then closing its vector env) as the run, ``model.predict`` as the act."""

    def run() -> None:
        model.learn(total_timesteps=total_timesteps)
        env.close()

    def act(obs: np.ndarray) -> np.ndarray:
        action, _ = model.predict(obs, deterministic=True)
        return np.asarray(action)

    return run, act


def tianshou_envs(make_env: Callable[[], Any], num_envs: int, seed: int) -> Any:
    """Tianshou: torch seeded, then ``num_envs`` envs in a ``DummyVectorEnv`` seeded with ``seed``."""
    from tianshou.env import DummyVectorEnv

    torch.manual_seed(seed)
    envs = DummyVectorEnv([make_env] * num_envs)
    envs.seed(seed)
    return envs


def tianshou_run(algorithm: Any, params: Any, envs: Any, prefill_env_steps: int = 0) -> Run:
    """Tianshou: ``prefill_env_steps`` uniformly random env steps first (if any; the collector reset
    before them), then ``algorithm.run_training(params)``, then the envs closed."""

    def run() -> None:
        if prefill_env_steps:
            params.training_collector.reset()
            params.training_collector.collect(n_step=prefill_env_steps, random=True)
        algorithm.run_training(params)
        envs.close()

    return run


def tshtrain_off_policy_run(algorithm: Any, params: Any, envs: Any, prefill_env_steps: int) -> Run:
    """tshtrain: ``prefill_env_steps`` uniformly random env steps, then an ``OffPolicyTrainer`` run,
    then the envs closed."""
    from tshtrain.trainer import OffPolicyTrainer

    def run() -> None:
        params.training_collector.collect(n_step=prefill_env_steps, random=True)
        OffPolicyTrainer(algorithm, params).run()
        envs.close()

    return run
