"""Bit-exactness fingerprint of every algorithm: a short seeded run through the real trainer, then a
SHA-256 over the whole ``algorithm.state_dict()`` (weights, optimizer states, extra state, generator
states) and the last TrainingStats.

A refactor of ``tshtrain/algorithm`` that keeps behaviour leaves this output unchanged, byte for byte:

    python scripts/algo_fingerprint.py > /tmp/after.txt
    diff scripts/algo_fingerprint.before.txt /tmp/after.txt

Run: python scripts/algo_fingerprint.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from tshtrain.adapters import HookRegistry
from tshtrain.algorithm import (
    A2C,
    CQL,
    DDPG,
    DQN,
    PPO,
    SAC,
    TD3,
    TD3BC,
    A2CParams,
    Algorithm,
    BCParams,
    BehaviorCloning,
    CategoricalPolicy,
    CQLParams,
    DDPGParams,
    DeterministicActorPolicy,
    DiscreteCQL,
    DiscreteCQLParams,
    DiscreteQEnsemble,
    DiscreteSAC,
    DiscreteSACParams,
    DQNParams,
    EpsilonSchedule,
    GaussianPolicy,
    LinearSchedule,
    PPOParams,
    QEnsemble,
    QValuePolicy,
    Reinforce,
    ReinforceParams,
    RunningObsNormalizer,
    SACParams,
    TanhGaussianPolicy,
    TD3BCParams,
    TD3Params,
    TrainingStats,
    dueling_mlp,
    mlp,
)
from tshtrain.data import Collector, PrioritizedVectorReplayBuffer, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    Trainer,
)

Result = tuple[int, TrainingStats | None]
"""(gradient steps of the run, the last TrainingStats)"""

HIDDEN = (16, 16)
NUM_ENVS = 2
SEED = 7


# ---------------------------------------------------------------------------------------- hashing
def _feed(digest: Any, path: str, value: Any) -> None:
    """Hash ``value`` under ``path``, walking dicts (sorted keys) and sequences in order."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"{path}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, np.ndarray):
        digest.update(f"{path}:{value.dtype}:{value.shape}\n".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _feed(digest, f"{path}/{key}", value[key])
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _feed(digest, f"{path}[{i}]", item)
    else:
        digest.update(f"{path}={value!r}\n".encode())


def state_hash(algorithm: Algorithm[Any]) -> str:
    digest = hashlib.sha256()
    _feed(digest, "", algorithm.state_dict())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------- helpers
def _envs(env_id: str) -> Any:
    return make_vector_env(env_id, NUM_ENVS)


def _test_collector(policy: Any, env_id: str) -> Collector:
    return Collector(policy, _envs(env_id), seed=SEED + 1000)


def _dataset(env_id: str, num_env_steps: int = 400) -> BaseReplayBuffer:
    """Random transitions collected with a fixed seed (the same dataset on every run)."""
    buffer = VectorReplayBuffer(1000, NUM_ENVS, seed=SEED)
    space = _envs(env_id).single_action_space
    if env_id == "CartPole-v1":
        policy: Any = CategoricalPolicy(mlp(4, 2, HIDDEN), space, seed=0)
    else:
        policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN), space, seed=0)
    Collector(policy, _envs(env_id), buffer, seed=SEED).collect(n_step=num_env_steps, random=True)
    return buffer


@dataclass
class _Trace:
    lines: list[str] | None = None
    """when a list, every trainer records its post_loss / post_optim hook calls into it"""


TRACE = _Trace()


def _trace_hooks(trainer: Trainer[Any, Any], trace: list[str]) -> None:
    def post_loss(ctx: Any) -> None:
        trace.append(f"loss {ctx.counters.gradient_step} " + ",".join(
            f"{name}={float(value.detach())!r}" for name, value in ctx.data.items()))  # fmt: skip

    def post_optim(ctx: Any) -> None:
        trace.append(f"optim {ctx.counters.gradient_step} {ctx.data.name}")

    hooks = HookRegistry()
    trainer.add_callback(hooks, name="hooks")
    hooks.register("post_loss", post_loss)
    hooks.register("post_optim", post_optim)


def _drive(trainer: Trainer[Any, Any]) -> Result:
    """Run ``trainer`` step by step (what ``run()`` does), keeping the last TrainingStats."""
    last: TrainingStats | None = None
    if TRACE.lines is not None:
        _trace_hooks(trainer, TRACE.lines)
    trainer.reset()
    while not trainer.done:
        result = trainer.execute_training_step()
        if result.training_stat is not None:
            last = result.training_stat
    trainer.close()
    return trainer.info_stats().gradient_step, last


def _on_policy(algorithm: Any, env_id: str, **kw: Any) -> Result:
    policy = algorithm.policy
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, _envs(env_id), VectorReplayBuffer(2000, NUM_ENVS), seed=SEED),
        test_collector=_test_collector(policy, env_id),
        max_epochs=2,
        epoch_num_steps=64,
        collection_step_num_env_steps=kw.pop("collection_step_num_env_steps", 32),
        batch_size=kw.pop("batch_size", 16),
        update_step_num_repetitions=2,
        test_step_num_episodes=1,
        show_progress=False,
        verbose=False,
        **kw,
    )
    return _drive(OnPolicyTrainer(algorithm, params))


def _off_policy(algorithm: Any, env_id: str, *, prioritized: bool = False) -> Result:
    policy = algorithm.policy
    buffer: BaseReplayBuffer = (
        PrioritizedVectorReplayBuffer(1000, NUM_ENVS, seed=SEED)
        if prioritized
        else VectorReplayBuffer(1000, NUM_ENVS, seed=SEED)
    )
    params = OffPolicyTrainerParams(
        training_collector=Collector(policy, _envs(env_id), buffer, exploration_noise=True, seed=SEED),
        test_collector=_test_collector(policy, env_id),
        max_epochs=2,
        epoch_num_steps=100,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=16,
        test_step_num_episodes=1,
        show_progress=False,
        verbose=False,
    )
    return _drive(OffPolicyTrainer(algorithm, params))


def _offline(algorithm: Any, env_id: str) -> Result:
    params = OfflineTrainerParams(
        buffer=_dataset(env_id),
        test_collector=_test_collector(algorithm.policy, env_id),
        max_epochs=2,
        epoch_num_steps=20,
        batch_size=16,
        test_step_num_episodes=1,
        show_progress=False,
        verbose=False,
    )
    return _drive(OfflineTrainer(algorithm, params))


def _space(env_id: str) -> Any:
    return _envs(env_id).single_action_space


# ---------------------------------------------------------------------------------------- builders
def reinforce() -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN), _space("CartPole-v1"), seed=SEED)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(lr=1e-3), seed=SEED)
    return algorithm, _on_policy(algorithm, "CartPole-v1", collection_step_num_env_steps=None,
                                 collection_step_num_episodes=2, batch_size=None)  # fmt: skip


def _actor_critic(algo: str, space: str) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    env_id = "CartPole-v1" if space == "discrete" else "Pendulum-v1"
    normalizer: RunningObsNormalizer | None = None
    policy: CategoricalPolicy | GaussianPolicy
    if space == "discrete":
        policy = CategoricalPolicy(mlp(4, 2, HIDDEN), _space(env_id), seed=SEED)
        critic: nn.Module = mlp(4, 1, HIDDEN)
    else:
        normalizer = RunningObsNormalizer(3)
        policy = GaussianPolicy(
            nn.Sequential(normalizer, mlp(3, 1, HIDDEN)), _space(env_id), init_log_std=-0.5, seed=SEED
        )
        critic = nn.Sequential(normalizer, mlp(3, 1, HIDDEN))
    schedule = LinearSchedule(num_update_steps=10)
    algorithm: PPO | A2C
    if algo == "ppo":
        params = PPOParams(
            lr=1e-3, lr_schedule=schedule, clip_schedule=schedule, value_clip_range=1.0, ent_coef=0.01
        )
        algorithm = PPO(policy=policy, critic=critic, params=params, obs_normalizer=normalizer, seed=SEED)
    else:
        a2c = A2CParams(lr=1e-3, lr_schedule=schedule, ent_coef=0.01)
        algorithm = A2C(policy=policy, critic=critic, params=a2c, obs_normalizer=normalizer, seed=SEED)
    return algorithm, _on_policy(algorithm, env_id)


def _dqn(prioritized: bool = False, **kw: Any) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    net = dueling_mlp(4, 2, HIDDEN) if kw.pop("dueling", False) else mlp(4, 2, HIDDEN, nn.ReLU)
    policy = QValuePolicy(
        net, _space("CartPole-v1"), eps_schedule=EpsilonSchedule(num_env_steps=100), seed=SEED
    )
    algorithm = DQN(policy=policy, params=DQNParams(target_update_freq=3, **kw))
    return algorithm, _off_policy(algorithm, "CartPole-v1", prioritized=prioritized)


def _ddpg() -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = DeterministicActorPolicy(
        mlp(3, 1, HIDDEN, nn.ReLU), _space("Pendulum-v1"), noise_std=0.1, seed=SEED
    )
    algorithm = DDPG(policy=policy, critic=QEnsemble(3, 1, HIDDEN, num_critics=1), params=DDPGParams())
    return algorithm, _off_policy(algorithm, "Pendulum-v1")


def _td3(**kw: Any) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = DeterministicActorPolicy(
        mlp(3, 1, HIDDEN, nn.ReLU), _space("Pendulum-v1"), noise_std=0.1, seed=SEED
    )
    algorithm = TD3(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=TD3Params(**kw), seed=SEED)
    return algorithm, _off_policy(algorithm, "Pendulum-v1")


def _sac(prioritized: bool = False, **kw: Any) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN, nn.ReLU), _space("Pendulum-v1"), seed=SEED)
    algorithm = SAC(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=SACParams(**kw))
    return algorithm, _off_policy(algorithm, "Pendulum-v1", prioritized=prioritized)


def _discrete_sac(**kw: Any) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN, nn.ReLU), _space("CartPole-v1"), seed=SEED)
    algorithm = DiscreteSAC(
        policy=policy, critic=DiscreteQEnsemble(4, 2, HIDDEN), params=DiscreteSACParams(**kw)
    )
    return algorithm, _off_policy(algorithm, "CartPole-v1")


def _cql(**kw: Any) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN, nn.ReLU), _space("Pendulum-v1"), seed=SEED)
    params = CQLParams(num_sampled_actions=3, **kw)
    algorithm = CQL(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=params)
    return algorithm, _offline(algorithm, "Pendulum-v1")


class _NormalisedCritic(nn.Module):
    def __init__(self, normalizer: RunningObsNormalizer):
        super().__init__()
        self.normalizer = normalizer
        self.q = QEnsemble(3, 1, HIDDEN)

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.q(self.normalizer(obs), act)
        return out


def _td3_bc(*, raw_obs: bool = False) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    if raw_obs:  # no obs_normalizer: observations as they are (TD3BCParams(normalize_obs=False) before)
        actor, critic, normalizer = mlp(3, 1, HIDDEN, nn.ReLU), QEnsemble(3, 1, HIDDEN), None
    else:
        normalizer = RunningObsNormalizer(3)
        actor, critic = nn.Sequential(normalizer, mlp(3, 1, HIDDEN, nn.ReLU)), _NormalisedCritic(normalizer)
    policy = DeterministicActorPolicy(actor, _space("Pendulum-v1"), seed=SEED)
    algorithm = TD3BC(policy=policy, critic=critic, obs_normalizer=normalizer, params=TD3BCParams(), seed=SEED)
    return algorithm, _offline(algorithm, "Pendulum-v1")


def _discrete_cql(**kw: Any) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    policy = QValuePolicy(
        mlp(4, 2, HIDDEN, nn.ReLU), _space("CartPole-v1"), eps_schedule=EpsilonSchedule(), seed=SEED
    )
    algorithm = DiscreteCQL(policy=policy, params=DiscreteCQLParams(target_update_freq=3, **kw))
    return algorithm, _offline(algorithm, "CartPole-v1")


def _bc(space: str) -> tuple[Algorithm[Any], Result]:
    torch.manual_seed(SEED)
    env_id = "CartPole-v1" if space == "discrete" else "Pendulum-v1"
    policy: CategoricalPolicy | DeterministicActorPolicy
    if space == "discrete":
        policy = CategoricalPolicy(mlp(4, 2, HIDDEN), _space(env_id), seed=SEED)
    else:
        policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN), _space(env_id), seed=SEED)
    algorithm = BehaviorCloning(policy=policy, params=BCParams(lr=1e-3))
    return algorithm, _offline(algorithm, env_id)


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[], tuple[Algorithm[Any], Result]]


CASES = [
    Case("Reinforce", reinforce),
    Case("A2C-discrete", lambda: _actor_critic("a2c", "discrete")),
    Case("A2C-continuous", lambda: _actor_critic("a2c", "continuous")),
    Case("PPO-discrete", lambda: _actor_critic("ppo", "discrete")),
    Case("PPO-continuous", lambda: _actor_critic("ppo", "continuous")),
    Case("DQN", _dqn),
    Case("DQN-nstep-dueling-prioritized", lambda: _dqn(True, n_step=3, dueling=True, max_grad_norm=1.0)),
    Case("DQN-single-huberless", lambda: _dqn(is_double=False, huber_loss=False)),
    Case("DDPG", _ddpg),
    Case("TD3", _td3),
    Case("TD3-nstep", lambda: _td3(n_step=2)),
    Case("SAC", _sac),
    Case("SAC-fixed-alpha-prioritized", lambda: _sac(True, auto_alpha=False, alpha=0.2)),
    Case("SAC-nstep", lambda: _sac(n_step=3)),
    Case("DiscreteSAC", _discrete_sac),
    Case("DiscreteSAC-nstep-fixed-alpha", lambda: _discrete_sac(n_step=3, auto_alpha=False, alpha=0.1)),
    Case("CQL", _cql),
    Case("CQL-lagrange-fixed-alpha", lambda: _cql(with_lagrange=True, auto_alpha=False)),
    Case("TD3BC", _td3_bc),
    Case("TD3BC-raw-obs", lambda: _td3_bc(raw_obs=True)),
    Case("DiscreteCQL", _discrete_cql),
    Case("DiscreteCQL-nstep-single", lambda: _discrete_cql(n_step=3, is_double=False, huber_loss=False)),
    Case("BC-discrete", lambda: _bc("discrete")),
    Case("BC-continuous", lambda: _bc("continuous")),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=None, help="case names to run (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        TRACE.lines = None
        algorithm, (gradient_steps, last) = case.run()
        print(
            f"{case.name} {state_hash(algorithm)} gradient_steps={gradient_steps} last={last!r}", flush=True
        )
        trace: list[str] = []
        TRACE.lines = trace
        algorithm, _ = case.run()  # again, with hooks that record the losses and optimizer steps
        kinds = sorted({" ".join(line.split(" ")[0:1] + line.split(" ")[2:]).split("=")[0] for line in trace})
        trace_hash = hashlib.sha256("\n".join(trace).encode()).hexdigest()
        print(f"  with hooks: {state_hash(algorithm)} trace={trace_hash} calls={len(trace)} kinds={kinds}")


if __name__ == "__main__":
    main()
