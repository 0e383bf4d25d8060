"""Contract of every offline algorithm (CQL, TD3+BC, discrete CQL): a tiny epoch on OfflineTrainer,
state_dict round trips, same seed -> same run, NaN losses raise, update hooks, pinned validation errors,
and the penalties against hand-computed values."""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    CQL,
    IQL,
    TD3BC,
    CQLParams,
    DeterministicActorPolicy,
    DiscreteCQL,
    DiscreteCQLParams,
    EpsilonSchedule,
    IQLParams,
    NonFiniteLossError,
    OfflineAlgorithm,
    QEnsemble,
    QValuePolicy,
    RunningObsNormalizer,
    TanhGaussianPolicy,
    TD3BCParams,
    conservative_penalty,
    discrete_conservative_penalty,
    mlp,
)
from tshtrain.algorithm.algos.td3_bc import td3_bc_actor_loss
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OfflineTrainer, OfflineTrainerParams

HIDDEN = (16, 16)


def _space(env_id: str) -> Any:
    return make_vector_env(env_id, 1).single_action_space


def _cql(seed: int, **kw: Any) -> CQL:
    torch.manual_seed(seed)
    policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN, nn.ReLU), _space("Pendulum-v1"), seed=seed)
    return CQL(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=CQLParams(num_sampled_actions=3, **kw))


class _NormalisedCritic(nn.Module):
    def __init__(self, normalizer: RunningObsNormalizer):
        super().__init__()
        self.normalizer = normalizer
        self.q = QEnsemble(3, 1, HIDDEN)

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.q(self.normalizer(obs), act)
        return out


def _td3_bc(seed: int, raw_obs: bool = False, **kw: Any) -> TD3BC:
    torch.manual_seed(seed)
    if raw_obs:  # no obs_normalizer: the observations as they are
        policy = DeterministicActorPolicy(mlp(3, 1, HIDDEN, nn.ReLU), _space("Pendulum-v1"), seed=seed)
        return TD3BC(policy=policy, critic=QEnsemble(3, 1, HIDDEN), params=TD3BCParams(**kw), seed=seed)
    normalizer = RunningObsNormalizer(3)
    actor = nn.Sequential(normalizer, mlp(3, 1, HIDDEN, nn.ReLU))
    policy = DeterministicActorPolicy(actor, _space("Pendulum-v1"), seed=seed)
    return TD3BC(
        policy=policy,
        critic=_NormalisedCritic(normalizer),
        obs_normalizer=normalizer,
        params=TD3BCParams(**kw),
        seed=seed,
    )


def _discrete_cql(seed: int, **kw: Any) -> DiscreteCQL:
    torch.manual_seed(seed)
    policy = QValuePolicy(
        mlp(4, 2, HIDDEN, nn.ReLU), _space("CartPole-v1"), eps_schedule=EpsilonSchedule(), seed=seed
    )
    return DiscreteCQL(policy=policy, params=DiscreteCQLParams(target_update_freq=3, **kw))


def _iql(seed: int, normalised: bool = False, **kw: Any) -> IQL:
    torch.manual_seed(seed)
    if not normalised:
        policy = TanhGaussianPolicy(mlp(3, 2, HIDDEN, nn.ReLU), _space("Pendulum-v1"), seed=seed)
        value = mlp(3, 1, HIDDEN, nn.ReLU)
        return IQL(policy=policy, critic=QEnsemble(3, 1, HIDDEN), value=value, params=IQLParams(**kw))
    normalizer = RunningObsNormalizer(3)
    actor = nn.Sequential(normalizer, mlp(3, 2, HIDDEN, nn.ReLU))
    policy = TanhGaussianPolicy(actor, _space("Pendulum-v1"), seed=seed)
    return IQL(
        policy=policy,
        critic=_NormalisedCritic(normalizer),
        value=nn.Sequential(normalizer, mlp(3, 1, HIDDEN, nn.ReLU)),
        obs_normalizer=normalizer,
        params=IQLParams(**kw),
    )


@dataclass(frozen=True)
class Spec:
    name: str
    env_id: str
    make: Callable[..., OfflineAlgorithm[Any]]
    kwargs: tuple[tuple[str, Any], ...] = ()
    loss_name: str = "critic loss"

    def build(self, seed: int) -> OfflineAlgorithm[Any]:
        return self.make(seed, **dict(self.kwargs))


SPECS = [
    Spec("CQL", "Pendulum-v1", _cql),
    Spec("CQL-lagrange-fixed-alpha", "Pendulum-v1", _cql, (("with_lagrange", True), ("auto_alpha", False))),
    Spec("TD3BC", "Pendulum-v1", _td3_bc),
    Spec("TD3BC-raw-obs", "Pendulum-v1", _td3_bc, (("raw_obs", True),)),
    Spec("DiscreteCQL", "CartPole-v1", _discrete_cql, loss_name="loss"),
    Spec("DiscreteCQL-nstep", "CartPole-v1", _discrete_cql, (("n_step", 3), ("is_double", False)), "loss"),
    Spec("IQL", "Pendulum-v1", _iql),
    Spec("IQL-normalised-expectile-0.9", "Pendulum-v1", _iql, (("normalised", True), ("expectile", 0.9))),
]
IDS = [s.name for s in SPECS]


def _buffer(env_id: str, seed: int, num_env_steps: int = 120) -> BaseReplayBuffer:
    """A dataset of random transitions; the same seed gives the same contents and the same samples."""
    buffer = VectorReplayBuffer(400, 2, seed=seed)
    env = make_vector_env(env_id, 2)
    policy = (_discrete_cql if env_id == "CartPole-v1" else _cql)(0).policy  # random=True only maps actions
    Collector(policy, env, buffer, seed=seed).collect(n_step=num_env_steps, random=True)
    env.close()
    return buffer


def _obs(env_id: str) -> torch.Tensor:
    dim = 4 if env_id == "CartPole-v1" else 3
    return torch.linspace(-1.0, 1.0, 5 * dim).reshape(5, dim)


def _params_of(algorithm: OfflineAlgorithm[Any]) -> list[torch.Tensor]:
    tensors: list[torch.Tensor] = []
    for comp in algorithm.components().values():
        state = comp.state_dict()
        if isinstance(comp, nn.Module) or "state" not in state:
            tensors.extend(v.detach().clone() for v in state.values() if isinstance(v, torch.Tensor))
    return tensors


def _assert_same_tensors(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def _updates(algorithm: OfflineAlgorithm[Any], buffer: BaseReplayBuffer, n: int) -> list[Any]:
    return [algorithm.update(buffer, 16) for _ in range(n)]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_one_tiny_epoch_on_the_offline_trainer(spec: Spec) -> None:
    algorithm = spec.build(0)
    params = OfflineTrainerParams(
        buffer=_buffer(spec.env_id, 0),
        test_collector=Collector(algorithm.policy, make_vector_env(spec.env_id, 2), seed=1),
        max_epochs=1,
        epoch_num_steps=6,
        batch_size=8,
        test_step_num_episodes=2,
        show_progress=False,
        verbose=False,
    )
    info = OfflineTrainer(algorithm, params).run()
    assert info.gradient_step == 6 and info.test_episode == 4


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_state_dict_round_trip_gives_the_same_actions_and_the_same_next_update(spec: Spec) -> None:
    trained = spec.build(0)
    buffer = _buffer(spec.env_id, 1)
    trained.process_buffer(buffer)
    _updates(trained, buffer, 5)
    blob = io.BytesIO()
    torch.save(trained.state_dict(), blob)
    blob.seek(0)
    fresh = spec.build(99)  # other initial weights, reloaded
    fresh.load_state_dict(torch.load(blob))  # weights_only=True: plain tensors and numbers
    obs = _obs(spec.env_id)
    with torch.inference_mode():
        torch.testing.assert_close(
            fresh.policy.actions(obs, deterministic=True), trained.policy.actions(obs, deterministic=True)
        )
    _assert_same_tensors(_params_of(fresh), _params_of(trained))
    stats_a = _updates(trained, _buffer(spec.env_id, 2), 3)
    stats_b = _updates(fresh, _buffer(spec.env_id, 2), 3)
    assert stats_a == stats_b
    _assert_same_tensors(_params_of(fresh), _params_of(trained))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_same_seed_gives_the_same_run(spec: Spec) -> None:
    runs = []
    for _ in range(2):
        algorithm = spec.build(3)
        buffer = _buffer(spec.env_id, 4)
        algorithm.process_buffer(buffer)
        stats = _updates(algorithm, buffer, 6)
        runs.append((stats, _params_of(algorithm)))
    assert runs[0][0] == runs[1][0]
    _assert_same_tensors(runs[0][1], runs[1][1])


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_a_nan_loss_raises_naming_the_algorithm_and_the_loss(spec: Spec) -> None:
    algorithm = spec.build(0)
    buffer = _buffer(spec.env_id, 0)
    buffer.field_arrays()["rew"][:] = np.nan
    algorithm_name = spec.name.split("-")[0]
    with pytest.raises(NonFiniteLossError, match=f"^{algorithm_name}: the {spec.loss_name} is nan"):
        algorithm.update(buffer, 8)


class _RecordingHooks:
    """Update hooks that record what the algorithm hands them."""

    def __init__(self) -> None:
        self.batches = 0
        self.losses: list[str] = []
        self.optimizer_steps: list[str] = []
        self.components: dict[str, Any] = {}

    def on_sampled_batch(self, batch: Any, /) -> Any:
        self.batches += 1
        return dataclasses.replace(batch, rew=np.zeros_like(batch.rew))

    def on_loss(self, losses: Any, /) -> None:
        self.losses.extend(losses)

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        assert optimizer is self.components[name]
        self.optimizer_steps.append(name)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_update_hooks_see_every_sample_and_every_loss(spec: Spec) -> None:
    algorithm = spec.build(0)
    hooks = _RecordingHooks()
    hooks.components = algorithm.components()
    for _ in range(2):
        algorithm.update(_buffer(spec.env_id, 0), 16, hooks=hooks)
    assert hooks.optimizer_steps  # on_optimizer_step checked each name against components()
    assert hooks.batches == 2
    assert spec.loss_name in hooks.losses


def test_td3_bc_process_buffer_standardises_with_the_dataset_statistics() -> None:
    algorithm = _td3_bc(0)
    buffer = _buffer("Pendulum-v1", 0)
    algorithm.process_buffer(buffer)
    obs = torch.as_tensor(buffer.sample_all().obs)
    normalizer = algorithm.obs_normalization.normalizer
    assert normalizer is not None
    normalised = normalizer(obs)
    torch.testing.assert_close(normalised.mean(0), torch.zeros(3), atol=1e-4, rtol=0)
    torch.testing.assert_close(normalised.std(0, unbiased=False), torch.ones(3), atol=1e-4, rtol=0)
    # the target actor holds the same statistics
    target_norm = algorithm.nets.actor_target.net[0]
    torch.testing.assert_close(target_norm(obs), normalised)


def test_conservative_penalty_matches_hand_computed_values() -> None:
    q_data = torch.tensor([[1.0, 2.0]])
    q_sampled = torch.tensor([[[0.0, math.log(3.0)], [1.0, 1.0]]])
    # row 0: log(1 + 3) - 1; row 1: log(2 e) - 2
    expected = ((math.log(4.0) - 1.0) + (math.log(2.0) + 1.0 - 2.0)) / 2
    torch.testing.assert_close(conservative_penalty(q_data, q_sampled, 1.0), torch.tensor([expected]))
    # temperature T: T * logsumexp(q / T)
    t = 2.0
    expected_t = ((t * math.log(1.0 + 3.0 ** (1 / t)) - 1.0) + (t * math.log(2.0) + 1.0 - 2.0)) / 2
    torch.testing.assert_close(conservative_penalty(q_data, q_sampled, t), torch.tensor([expected_t]))


def test_discrete_conservative_penalty_matches_hand_computed_values() -> None:
    q = torch.tensor([[0.0, math.log(3.0)], [2.0, 2.0]])
    act = torch.tensor([1, 0])
    expected = ((math.log(4.0) - math.log(3.0)) + (2.0 + math.log(2.0) - 2.0)) / 2
    torch.testing.assert_close(discrete_conservative_penalty(q, act), torch.tensor(expected))


def test_td3_bc_actor_loss_matches_hand_computed_values() -> None:
    q = torch.tensor([2.0, -4.0])
    pi, a = torch.tensor([[0.5], [0.0]]), torch.tensor([[0.0], [1.0]])
    loss, bc = td3_bc_actor_loss(q, pi, a, 2.5)
    torch.testing.assert_close(bc, torch.tensor((0.25 + 1.0) / 2))
    torch.testing.assert_close(loss, torch.tensor(-2.5 / 3.0 * -1.0 + 0.625))


def test_cql_weight_zero_leaves_the_penalty_out_of_the_critic_loss() -> None:
    algorithm = _cql(0, cql_weight=0.0)
    stats = algorithm.update(_buffer("Pendulum-v1", 0), 16)
    assert stats.as_scalars()["critic_loss"] == pytest.approx(stats.as_scalars()["td_loss"])


def test_cql_lagrange_tunes_the_weight() -> None:
    algorithm = _cql(0, with_lagrange=True, cql_weight=1.0, cql_weight_lr=0.1)
    stats = _updates(algorithm, _buffer("Pendulum-v1", 0), 3)
    assert stats[0].as_scalars()["cql_weight"] == pytest.approx(1.0)
    assert stats[-1].as_scalars()["cql_weight"] != pytest.approx(1.0)


def test_td3_bc_normalizer_must_be_passed_and_sit_in_both_networks() -> None:
    normalizer = RunningObsNormalizer(3)
    policy = DeterministicActorPolicy(nn.Sequential(normalizer, mlp(3, 1, HIDDEN)), _space("Pendulum-v1"))
    with pytest.raises(ConfigurationError, match=r"^TD3BC: the policy contains a RunningObsNormalizer"):
        TD3BC(policy=policy, critic=_NormalisedCritic(normalizer))
    with pytest.raises(ConfigurationError, match=r"^TD3BC: obs_normalizer is not a layer of the critic"):
        TD3BC(policy=policy, critic=QEnsemble(3, 1, HIDDEN), obs_normalizer=normalizer)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: CQLParams(cql_weight=-1.0),
            r"CQLParams.cql_weight must be a finite number >= 0, got -1.0",
        ),
        (
            lambda: CQLParams(num_sampled_actions=0),
            r"CQLParams.num_sampled_actions must be an int >= 1, got 0",
        ),
        (lambda: CQLParams(temperature=0.0), r"CQLParams.temperature must be a finite number > 0, got 0.0"),
        (lambda: CQLParams(tau=0.0), r"CQLParams.tau must be a number in \(0, 1\], got 0.0"),
        (
            lambda: CQLParams(with_lagrange=True, cql_weight=0.0),
            r"CQLParams.cql_weight=0 cannot be tuned with with_lagrange=True",
        ),
        (lambda: CQLParams(target_entropy=float("inf")), r"CQLParams.target_entropy must be a finite number"),
        (lambda: TD3BCParams(alpha=-2.5), r"TD3BCParams.alpha must be a finite number >= 0, got -2.5"),
        (lambda: TD3BCParams(policy_delay=0), r"TD3BCParams.policy_delay must be an int >= 1, got 0"),
        (lambda: TD3BCParams(gamma=1.5), r"TD3BCParams.gamma must be a number in \[0, 1\], got 1.5"),
        (
            lambda: DiscreteCQLParams(cql_weight=-0.5),
            r"DiscreteCQLParams.cql_weight must be a finite number >= 0, got -0.5",
        ),
        (lambda: DiscreteCQLParams(lr=0.0), r"DiscreteCQLParams.lr must be a finite number > 0, got 0.0"),
        (
            lambda: DiscreteCQLParams(target_update_freq=0),
            r"DiscreteCQLParams.target_update_freq must be an int >= 1, got 0",
        ),
    ],
)
def test_hyperparameter_validation(build: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()
