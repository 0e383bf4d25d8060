"""Tianshou 2.0.1 tic-tac-toe baseline for issue 17 (multi-agent), run in /work/bench-venv-atari.

Reproduces the setup of Tianshou's own example ``test/pettingzoo/tic_tac_toe.py`` (tag v2.0.1)
with Tianshou's public API, defaults unchanged:

- env: ``PettingZooEnv(tictactoe_v3.env())``, ``DummyVectorEnv`` of 10 training / 10 test envs,
  seeded with ``--seed`` (default 1626 as theirs);
- learner: ``DiscreteQLearningPolicy`` on ``Net(hidden_sizes=[128]*4)``, eps 0.1 train / 0.05 test,
  ``DQN(n_step_return_horizon=3, gamma=0.9, target_update_freq=320)``, Adam lr 1e-4;
- opponent: ``MARLRandomDiscreteMaskedOffPolicyAlgorithm`` (uniformly random legal move);
- their default ``--agent_id 2``: the learner is the second player (``player_2``, O); we mirror it;
- ``VectorReplayBuffer(20000, 10)``, 640 warm-up steps (batch_size * num_training_envs),
  ``OffPolicyTrainerParams(max_epochs=50, epoch_num_steps=1000, collection_step_num_env_steps=10,
  update_step_num_gradient_steps_per_sample=0.1, batch_size=64, test_step_num_episodes=10,
  test_in_training=False, multi_agent_return_reduction=reward of the learner)``;
  50 x 1000 = 50k env steps, where a Tianshou env step here is ONE MOVE of either player
  (the AEC wrapper steps one agent at a time), so the learner makes about half of them;
- their ``stop_fn``: stop once the mean test reward of the learner (10 episodes, eps 0.05)
  reaches ``--win_rate`` 0.6. ``--no-early-stop`` disables it to spend the full 50k budget.

Differences from their script (none affect learning): no TensorBoard logger (default logger),
the "best" policy is kept in memory instead of ``policy.pth``, ``torch.set_num_threads(1)``.

After training, both the final learner (what their ``train_agent`` returns) and the best one
(what their ``save_best_fn`` would have saved) are evaluated GREEDILY (argmax Q over legal moves)
over ``--eval-games`` games of ``tictactoe_v3`` against a uniformly random FIRST player, with our
own loop. Output: one JSON line per seed (``--json-out`` appends them to a file).
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import time
from typing import Any

import gymnasium
import numpy as np
import pettingzoo
import tianshou
import torch
from pettingzoo.classic import tictactoe_v3
from tianshou.algorithm import DQN, MARLRandomDiscreteMaskedOffPolicyAlgorithm, MultiAgentOffPolicyAlgorithm
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.env.pettingzoo_env import PettingZooEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net


def get_env() -> PettingZooEnv:
    return PettingZooEnv(tictactoe_v3.env())


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Tianshou's defaults (test/pettingzoo/tic_tac_toe.py, v2.0.1)
    p.add_argument("--seeds", type=int, nargs="+", default=[1626, 1627, 1628])
    p.add_argument("--eps_test", type=float, default=0.05)
    p.add_argument("--eps_train", type=float, default=0.1)
    p.add_argument("--buffer_size", type=int, default=20000)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--gamma", type=float, default=0.9)
    p.add_argument("--n_step", type=int, default=3)
    p.add_argument("--target_update_freq", type=int, default=320)
    p.add_argument("--epoch", type=int, default=50)
    p.add_argument("--epoch_num_steps", type=int, default=1000)
    p.add_argument("--collection_step_num_env_steps", type=int, default=10)
    p.add_argument("--update_per_step", type=float, default=0.1)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--hidden_sizes", type=int, nargs="*", default=[128, 128, 128, 128])
    p.add_argument("--num_training_envs", type=int, default=10)
    p.add_argument("--num_test_envs", type=int, default=10)
    p.add_argument("--win_rate", type=float, default=0.6)
    p.add_argument("--agent_id", type=int, default=2, choices=(1, 2))
    # ours
    p.add_argument("--no-early-stop", action="store_true", help="ignore stop_fn: spend the whole budget")
    p.add_argument("--eval-games", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json-out", default="")
    return p.parse_args()


def build(args: argparse.Namespace) -> tuple[MultiAgentOffPolicyAlgorithm, DQN, list[str]]:
    env = get_env()
    obs_space = env.observation_space
    if isinstance(obs_space, gymnasium.spaces.Dict):
        obs_space = obs_space.spaces["observation"]
    net = Net(
        state_shape=obs_space.shape, action_shape=int(env.action_space.n), hidden_sizes=args.hidden_sizes
    )
    policy = DiscreteQLearningPolicy(
        model=net, action_space=env.action_space, eps_training=args.eps_train, eps_inference=args.eps_test
    )
    learner = DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=args.lr),
        n_step_return_horizon=args.n_step,
        gamma=args.gamma,
        target_update_freq=args.target_update_freq,
    )
    opponent = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=env.action_space)
    agents = [learner, opponent] if args.agent_id == 1 else [opponent, learner]
    return MultiAgentOffPolicyAlgorithm(algorithms=agents, env=env), learner, list(env.agents)


def greedy_eval(net: torch.nn.Module, n_games: int, seed: int, learner_index: int) -> dict[str, float]:
    """Learner plays greedily as player ``learner_index`` (0 first, 1 second); the other is random."""
    rng = np.random.default_rng(seed)
    env = tictactoe_v3.env()
    learner_name = f"player_{learner_index + 1}"
    wins = draws = losses = 0
    net.eval()
    with torch.no_grad():
        for g in range(n_games):
            env.reset(seed=seed * 100003 + g)
            r = None
            for agent in env.agent_iter():
                obs, rew, term, trunc, _info = env.last()
                if term or trunc:
                    if agent == learner_name:
                        r = rew
                    env.step(None)
                    continue
                legal = np.flatnonzero(obs["action_mask"])
                if agent == learner_name:
                    q, _ = net(obs["observation"][None].astype(np.float32))
                    q = q[0].numpy().copy()
                    q[obs["action_mask"] == 0] = -np.inf
                    action = int(np.argmax(q))
                else:
                    action = int(rng.choice(legal))
                env.step(action)
            assert r is not None, "game ended without a final reward for the learner"
            wins += r > 0
            draws += r == 0
            losses += r < 0
    net.train()
    return {"win": wins / n_games, "draw": draws / n_games, "loss": losses / n_games}


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    training_envs = DummyVectorEnv([get_env for _ in range(args.num_training_envs)])
    test_envs = DummyVectorEnv([get_env for _ in range(args.num_test_envs)])
    np.random.seed(seed)
    torch.manual_seed(seed)
    training_envs.seed(seed)
    test_envs.seed(seed)
    marl, learner, agents = build(args)
    player = agents[args.agent_id - 1]

    t0, c0 = time.perf_counter(), time.process_time()
    training_collector = Collector[CollectStats](
        marl, training_envs, VectorReplayBuffer(args.buffer_size, len(training_envs)), exploration_noise=True
    )
    test_collector = Collector[CollectStats](marl, test_envs, exploration_noise=True)
    training_collector.reset()
    training_collector.collect(n_step=args.batch_size * args.num_training_envs)

    best: dict[str, Any] = {}

    def save_best_fn(algo: Any) -> None:
        best["state"] = copy.deepcopy(algo.get_algorithm(player).policy.model.state_dict())

    def stop_fn(mean_rewards: float) -> bool:
        return (not args.no_early_stop) and mean_rewards >= args.win_rate

    def reward_metric(rews: np.ndarray) -> np.ndarray:
        return rews[:, args.agent_id - 1]

    result = marl.run_training(
        OffPolicyTrainerParams(
            training_collector=training_collector,
            test_collector=test_collector,
            max_epochs=args.epoch,
            epoch_num_steps=args.epoch_num_steps,
            collection_step_num_env_steps=args.collection_step_num_env_steps,
            test_step_num_episodes=args.num_test_envs,
            batch_size=args.batch_size,
            stop_fn=stop_fn,
            save_best_fn=save_best_fn,
            update_step_num_gradient_steps_per_sample=args.update_per_step,
            test_in_training=False,
            multi_agent_return_reduction=reward_metric,
        )
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    net = learner.policy.model
    out: dict[str, Any] = {
        "seed": seed,
        "early_stop": not args.no_early_stop,
        "train_env_steps": int(result.train_step),
        "update_steps": int(result.update_step),
        "train_episodes": int(result.train_episode),
        "best_test_reward": float(result.best_reward),
        "train_wall_s": wall,
        "train_cpu_s": cpu,
    }
    t1 = time.perf_counter()
    out["eval_final"] = greedy_eval(net, args.eval_games, seed, args.agent_id - 1)
    if "state" in best:
        best_net = copy.deepcopy(net)
        best_net.load_state_dict(best["state"])
        out["eval_best"] = greedy_eval(best_net, args.eval_games, seed, args.agent_id - 1)
    out["eval_wall_s"] = time.perf_counter() - t1
    return out


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    versions = {
        "python": platform.python_version(),
        "tianshou": tianshou.__version__,
        "pettingzoo": pettingzoo.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "gymnasium": gymnasium.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps({"versions": versions}), flush=True)
    for seed in args.seeds:
        row = run_seed(args, seed)
        row["versions"] = versions
        line = json.dumps(row)
        print(line, flush=True)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    sys.exit(main())
