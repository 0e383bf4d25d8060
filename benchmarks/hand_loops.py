"""Hand-written training loops: the "limit" contestants of ``bench_e2e.py``.

Each loop is what an engineer would write by hand in one file, top to bottom, with no library around
it: a Gymnasium env, plain ``torch.nn`` networks, ``torch.optim.Adam`` with its default settings,
numpy / torch storage allocated once. They do the same work as the tshtrain runs they are compared
with (same networks, hyperparameters, truncation handling and number of gradient steps), so that the
ratio tshtrain / hand loop measures the cost of the library, not a difference in the algorithm.

Every loop takes ``make_env`` (a factory for one env, wrapped by the benchmark's episode recorder) and
returns a deterministic ``act(obs_batch) -> actions`` for the final evaluation.

Two kinds of env stepping (``bench_e2e_floor.py`` reports both): ``ppo_cartpole`` steps a SAME_STEP
``SyncVectorEnv``; ``ppo_cartpole_raw`` steps 8 raw ``gym.make`` envs kept in a Python list and resets
them by hand (the rest of the two PPO loops is one function, :func:`_ppo_train`). ``dqn_cartpole`` and
``sac_pendulum`` step one raw env by default and a one-env SAME_STEP ``SyncVectorEnv`` (what
``tshtrain.env.make_vector_env(make_env, 1)`` builds) with ``vector=True`` (:class:`OneEnv`).
``flush_denormal=True`` runs a loop with ``torch.set_flush_denormal(True)`` (what tshtrain's trainer
does by default) and restores the flag afterwards; ``fused_adam=True`` gives its Adams the fused kernel
(``torch.optim.Adam(..., fused=True)``, what tshtrain's ``make_adam`` picks on the CPU). Both together
are the "hand, fused" contestant of ``bench_e2e.py``: the hand loop with what tshtrain uses.

The gradient steps of DQN and SAC (:func:`dqn_gradient_step`, :func:`sac_gradient_step`) are shared
with ``e2e_floor.py``, whose "network work alone" floor must do the very same work.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

EnvFactory = Callable[[], gym.Env[Any, Any]]
ActFn = Callable[[np.ndarray], np.ndarray]


def mlp(sizes: list[int], activation: type[nn.Module]) -> nn.Sequential:
    """Linear layers of the given sizes with ``activation`` between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


@contextmanager
def denormals_flushed(on: bool) -> Iterator[None]:
    """``torch.set_flush_denormal(True)`` inside the block when ``on``; off again afterwards."""
    if on:
        torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if on:
            torch.set_flush_denormal(False)


def _argmax_act(net: nn.Module) -> ActFn:
    """The greedy action of a logits / Q-value network, for the evaluation."""

    def act(obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(obs_batch, dtype=torch.float32)).argmax(-1).numpy()

    return act


def same_step_vector_env(make_env: EnvFactory, num_envs: int) -> gym.vector.SyncVectorEnv:
    """Sub-envs reset inside the step that ends an episode; the last observation is in ``info``."""
    return gym.vector.SyncVectorEnv([make_env] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


# ============================================================================================ PPO
@dataclass(frozen=True, kw_only=True)
class PPOSettings:
    """rl-zoo's CartPole-v1 PPO settings (``e2e_contestants.PPO_SETTINGS``)."""

    num_envs: int = 8
    num_steps: int = 32
    """env steps per env per rollout"""
    batch_size: int = 256
    num_epochs: int = 20
    gamma: float = 0.98
    gae_lambda: float = 0.8
    lr: float = 1e-3
    clip: float = 0.2
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


class _PPONets(NamedTuple):
    actor: nn.Sequential
    critic: nn.Sequential
    params: list[nn.Parameter]
    optimizer: torch.optim.Adam


EnvStep = Callable[[torch.Tensor], tuple[torch.Tensor, np.ndarray, np.ndarray, list[int], list[np.ndarray]]]
"""Steps every env with its action: (next observations (N, O), rewards (N,) float32, dones (N,) float32,
the rows whose episode was truncated (not terminated) and those episodes' last observations)."""


def _ppo_update(
    nets: _PPONets,
    rollout: tuple[torch.Tensor, ...],
    next_value: torch.Tensor,
    *,
    clip_now: float,
    s: PPOSettings,
) -> None:
    """GAE over one rollout of (T, N) tensors, then ``s.num_epochs`` epochs of clipped-PPO mini-batches."""
    obs_buf, act_buf, logp_buf, rew_buf, done_buf, value_buf = rollout
    num_steps, num_envs, obs_dim = obs_buf.shape
    with torch.no_grad():
        advantages = torch.zeros_like(rew_buf)
        last_gae = torch.zeros(num_envs)
        for t in reversed(range(num_steps)):
            not_done = 1.0 - done_buf[t]
            delta = rew_buf[t] + s.gamma * next_value * not_done - value_buf[t]
            last_gae = delta + s.gamma * s.gae_lambda * not_done * last_gae
            advantages[t] = last_gae
            next_value = value_buf[t]
        returns = advantages + value_buf
    b_obs = obs_buf.reshape(-1, obs_dim)
    b_act, b_logp = act_buf.reshape(-1), logp_buf.reshape(-1)
    b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)
    n = len(b_obs)
    for _ in range(s.num_epochs):
        perm = torch.randperm(n)
        for start in range(0, n, s.batch_size):
            idx = perm[start : start + s.batch_size]
            dist = torch.distributions.Categorical(logits=nets.actor(b_obs[idx]))
            log_ratio = dist.log_prob(b_act[idx]) - b_logp[idx]
            ratio = log_ratio.exp()
            adv = b_adv[idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_now, 1 + clip_now)).mean()
            v_loss = F.mse_loss(nets.critic(b_obs[idx]).squeeze(-1), b_ret[idx])
            loss = pg_loss + s.vf_coef * v_loss
            nets.optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(nets.params, s.max_grad_norm)
            nets.optimizer.step()


def _ppo_train(
    step: EnvStep,
    obs: torch.Tensor,
    num_actions: int,
    *,
    num_env_steps: int,
    s: PPOSettings,
    flush: bool,
    fused: bool = False,
) -> ActFn:
    """PPO for a Discrete action space from the first observations ``obs`` (N, O), stepping the envs
    with ``step``; separate 64-64 tanh actor and critic, one Adam over both.

    Learning rate and clip range decay linearly to 0 over the run (factor ``1 - k / num_updates`` in
    update ``k``, counted from 0); advantages are standardised per mini-batch; at a truncation the
    reward is topped up with ``gamma * V(last obs)`` so that GAE bootstraps through it.
    """
    num_envs, obs_dim = obs.shape
    actor = mlp([obs_dim, 64, 64, num_actions], nn.Tanh)
    critic = mlp([obs_dim, 64, 64, 1], nn.Tanh)
    params = [*actor.parameters(), *critic.parameters()]
    nets = _PPONets(actor, critic, params, torch.optim.Adam(params, lr=s.lr, fused=fused or None))
    obs_buf = torch.zeros((s.num_steps, num_envs, obs_dim))
    act_buf = torch.zeros((s.num_steps, num_envs), dtype=torch.long)
    logp_buf, rew_buf, done_buf, value_buf = (torch.zeros((s.num_steps, num_envs)) for _ in range(4))
    num_updates = -(-num_env_steps // (s.num_steps * num_envs))
    with denormals_flushed(flush):
        for update in range(num_updates):
            frac = 1.0 - update / num_updates
            for group in nets.optimizer.param_groups:
                group["lr"] = s.lr * frac
            # ---------------------------------------------------------------- rollout
            for t in range(s.num_steps):
                with torch.no_grad():
                    dist = torch.distributions.Categorical(logits=actor(obs))
                    action = dist.sample()
                    logp_buf[t] = dist.log_prob(action)
                    value_buf[t] = critic(obs).squeeze(-1)
                obs_buf[t] = obs
                act_buf[t] = action
                obs, reward, done, cut_rows, cut_obs = step(action)
                if cut_rows:  # bootstrap through the time limit from the episode's last observation
                    with torch.no_grad():
                        values = critic(torch.from_numpy(np.stack(cut_obs).astype(np.float32)))
                    reward[cut_rows] += s.gamma * values.squeeze(-1).numpy()
                rew_buf[t] = torch.from_numpy(reward)
                done_buf[t] = torch.from_numpy(done)
            # ---------------------------------------------------------------- GAE + update
            with torch.no_grad():
                next_value = critic(obs).squeeze(-1)
            rollout = (obs_buf, act_buf, logp_buf, rew_buf, done_buf, value_buf)
            _ppo_update(nets, rollout, next_value, clip_now=s.clip * frac, s=s)
    return _argmax_act(actor)


def ppo_cartpole(
    make_env: EnvFactory,
    *,
    seed: int,
    num_env_steps: int,
    settings: PPOSettings = PPOSettings(),
    flush_denormal: bool = False,
    fused_adam: bool = False,
) -> ActFn:
    """:func:`_ppo_train` on a SAME_STEP ``SyncVectorEnv`` of ``settings.num_envs`` envs."""
    torch.manual_seed(seed)
    envs = same_step_vector_env(make_env, settings.num_envs)
    num_actions = int(envs.single_action_space.n)  # type: ignore[attr-defined]

    def step(
        action: torch.Tensor,
    ) -> tuple[torch.Tensor, np.ndarray, np.ndarray, list[int], list[np.ndarray]]:
        obs_np, reward, terminated, truncated, info = envs.step(action.numpy())
        cut_rows = np.flatnonzero(truncated & ~terminated).tolist()
        cut_obs = [info["final_obs"][i] for i in cut_rows]
        done = (terminated | truncated).astype(np.float32)
        return (
            torch.as_tensor(obs_np, dtype=torch.float32),
            reward.astype(np.float32),
            done,
            cut_rows,
            cut_obs,
        )

    obs = torch.as_tensor(envs.reset(seed=seed)[0], dtype=torch.float32)
    act = _ppo_train(
        step,
        obs,
        num_actions,
        num_env_steps=num_env_steps,
        s=settings,
        flush=flush_denormal,
        fused=fused_adam,
    )
    envs.close()
    return act


def ppo_cartpole_raw(
    make_env: EnvFactory,
    *,
    seed: int,
    num_env_steps: int,
    settings: PPOSettings = PPOSettings(),
    flush_denormal: bool = True,
) -> ActFn:
    """:func:`_ppo_train` stepping ``settings.num_envs`` raw envs kept in a Python list (no vector
    wrapper): each env is stepped with a Python ``int`` action and reset by hand when its episode ends."""
    torch.manual_seed(seed)
    envs = [make_env() for _ in range(settings.num_envs)]
    obs_dim = int(np.prod(envs[0].observation_space.shape))  # type: ignore[arg-type]
    num_actions = int(envs[0].action_space.n)  # type: ignore[attr-defined]
    obs_np = np.zeros((len(envs), obs_dim), dtype=np.float32)  # the next observation of every env
    rew_np = np.zeros(len(envs), dtype=np.float32)
    done_np = np.zeros(len(envs), dtype=np.float32)

    def step(
        action: torch.Tensor,
    ) -> tuple[torch.Tensor, np.ndarray, np.ndarray, list[int], list[np.ndarray]]:
        cut_rows: list[int] = []
        cut_obs: list[np.ndarray] = []
        for i, (env, a) in enumerate(zip(envs, action.tolist(), strict=True)):
            next_obs, reward, terminated, truncated, _ = env.step(a)
            rew_np[i] = reward
            done_np[i] = float(terminated or truncated)
            if terminated or truncated:
                if not terminated:  # bootstrap through the time limit
                    cut_rows.append(i)
                    cut_obs.append(next_obs)
                next_obs = env.reset()[0]
            obs_np[i] = next_obs
        return torch.from_numpy(obs_np.copy()), rew_np, done_np, cut_rows, cut_obs

    for i, env in enumerate(envs):
        obs_np[i] = env.reset(seed=seed + i)[0]
    obs = torch.from_numpy(obs_np.copy())
    act = _ppo_train(step, obs, num_actions, num_env_steps=num_env_steps, s=settings, flush=flush_denormal)
    for env in envs:
        env.close()
    return act


# ============================================================================= one env, replay buffer
class OneEnv:
    """One env: raw and reset by hand, or (``vector=True``) the only sub-env of a SAME_STEP
    ``SyncVectorEnv``, whose step returns the episode's last observation in ``info``."""

    def __init__(self, make_env: EnvFactory, *, vector: bool) -> None:
        self.env = make_env()
        self.venv = None
        if vector:
            env = self.env
            self.venv = gym.vector.SyncVectorEnv(
                [lambda: env], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
            )

    def reset(self, seed: int) -> np.ndarray:
        return self.env.reset(seed=seed)[0] if self.venv is None else self.venv.reset(seed=seed)[0][0]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, np.ndarray]:
        """(the step's own next observation, reward, terminated, the observation to act on next)."""
        if self.venv is None:
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            return (
                next_obs,
                float(reward),
                terminated,
                self.env.reset()[0] if terminated or truncated else next_obs,
            )
        next_obs_N, reward_N, term_N, trunc_N, info = self.venv.step(np.asarray(action)[None])
        last_obs = info["final_obs"][0] if term_N[0] or trunc_N[0] else next_obs_N[0]
        return last_obs, float(reward_N[0]), bool(term_N[0]), next_obs_N[0]

    def close(self) -> None:
        (self.env if self.venv is None else self.venv).close()


class Replay:
    """Transitions in numpy arrays allocated once, overwritten oldest first; uniform sampling."""

    def __init__(self, capacity: int, obs_dim: int, act_shape: tuple[int, ...], act_dtype: type) -> None:
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.act = np.zeros((capacity, *act_shape), dtype=act_dtype)
        self.rew = np.zeros(capacity, dtype=np.float32)
        self.term = np.zeros(capacity, dtype=np.float32)
        self.capacity, self.size, self.ptr = capacity, 0, 0

    def add(
        self, obs: np.ndarray, next_obs: np.ndarray, action: Any, reward: float, terminated: bool
    ) -> None:
        p = self.ptr
        self.obs[p], self.next_obs[p], self.act[p] = obs, next_obs, action
        self.rew[p], self.term[p] = reward, float(terminated)
        self.ptr, self.size = (p + 1) % self.capacity, min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, batch_size: int) -> tuple[torch.Tensor, ...]:
        """(obs, next obs, action, reward, terminated) of ``batch_size`` transitions drawn uniformly."""
        idx = rng.integers(0, self.size, size=batch_size)
        return tuple(
            torch.from_numpy(a[idx]) for a in (self.obs, self.next_obs, self.act, self.rew, self.term)
        )


# ============================================================================================ DQN
def dqn_gradient_step(
    q_net: nn.Module,
    target_net: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: tuple[torch.Tensor, ...],
    *,
    gamma: float,
    max_grad_norm: float,
) -> None:
    """One Adam step on the Huber loss against the target network's max (no double Q-learning)."""
    b_obs, b_next, b_act, b_rew, b_term = batch
    with torch.no_grad():
        target = b_rew + gamma * (1.0 - b_term) * target_net(b_next).max(dim=1).values
    q = q_net(b_obs).gather(1, b_act.unsqueeze(1)).squeeze(1)
    loss = F.smooth_l1_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(q_net.parameters(), max_grad_norm)
    optimizer.step()


def dqn_cartpole(
    make_env: EnvFactory,
    *,
    seed: int,
    num_env_steps: int,
    prefill_env_steps: int = 1000,
    collection_env_steps: int = 256,
    gradient_steps: int = 128,
    batch_size: int = 64,
    buffer_size: int = 100_000,
    gamma: float = 0.99,
    lr: float = 2.3e-3,
    eps_start: float = 1.0,
    eps_end: float = 0.04,
    eps_env_steps: int = 8000,
    max_grad_norm: float = 10.0,
    hidden: int = 256,
    vector: bool = False,
    flush_denormal: bool = False,
    fused_adam: bool = False,
) -> ActFn:
    """DQN on one env, rl-zoo's CartPole settings by default: ``prefill_env_steps`` uniformly random
    steps, then rounds of ``collection_env_steps`` epsilon-greedy steps followed by ``gradient_steps``
    Adam steps on the Huber loss against a target network copied from the online one at the start of
    each round (no double Q-learning). Epsilon decays linearly over the first ``eps_env_steps``
    epsilon-greedy steps; truncated episodes bootstrap from their last observation.

    The env is one raw env reset by hand, or with ``vector=True`` a one-env SAME_STEP ``SyncVectorEnv``.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = OneEnv(make_env, vector=vector)
    obs_dim = int(np.prod(env.env.observation_space.shape))  # type: ignore[arg-type]
    num_actions = int(env.env.action_space.n)  # type: ignore[attr-defined]
    q_net = mlp([obs_dim, hidden, hidden, num_actions], nn.ReLU)
    target_net = mlp([obs_dim, hidden, hidden, num_actions], nn.ReLU)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=lr, fused=fused_adam or None)
    replay = Replay(buffer_size, obs_dim, (), np.int64)
    obs = env.reset(seed)
    env.env.action_space.seed(seed)

    def env_step(action: int) -> None:
        nonlocal obs
        next_obs, reward, terminated, obs_after = env.step(action)
        replay.add(obs, next_obs, action, reward, terminated)
        obs = obs_after

    with denormals_flushed(flush_denormal):
        for _ in range(prefill_env_steps):
            env_step(int(env.env.action_space.sample()))
        explored = 0
        for _ in range((num_env_steps - prefill_env_steps) // collection_env_steps):
            for _ in range(collection_env_steps):
                eps = eps_end + (eps_start - eps_end) * max(0.0, 1.0 - explored / eps_env_steps)
                explored += 1
                if rng.random() < eps:
                    action = int(rng.integers(num_actions))
                else:
                    with torch.no_grad():
                        action = int(q_net(torch.as_tensor(obs, dtype=torch.float32)).argmax())
                env_step(action)
            target_net.load_state_dict(q_net.state_dict())
            for _ in range(gradient_steps):
                batch = replay.sample(rng, batch_size)
                dqn_gradient_step(
                    q_net, target_net, optimizer, batch, gamma=gamma, max_grad_norm=max_grad_norm
                )
    env.close()
    return _argmax_act(q_net)


# ============================================================================================ SAC
def _squashed_sample(actor: nn.Module, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """a = tanh(mu + sigma * eps) and log pi(a | obs) (with the tanh correction)."""
    mu, log_std = actor(obs).chunk(2, dim=-1)
    std = log_std.clamp(-20.0, 2.0).exp()
    normal = torch.distributions.Normal(mu, std)
    u = normal.rsample()
    action = torch.tanh(u)
    log_prob = (normal.log_prob(u) - torch.log(1.0 - action.pow(2) + 1e-6)).sum(-1)
    return action, log_prob


@dataclass(frozen=True)
class SACNets:
    """A tanh-Gaussian actor, twin critics with Polyak-averaged targets, alpha, and their Adams."""

    actor: nn.Sequential
    q1: nn.Sequential
    q2: nn.Sequential
    q1_targ: nn.Sequential
    q2_targ: nn.Sequential
    log_alpha: torch.Tensor
    actor_opt: torch.optim.Adam
    critic_opt: torch.optim.Adam
    alpha_opt: torch.optim.Adam


def sac_nets(obs_dim: int, act_dim: int, *, hidden: int, lr: float, fused: bool = False) -> SACNets:
    """Networks of ``hidden``-``hidden`` ReLU layers; alpha starts at 1; plain Adam (or fused)."""
    actor = mlp([obs_dim, hidden, hidden, 2 * act_dim], nn.ReLU)
    q1, q2 = (mlp([obs_dim + act_dim, hidden, hidden, 1], nn.ReLU) for _ in range(2))
    q1_targ, q2_targ = (mlp([obs_dim + act_dim, hidden, hidden, 1], nn.ReLU) for _ in range(2))
    q1_targ.load_state_dict(q1.state_dict())
    q2_targ.load_state_dict(q2.state_dict())
    log_alpha = torch.zeros(1, requires_grad=True)
    return SACNets(
        actor,
        q1,
        q2,
        q1_targ,
        q2_targ,
        log_alpha,
        actor_opt=torch.optim.Adam(actor.parameters(), lr=lr, fused=fused or None),
        critic_opt=torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=lr, fused=fused or None),
        alpha_opt=torch.optim.Adam([log_alpha], lr=lr, fused=fused or None),
    )


def sac_gradient_step(
    n: SACNets, batch: tuple[torch.Tensor, ...], *, gamma: float, tau: float, target_entropy: float
) -> None:
    """One gradient step of the critics, the actor and alpha, then the Polyak update of the targets."""
    b_obs, b_next, b_act, b_rew, b_term = batch
    alpha = n.log_alpha.detach().exp()
    with torch.no_grad():
        next_act, next_logp = _squashed_sample(n.actor, b_next)
        next_in = torch.cat([b_next, next_act], dim=-1)
        q_next = torch.min(n.q1_targ(next_in), n.q2_targ(next_in)).squeeze(-1)
        target = b_rew + gamma * (1.0 - b_term) * (q_next - alpha * next_logp)
    q_in = torch.cat([b_obs, b_act], dim=-1)
    critic_loss = F.mse_loss(n.q1(q_in).squeeze(-1), target) + F.mse_loss(n.q2(q_in).squeeze(-1), target)
    n.critic_opt.zero_grad()
    critic_loss.backward()
    n.critic_opt.step()

    new_act, logp = _squashed_sample(n.actor, b_obs)
    new_in = torch.cat([b_obs, new_act], dim=-1)
    actor_loss = (alpha * logp - torch.min(n.q1(new_in), n.q2(new_in)).squeeze(-1)).mean()
    n.actor_opt.zero_grad()
    actor_loss.backward()
    n.actor_opt.step()

    alpha_loss = -(n.log_alpha * (logp.detach() + target_entropy)).mean()
    n.alpha_opt.zero_grad()
    alpha_loss.backward()
    n.alpha_opt.step()
    with torch.no_grad():
        for q, q_targ in ((n.q1, n.q1_targ), (n.q2, n.q2_targ)):
            for p, tp in zip(q.parameters(), q_targ.parameters(), strict=True):
                tp.mul_(1.0 - tau).add_(p, alpha=tau)


def sac_pendulum(
    make_env: EnvFactory,
    *,
    seed: int,
    num_env_steps: int,
    prefill_env_steps: int = 1000,
    batch_size: int = 256,
    buffer_size: int = 20_000,
    gamma: float = 0.99,
    tau: float = 0.005,
    lr: float = 1e-3,
    hidden: int = 256,
    vector: bool = False,
    flush_denormal: bool = False,
    fused_adam: bool = False,
) -> ActFn:
    """SAC on one env with twin critics, a tanh-squashed Gaussian actor and automatic entropy tuning
    (alpha starts at 1, target entropy -dim(A)); one gradient step of the critics, the actor and alpha
    per env step after ``prefill_env_steps`` uniformly random ones; Polyak-averaged target critics.
    Actions are stored in [-1, 1] and scaled onto the env's bounds when stepping. The env is one raw env
    reset by hand, or with ``vector=True`` a one-env SAME_STEP ``SyncVectorEnv``.
    """
    torch.manual_seed(seed)
    env = OneEnv(make_env, vector=vector)
    obs_dim = int(np.prod(env.env.observation_space.shape))  # type: ignore[arg-type]
    act_dim = int(np.prod(env.env.action_space.shape))  # type: ignore[arg-type]
    high = float(env.env.action_space.high[0])  # type: ignore[attr-defined]
    nets = sac_nets(obs_dim, act_dim, hidden=hidden, lr=lr, fused=fused_adam)
    replay = Replay(buffer_size, obs_dim, (act_dim,), np.float32)
    rng = np.random.default_rng(seed)
    obs = env.reset(seed)
    with denormals_flushed(flush_denormal):
        for step in range(num_env_steps):
            if step < prefill_env_steps:
                action = rng.uniform(-1.0, 1.0, size=act_dim).astype(np.float32)
            else:
                with torch.no_grad():
                    sampled, _ = _squashed_sample(nets.actor, torch.as_tensor(obs, dtype=torch.float32)[None])
                action = sampled[0].numpy()
            next_obs, reward, terminated, obs_after = env.step(action * high)
            replay.add(obs, next_obs, action, reward, terminated)
            obs = obs_after
            if step >= prefill_env_steps:
                batch = replay.sample(rng, batch_size)
                sac_gradient_step(nets, batch, gamma=gamma, tau=tau, target_entropy=-float(act_dim))
    env.close()

    def act(obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            mu, _ = nets.actor(torch.as_tensor(obs_batch, dtype=torch.float32)).chunk(2, dim=-1)
            return (torch.tanh(mu) * high).numpy()

    return act
