"""BenchMARL's IPPO / MAPPO on one task of ``marl_config``, timed: the subprocess contestant of
``bench_marl.py``. Runs in BenchMARL's own venv (BenchMARL pins a TorchRL that tshtrain's venv does
not have), so it imports nothing from tshtrain; it reads the hyperparameters from ``marl_config.py``
(plain dicts) next to it.

    /work/bench-venv-marl/bin/python benchmarks/benchmarl_marl.py --task balance --algo mappo \
        --iterations 2 --seed 0

What it does: builds an ``Experiment`` (untimed), runs one untimed warm-up experiment of one iteration
first (so lazy initialisation and first-call costs are not timed, as the in-process contestants get a
warm-up round), builds a fresh experiment with ``max_n_iters = --iterations`` and times
``experiment.run()`` with ``perf_counter`` (wall) and ``process_time`` (this process's CPU). It prints
one JSON line ``{"wall": s, "cpu": s, "frames": n, ...}`` last on stdout.

BenchMARL's config (``ExperimentConfig`` from its yaml, then overridden):

* ``on_policy_collected_frames_per_batch`` = ``num_envs * rollout_len`` env steps ("frames": one step of
  one env with all of its agents), ``on_policy_n_envs_per_worker`` = ``num_envs`` (VMAS: one batched
  env of that many worlds; PettingZoo: a ``SerialEnv`` of that many envs);
* ``on_policy_n_minibatch_iters`` = ``epochs`` (passes over the batch), ``on_policy_minibatch_size`` =
  frames per batch / ``minibatches``;
* lr, Adam eps, gamma, gradient-norm clip from ``marl_config``; GAE lambda, clip epsilon, entropy and
  critic coefficients in the algorithm config; MLP ``hidden_sizes`` with Tanh for actor and critic;
  parameter sharing for both;
* no evaluation, no loggers, no JSON, no rendering, no checkpoints; CPU for sampling, training and
  buffer.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import marl_config


def _mpe2_shim() -> None:
    """TorchRL 0.11's ``PettingZooEnv`` finds MPE under ``pettingzoo.mpe``, which PettingZoo 1.25+ turned
    into an ImportError (MPE moved to the ``mpe2`` package); point ``pettingzoo.mpe.all_modules`` at
    ``mpe2.all_modules`` (same modules, same ``mpe/<name>`` keys), which is what BenchMARL would load
    with an older PettingZoo."""
    import types

    import mpe2.all_modules

    shim = types.ModuleType("pettingzoo.mpe")
    shim.all_modules = mpe2.all_modules  # type: ignore[attr-defined]
    sys.modules["pettingzoo.mpe"] = shim
    sys.modules["pettingzoo.mpe.all_modules"] = mpe2.all_modules


def build(task_name: str, algo: str, iterations: int, seed: int, folder: str) -> Any:
    import torch
    from benchmarl.algorithms import IppoConfig, MappoConfig
    from benchmarl.environments import PettingZooTask, VmasTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    c = marl_config.TASKS[task_name]
    frames = c["num_envs"] * c["rollout_len"]
    cfg = ExperimentConfig.get_from_yaml()
    cfg.sampling_device = cfg.train_device = cfg.buffer_device = "cpu"
    cfg.share_policy_params = True
    cfg.prefer_continuous_actions = bool(c["continuous_actions"])
    cfg.gamma = c["gamma"]
    cfg.lr = c["lr"]
    cfg.adam_eps = c["adam_eps"]
    cfg.clip_grad_norm = True
    cfg.clip_grad_val = c["max_grad_norm"]
    cfg.max_n_frames = None
    cfg.max_n_iters = iterations
    cfg.on_policy_collected_frames_per_batch = frames
    cfg.on_policy_n_envs_per_worker = c["num_envs"]
    cfg.on_policy_n_minibatch_iters = c["epochs"]
    cfg.on_policy_minibatch_size = frames // c["minibatches"]
    cfg.evaluation = False
    cfg.render = False
    cfg.loggers = []
    cfg.create_json = False
    cfg.save_folder = folder
    cfg.checkpoint_interval = 0
    cfg.checkpoint_at_end = False

    if task_name == "balance":
        task = VmasTask.BALANCE.get_from_yaml()
        task.config.update({"max_steps": c["max_steps"], "n_agents": c["n_agents"], **c["env_kwargs"]})
    else:
        _mpe2_shim()
        task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
        task.config.update({"max_cycles": c["max_steps"], "N": c["n_agents"], **c["env_kwargs"]})

    algo_cls = MappoConfig if algo == "mappo" else IppoConfig
    algorithm = algo_cls.get_from_yaml()
    algorithm.share_param_critic = True
    algorithm.clip_epsilon = c["clip"]
    algorithm.entropy_coef = c["entropy_coef"]
    algorithm.critic_coef = c["value_coef"]
    algorithm.loss_critic_type = "l2"
    algorithm.lmbda = c["gae_lambda"]

    model = MlpConfig.get_from_yaml()
    model.num_cells = list(c["hidden_sizes"])
    model.activation_class = torch.nn.Tanh
    critic_model = MlpConfig.get_from_yaml()
    critic_model.num_cells = list(c["hidden_sizes"])
    critic_model.activation_class = torch.nn.Tanh
    return Experiment(
        task=task,
        algorithm_config=algorithm,
        model_config=model,
        critic_model_config=critic_model,
        seed=seed,
        config=cfg,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=sorted(marl_config.TASKS), required=True)
    parser.add_argument("--algo", choices=("ippo", "mappo"), required=True)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-warmup", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        if not args.no_warmup:
            build(args.task, args.algo, 1, args.seed + 1000, folder).run()
        t0 = time.perf_counter()
        experiment = build(args.task, args.algo, args.iterations, args.seed, folder)
        setup = time.perf_counter() - t0
        torch.set_flush_denormal(True)  # as every contestant
        cpu_start, start = time.process_time(), time.perf_counter()
        experiment.run()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        frames = int(experiment.total_frames)
        mean_return = float(getattr(experiment, "mean_return", float("nan")))
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "frames": frames,
                "setup_seconds": setup,
                "mean_return": mean_return,
                "versions": _versions(),
            }
        ),
        flush=True,
    )


def _versions() -> dict[str, str]:
    import importlib.metadata

    out = {}
    for name in ("benchmarl", "torchrl", "tensordict", "torch", "vmas", "pettingzoo", "mpe2"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


if __name__ == "__main__":
    main()
