"""Centralised critic: MAPPO on the VMAS scenario ``balance`` (4 agents, batched torch worlds).

``VmasEnv(agent_layout="columns")`` lays the agents of ``E`` worlds out as ``4 * E`` rows (agent ``a`` of
world ``e`` is row ``a * E + e``); ``agent_id=True`` adds the one-hot agent id and ``global_state=True``
the concatenated observations of all agents of the world (``state``). One PPO is shared by the agents:
its actor reads ``obs`` + ``agent_id``, its critic ``state`` + ``agent_id`` (MAPPO). With
``--ippo`` the critic reads the actor's inputs instead (IPPO). Everything stays in torch: the
:class:`~tshtrain.data.TensorCollector` writes into a :class:`~tshtrain.data.TensorReplayBuffer`.

Settings close to BenchMARL's MAPPO (``mappo.yaml``): rollouts of 6,000 env steps (60 worlds x 100
steps), 45 passes over each in mini-batches of 400 env steps (1,600 agent transitions): 675 gradient
steps per rollout; lr 5e-5, GAE lambda 0.9, critic weight 1, gradient norm 5, Adam eps 1e-6, 256-256 tanh
networks. Measured (2026-11-29, tests every 18,000 env steps): the deterministic test return (32 full
episodes) first reaches 35 after 90,000 / 108,000 / 90,000 env steps (seeds 0 / 1 / 2: 38.8 / 41.2 /
48.6); seed 0, run to the end, scores 51-54 from 126k on (BenchMARL's MAPPO: 114-138k; a hand IPPO:
141-179k).

The experiment file ``examples/configs/mappo_vmas_balance.yaml`` trains with the same settings through
the command line (``tshtrain train``); both are the ``SAMPLE_EFFICIENT`` settings of
tests/learning/test_vmas_multi_agent_learning.py, whose results docs/multi_agent.md reports (a contract
test checks all three agree).

Run: python examples/multi_agent/mappo_vmas.py [--env-steps 198000] [--num-envs 60] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from tshtrain.algorithm import PPO, MultiAgentOnPolicy, PPOParams, shared_learner
from tshtrain.algorithm.blocks.agent_nets import mappo_actor_critic
from tshtrain.data import TensorCollector, TensorReplayBuffer
from tshtrain.env.vmas import VmasEnv
from tshtrain.trainer import InfoStats, OnPolicyTrainer, OnPolicyTrainerParams

NUM_AGENTS = 4
MAX_EPISODE_STEPS = 100
ROLLOUT_LEN = 100
"""vector steps per rollout: each of the E worlds takes 100 steps (one episode), storing 100 * 4
transitions"""
ENV_STEPS = 198_000
"""the default budget: 11 epochs of 3 rollouts of 6,000 env steps (under the docs' 200k)"""
MINIBATCH_ENV_STEPS = 400
"""env steps (worlds' steps; 4 agent transitions each) per mini-batch"""
NUM_PASSES = 45
"""passes over each rollout"""
NUM_WORLDS = 60
"""VMAS worlds stepped together in training (4 agent rows each)"""
TEST_EPISODES = 32
"""test episodes per test step (one per test world)"""


def make_env(num_envs: int, seed: int, *, global_state: bool = True, test: bool = False) -> VmasEnv:
    """``num_envs`` balance worlds as agent columns, with agent ids and (for MAPPO) the global state.
    ``test``: every episode starts at step 0 (training envs desynchronise their episode clocks, so that
    the worlds do not all reset together; a test episode cut short by that would score half its return)."""
    return VmasEnv(
        "balance",
        num_envs=num_envs,
        seed=seed,
        max_episode_steps=MAX_EPISODE_STEPS,
        agent_layout="columns",
        agent_id=True,
        global_state=global_state,
        n_agents=NUM_AGENTS,
        desync_episode_clocks=not test,
    )


def train(
    *,
    seed: int = 0,
    env_steps: int = ENV_STEPS,
    num_envs: int = NUM_WORLDS,
    test_episodes: int = TEST_EPISODES,
    centralised_critic: bool = True,
    verbose: bool = True,
) -> tuple[MultiAgentOnPolicy, InfoStats]:
    """Train for about ``env_steps`` env steps (an env step is one step of one world: 4 transitions)."""
    torch.manual_seed(seed)
    train_envs = make_env(num_envs, seed, global_state=centralised_critic)
    test_envs = make_env(min(32, test_episodes), seed + 1000, global_state=centralised_critic, test=True)
    policy, critic = mappo_actor_critic(
        train_envs.single_observation_space,  # Dict(agent_id, obs, state); Box actions
        train_envs.single_action_space,
        hidden_sizes=(256, 256),
        init_log_std=0.0,
        centralised_critic=centralised_critic,
        seed=seed,
    )
    ppo = PPO(
        policy=policy,
        critic=critic,
        params=PPOParams(
            lr=5e-5, gamma=0.99, gae_lambda=0.9, ent_coef=0.0, vf_coef=1.0, max_grad_norm=5.0, adam_eps=1e-6
        ),
        seed=seed,
    )
    algorithm = MultiAgentOnPolicy(shared_learner(train_envs.columns, ppo))
    rows = train_envs.num_envs  # VmasEnv.num_envs counts rows: 4 * E
    per_step = min(ROLLOUT_LEN * num_envs, env_steps)  # env steps per rollout (counting worlds)
    buffer = TensorReplayBuffer(-(-per_step // num_envs) * rows, rows, device="cpu", seed=seed)
    epoch_num_steps = min(3 * per_step, env_steps)
    params = OnPolicyTrainerParams(
        training_collector=TensorCollector(algorithm.policy, train_envs, buffer, seed=seed),
        test_collector=TensorCollector(algorithm.policy, test_envs, seed=seed + 1000),
        max_epochs=max(1, env_steps // epoch_num_steps),
        epoch_num_steps=epoch_num_steps,
        collection_step_num_env_steps=per_step,
        batch_size=MINIBATCH_ENV_STEPS * NUM_AGENTS,  # rows: one per agent transition
        update_step_num_repetitions=NUM_PASSES,
        test_step_num_episodes=test_episodes,
        verbose=verbose,
        show_progress=False,
    )
    return algorithm, OnPolicyTrainer(algorithm, params).run()


def main(argv: Sequence[str] | None = None) -> InfoStats:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-steps", type=int, default=ENV_STEPS, help="training budget in env steps")
    parser.add_argument("--num-envs", type=int, default=NUM_WORLDS, help="VMAS worlds E (4 * E agent rows)")
    parser.add_argument("--test-episodes", type=int, default=TEST_EPISODES)
    parser.add_argument("--ippo", action="store_true", help="no centralised critic (IPPO)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _, info = train(
        seed=args.seed,
        env_steps=args.env_steps,
        num_envs=args.num_envs,
        test_episodes=args.test_episodes,
        centralised_critic=not args.ippo,
        verbose=not args.quiet,
    )
    print(
        f"best mean test return {info.best_reward:.1f} at epoch {info.best_epoch}, "
        f"{info.train_step} env steps, {info.timing.total_time:.1f} s"
    )
    return info


if __name__ == "__main__":
    main()
