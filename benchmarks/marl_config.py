"""Shared hyperparameters of the multi-agent benchmark (issue 17, ``bench_marl.py``): the hand loops
(``hand_marl_loops.py``), tshtrain (``bench_marl.py``) and BenchMARL (``benchmarl_marl.py``, run in its
own venv, so this file imports nothing but the standard library) read these dicts.

One dict per task. Close to BenchMARL 1.5's MAPPO/IPPO defaults (``conf/algorithm/mappo.yaml``,
``conf/experiment/base_experiment.yaml``, ``conf/model/layers/mlp.yaml``) where that is sensible:
gamma 0.99, GAE lambda 0.9, clip 0.2, entropy 0.0, critic coefficient 1.0 (squared error), Adam eps
1e-6, gradient-norm clip 5, MLP [256, 256] with Tanh, parameter sharing for actor and critic.
Deliberate departures, because our budgets are ~100x smaller than BenchMARL's 3M-10M frames:

- ``lr`` 3e-4 instead of 5e-5;
- rollouts of ``rollout_len`` steps of every env (balance: 512 x 20 = 10,240 env steps per
  iteration; simple_spread: 8 x 100 = 800; BenchMARL's default is 6,000 frames for both);
- ``epochs`` passes over the rollout, each in ``minibatches`` shuffled mini-batches (BenchMARL's
  ``on_policy_n_minibatch_iters`` and frames per batch / ``on_policy_minibatch_size``; its default is
  45 passes of 15 mini-batches of 400 frames);
- advantages normalized per minibatch (tshtrain's PPO does; BenchMARL's ``minibatch_advantage: False``
  and TorchRL's ClipPPOLoss do not normalise);
- simple_spread episodes of 25 steps (``max_cycles``; BenchMARL's task default is 100).

``iterations`` is the number of PPO iterations (rollout + update) of one timed benchmark run.

An "env step" is one step of one environment, all of its agents counted once (BenchMARL's "frame").
"""

from __future__ import annotations

from typing import Any

PPO: dict[str, Any] = {
    "epochs": 4,
    "minibatches": 4,
    "lr": 3e-4,
    "adam_eps": 1e-6,
    "gamma": 0.99,
    "gae_lambda": 0.9,
    "clip": 0.2,
    "entropy_coef": 0.0,
    "value_coef": 1.0,
    "max_grad_norm": 5.0,
    "hidden_sizes": (256, 256),
    "activation": "tanh",
    "init_log_std": 0.0,
}
"""The PPO settings both tasks share (BenchMARL's defaults where it has them)."""

BALANCE: dict[str, Any] = {
    "task": "vmas/balance",
    "n_agents": 4,
    "num_envs": 512,
    "max_steps": 100,  # episode length (VMAS max_steps; BenchMARL's balance.yaml)
    "env_kwargs": {"random_package_pos_on_line": True, "package_mass": 5},
    "continuous_actions": True,
    "rollout_len": 20,
    "iterations": 2,
    **PPO,
}

SIMPLE_SPREAD: dict[str, Any] = {
    "task": "mpe2/simple_spread_v3",
    "n_agents": 3,  # N
    "num_envs": 8,  # stepped one after the other in a Python loop
    "max_steps": 25,  # max_cycles
    "env_kwargs": {"local_ratio": 0.5},
    "continuous_actions": False,
    "rollout_len": 100,
    "iterations": 3,
    **PPO,
}

TASKS: dict[str, dict[str, Any]] = {"balance": BALANCE, "simple_spread": SIMPLE_SPREAD}
