"""The contestants of ``bench_vmas.py``: PPO on one batched torch env (a
:class:`~tshtrain.env.tensor_env.TensorVectorEnv`), written by hand (``hand_ppo_vmas.HandPPO``, the one
hand loop, also used for the task's learning check), with tshtrain, with rsl_rl 5.x and with skrl 2.x,
all with the settings of one ``vmas_task.PPOSettings``.

Every contestant drives the same env type: the benchmark hands each one a ``vmas_task.TimedEnv`` around a
fresh env, which times ``env.step``; rsl_rl and skrl see it through the thin adapters
:class:`RslRlVecEnv` and :class:`SkrlEnvWrapper`. The env is ``tshtrain.env.vmas.VmasEnv`` on the task
of ``vmas_task.TASK``; ``vmas_task.StubNavEnv`` is a cheap stand-in for developing (``--env stub``).

A builder takes ``(env, settings, seed, num_iterations, phases)``, constructs everything (untimed) and
returns the timed ``run()``: ``num_iterations`` PPO iterations (a rollout of ``settings.rollout_len``
vector steps, then the update). ``run`` adds the seconds of the update phase (and, where the library
has a separate collection call, of the collection phase) to ``phases``.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import hand_ppo_vmas
import torch
from torch import nn
from vmas_task import Phases, PPOSettings, TimedEnv, box_bounds, mlp_tanh, obs_dim

from tshtrain.env.tensor_env import TensorObs, TensorVectorEnv

Run = Callable[[], None]


# ============================================================================ settings and timers
UNMATCHED_KNOBS = (
    "Knobs the libraries do not let us match: rsl_rl clips the actor's and the critic's gradient norms "
    "separately (the others clip their joint norm), bootstraps a time-out with V(o_t) instead of V(final "
    "obs) and checks every step for NaNs (its default); skrl standardises advantages over the whole "
    "rollout (the others per mini-batch) and bootstraps a time-out with V of the next episode's first "
    "observation (its envs give no final observation); tshtrain recomputes the rollout's values and "
    "log-probabilities at the start of the update (the others store them while collecting). Network "
    "initialisation is each library's default; all use Adam with torch's default hyperparameters (the "
    "hand loop and tshtrain with torch's fused CPU kernel, rsl_rl and skrl with its default one) and "
    "plain Gaussian sampling (rsl_rl and skrl through torch.distributions.Normal)."
)


def _timed(fn: Callable[..., Any], add: Callable[[float], None]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            add(time.perf_counter() - start)

    return wrapper


def _add_update(phases: Phases) -> Callable[[float], None]:
    def add(seconds: float) -> None:
        phases.update += seconds

    return add


# ============================================================================ adapters
def _rsl_rl_adapter_class() -> type:
    from rsl_rl.env import VecEnv
    from tensordict import TensorDict

    class RslRlVecEnv(VecEnv):
        """rsl_rl's ``VecEnv`` over a :class:`TensorVectorEnv`: one observation group ``policy``, dones
        = terminated | truncated, ``extras["time_outs"]`` = truncated and not terminated, actions
        clipped to the Box (as Isaac Lab's rsl_rl wrapper does)."""

        def __init__(self, env: TensorVectorEnv, seed: int):
            self.env = env
            self.num_envs = env.num_envs
            self.device = env.device
            self.low, self.high = box_bounds(env)
            self.num_actions = len(self.low)
            self.max_episode_length = int(getattr(env, "max_episode_steps", 0) or 0)
            self.episode_length_buf = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
            self.cfg: dict[str, Any] = {}
            obs, _ = env.reset(seed=seed)
            self._obs = self._wrap(obs)

        def _wrap(self, obs: TensorObs) -> TensorDict:
            assert isinstance(obs, torch.Tensor)
            return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

        def get_observations(self) -> TensorDict:
            return self._obs

        def step(
            self, actions: torch.Tensor
        ) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
            out = self.env.step(torch.clamp(actions, self.low, self.high))
            done = out.terminated | out.truncated
            self.episode_length_buf += 1
            self.episode_length_buf.masked_fill_(done, 0)
            self._obs = self._wrap(out.obs)
            extras = {"time_outs": out.truncated & ~out.terminated, "log": {}}
            return self._obs, out.rew, done.float(), extras

    return RslRlVecEnv


def _skrl_adapter_class() -> type:
    from skrl.envs.wrappers.torch.base import Wrapper

    class SkrlEnvWrapper(Wrapper):
        """skrl's env wrapper over a :class:`TensorVectorEnv`: (N, 1) rewards / terminated / truncated,
        reset once (the trainer calls ``reset`` at the start of ``train``; episodes reset themselves)."""

        def __init__(self, env: TensorVectorEnv, seed: int):
            super().__init__(env)
            self._seed = seed
            self._obs: torch.Tensor | None = None

        @property
        def observation_space(self) -> gym.Space[Any]:
            return self._env.single_observation_space

        @property
        def action_space(self) -> gym.Space[Any]:
            return self._env.single_action_space

        @property
        def num_envs(self) -> int:
            return int(self._env.num_envs)

        def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
            if self._obs is None:
                obs, _ = self._env.reset(seed=self._seed)
                assert isinstance(obs, torch.Tensor)
                self._obs = obs
            return self._obs, {}

        def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, ...] | Any:
            out = self._env.step(actions)
            assert isinstance(out.obs, torch.Tensor)
            self._obs = out.obs
            return (
                out.obs,
                out.rew.view(-1, 1),
                out.terminated.view(-1, 1),
                out.truncated.view(-1, 1),
                out.info,
            )

        def state(self) -> None:
            return None

        def render(self, *args: Any, **kwargs: Any) -> None:
            return None

        def close(self) -> None:
            self._env.close()

    return SkrlEnvWrapper


# ============================================================================ contestants
Builder = Callable[[TimedEnv, PPOSettings, int, int, Phases], Run]


def _hand(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    train = hand_ppo_vmas.build(env, s, seed=seed, phases=phases)
    return lambda: train(num_iterations)


def _hand_in_place(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    """The hand loop with its tanh written in place, as tshtrain's ``mlp`` does (the honest baseline
    for that trick: the same numbers, less allocation)."""
    train = hand_ppo_vmas.build(env, s, seed=seed, phases=phases, in_place_tanh=True)
    return lambda: train(num_iterations)


def _hand_fast(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    """The hand loop with tshtrain's ``FastTanh`` (tanh from expm1, within 1.7e-7 of torch's, half its
    CPU cost) in place of ``nn.Tanh``: the honest baseline for that trick."""
    train = hand_ppo_vmas.build(env, s, seed=seed, phases=phases, fast_tanh=True)
    return lambda: train(num_iterations)


def _hand_kept_memory(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    """The hand loop in a process where glibc keeps freed memory for reuse
    (``tshtrain.cpu_memory.keep_freed_memory``, what tshtrain's trainer does by default): the honest
    baseline for that setting. Only meaningful with ``--isolate`` (the setting is process-wide)."""
    from tshtrain.cpu_memory import keep_freed_memory

    keep_freed_memory()
    return _hand(env, s, seed, num_iterations, phases)


def _tshtrain(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    return _tshtrain_run(env, s, seed, num_iterations, phases, compile_loss=False)


def _tshtrain_values(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    """tshtrain with the critic evaluated while collecting (``TensorCollector(values=...)``, rsl_rl's
    phase split); otherwise the default path."""
    return _tshtrain_run(env, s, seed, num_iterations, phases, compile_loss=False, collection_values=True)


def _tshtrain_fast_tanh(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    """tshtrain with ``mlp(..., activation=FastTanh)``: the opt-in eager tanh for large CPU batches
    (compare with ``hand loop (fast tanh)``, the hand loop given the same activation)."""
    return _tshtrain_run(env, s, seed, num_iterations, phases, compile_loss=False, fast_tanh=True)


def _tshtrain_compiled(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    """tshtrain with ``PPOParams(compile_loss=True)``: the opt-in compiled path (its compilation happens
    in the untimed warm-up round; later runs in the process reuse the compiled loss)."""
    return _tshtrain_run(env, s, seed, num_iterations, phases, compile_loss=True)


def _tshtrain_run(
    env: TimedEnv,
    s: PPOSettings,
    seed: int,
    num_iterations: int,
    phases: Phases,
    *,
    compile_loss: bool,
    collection_values: bool = False,
    fast_tanh: bool = False,
) -> Run:
    from tshtrain.algorithm import PPO, FastTanh, GaussianPolicy, PPOParams, mlp
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

    TensorCollector, TensorReplayBuffer = tshtrain_torch_data()

    torch.manual_seed(seed)
    o_dim, a_dim, n = obs_dim(env), len(box_bounds(env)[0]), env.num_envs
    activation = FastTanh if fast_tanh else nn.Tanh
    policy = GaussianPolicy(
        mlp(o_dim, a_dim, s.hidden_sizes, activation),
        env.single_action_space,
        init_log_std=s.init_log_std,
        seed=seed,
    )
    params = PPOParams(
        lr=s.lr,
        gamma=s.gamma,
        gae_lambda=s.gae_lambda,
        clip_range=s.clip_range,
        ent_coef=s.ent_coef,
        vf_coef=s.vf_coef,
        max_grad_norm=s.max_grad_norm,
        compile_loss=compile_loss,
    )
    algorithm = PPO(policy=policy, critic=mlp(o_dim, 1, s.hidden_sizes, activation), params=params, seed=seed)
    rollout = s.rollout_len * n
    values = algorithm.collection_values() if collection_values else None
    buffer = TensorReplayBuffer(rollout, n, device=env.device)
    collector = TensorCollector(policy, env, buffer, seed=seed, values=values)
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=collector,
            max_epochs=num_iterations,
            epoch_num_steps=rollout,
            collection_step_num_env_steps=rollout,
            batch_size=rollout // s.num_minibatches,
            update_step_num_repetitions=s.num_epochs,
            verbose=False,
            show_progress=False,
        ),
    )

    def run() -> None:
        info = trainer.run()
        phases.update += info.timing.train_time_update
        phases.collect = (phases.collect or 0.0) + info.timing.train_time_collect

    return run


def _rsl_rl(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    from rsl_rl.runners import OnPolicyRunner

    torch.manual_seed(seed)
    vec_env = _rsl_rl_adapter_class()(env, seed)
    net = {"hidden_dims": list(s.hidden_sizes), "activation": "tanh", "obs_normalization": False}
    cfg: dict[str, Any] = {
        "num_steps_per_env": s.rollout_len,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": s.num_epochs,
            "num_mini_batches": s.num_minibatches,
            "clip_param": s.clip_range,
            "gamma": s.gamma,
            "lam": s.gae_lambda,
            "value_loss_coef": s.vf_coef,
            "entropy_coef": s.ent_coef,
            "learning_rate": s.lr,
            "max_grad_norm": s.max_grad_norm,
            "use_clipped_value_loss": False,
            "schedule": "fixed",
            "normalize_advantage_per_mini_batch": True,
        },
        "actor": {
            "class_name": "MLPModel",
            **net,
            "distribution_cfg": {
                "class_name": "GaussianDistribution",
                "init_std": math.exp(s.init_log_std),
                "std_type": "log",
            },
        },
        "critic": {"class_name": "MLPModel", **net},
    }
    with contextlib.redirect_stdout(io.StringIO()):  # it prints the models
        runner = OnPolicyRunner(vec_env, cfg, log_dir=None, device=str(env.device))
    add = _add_update(phases)
    runner.alg.update = _timed(runner.alg.update, add)
    runner.alg.compute_returns = _timed(runner.alg.compute_returns, add)
    log = runner.logger.log

    def log_collect_time(*args: Any, collect_time: float, **kwargs: Any) -> None:
        """The runner measures its rollout loop and hands the seconds to its logger."""
        phases.collect = (phases.collect or 0.0) + collect_time
        log(*args, collect_time=collect_time, **kwargs)

    runner.logger.log = log_collect_time
    return lambda: runner.learn(num_learning_iterations=num_iterations)


def _skrl_models(env: TensorVectorEnv, s: PPOSettings) -> dict[str, Any]:
    from skrl.models.torch import DeterministicMixin, GaussianMixin, Model

    o_dim, a_dim = obs_dim(env), len(box_bounds(env)[0])

    class Policy(GaussianMixin, Model):
        def __init__(self) -> None:
            Model.__init__(
                self,
                observation_space=env.single_observation_space,
                action_space=env.single_action_space,
                device=env.device,
            )
            GaussianMixin.__init__(self, clip_actions=True, clip_log_std=False)
            self.net = mlp_tanh([o_dim, *s.hidden_sizes, a_dim])
            self.log_std_parameter = nn.Parameter(torch.full((a_dim,), s.init_log_std))

        def compute(self, inputs: Mapping[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
            return self.net(inputs["observations"]), {"log_std": self.log_std_parameter}

    class Value(DeterministicMixin, Model):
        def __init__(self) -> None:
            Model.__init__(
                self,
                observation_space=env.single_observation_space,
                action_space=env.single_action_space,
                device=env.device,
            )
            DeterministicMixin.__init__(self)
            self.net = mlp_tanh([o_dim, *s.hidden_sizes, 1])

        def compute(self, inputs: Mapping[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
            return self.net(inputs["observations"]), {}

    return {"policy": Policy(), "value": Value()}


def _skrl(env: TimedEnv, s: PPOSettings, seed: int, num_iterations: int, phases: Phases) -> Run:
    from skrl.agents.torch.base import ExperimentCfg
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.memories.torch import RandomMemory
    from skrl.trainers.torch import SequentialTrainer, SequentialTrainerCfg

    torch.manual_seed(seed)
    wrapped = _skrl_adapter_class()(env, seed)
    cfg = PPO_CFG(
        rollouts=s.rollout_len,
        learning_epochs=s.num_epochs,
        mini_batches=s.num_minibatches,
        discount_factor=s.gamma,
        gae_lambda=s.gae_lambda,
        learning_rate=s.lr,
        grad_norm_clip=s.max_grad_norm,
        ratio_clip=s.clip_range,
        value_clip=0.0,
        entropy_loss_scale=s.ent_coef,
        value_loss_scale=s.vf_coef,
        time_limit_bootstrap=True,
        experiment=ExperimentCfg(write_interval=0, checkpoint_interval=0),
    )
    agent = PPO(
        models=_skrl_models(env, s),
        memory=RandomMemory(memory_size=s.rollout_len, num_envs=env.num_envs, device=env.device),
        observation_space=wrapped.observation_space,
        action_space=wrapped.action_space,
        device=env.device,
        cfg=cfg,
    )
    trainer = SequentialTrainer(
        env=wrapped,
        agents=agent,
        cfg=SequentialTrainerCfg(
            timesteps=num_iterations * s.rollout_len,
            headless=True,
            disable_progressbar=True,
            close_environment_at_exit=False,
        ),
    )
    agent.update = _timed(agent.update, _add_update(phases))
    return trainer.train


def tshtrain_torch_data() -> tuple[Any, Any]:
    """(TensorCollector, TensorReplayBuffer): from ``tshtrain.data``, or from their modules while the
    package does not re-export them yet. Raises ImportError while they do not exist."""
    try:
        from tshtrain.data import TensorCollector, TensorReplayBuffer
    except ImportError as not_exported:
        try:
            from tshtrain.data.tensor_buffer import TensorReplayBuffer
            from tshtrain.data.tensor_collector import TensorCollector
        except ImportError:
            raise not_exported from None
    return TensorCollector, TensorReplayBuffer


def tshtrain_available() -> str | None:
    """None if tshtrain's torch data path can be imported, else why not."""
    try:
        tshtrain_torch_data()
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


HAND_LOOP = "hand_ppo_vmas.HandPPO"
"""the reference contestant's code"""

CONTESTANTS: dict[str, Builder] = {
    "hand loop": _hand,
    "hand loop (in-place tanh)": _hand_in_place,
    "hand loop (fast tanh)": _hand_fast,
    "hand loop (kept memory)": _hand_kept_memory,
    "tshtrain": _tshtrain,
    "tshtrain (fast tanh)": _tshtrain_fast_tanh,
    "tshtrain (compiled)": _tshtrain_compiled,
    "tshtrain (values in collection)": _tshtrain_values,
    "rsl_rl": _rsl_rl,
    "skrl": _skrl,
}
"""name -> builder; the first row is the reference of the ratios"""
