"""Every algorithm built small, exercised on a device, and an inventory of where its state lives.

Shared by the CPU tier (``tests/unit/test_devices.py``: the runtime check under
``torch.set_default_device("meta")``) and the CUDA tier (``tests/cuda/``), which run the same checks with
``device="cuda"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

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
    DQNParams,
    EpsilonSchedule,
    GaussianPolicy,
    PPOParams,
    QEnsemble,
    QValuePolicy,
    Reinforce,
    RunningObsNormalizer,
    SACParams,
    TanhGaussianPolicy,
    TD3BCParams,
    TD3Params,
    mlp,
)
from tshtrain.algorithm.base import Algorithm, OnPolicyAlgorithm
from tshtrain.data import Collector, RolloutBatch, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env

HIDDEN = (16, 16)
CARTPOLE, PENDULUM = "CartPole-v1", "Pendulum-v1"


def _space(env_id: str) -> Any:
    return make_vector_env(env_id, 1).single_action_space


def _ppo(seed: int) -> PPO:
    normalizer = RunningObsNormalizer(3)
    actor = nn.Sequential(normalizer, mlp(3, 1, HIDDEN))
    policy = GaussianPolicy(actor, _space(PENDULUM), init_log_std=-0.5, seed=seed)
    critic = nn.Sequential(normalizer, mlp(3, 1, HIDDEN))
    return PPO(policy=policy, critic=critic, params=PPOParams(lr=1e-3), obs_normalizer=normalizer, seed=seed)


def _a2c(seed: int) -> A2C:
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN), _space(CARTPOLE), seed=seed)
    return A2C(policy=policy, critic=mlp(4, 1, HIDDEN), params=A2CParams(lr=1e-3), seed=seed)


def _reinforce(seed: int) -> Reinforce:
    return Reinforce(policy=CategoricalPolicy(mlp(4, 2, HIDDEN), _space(CARTPOLE), seed=seed), seed=seed)


def _dqn(seed: int) -> DQN:
    normalizer = RunningObsNormalizer(4)
    net = nn.Sequential(normalizer, mlp(4, 2, HIDDEN))
    policy = QValuePolicy(net, _space(CARTPOLE), eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed)
    params = DQNParams(target_update_freq=2, n_step=2)
    return DQN(policy=policy, params=params, obs_normalizer=normalizer)


def _ddpg(seed: int) -> DDPG:
    policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN), _space(PENDULUM), noise_std=0.1, seed=seed)
    return DDPG(policy=policy, critic=QEnsemble(3, 1, HIDDEN, num_critics=1), params=DDPGParams())


def _td3(seed: int) -> TD3:
    policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN), _space(PENDULUM), noise_std=0.1, seed=seed)
    return TD3(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=TD3Params(policy_delay=2), seed=seed)


def _sac(seed: int) -> SAC:
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN), _space(PENDULUM), seed=seed)
    return SAC(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=SACParams(auto_alpha=False))


def _discrete_sac(seed: int) -> DiscreteSAC:
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN), _space(CARTPOLE), seed=seed)
    return DiscreteSAC(policy=policy, critic=DiscreteQEnsemble(4, 2, HIDDEN))


def _cql(seed: int, *, with_lagrange: bool = False) -> CQL:
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN), _space(PENDULUM), seed=seed)
    params = CQLParams(num_sampled_actions=3, with_lagrange=with_lagrange)
    return CQL(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=params)


def _cql_lagrange(seed: int) -> CQL:
    return _cql(seed, with_lagrange=True)


def _td3_bc(seed: int) -> TD3BC:
    policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN), _space(PENDULUM), seed=seed)
    return TD3BC(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=TD3BCParams(policy_delay=2), seed=seed)


def _discrete_cql(seed: int) -> DiscreteCQL:
    policy = QValuePolicy(mlp(4, 2, HIDDEN), _space(CARTPOLE), seed=seed)
    return DiscreteCQL(policy=policy, params=DiscreteCQLParams(target_update_freq=2))


def _bc(seed: int) -> BehaviorCloning:
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN), _space(CARTPOLE), seed=seed)
    return BehaviorCloning(policy=policy, params=BCParams())


@dataclass(frozen=True)
class AlgorithmCase:
    """How to build one algorithm small, on which env."""

    name: str
    env_id: str
    make: Callable[[int], Algorithm[Any]]

    def build(self, seed: int = 0, device: str = "cpu") -> Algorithm[Any]:
        """Built on the CPU with ``torch.manual_seed(seed)``, then moved to ``device``."""
        torch.manual_seed(seed)
        return self.make(seed).to(device)


CASES = [
    AlgorithmCase("PPO", PENDULUM, _ppo),
    AlgorithmCase("A2C", CARTPOLE, _a2c),
    AlgorithmCase("Reinforce", CARTPOLE, _reinforce),
    AlgorithmCase("DQN", CARTPOLE, _dqn),
    AlgorithmCase("DDPG", PENDULUM, _ddpg),
    AlgorithmCase("TD3", PENDULUM, _td3),
    AlgorithmCase("SAC", PENDULUM, _sac),
    AlgorithmCase("DiscreteSAC", CARTPOLE, _discrete_sac),
    AlgorithmCase("CQL", PENDULUM, _cql),
    AlgorithmCase("CQL-lagrange", PENDULUM, _cql_lagrange),
    AlgorithmCase("TD3BC", PENDULUM, _td3_bc),
    AlgorithmCase("DiscreteCQL", CARTPOLE, _discrete_cql),
    AlgorithmCase("BehaviorCloning", CARTPOLE, _bc),
]
IDS = [case.name for case in CASES]


@dataclass(frozen=True)
class Data:
    """What an algorithm's update takes, collected on the CPU beforehand: a rollout (on-policy) or a
    buffer (off-policy and offline), and a batch of observations for the policy."""

    rollout: RolloutBatch | None
    buffer: BaseReplayBuffer | None
    obs: np.ndarray


def collect_data(case: AlgorithmCase, algorithm: Algorithm[Any], seed: int = 1) -> Data:
    """16 env steps of 2 envs with the algorithm's policy (a copy of the rollout), or 120 random ones
    into a replay buffer."""
    env = make_vector_env(case.env_id, 2)
    buffer = VectorReplayBuffer(400, 2, seed=seed)
    collector = Collector(algorithm.policy, env, buffer, seed=seed)
    if isinstance(algorithm, OnPolicyAlgorithm):
        collector.collect(n_step=16)
        rollout = buffer.rollout()
        copied = {f.name: np.array(getattr(rollout, f.name), copy=True) for f in dataclasses.fields(rollout)}
        data = Data(rollout=RolloutBatch(**copied), buffer=None, obs=np.asarray(copied["obs"][0]))
    else:
        collector.collect(n_step=120, random=True)
        obs = buffer.sample(5).obs
        assert isinstance(obs, np.ndarray)
        data = Data(rollout=None, buffer=buffer, obs=obs)
    env.close()
    return data


def exercise(algorithm: Algorithm[Any], data: Data, num_updates: int = 3) -> list[Any]:
    """Stochastic and deterministic actions, then ``num_updates`` updates; their stats."""
    policy = algorithm.policy
    for deterministic in (False, True):
        act = policy.compute_actions(data.obs, deterministic=deterministic)
        assert len(act) == len(data.obs)
    stats: list[Any] = []
    for _ in range(num_updates):
        if data.rollout is not None:
            assert isinstance(algorithm, OnPolicyAlgorithm)
            stats.append(algorithm.update(data.rollout, batch_size=8, num_repetitions=2))
        else:
            assert data.buffer is not None
            stats.append(algorithm.update(data.buffer, 16))  # type: ignore[attr-defined]  # off-policy or offline
    return stats


def _is_ours(value: object) -> bool:
    module = getattr(type(value), "__module__", "") or ""
    return module.startswith(("tshtrain", "torch.nn", "torch.optim")) and not isinstance(value, type)


def state_devices(algorithm: Algorithm[Any]) -> Iterator[tuple[str, torch.device, object]]:
    """``(path, device, owner)`` of every tensor and generator reachable from the algorithm through
    attributes, dicts, lists and tuples of tshtrain and torch.nn / torch.optim objects (parameters,
    buffers, optimizer state, cached tensors, generators). Independent of ``Algorithm.to``'s own walk."""
    seen: set[int] = set()
    stack: list[tuple[str, object, object]] = [("algorithm", algorithm, None)]
    while stack:
        path, value, owner = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, torch.Tensor | torch.Generator):
            yield path, value.device, owner
        elif isinstance(value, dict):
            stack.extend((f"{path}[{i}]", v, owner) for i, v in enumerate(value.values()))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", v, owner) for i, v in enumerate(value))
        elif _is_ours(value) and hasattr(value, "__dict__"):
            stack.extend((f"{path}.{k}", v, value) for k, v in vars(value).items())


def misplaced_state(algorithm: Algorithm[Any], device: torch.device) -> list[str]:
    """Paths of the tensors and generators that are not on ``device``; an unfused, non-capturable
    optimizer's ``step`` counter is allowed on the CPU (torch keeps it there)."""
    wrong = []
    for path, where, owner in state_devices(algorithm):
        if where == device:
            continue
        if isinstance(owner, torch.optim.Optimizer) and where.type == "cpu" and _is_host_step(owner, path):
            continue
        wrong.append(f"{path} on {where}")
    return wrong


def _is_host_step(optimizer: torch.optim.Optimizer, path: str) -> bool:
    unfused = not any(group.get("fused") or group.get("capturable") for group in optimizer.param_groups)
    return unfused and ".state[" in path


def probe_obs(case: AlgorithmCase) -> torch.Tensor:
    """Five fixed observations of the case's env."""
    dim = 4 if case.env_id == CARTPOLE else 3
    return torch.linspace(-1.0, 1.0, 5 * dim).reshape(5, dim)
