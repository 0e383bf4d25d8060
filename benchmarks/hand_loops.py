"""Hand-written training loops: the "limit" contestants of ``bench_e2e.py``.

Each loop is what an engineer would write by hand in one file, top to bottom, with no library around
it: a Gymnasium vector env, plain ``torch.nn`` networks, ``torch.optim.Adam`` with its default
settings, numpy / torch storage allocated once. They do the same work as the tshtrain runs they are
compared with (same networks, hyperparameters, truncation handling and number of gradient steps), so
that the ratio tshtrain / hand loop measures the cost of the library, not a difference in the
algorithm.

Every loop takes ``make_env`` (a factory for one env, wrapped by the benchmark's episode recorder) and
returns a deterministic ``act(obs_batch) -> actions`` for the final evaluation.

Two kinds of env stepping (``bench_e2e_floor.py`` reports both): ``ppo_cartpole`` steps a SAME_STEP
``SyncVectorEnv``; ``ppo_cartpole_raw`` steps 8 raw ``gym.make`` envs kept in a Python list and resets
them by hand. ``dqn_cartpole`` and ``sac_pendulum`` step one raw env by default and a one-env SAME_STEP
``SyncVectorEnv`` (what ``tshtrain.env.make_vector_env(make_env, 1)`` builds) with ``vector=True``.
``flush_denormal=True`` runs a loop with ``torch.set_flush_denormal(True)`` (what tshtrain's trainer
does by default) and restores the flag afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
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


def _one_env_vector(env: gym.Env[Any, Any]) -> gym.vector.SyncVectorEnv:
    """``env`` (already built) as the only sub-env of a SAME_STEP ``SyncVectorEnv``."""
    return gym.vector.SyncVectorEnv([lambda: env], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def same_step_vector_env(make_env: EnvFactory, num_envs: int) -> gym.vector.SyncVectorEnv:
    """Sub-envs reset inside the step that ends an episode; the last observation is in ``info``."""
    return gym.vector.SyncVectorEnv([make_env] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


# ============================================================================================ PPO
def _ppo_update(
    actor: nn.Module,
    critic: nn.Module,
    optimizer: torch.optim.Optimizer,
    params: list[nn.Parameter],
    rollout: tuple[torch.Tensor, ...],
    next_value: torch.Tensor,
    *,
    clip_now: float,
    gamma: float,
    gae_lambda: float,
    num_epochs: int,
    batch_size: int,
    vf_coef: float,
    max_grad_norm: float,
) -> None:
    """GAE over one rollout of (T, N) tensors, then ``num_epochs`` epochs of clipped-PPO mini-batches."""
    obs_buf, act_buf, logp_buf, rew_buf, done_buf, value_buf = rollout
    num_steps, num_envs, obs_dim = obs_buf.shape
    with torch.no_grad():
        advantages = torch.zeros_like(rew_buf)
        last_gae = torch.zeros(num_envs)
        for t in reversed(range(num_steps)):
            not_done = 1.0 - done_buf[t]
            delta = rew_buf[t] + gamma * next_value * not_done - value_buf[t]
            last_gae = delta + gamma * gae_lambda * not_done * last_gae
            advantages[t] = last_gae
            next_value = value_buf[t]
        returns = advantages + value_buf
    b_obs = obs_buf.reshape(-1, obs_dim)
    b_act, b_logp = act_buf.reshape(-1), logp_buf.reshape(-1)
    b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)
    n = len(b_obs)
    for _ in range(num_epochs):
        perm = torch.randperm(n)
        for start in range(0, n, batch_size):
            idx = perm[start : start + batch_size]
            dist = torch.distributions.Categorical(logits=actor(b_obs[idx]))
            log_ratio = dist.log_prob(b_act[idx]) - b_logp[idx]
            ratio = log_ratio.exp()
            adv = b_adv[idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_now, 1 + clip_now)).mean()
            v_loss = F.mse_loss(critic(b_obs[idx]).squeeze(-1), b_ret[idx])
            loss = pg_loss + vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()


def ppo_cartpole(
    make_env: EnvFactory,
    *,
    seed: int,
    num_env_steps: int,
    num_envs: int = 8,
    num_steps: int = 32,
    batch_size: int = 256,
    num_epochs: int = 20,
    gamma: float = 0.98,
    gae_lambda: float = 0.8,
    lr: float = 1e-3,
    clip: float = 0.2,
    vf_coef: float = 0.5,
    max_grad_norm: float = 0.5,
    flush_denormal: bool = False,
) -> ActFn:
    """PPO for a Discrete action space on a SAME_STEP ``SyncVectorEnv``, rl-zoo's CartPole settings by
    default.

    Learning rate and clip range decay linearly to 0 over the run (factor ``1 - k / num_updates`` in
    update ``k``, counted from 0); advantages are standardised per mini-batch; at a truncation the
    reward is topped up with ``gamma * V(last obs)`` so that GAE bootstraps through it.
    """
    torch.manual_seed(seed)
    envs = same_step_vector_env(make_env, num_envs)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    num_actions = int(envs.single_action_space.n)  # type: ignore[attr-defined]
    actor = mlp([obs_dim, 64, 64, num_actions], nn.Tanh)
    critic = mlp([obs_dim, 64, 64, 1], nn.Tanh)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=lr)

    obs_buf = torch.zeros((num_steps, num_envs, obs_dim))
    act_buf = torch.zeros((num_steps, num_envs), dtype=torch.long)
    logp_buf = torch.zeros((num_steps, num_envs))
    rew_buf = torch.zeros((num_steps, num_envs))
    done_buf = torch.zeros((num_steps, num_envs))
    value_buf = torch.zeros((num_steps, num_envs))

    obs_np, _ = envs.reset(seed=seed)
    obs = torch.as_tensor(obs_np, dtype=torch.float32)
    num_updates = -(-num_env_steps // (num_steps * num_envs))
    with denormals_flushed(flush_denormal):
        for update in range(num_updates):
            frac = 1.0 - update / num_updates
            for group in optimizer.param_groups:
                group["lr"] = lr * frac
            # ---------------------------------------------------------------- rollout
            for t in range(num_steps):
                with torch.no_grad():
                    dist = torch.distributions.Categorical(logits=actor(obs))
                    action = dist.sample()
                    logp_buf[t] = dist.log_prob(action)
                    value_buf[t] = critic(obs).squeeze(-1)
                obs_buf[t] = obs
                act_buf[t] = action
                obs_np, reward, terminated, truncated, info = envs.step(action.numpy())
                reward = reward.astype(np.float32)
                cut = truncated & ~terminated
                if cut.any():  # bootstrap through the time limit from the episode's last observation
                    last_obs = torch.as_tensor(np.stack(info["final_obs"][cut]), dtype=torch.float32)
                    with torch.no_grad():
                        reward[cut] += gamma * critic(last_obs).squeeze(-1).numpy()
                rew_buf[t] = torch.from_numpy(reward)
                done_buf[t] = torch.from_numpy((terminated | truncated).astype(np.float32))
                obs = torch.as_tensor(obs_np, dtype=torch.float32)
            # ---------------------------------------------------------------- GAE + update
            with torch.no_grad():
                next_value = critic(obs).squeeze(-1)
            _ppo_update(
                actor,
                critic,
                optimizer,
                params,
                (obs_buf, act_buf, logp_buf, rew_buf, done_buf, value_buf),
                next_value,
                clip_now=clip * frac,
                gamma=gamma,
                gae_lambda=gae_lambda,
                num_epochs=num_epochs,
                batch_size=batch_size,
                vf_coef=vf_coef,
                max_grad_norm=max_grad_norm,
            )
    envs.close()

    def act(obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return actor(torch.as_tensor(obs_batch, dtype=torch.float32)).argmax(-1).numpy()

    return act


def ppo_cartpole_raw(
    make_env: EnvFactory,
    *,
    seed: int,
    num_env_steps: int,
    num_envs: int = 8,
    num_steps: int = 32,
    batch_size: int = 256,
    num_epochs: int = 20,
    gamma: float = 0.98,
    gae_lambda: float = 0.8,
    lr: float = 1e-3,
    clip: float = 0.2,
    vf_coef: float = 0.5,
    max_grad_norm: float = 0.5,
    flush_denormal: bool = True,
) -> ActFn:
    """:func:`ppo_cartpole` stepping ``num_envs`` raw envs kept in a Python list (no vector wrapper):
    each env is stepped with a Python ``int`` action and reset by hand when its episode ends. The
    networks, the sampling, GAE and the update are the same code as :func:`ppo_cartpole`'s."""
    torch.manual_seed(seed)
    envs = [make_env() for _ in range(num_envs)]
    obs_dim = int(np.prod(envs[0].observation_space.shape))  # type: ignore[arg-type]
    num_actions = int(envs[0].action_space.n)  # type: ignore[attr-defined]
    actor = mlp([obs_dim, 64, 64, num_actions], nn.Tanh)
    critic = mlp([obs_dim, 64, 64, 1], nn.Tanh)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=lr)

    obs_buf = torch.zeros((num_steps, num_envs, obs_dim))
    act_buf = torch.zeros((num_steps, num_envs), dtype=torch.long)
    logp_buf = torch.zeros((num_steps, num_envs))
    rew_buf = torch.zeros((num_steps, num_envs))
    done_buf = torch.zeros((num_steps, num_envs))
    value_buf = torch.zeros((num_steps, num_envs))
    obs_np = np.zeros((num_envs, obs_dim), dtype=np.float32)  # the next observation of every env
    rew_np = np.zeros(num_envs, dtype=np.float32)
    done_np = np.zeros(num_envs, dtype=np.float32)
    for i, env in enumerate(envs):
        obs_np[i] = env.reset(seed=seed + i)[0]
    obs = torch.from_numpy(obs_np.copy())
    num_updates = -(-num_env_steps // (num_steps * num_envs))
    with denormals_flushed(flush_denormal):
        for update in range(num_updates):
            frac = 1.0 - update / num_updates
            for group in optimizer.param_groups:
                group["lr"] = lr * frac
            # ---------------------------------------------------------------- rollout
            for t in range(num_steps):
                with torch.no_grad():
                    dist = torch.distributions.Categorical(logits=actor(obs))
                    action = dist.sample()
                    logp_buf[t] = dist.log_prob(action)
                    value_buf[t] = critic(obs).squeeze(-1)
                obs_buf[t] = obs
                act_buf[t] = action
                cut_rows: list[int] = []
                cut_obs: list[np.ndarray] = []
                for i, (env, a) in enumerate(zip(envs, action.tolist(), strict=True)):
                    next_obs, reward, terminated, truncated, _ = env.step(a)
                    rew_np[i] = reward
                    if terminated or truncated:
                        done_np[i] = 1.0
                        if not terminated:  # bootstrap through the time limit (below)
                            cut_rows.append(i)
                            cut_obs.append(next_obs)
                        next_obs = env.reset()[0]
                    else:
                        done_np[i] = 0.0
                    obs_np[i] = next_obs
                if cut_rows:
                    with torch.no_grad():
                        values = critic(torch.from_numpy(np.stack(cut_obs).astype(np.float32)))
                    rew_np[cut_rows] += gamma * values.squeeze(-1).numpy()
                rew_buf[t] = torch.from_numpy(rew_np)
                done_buf[t] = torch.from_numpy(done_np)
                obs = torch.from_numpy(obs_np.copy())
            # ---------------------------------------------------------------- GAE + update
            with torch.no_grad():
                next_value = critic(obs).squeeze(-1)
            _ppo_update(
                actor,
                critic,
                optimizer,
                params,
                (obs_buf, act_buf, logp_buf, rew_buf, done_buf, value_buf),
                next_value,
                clip_now=clip * frac,
                gamma=gamma,
                gae_lambda=gae_lambda,
                num_epochs=num_epochs,
                batch_size=batch_size,
                vf_coef=vf_coef,
                max_grad_norm=max_grad_norm,
            )
    for env in envs:
        env.close()

    def act(obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return actor(torch.as_tensor(obs_batch, dtype=torch.float32)).argmax(-1).numpy()

    return act


# ============================================================================================ DQN
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
    env = make_env()
    venv = _one_env_vector(env) if vector else None
    obs_dim = int(np.prod(env.observation_space.shape))  # type: ignore[arg-type]
    num_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    q_net = mlp([obs_dim, hidden, hidden, num_actions], nn.ReLU)
    target_net = mlp([obs_dim, hidden, hidden, num_actions], nn.ReLU)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=lr)

    obs_buf = np.zeros((buffer_size, obs_dim), dtype=np.float32)
    next_obs_buf = np.zeros((buffer_size, obs_dim), dtype=np.float32)
    act_buf = np.zeros(buffer_size, dtype=np.int64)
    rew_buf = np.zeros(buffer_size, dtype=np.float32)
    term_buf = np.zeros(buffer_size, dtype=np.float32)
    size = ptr = 0
    obs = env.reset(seed=seed)[0] if venv is None else venv.reset(seed=seed)[0][0]
    env.action_space.seed(seed)

    def env_step(action: int) -> None:
        nonlocal obs, size, ptr
        next_obs, reward, terminated, truncated, _ = env.step(action)
        obs_buf[ptr], next_obs_buf[ptr], act_buf[ptr] = obs, next_obs, action
        rew_buf[ptr], term_buf[ptr] = reward, float(terminated)
        ptr, size = (ptr + 1) % buffer_size, min(size + 1, buffer_size)
        obs = env.reset()[0] if terminated or truncated else next_obs

    def vector_env_step(action: int) -> None:
        nonlocal obs, size, ptr
        assert venv is not None
        next_obs, reward, terminated, truncated, info = venv.step(np.array([action]))
        last_obs = info["final_obs"][0] if terminated[0] or truncated[0] else next_obs[0]
        obs_buf[ptr], next_obs_buf[ptr], act_buf[ptr] = obs, last_obs, action
        rew_buf[ptr], term_buf[ptr] = reward[0], float(terminated[0])
        ptr, size = (ptr + 1) % buffer_size, min(size + 1, buffer_size)
        obs = next_obs[0]

    if vector:
        env_step = vector_env_step

    with denormals_flushed(flush_denormal):
        for _ in range(prefill_env_steps):
            env_step(int(env.action_space.sample()))
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
                idx = rng.integers(0, size, size=batch_size)
                b_obs, b_next = torch.from_numpy(obs_buf[idx]), torch.from_numpy(next_obs_buf[idx])
                b_act, b_rew = torch.from_numpy(act_buf[idx]), torch.from_numpy(rew_buf[idx])
                b_term = torch.from_numpy(term_buf[idx])
                with torch.no_grad():
                    target = b_rew + gamma * (1.0 - b_term) * target_net(b_next).max(dim=1).values
                q = q_net(b_obs).gather(1, b_act.unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, target)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q_net.parameters(), max_grad_norm)
                optimizer.step()
    (env if venv is None else venv).close()

    def act(obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return q_net(torch.as_tensor(obs_batch, dtype=torch.float32)).argmax(-1).numpy()

    return act


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
) -> ActFn:
    """SAC on one env with twin critics, a tanh-squashed Gaussian actor and automatic entropy tuning
    (alpha starts at 1, target entropy -dim(A)); one gradient step of the critics, the actor and alpha
    per env step after ``prefill_env_steps`` uniformly random ones; Polyak-averaged target critics.
    Actions are stored in [-1, 1] and scaled onto the env's bounds when stepping. The env is one raw env
    reset by hand, or with ``vector=True`` a one-env SAME_STEP ``SyncVectorEnv``.
    """
    torch.manual_seed(seed)
    env = make_env()
    venv = _one_env_vector(env) if vector else None
    obs_dim = int(np.prod(env.observation_space.shape))  # type: ignore[arg-type]
    act_dim = int(np.prod(env.action_space.shape))  # type: ignore[arg-type]
    high = float(env.action_space.high[0])  # type: ignore[attr-defined]
    actor = mlp([obs_dim, hidden, hidden, 2 * act_dim], nn.ReLU)
    q1, q2 = (mlp([obs_dim + act_dim, hidden, hidden, 1], nn.ReLU) for _ in range(2))
    q1_targ, q2_targ = (mlp([obs_dim + act_dim, hidden, hidden, 1], nn.ReLU) for _ in range(2))
    q1_targ.load_state_dict(q1.state_dict())
    q2_targ.load_state_dict(q2.state_dict())
    critic_params = [*q1.parameters(), *q2.parameters()]
    target_params = [*q1_targ.parameters(), *q2_targ.parameters()]
    actor_opt = torch.optim.Adam(actor.parameters(), lr=lr)
    critic_opt = torch.optim.Adam(critic_params, lr=lr)
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha_opt = torch.optim.Adam([log_alpha], lr=lr)
    target_entropy = -float(act_dim)

    obs_buf = np.zeros((buffer_size, obs_dim), dtype=np.float32)
    next_obs_buf = np.zeros((buffer_size, obs_dim), dtype=np.float32)
    act_buf = np.zeros((buffer_size, act_dim), dtype=np.float32)
    rew_buf = np.zeros(buffer_size, dtype=np.float32)
    term_buf = np.zeros(buffer_size, dtype=np.float32)
    rng = np.random.default_rng(seed)
    obs = env.reset(seed=seed)[0] if venv is None else venv.reset(seed=seed)[0][0]
    size = ptr = 0
    with denormals_flushed(flush_denormal):
        for step in range(num_env_steps):
            if step < prefill_env_steps:
                action = rng.uniform(-1.0, 1.0, size=act_dim).astype(np.float32)
            else:
                with torch.no_grad():
                    action = _squashed_sample(actor, torch.as_tensor(obs, dtype=torch.float32)[None])[0][
                        0
                    ].numpy()
            if venv is None:
                next_obs, reward, terminated, truncated, _ = env.step(action * high)
                obs_buf[ptr], next_obs_buf[ptr], act_buf[ptr] = obs, next_obs, action
                rew_buf[ptr], term_buf[ptr] = reward, float(terminated)
                obs = env.reset()[0] if terminated or truncated else next_obs
            else:
                next_obs_N, reward_N, term_N, trunc_N, info = venv.step(action[None] * high)
                last_obs = info["final_obs"][0] if term_N[0] or trunc_N[0] else next_obs_N[0]
                obs_buf[ptr], next_obs_buf[ptr], act_buf[ptr] = obs, last_obs, action
                rew_buf[ptr], term_buf[ptr] = reward_N[0], float(term_N[0])
                obs = next_obs_N[0]
            ptr, size = (ptr + 1) % buffer_size, min(size + 1, buffer_size)
            if step < prefill_env_steps:
                continue
            # -------------------------------------------------------------------- one gradient step
            idx = rng.integers(0, size, size=batch_size)
            b_obs, b_next = torch.from_numpy(obs_buf[idx]), torch.from_numpy(next_obs_buf[idx])
            b_act, b_rew, b_term = (torch.from_numpy(a[idx]) for a in (act_buf, rew_buf, term_buf))
            alpha = log_alpha.detach().exp()
            with torch.no_grad():
                next_act, next_logp = _squashed_sample(actor, b_next)
                next_in = torch.cat([b_next, next_act], dim=-1)
                q_next = torch.min(q1_targ(next_in), q2_targ(next_in)).squeeze(-1)
                target = b_rew + gamma * (1.0 - b_term) * (q_next - alpha * next_logp)
            q_in = torch.cat([b_obs, b_act], dim=-1)
            critic_loss = F.mse_loss(q1(q_in).squeeze(-1), target) + F.mse_loss(q2(q_in).squeeze(-1), target)
            critic_opt.zero_grad()
            critic_loss.backward()
            critic_opt.step()

            new_act, logp = _squashed_sample(actor, b_obs)
            new_in = torch.cat([b_obs, new_act], dim=-1)
            actor_loss = (alpha * logp - torch.min(q1(new_in), q2(new_in)).squeeze(-1)).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()

            alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
            alpha_opt.zero_grad()
            alpha_loss.backward()
            alpha_opt.step()
            with torch.no_grad():
                for p, tp in zip(critic_params, target_params, strict=True):
                    tp.mul_(1.0 - tau).add_(p, alpha=tau)
    (env if venv is None else venv).close()

    def act(obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            mu, _ = actor(torch.as_tensor(obs_batch, dtype=torch.float32)).chunk(2, dim=-1)
            return (torch.tanh(mu) * high).numpy()

    return act
