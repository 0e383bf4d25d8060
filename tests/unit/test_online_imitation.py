"""OffPolicyImitation (online imitation from a buffer an expert's collector fills) and the trainer's
run-time check that an algorithm belongs to the trainer's family."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    A2C,
    DQN,
    PPO,
    A2CParams,
    BCParams,
    BehaviorCloning,
    CategoricalPolicy,
    DeterministicActorPolicy,
    DQNParams,
    NonFiniteLossError,
    OffPolicyImitation,
    OffPolicyImitationParams,
    OffPolicyImitationTrainingStats,
    PPOParams,
    QValuePolicy,
    TanhGaussianPolicy,
    mlp,
)
from tshtrain.data import Collector, ReplayBuffer, VectorReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import (
    OfflineTrainer,
    OfflineTrainerParams,
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
)

HIDDEN = (32, 32)


def _cartpole_space() -> Any:
    return make_vector_env("CartPole-v1", 1).single_action_space


def _pendulum_space() -> Any:
    return make_vector_env("Pendulum-v1", 1).single_action_space


def _discrete(seed: int, lr: float = 1e-2) -> OffPolicyImitation:
    torch.manual_seed(seed)
    policy = CategoricalPolicy(mlp(4, 2, HIDDEN, nn.ReLU), _cartpole_space(), seed=seed)
    return OffPolicyImitation(policy=policy, params=OffPolicyImitationParams(lr=lr))


def _continuous(seed: int, lr: float = 1e-2) -> OffPolicyImitation:
    torch.manual_seed(seed)
    policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN, nn.ReLU), _pendulum_space(), seed=seed)
    return OffPolicyImitation(policy=policy, params=OffPolicyImitationParams(lr=lr))


class _Expert(nn.Module):
    """A fixed 'expert' for CartPole: push towards the pole's lean (logits, deterministic at test)."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        lean = obs[:, 2:3] + 0.5 * obs[:, 3:4]
        return torch.cat([-50.0 * lean, 50.0 * lean], dim=1)


class _PendulumExpert(nn.Module):
    """A fixed continuous 'expert': act = tanh(2 * (-cos th - 0.5 * th_dot))."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return 2.0 * (-obs[:, 0:1] - 0.5 * obs[:, 2:3])


def _expert_collector(env_id: str, seed: int, size: int = 2000) -> Collector:
    if env_id == "CartPole-v1":
        expert: Any = CategoricalPolicy(_Expert(), _cartpole_space(), seed=seed)
    else:
        expert = DeterministicActorPolicy(_PendulumExpert(), _pendulum_space(), seed=seed)
    env = make_vector_env(env_id, 2)
    return Collector(expert, env, VectorReplayBuffer(size, 2, seed=seed), exploration_noise=True, seed=seed)


def _run(algorithm: OffPolicyImitation, env_id: str, *, max_epochs: int = 1, seed: int = 0) -> Any:
    collector = _expert_collector(env_id, seed)
    params = OffPolicyTrainerParams(
        training_collector=collector,
        test_collector=Collector(algorithm.policy, make_vector_env(env_id, 2), seed=seed + 1),
        max_epochs=max_epochs,
        epoch_num_steps=200,
        collection_step_num_env_steps=10,
        batch_size=64,
        test_step_num_episodes=2,
        show_progress=False,
        verbose=False,
    )
    info = OffPolicyTrainer(algorithm, params).run()
    return info, collector


def _params_of(algorithm: OffPolicyImitation) -> list[torch.Tensor]:
    return [p.detach().clone() for p in algorithm.policy.parameters()]


@pytest.mark.parametrize(("env_id", "build"), [("CartPole-v1", _discrete), ("Pendulum-v1", _continuous)])
def test_a_tiny_run_on_the_off_policy_trainer_imitates_the_collectors_expert(env_id: str, build: Any) -> None:
    algorithm = build(0)
    info, collector = _run(algorithm, env_id, max_epochs=2)
    assert info.train_step == 400 and info.update_step == 40 and info.gradient_step == 400
    # the imitator now acts like the expert on the expert's states
    batch = collector.buffer.sample_all()
    obs = torch.as_tensor(batch.obs)
    with torch.inference_mode():
        act = algorithm.policy.actions(obs, deterministic=True)
        expert = collector.policy
        assert isinstance(expert, CategoricalPolicy | DeterministicActorPolicy)
        expert_act = expert.actions(obs, deterministic=True)
    if env_id == "CartPole-v1":
        assert (act == expert_act).float().mean().item() > 0.9
    else:
        assert (act - expert_act).abs().mean().item() < 0.1


class _Recorder:
    """Update hooks that keep the sampled batch (to recompute the loss by hand)."""

    def __init__(self) -> None:
        self.batch: Any = None

    def on_sampled_batch(self, batch: Any, /) -> Any:
        self.batch = batch
        return batch

    def on_loss(self, losses: Any, /) -> None:
        del losses

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        del name, optimizer


@pytest.mark.parametrize(("env_id", "build"), [("CartPole-v1", _discrete), ("Pendulum-v1", _continuous)])
def test_the_loss_is_cross_entropy_or_squared_error_to_the_stored_actions(env_id: str, build: Any) -> None:
    collector = _expert_collector(env_id, 0)
    collector.collect(n_step=40)
    assert collector.buffer is not None
    algorithm = build(0)
    before = [p.detach().clone() for p in algorithm.policy.actor.parameters()]
    recorder = _Recorder()
    stats = algorithm.update(collector.buffer, 32, hooks=recorder)
    assert isinstance(stats, OffPolicyImitationTrainingStats)
    obs, act = torch.as_tensor(recorder.batch.obs), torch.as_tensor(recorder.batch.act)
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(
            torch.nn.utils.parameters_to_vector(before), algorithm.policy.actor.parameters()
        )
        out = algorithm.policy.actor(obs)
        if env_id == "CartPole-v1":
            logp = torch.log_softmax(out, dim=-1)
            expected = -logp.gather(1, act.long().unsqueeze(1)).mean()
        else:
            expected = ((torch.tanh(out) - act) ** 2).mean()
    assert stats.loss == pytest.approx(float(expected), rel=1e-5)


@pytest.mark.parametrize("build", [_discrete, _continuous])
def test_state_dict_round_trip_and_same_seed_same_run(build: Any) -> None:
    env_id = "CartPole-v1" if build is _discrete else "Pendulum-v1"
    collector = _expert_collector(env_id, 1)
    collector.collect(n_step=100)
    buffer = collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    trained = build(0)
    for _ in range(5):
        trained.update(buffer, 16)
    blob = io.BytesIO()
    torch.save(trained.state_dict(), blob)
    blob.seek(0)
    fresh = build(7)
    fresh.load_state_dict(torch.load(blob))
    for a, b in zip(_params_of(fresh), _params_of(trained), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    state = buffer.sampler_state()
    stats_a = [trained.update(buffer, 16) for _ in range(3)]
    buffer.load_sampler_state(state)
    stats_b = [fresh.update(buffer, 16) for _ in range(3)]
    assert stats_a == stats_b

    runs = []
    for _ in range(2):
        buffer.load_sampler_state(state)
        algorithm = build(3)
        runs.append(([algorithm.update(buffer, 16) for _ in range(4)], _params_of(algorithm)))
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_nan_loss_raises_naming_the_algorithm() -> None:
    collector = _expert_collector("Pendulum-v1", 0)
    collector.collect(n_step=20)
    assert collector.buffer is not None
    collector.buffer.field_arrays()["act"][:] = np.nan
    with pytest.raises(NonFiniteLossError, match=r"^OffPolicyImitation: the imitation loss is nan"):
        _continuous(0).update(collector.buffer, 8)


def test_other_policies_and_bad_params_are_refused() -> None:
    q_policy = QValuePolicy(mlp(4, 2, HIDDEN), _cartpole_space())
    with pytest.raises(ConfigurationError, match="QValuePolicy; imitation trains a CategoricalPolicy"):
        OffPolicyImitation(policy=q_policy)  # type: ignore[arg-type]  # what the check is for
    gaussian = TanhGaussianPolicy(mlp(3, 2, HIDDEN), _pendulum_space())
    with pytest.raises(ConfigurationError, match="TanhGaussianPolicy"):
        OffPolicyImitation(policy=gaussian)  # type: ignore[arg-type]  # what the check is for
    with pytest.raises(ValueError, match="lr"):
        OffPolicyImitationParams(lr=0.0)


# ---------------------------------------------------------------------- trainer / algorithm family check
def _off_policy_params(policy: Any) -> OffPolicyTrainerParams:
    env = make_vector_env("CartPole-v1", 1)
    return OffPolicyTrainerParams(
        training_collector=Collector(policy, env, ReplayBuffer(100)),
        max_epochs=1,
        epoch_num_steps=10,
        collection_step_num_env_steps=10,
        show_progress=False,
        verbose=False,
    )


def _bc() -> BehaviorCloning:
    return BehaviorCloning(policy=CategoricalPolicy(mlp(4, 2, HIDDEN), _cartpole_space()), params=BCParams())


def test_off_policy_trainer_refuses_behavior_cloning_naming_what_to_use() -> None:
    bc = _bc()
    with pytest.raises(ConfigurationError) as caught:
        OffPolicyTrainer(bc, _off_policy_params(bc.policy))  # type: ignore[arg-type]  # mypy rejects it too
    message = str(caught.value)
    assert message.startswith("OffPolicyTrainer cannot train BehaviorCloning: it is an offline algorithm")
    assert "Use OfflineTrainer with BehaviorCloning" in message
    assert "OffPolicyImitation" in message


def test_every_trainer_algorithm_mismatch_is_refused_at_construction() -> None:
    space = _cartpole_space()
    dqn = DQN(policy=QValuePolicy(mlp(4, 2, HIDDEN), space), params=DQNParams())
    ppo = PPO(
        policy=CategoricalPolicy(mlp(4, 2, HIDDEN), space), critic=mlp(4, 1, HIDDEN), params=PPOParams()
    )
    a2c = A2C(
        policy=CategoricalPolicy(mlp(4, 2, HIDDEN), space), critic=mlp(4, 1, HIDDEN), params=A2CParams()
    )
    env = make_vector_env("CartPole-v1", 1)
    on_params = OnPolicyTrainerParams(
        training_collector=Collector(dqn.policy, env, ReplayBuffer(100)),
        max_epochs=1,
        epoch_num_steps=10,
        collection_step_num_env_steps=10,
        show_progress=False,
        verbose=False,
    )
    dataset = ReplayBuffer(100)
    Collector(dqn.policy, make_vector_env("CartPole-v1", 1), dataset).collect(n_step=10, random=True)
    offline_params = OfflineTrainerParams(
        buffer=dataset, max_epochs=1, epoch_num_steps=1, show_progress=False, verbose=False
    )
    cases: list[tuple[Any, Any, Any, str]] = [
        (OffPolicyTrainer, ppo, _off_policy_params(ppo.policy), "Use OnPolicyTrainer with PPO"),
        (OffPolicyTrainer, a2c, _off_policy_params(a2c.policy), "Use OnPolicyTrainer with A2C"),
        (OnPolicyTrainer, dqn, on_params, "Use OffPolicyTrainer with DQN"),
        (OnPolicyTrainer, _bc(), on_params, "Use OfflineTrainer with BehaviorCloning"),
        (OfflineTrainer, dqn, offline_params, "Use OffPolicyTrainer with DQN"),
        (OfflineTrainer, ppo, offline_params, "Use OnPolicyTrainer with PPO"),
    ]
    for trainer, algorithm, params, hint in cases:
        with pytest.raises(ConfigurationError, match=f"^{trainer.__name__} cannot train") as caught:
            trainer(algorithm, params)
        assert hint in str(caught.value)
    with pytest.raises(ConfigurationError, match="algorithm is a str, not a OffPolicyAlgorithm"):
        OffPolicyTrainer("dqn", _off_policy_params(dqn.policy))  # type: ignore[arg-type]  # the check's case
