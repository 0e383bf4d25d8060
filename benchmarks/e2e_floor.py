"""The floor of each end-to-end workload of ``bench_e2e_floor.py``, and its contestants.

The floor of a training run is the time of its two irreducible parts, measured apart:

* **env alone** (:func:`env_alone`): the same number of env steps on raw envs (built by the
  benchmark's ``make_env``, so with the same wrappers and episode recorder as every contestant), with
  uniformly random actions drawn before the clock starts, resets included;
* **network work alone** (``*_net_alone``): the same forward passes for acting (one per env step
  that a hand loop acts on with the network) and the same forward / backward / optimizer steps of
  the update, on random tensors of the right shapes drawn before the clock starts, with plain
  ``torch.optim.Adam`` (not fused) and denormals flushed. ``fused=True`` measures the same work with
  fused Adam (``torch.optim.Adam(fused=True)``, what tshtrain uses): a second, lower floor, since a
  fused Adam step costs a fraction of a per-tensor one for these small networks.

The DQN and SAC gradient steps are ``hand_loops``' own functions (the code the hand loops run).
No storage, no sampling of a replay buffer, no GAE, no conversion of observations: whatever a
contestant spends above ``env + net`` is the cost of its loop, its buffers and its library.

Builders follow ``e2e_contestants``: ``(make_env, seed, num_env_steps) -> (run, act)``; a floor part's
``act`` is ``None`` (nothing to evaluate).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import e2e_contestants as ec
import gymnasium as gym
import hand_loops
import numpy as np
import torch
import torch.nn.functional as F
from hand_loops import (
    _squashed_sample,
    denormals_flushed,
    dqn_gradient_step,
    mlp,
    sac_gradient_step,
    sac_nets,
)
from torch import nn

EnvFactory = Callable[[], gym.Env[Any, Any]]
Run = Callable[[], None]
FloorBuilder = Callable[[EnvFactory, int, int], tuple[Run, ec.ActFn | None]]

POOL = 16
"""random batches drawn before the clock starts, used in turn"""


# ============================================================================================ env
def env_alone(num_envs: int, steps_taken: Callable[[int], int]) -> FloorBuilder:
    """The env steps a run with a budget of ``num_env_steps`` takes (``steps_taken(num_env_steps)``),
    split evenly over ``num_envs`` raw envs stepped in turn (a Python list, no vector wrapper), random
    actions drawn beforehand, each env reset by hand at an episode's end."""

    def build(make_env: EnvFactory, seed: int, num_env_steps: int) -> tuple[Run, ec.ActFn | None]:
        envs = [make_env() for _ in range(num_envs)]
        for i, env in enumerate(envs):
            env.reset(seed=seed + i)
        steps_per_env = steps_taken(num_env_steps) // num_envs
        space = envs[0].action_space
        rng = np.random.default_rng(seed)
        actions: list[list[Any]]
        if isinstance(space, gym.spaces.Discrete):
            actions = rng.integers(int(space.n), size=(steps_per_env, num_envs)).tolist()
        else:
            assert isinstance(space, gym.spaces.Box)
            drawn = rng.uniform(space.low, space.high, size=(steps_per_env, num_envs, *space.shape))
            actions = list(drawn.astype(np.float32))  # type: ignore[arg-type]

        def run() -> None:
            for row in actions:
                for env, a in zip(envs, row, strict=True):
                    _, _, terminated, truncated, _ = env.step(a)
                    if terminated or truncated:
                        env.reset()
            for env in envs:
                env.close()

        return run, None

    return build


# ============================================================================================ PPO
def ppo_net_alone(
    make_env: EnvFactory, seed: int, num_env_steps: int, *, fused: bool = False
) -> tuple[Run, ec.ActFn | None]:
    """PPO's network work (settings of ``ec.PPO_SETTINGS``): per update, 32 acting passes of the actor
    on (8, 4) with a categorical sample; one pass of the critic over the rollout and the last
    observations (264 rows) and of the actor over the rollout (the old log-probabilities); then 20
    clipped-PPO gradient steps on a mini-batch of 256 (both networks, value loss, gradient norm
    clipping, plain Adam with the linearly decaying learning rate)."""
    del make_env
    torch.manual_seed(seed)
    obs_dim, num_actions, num_envs, num_steps = 4, 2, ec.PPO_NUM_ENVS, ec.PPO_ROLLOUT // ec.PPO_NUM_ENVS
    actor = mlp([obs_dim, 64, 64, num_actions], nn.Tanh)
    critic = mlp([obs_dim, 64, 64, 1], nn.Tanh)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-3, fused=fused or None)
    num_updates = num_env_steps // ec.PPO_ROLLOUT
    act_obs = [torch.randn(num_envs, obs_dim) for _ in range(POOL)]
    rollouts = [torch.randn(ec.PPO_ROLLOUT + num_envs, obs_dim) for _ in range(POOL)]
    acts = [torch.randint(num_actions, (ec.PPO_ROLLOUT,)) for _ in range(POOL)]
    advs = [torch.randn(ec.PPO_ROLLOUT) for _ in range(POOL)]
    rets = [torch.randn(ec.PPO_ROLLOUT) for _ in range(POOL)]

    def run() -> None:
        with denormals_flushed(True):
            for update in range(num_updates):
                frac = 1.0 - update / num_updates
                for group in optimizer.param_groups:
                    group["lr"] = 1e-3 * frac
                clip_now = 0.2 * frac
                for t in range(num_steps):
                    with torch.no_grad():
                        logits = actor(act_obs[t % POOL])
                        torch.multinomial(logits.softmax(-1), 1)
                k = update % POOL
                b_obs, b_act, b_adv, b_ret = rollouts[k][: ec.PPO_ROLLOUT], acts[k], advs[k], rets[k]
                with torch.no_grad():
                    critic(rollouts[k])
                    b_logp = actor(b_obs).log_softmax(-1).gather(1, b_act[:, None]).squeeze(1)
                for _ in range(20):
                    logp = actor(b_obs).log_softmax(-1).gather(1, b_act[:, None]).squeeze(1)
                    ratio = (logp - b_logp).exp()
                    adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
                    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_now, 1 + clip_now)).mean()
                    v_loss = F.mse_loss(critic(b_obs).squeeze(-1), b_ret)
                    loss = pg_loss + 0.5 * v_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(params, 0.5)
                    optimizer.step()

    return run, None


# ============================================================================================ DQN
def _dqn_num_greedy(seed: int, num_env_steps: int) -> int:
    """How many of the epsilon-greedy env steps act with the Q-network (the hand loop's schedule)."""
    rng = np.random.default_rng(seed)
    rounds = (num_env_steps - ec.DQN_PREFILL) // ec.DQN_ROUND
    n = rounds * ec.DQN_ROUND
    eps = 0.04 + (1.0 - 0.04) * np.maximum(0.0, 1.0 - np.arange(n) / ec.DQN_EPS_STEPS)
    return int((rng.random(n) >= eps).sum())


def dqn_net_alone(
    make_env: EnvFactory, seed: int, num_env_steps: int, *, fused: bool = False
) -> tuple[Run, ec.ActFn | None]:
    """DQN's network work (settings of ``ec.DQN_SETTINGS``): one greedy pass of the Q-network on one
    observation per env step that acts greedily; per round, the target network copied from the online
    one and 128 gradient steps on a batch of 64 (Huber loss against the target network's max, gradient
    norm clipping, plain Adam)."""
    del make_env
    torch.manual_seed(seed)
    obs_dim, num_actions, batch = 4, 2, 64
    q_net = mlp([obs_dim, 256, 256, num_actions], nn.ReLU)
    target_net = mlp([obs_dim, 256, 256, num_actions], nn.ReLU)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=2.3e-3, fused=fused or None)
    rounds = (num_env_steps - ec.DQN_PREFILL) // ec.DQN_ROUND
    num_greedy = _dqn_num_greedy(seed, num_env_steps)
    greedy_per_round = [num_greedy // rounds + (r < num_greedy % rounds) for r in range(rounds)]
    act_obs = [torch.randn(obs_dim) for _ in range(POOL)]
    batches = [
        (
            torch.randn(batch, obs_dim),
            torch.randn(batch, obs_dim),
            torch.randint(num_actions, (batch,)),
            torch.randn(batch),
            (torch.rand(batch) < 0.05).float(),
        )
        for _ in range(POOL)
    ]

    def run() -> None:
        with denormals_flushed(True):
            for r in range(rounds):
                for t in range(greedy_per_round[r]):
                    with torch.no_grad():
                        int(q_net(act_obs[t % POOL]).argmax())
                target_net.load_state_dict(q_net.state_dict())
                for g in range(128):
                    dqn_gradient_step(
                        q_net, target_net, optimizer, batches[g % POOL], gamma=0.99, max_grad_norm=10.0
                    )

    return run, None


def _dqn_hand(*, vector: bool, flush: bool) -> ec.Builder:
    loop = functools.partial(
        hand_loops.dqn_cartpole, prefill_env_steps=ec.DQN_PREFILL, vector=vector, flush_denormal=flush
    )
    return ec.hand_builder(loop)


# ============================================================================================ SAC
def sac_net_alone(
    make_env: EnvFactory, seed: int, num_env_steps: int, *, fused: bool = False
) -> tuple[Run, ec.ActFn | None]:
    """SAC's network work (settings of ``ec.SAC_SETTINGS``): one squashed-Gaussian actor pass on one
    observation per env step after the random ones; per env step after those, one gradient step of
    the twin critics (target from the actor and the target critics), of the actor and of alpha on a
    batch of 256, and the Polyak update of the target critics (plain Adam)."""
    del make_env
    torch.manual_seed(seed)
    obs_dim, act_dim, batch = 3, 1, 256
    nets = sac_nets(obs_dim, act_dim, hidden=256, lr=1e-3, fused=fused)
    num_steps = num_env_steps - ec.SAC_PREFILL
    act_obs = [torch.randn(1, obs_dim) for _ in range(POOL)]
    batches = [
        (
            torch.randn(batch, obs_dim),
            torch.randn(batch, obs_dim),
            torch.rand(batch, act_dim) * 2.0 - 1.0,
            torch.randn(batch),
            torch.zeros(batch),
        )
        for _ in range(POOL)
    ]

    def run() -> None:
        with denormals_flushed(True):
            for step in range(num_steps):
                with torch.no_grad():
                    _squashed_sample(nets.actor, act_obs[step % POOL])[0][0].numpy()
                sac_gradient_step(nets, batches[step % POOL], gamma=0.99, tau=0.005, target_entropy=-1.0)

    return run, None


def _sac_hand(*, vector: bool, flush: bool) -> ec.Builder:
    loop = functools.partial(
        hand_loops.sac_pendulum, prefill_env_steps=ec.SAC_PREFILL, vector=vector, flush_denormal=flush
    )
    return ec.hand_builder(loop)


# ============================================================================================ tables
ENV_PART, NET_PART, FUSED_NET_PART = "floor: env", "floor: net", "floor: net (fused Adam)"
RAW_HAND = "hand (raw envs)"
"""the reference of the goals"""

PPO_CONTESTANTS: dict[str, FloorBuilder] = {
    "tshtrain": ec.PPO_CONTESTANTS["tshtrain"],
    RAW_HAND: ec.hand_builder(hand_loops.ppo_cartpole_raw),
    "hand (vector)": ec.hand_builder(functools.partial(hand_loops.ppo_cartpole, flush_denormal=True)),
    "SB3": ec.PPO_CONTESTANTS["SB3"],
    "Tianshou": ec.PPO_CONTESTANTS["Tianshou"],
    ENV_PART: env_alone(ec.PPO_NUM_ENVS, lambda n: n // ec.PPO_ROLLOUT * ec.PPO_ROLLOUT),
    NET_PART: ppo_net_alone,
    FUSED_NET_PART: functools.partial(ppo_net_alone, fused=True),
}
DQN_CONTESTANTS: dict[str, FloorBuilder] = {
    "tshtrain": ec.DQN_CONTESTANTS["tshtrain"],
    RAW_HAND: _dqn_hand(vector=False, flush=True),
    "hand (vector)": _dqn_hand(vector=True, flush=True),
    "hand (raw env, no FTZ)": _dqn_hand(vector=False, flush=False),
    "SB3": ec.DQN_CONTESTANTS["SB3"],
    "Tianshou": ec.DQN_CONTESTANTS["Tianshou"],
    ENV_PART: env_alone(1, lambda n: ec.DQN_PREFILL + (n - ec.DQN_PREFILL) // ec.DQN_ROUND * ec.DQN_ROUND),
    NET_PART: dqn_net_alone,
    FUSED_NET_PART: functools.partial(dqn_net_alone, fused=True),
}
SAC_CONTESTANTS: dict[str, FloorBuilder] = {
    "tshtrain": ec.SAC_CONTESTANTS["tshtrain"],
    RAW_HAND: _sac_hand(vector=False, flush=True),
    "hand (vector)": _sac_hand(vector=True, flush=True),
    "SB3": ec.SAC_CONTESTANTS["SB3"],
    "Tianshou": ec.SAC_CONTESTANTS["Tianshou"],
    ENV_PART: env_alone(1, lambda n: n),
    NET_PART: sac_net_alone,
    FUSED_NET_PART: functools.partial(sac_net_alone, fused=True),
}
CONTESTANTS = {"ppo": PPO_CONTESTANTS, "dqn": DQN_CONTESTANTS, "sac": SAC_CONTESTANTS}
GOALS = {"ppo": 0.7, "dqn": 0.9, "sac": 0.9}
"""tshtrain's wall time / the raw-env hand loop's, at most"""
