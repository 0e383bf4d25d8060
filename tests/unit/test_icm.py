"""ICM: the losses and the intrinsic reward against hand-computed numbers (linear nets with set
weights), what the inner algorithms see, the contract every algorithm keeps (trainer family, state
round trip, same seed -> same run, NaN losses, checkpoint resume), and pinned errors."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import (
    A2C,
    C51,
    DQN,
    IQN,
    NPG,
    PPO,
    QRDQN,
    TRPO,
    C51Params,
    CategoricalPolicy,
    DiscreteQEnsemble,
    DiscreteSAC,
    DQNParams,
    EpsilonSchedule,
    ICMModule,
    ICMOffPolicy,
    ICMOnPolicy,
    ICMParams,
    ICMTrainingStats,
    NoisyQPolicy,
    NonFiniteLossError,
    OffPolicyAlgorithm,
    OnPolicyAlgorithm,
    PPOParams,
    QValuePolicy,
    Rainbow,
    Reinforce,
    TrainingStats,
    UpdateHooks,
    categorical_mlp,
    icm_forward_error,
    icm_intrinsic_reward,
    icm_losses,
    iqn_mlp,
    mlp,
    quantile_mlp,
)
from tshtrain.algorithm.base import NO_UPDATE_HOOKS
from tshtrain.algorithm.blocks.onpolicy import ActorPolicy
from tshtrain.data import Collector, TensorCollector, TensorReplayBuffer, VectorReplayBuffer
from tshtrain.data.batch import AnyRolloutBatch, RolloutBatch
from tshtrain.data.buffer import BaseReplayBuffer
from tshtrain.data.collector_base import AnyReplayBuffer
from tshtrain.env import TorchCartPole, make_vector_env
from tshtrain.errors import ConfigurationError, UnsupportedSpaceError
from tshtrain.logger import CsvLogger, LogScope, read_csv_log
from tshtrain.trainer import (
    OffPolicyTrainer,
    OffPolicyTrainerParams,
    OnPolicyTrainer,
    OnPolicyTrainerParams,
    Trainer,
)
from tshtrain.checkpoint import CheckpointManager, CheckpointParams

DISCRETE2 = gym.spaces.Discrete(2)
CPU = torch.device("cpu")
LN2 = math.log(2.0)


# ---------------------------------------------------------------------------------- hand-computed math


def _linear_module() -> ICMModule:
    """phi = identity (2 features); forward model copies phi(o); inverse model gives logits [1, 0]."""
    module = ICMModule(nn.Linear(2, 2), 2, DISCRETE2)
    with torch.no_grad():
        feature = module.feature_net
        assert isinstance(feature, nn.Linear)
        feature.weight.copy_(torch.eye(2))
        feature.bias.zero_()
        forward = module.forward_model[0]
        inverse = module.inverse_model[0]
        assert isinstance(forward, nn.Linear) and isinstance(inverse, nn.Linear)
        forward.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]))
        forward.bias.zero_()
        inverse.weight.zero_()
        inverse.bias.copy_(torch.tensor([1.0, 0.0]))
    return module


OBS = np.array([[1.0, 2.0], [0.0, 0.0]], dtype=np.float32)
ACT = np.array([1, 0])
OBS_NEXT = np.array([[0.0, 1.0], [2.0, 0.0]], dtype=np.float32)
# forward errors: 0.5 * ((1-0)^2 + (2-1)^2) = 1.0 and 0.5 * ((0-2)^2 + 0^2) = 2.0
ERRORS = [1.0, 2.0]
# inverse cross entropies with logits [1, 0]: act 1 -> log(1 + e), act 0 -> log(1 + 1/e)
INVERSE = (math.log(1 + math.e) + math.log(1 + 1 / math.e)) / 2
LOSS = 0.8 * INVERSE + 0.2 * 1.5  # forward_loss_weight 0.2, forward loss mean(1, 2)


def test_forward_error_is_half_the_squared_distance_summed_over_features() -> None:
    err = icm_forward_error(torch.tensor([[1.0, 2.0], [0.0, 0.0]]), torch.tensor([[0.0, 1.0], [2.0, 0.0]]))
    torch.testing.assert_close(err, torch.tensor(ERRORS))
    torch.testing.assert_close(icm_intrinsic_reward(err, 0.01), torch.tensor([0.01, 0.02]))


def test_module_and_losses_match_hand_computed_numbers() -> None:
    module = _linear_module()
    out = module(torch.as_tensor(OBS), torch.as_tensor(ACT), torch.as_tensor(OBS_NEXT))
    torch.testing.assert_close(out.forward_error_N, torch.tensor(ERRORS))
    torch.testing.assert_close(out.act_logits_NA, torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    losses = icm_losses(
        out.forward_error_N, out.act_logits_NA, torch.as_tensor(ACT), forward_loss_weight=0.2, lr_scale=2.0
    )
    assert losses.forward_loss.item() == pytest.approx(1.5)
    assert losses.inverse_loss.item() == pytest.approx(INVERSE)
    assert losses.loss.item() == pytest.approx(2.0 * LOSS)
    # all inverse weight on equal logits: ln 2
    equal = icm_losses(
        torch.zeros(2), torch.zeros(2, 2), torch.as_tensor(ACT), forward_loss_weight=0.0, lr_scale=1.0
    )
    assert equal.loss.item() == pytest.approx(LN2)


def test_masked_losses_ignore_padding() -> None:
    losses = icm_losses(
        torch.tensor([1.0, 2.0, 100.0]),
        torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 50.0]]),
        torch.tensor([1, 0, 0]),
        forward_loss_weight=0.2,
        lr_scale=1.0,
        valid_N=torch.tensor([True, True, False]),
    )
    assert losses.loss.item() == pytest.approx(LOSS)


# ---------------------------------------------------------------------------------- what the inner sees


class _RecordingOnPolicy(OnPolicyAlgorithm[CategoricalPolicy]):
    """An inner algorithm that records the rewards it was given."""

    def __init__(self) -> None:
        super().__init__(policy=CategoricalPolicy(mlp(2, 2, ()), DISCRETE2, seed=0))
        self.rew: list[np.ndarray] = []

    def update(
        self,
        rollout: AnyRolloutBatch,
        *,
        batch_size: int | None,
        num_repetitions: int,
        hooks: UpdateHooks = NO_UPDATE_HOOKS,
    ) -> TrainingStats:
        assert isinstance(rollout, RolloutBatch)
        self.rew.append(rollout.rew.copy())
        return TrainingStats(num_gradient_steps=3)


def _rollout() -> RolloutBatch:
    """T=2, E=2: column 0 holds the two hand-computed transitions, column 1 one padding step after one
    step with the first transition."""
    obs = np.stack([np.stack([OBS[0], OBS[0]]), np.stack([OBS[1], np.zeros(2, np.float32)])])
    obs_next = np.stack(
        [np.stack([OBS_NEXT[0], OBS_NEXT[0]]), np.stack([OBS_NEXT[1], np.zeros(2, np.float32)])]
    )
    valid = np.array([[True, True], [True, False]])
    return RolloutBatch(
        obs=obs,
        act=np.array([[1, 1], [0, 0]]),
        rew=np.array([[1.0, 1.0], [1.0, 0.0]], dtype=np.float32),
        terminated=np.zeros((2, 2), bool),
        truncated=np.zeros((2, 2), bool),
        obs_next=obs_next,
        boundary=np.array([[False, True], [True, True]]),
        valid=valid,
    )


def test_on_policy_inner_gets_the_intrinsic_reward_and_stats_report_the_hand_computed_loss() -> None:
    inner = _RecordingOnPolicy()
    icm = ICMOnPolicy(inner, _linear_module(), ICMParams(reward_scale=0.01, forward_loss_weight=0.2))
    stats = icm.update(_rollout(), batch_size=None, num_repetitions=1)
    np.testing.assert_allclose(inner.rew[0], [[1.01, 1.01], [1.02, 0.0]], rtol=0, atol=1e-7)
    # valid transitions: errors 1, 1, 2; inverse CE log(1+e), log(1+e), log(1+1/e)
    inverse = (2 * math.log(1 + math.e) + math.log(1 + 1 / math.e)) / 3
    assert stats.icm_forward_loss == pytest.approx(4 / 3)
    assert stats.icm_inverse_loss == pytest.approx(inverse)
    assert stats.icm_loss == pytest.approx(0.8 * inverse + 0.2 * 4 / 3)
    assert stats.intrinsic_reward == pytest.approx(0.04 / 3)
    assert stats.num_gradient_steps == 3  # the inner algorithm's
    assert icm.policy is inner.policy


def test_the_icm_step_moves_the_module_as_adam_on_the_loss() -> None:
    icm = ICMOnPolicy(_RecordingOnPolicy(), _linear_module(), ICMParams(lr=0.1))
    reference = _linear_module()
    optim = torch.optim.Adam(reference.parameters(), lr=0.1)
    rollout = _rollout()
    valid = torch.as_tensor(rollout.valid.reshape(-1))
    out = reference(
        torch.as_tensor(np.asarray(rollout.obs).reshape(4, 2)),
        torch.as_tensor(rollout.act.reshape(4)),
        torch.as_tensor(np.asarray(rollout.obs_next).reshape(4, 2)),
    )
    icm_losses(
        out.forward_error_N,
        out.act_logits_NA,
        torch.as_tensor(rollout.act.reshape(4)),
        forward_loss_weight=0.2,
        lr_scale=1.0,
        valid_N=valid,
    ).loss.backward()  # type: ignore[no-untyped-call]
    optim.step()
    icm.update(rollout, batch_size=None, num_repetitions=1)
    for a, b in zip(icm.learner.module.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert not torch.equal(
        icm.learner.module.forward_model[0].weight, _linear_module().forward_model[0].weight
    )


class _RecordingOffPolicy(OffPolicyAlgorithm[QValuePolicy]):
    """An inner algorithm that samples through its hooks and records the rewards it was given."""

    def __init__(self) -> None:
        super().__init__(policy=QValuePolicy(mlp(2, 2, ()), DISCRETE2, seed=0))
        self.seen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TrainingStats:
        assert isinstance(buffer, BaseReplayBuffer)
        batch = hooks.on_sampled_batch(buffer.sample(batch_size))
        assert not isinstance(batch.obs, dict) and not isinstance(batch.obs, torch.Tensor)
        assert isinstance(batch.rew, np.ndarray)
        self.seen.append((np.asarray(batch.obs), np.asarray(batch.obs_next), batch.rew.copy()))
        return TrainingStats()


class _RawRewards:
    """Outer hooks that record the rewards of the sampled batch before the intrinsic reward."""

    def __init__(self) -> None:
        self.rew: list[np.ndarray] = []

    def on_sampled_batch(self, batch: Any, /) -> Any:
        self.rew.append(np.array(batch.rew))
        return batch

    def on_loss(self, losses: Any, /) -> None:
        pass

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        pass


def _two_transition_buffer() -> VectorReplayBuffer:
    buffer = VectorReplayBuffer(10, 1, seed=0)
    for i in range(2):
        buffer.add(
            obs=OBS[i : i + 1],
            act=ACT[i : i + 1],
            rew=np.array([0.5], np.float32),
            terminated=np.array([False]),
            truncated=np.array([i == 1]),
            obs_next=OBS_NEXT[i : i + 1],
        )
    return buffer


def test_off_policy_inner_gets_the_intrinsic_reward_after_the_trainers_hooks() -> None:
    inner = _RecordingOffPolicy()
    icm = ICMOffPolicy(inner, _linear_module(), ICMParams(reward_scale=0.1))
    outer = _RawRewards()
    stats = icm.update(_two_transition_buffer(), 16, hooks=outer)
    obs, _, rew = inner.seen[0]
    np.testing.assert_array_equal(outer.rew[0], 0.5)  # the trainer's hooks see the stored rewards
    expected = np.where(obs[:, 0] == 1.0, 0.5 + 0.1 * 1.0, 0.5 + 0.1 * 2.0)
    np.testing.assert_allclose(rew, expected, rtol=0, atol=1e-6)
    assert isinstance(stats, ICMTrainingStats)
    assert stats.intrinsic_reward == pytest.approx(float(np.mean(rew - 0.5)), abs=1e-6)


# ---------------------------------------------------------------------------------- real inner algorithms


def _dqn(seed: int, **kw: Any) -> DQN:
    torch.manual_seed(seed)
    policy = QValuePolicy(
        mlp(4, 2, (16, 16), nn.ReLU), DISCRETE2, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=seed
    )
    return DQN(policy=policy, params=DQNParams(target_update_freq=3, **kw))


def _dqn_icm(seed: int, reward_scale: float = 0.01) -> ICMOffPolicy[QValuePolicy]:
    dqn = _dqn(seed)
    return ICMOffPolicy(dqn, ICMModule.from_mlp(4, DISCRETE2, (16, 16)), ICMParams(reward_scale=reward_scale))


def _ppo_icm(seed: int) -> ICMOnPolicy[ActorPolicy]:
    torch.manual_seed(seed)
    policy = CategoricalPolicy(mlp(4, 2, (16, 16)), DISCRETE2, seed=seed)
    ppo = PPO(policy=policy, critic=mlp(4, 1, (16, 16)), params=PPOParams(), seed=seed)
    return ICMOnPolicy(ppo, ICMModule.from_mlp(4, DISCRETE2, (16, 16)), ICMParams())


def _cartpole_buffer(seed: int) -> VectorReplayBuffer:
    buffer = VectorReplayBuffer(400, 2, seed=seed)
    env = make_vector_env("CartPole-v1", 2)
    Collector(_dqn(0).policy, env, buffer, seed=seed).collect(n_step=120, random=True)
    env.close()
    return buffer


def _tensors(algorithm: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for comp in algorithm.components().values():
        state = comp.state_dict()
        if isinstance(comp, nn.Module):
            out.extend(v.detach().clone() for v in state.values())
        elif "state" in state:  # optimizers (schedulers and counters hold no tensors)
            for param_state in state["state"].values():
                out.extend(v.clone() for v in param_state.values() if isinstance(v, torch.Tensor))
    return out


def _assert_same(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_zero_reward_scale_leaves_the_inner_dqn_bit_exact_and_still_trains_the_module() -> None:
    plain = _dqn(5)
    wrapped = _dqn_icm(5, reward_scale=0.0)
    module_before = [p.detach().clone() for p in wrapped.learner.module.parameters()]
    buffer = _cartpole_buffer(1)
    plain_stats = [plain.update(buffer, 16) for _ in range(6)]
    buffer = _cartpole_buffer(1)
    wrapped_stats = [wrapped.update(buffer, 16) for _ in range(6)]
    assert [s.inner for s in wrapped_stats] == plain_stats
    _assert_same(_tensors(plain), [*_tensors(wrapped.inner)])
    assert any(
        not torch.equal(a, b) for a, b in zip(module_before, wrapped.learner.module.parameters(), strict=True)
    )


def test_a_positive_reward_scale_changes_the_dqn_update() -> None:
    plain, wrapped = _dqn(5), _dqn_icm(5, reward_scale=1.0)
    assert plain.update(_cartpole_buffer(1), 16) != wrapped.update(_cartpole_buffer(1), 16).inner


def test_stats_report_inner_and_icm_scalars_and_aggregate_both() -> None:
    wrapped = _dqn_icm(0)
    buffer = _cartpole_buffer(0)
    stats = [wrapped.update(buffer, 16) for _ in range(3)]
    scalars = stats[0].as_scalars()
    assert set(stats[0].inner.as_scalars()) < set(scalars)
    assert {"icm_loss", "icm_forward_loss", "icm_inverse_loss", "intrinsic_reward"} < set(scalars)
    merged = ICMTrainingStats.aggregate(stats)
    assert merged.num_gradient_steps == 3
    assert merged.icm_loss == pytest.approx(sum(s.icm_loss for s in stats) / 3)
    assert merged.inner == type(stats[0].inner).aggregate([s.inner for s in stats])


def test_trainer_family_check_accepts_the_matching_trainer_only() -> None:
    envs = make_vector_env("CartPole-v1", 2)
    wrapped = _dqn_icm(0)
    collector = Collector(wrapped.policy, envs, VectorReplayBuffer(100, 2), seed=0)
    on = OnPolicyTrainerParams(training_collector=collector, max_epochs=1, collection_step_num_env_steps=20)
    off = OffPolicyTrainerParams(training_collector=collector, max_epochs=1, collection_step_num_env_steps=20)
    with pytest.raises(ConfigurationError, match="Use OffPolicyTrainer with ICMOffPolicy"):
        OnPolicyTrainer(wrapped, on)  # type: ignore[arg-type]  # what mypy rejects fails at run time too
    with pytest.raises(ConfigurationError, match="Use OnPolicyTrainer with ICMOnPolicy"):
        OffPolicyTrainer(_ppo_icm(0), off)  # type: ignore[arg-type]
    OffPolicyTrainer(wrapped, off)
    OnPolicyTrainer(_ppo_icm(0), on)
    envs.close()


def test_one_tiny_epoch_on_each_trainer() -> None:
    envs, test_envs = make_vector_env("CartPole-v1", 2), make_vector_env("CartPole-v1", 2)
    wrapped = _dqn_icm(0)
    off = OffPolicyTrainerParams(
        training_collector=Collector(
            wrapped.policy, envs, VectorReplayBuffer(200, 2, seed=0), exploration_noise=True, seed=0
        ),
        test_collector=Collector(wrapped.policy, test_envs, seed=1),
        max_epochs=1,
        epoch_num_steps=20,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=8,
        test_step_num_episodes=2,
        show_progress=False,
        verbose=False,
    )
    info = OffPolicyTrainer(wrapped, off).run()
    assert info.train_step == 20 and info.gradient_step == 10 and info.update_step == 2
    ppo = _ppo_icm(0)
    on = OnPolicyTrainerParams(
        training_collector=Collector(ppo.policy, envs, VectorReplayBuffer(64, 2), seed=0),
        test_collector=Collector(ppo.policy, test_envs, seed=1),
        max_epochs=1,
        epoch_num_steps=64,
        collection_step_num_env_steps=32,
        batch_size=16,
        update_step_num_repetitions=2,
        test_step_num_episodes=2,
        show_progress=False,
        verbose=False,
    )
    info = OnPolicyTrainer(ppo, on).run()
    assert info.train_step == 64 and info.update_step == 2
    envs.close()
    test_envs.close()


def test_state_dict_round_trip_restores_inner_and_icm_and_gives_the_same_next_updates() -> None:
    trained = _dqn_icm(0)
    for _ in range(5):
        trained.update(_cartpole_buffer(1), 16)
    state = trained.state_dict()
    assert {"policy", "icm_module", "icm_optim"} <= set(state) and set(_dqn(0).components()) <= set(state)
    blob = io.BytesIO()
    torch.save(state, blob)
    blob.seek(0)
    fresh = _dqn_icm(99)
    fresh.load_state_dict(torch.load(blob))  # weights_only=True
    _assert_same(_tensors(fresh), _tensors(trained))
    stats_a = [trained.update(_cartpole_buffer(2), 16) for _ in range(3)]
    stats_b = [fresh.update(_cartpole_buffer(2), 16) for _ in range(3)]
    assert stats_a == stats_b
    _assert_same(_tensors(fresh), _tensors(trained))


def test_same_seed_gives_the_same_run() -> None:
    runs = []
    for _ in range(2):
        wrapped = _dqn_icm(3)
        buffer = _cartpole_buffer(4)
        runs.append(([wrapped.update(buffer, 16) for _ in range(4)], _tensors(wrapped)))
    assert runs[0][0] == runs[1][0]
    _assert_same(runs[0][1], runs[1][1])


def test_a_nan_icm_loss_raises_naming_the_wrapper_and_the_loss() -> None:
    module = _linear_module()
    with torch.no_grad():
        module.forward_model[0].bias.fill_(float("nan"))
    icm = ICMOnPolicy(_RecordingOnPolicy(), module, ICMParams())
    with pytest.raises(NonFiniteLossError, match=r"^ICMOnPolicy: the icm loss is nan"):
        icm.update(_rollout(), batch_size=None, num_repetitions=1)


def _checkpointed_run(directory: Path, training_fn: Any = None) -> Trainer[Any, Any]:
    wrapped = _dqn_icm(0)
    envs, test_envs = make_vector_env("CartPole-v1", 2), make_vector_env("CartPole-v1", 2)
    training = Collector(
        wrapped.policy, envs, VectorReplayBuffer(1000, 2, seed=0), exploration_noise=True, seed=0
    )
    training.collect(n_step=64, random=True)
    params = OffPolicyTrainerParams(
        training_collector=training,
        test_collector=Collector(wrapped.policy, test_envs, seed=100),
        max_epochs=4,
        epoch_num_steps=100,
        collection_step_num_env_steps=10,
        update_step_num_gradient_steps_per_sample=0.5,
        batch_size=16,
        test_step_num_episodes=2,
        training_fn=training_fn,
        logger=CsvLogger(directory / "log"),
        checkpoint=CheckpointParams(directory=directory / "checkpoints"),
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(wrapped, params)


def test_resumed_run_equals_the_uninterrupted_run_bitwise(tmp_path: Path) -> None:
    reference = _checkpointed_run(tmp_path / "a")
    info_a = reference.run()

    def interrupt(epoch: int, env_step: int) -> None:
        if epoch == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _checkpointed_run(tmp_path / "b", interrupt).run()
    latest = CheckpointManager(CheckpointParams(directory=tmp_path / "b" / "checkpoints")).latest()
    assert latest is not None
    resumed = _checkpointed_run(tmp_path / "b")
    resumed.load_checkpoint(latest, trusted=True)
    info_b = resumed.run()
    _assert_same(_tensors(reference.algorithm), _tensors(resumed.algorithm))
    assert (info_a.gradient_step, info_a.train_step, info_a.best_reward) == (
        info_b.gradient_step,
        info_b.train_step,
        info_b.best_reward,
    )
    logs_a, logs_b = read_csv_log(tmp_path / "a" / "log"), read_csv_log(tmp_path / "b" / "log")
    updates_a = [(s, d["icm_loss"], d["loss"]) for s, d in logs_a[LogScope.UPDATE]]
    updates_b = [(s, d["icm_loss"], d["loss"]) for s, d in logs_b[LogScope.UPDATE]]
    assert updates_a and updates_a == updates_b  # the inner DQN's loss and the ICM loss, no gaps


# ---------------------------------------------------------------------------------- errors


def test_params_are_validated_naming_field_and_value() -> None:
    with pytest.raises(ConfigurationError, match=r"ICMParams\.reward_scale must be .*>= 0.*got -1"):
        ICMParams(reward_scale=-1.0)
    with pytest.raises(
        ConfigurationError, match=r"ICMParams\.forward_loss_weight must be .*\[0, 1\].*got 1.5"
    ):
        ICMParams(forward_loss_weight=1.5)
    with pytest.raises(ConfigurationError, match=r"ICMParams\.lr must be"):
        ICMParams(lr=0.0)


def test_box_actions_are_unsupported() -> None:
    with pytest.raises(UnsupportedSpaceError, match=r"ICMModule: action space Box.*Discrete"):
        ICMModule(nn.Linear(3, 4), 4, gym.spaces.Box(-1.0, 1.0, (1,)))
    with pytest.raises(UnsupportedSpaceError, match="starting at 0"):
        ICMModule(nn.Linear(3, 4), 4, gym.spaces.Discrete(3, start=1))


def test_n_step_returns_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"ICMOffPolicy: DQN\.params\.n_step=3.*Use n_step=1"):
        ICMOffPolicy(_dqn(0, n_step=3), ICMModule.from_mlp(4, DISCRETE2, (16,)))


def test_mismatched_actions_and_shared_parameters_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="ICM module has 3 actions, the inner algorithm's policy 2"):
        ICMOffPolicy(_dqn(0), ICMModule.from_mlp(4, gym.spaces.Discrete(3), (16,)))
    dqn = _dqn(0)
    shared = ICMModule(dqn.policy, 2, DISCRETE2)  # the Q-net as feature net
    with pytest.raises(ConfigurationError, match="shares parameters with DQN's networks"):
        ICMOffPolicy(dqn, shared)
    wrapped = _dqn_icm(0)
    with pytest.raises(ConfigurationError, match="already has components"):
        ICMOffPolicy(wrapped, ICMModule.from_mlp(4, DISCRETE2, (16,)))


def test_a_feature_net_of_the_wrong_width_is_named() -> None:
    module = ICMModule(nn.Linear(2, 3), 2, DISCRETE2)
    with pytest.raises(ConfigurationError, match=r"feature net returned shape \(2, 3\).*feature_dim=2"):
        module(torch.as_tensor(OBS), torch.as_tensor(ACT), torch.as_tensor(OBS_NEXT))


# ---------------------------------------------------------------------------------- both data paths


def _trainer_run(family: str, path: str, reward_scale: float | None) -> list[torch.Tensor]:
    """A tiny seeded run (numpy or torch path) of DQN / PPO, wrapped in ICM unless reward_scale is None;
    the policy's weights after it."""
    torch.manual_seed(0)
    tensor = path == "tensor"
    envs: Any = TorchCartPole(4, CPU, seed=0) if tensor else make_vector_env("CartPole-v1", 4)
    inner: Any
    if family == "dqn":
        policy: Any = QValuePolicy(
            mlp(4, 2, (16,), nn.ReLU), DISCRETE2, eps_schedule=EpsilonSchedule(num_env_steps=100), seed=0
        )
        inner = DQN(policy=policy, params=DQNParams(target_update_freq=10))
    else:
        policy = CategoricalPolicy(mlp(4, 2, (16,)), DISCRETE2, seed=0)
        inner = PPO(policy=policy, critic=mlp(4, 1, (16,)), params=PPOParams(lr=1e-3), seed=0)
    algorithm: Any = inner
    if reward_scale is not None:
        module = ICMModule.from_mlp(4, DISCRETE2, (16,))
        wrapper = ICMOffPolicy if family == "dqn" else ICMOnPolicy
        algorithm = wrapper(inner, module, ICMParams(reward_scale=reward_scale))
    size = 400 if family == "dqn" else 32
    buffer: Any = (
        TensorReplayBuffer(size * 4, 4, device=CPU, seed=0)
        if tensor
        else VectorReplayBuffer(size * 4, 4, seed=0)
    )
    collector: Any = (TensorCollector if tensor else Collector)(
        policy, envs, buffer, exploration_noise=family == "dqn", seed=0
    )
    common: dict[str, Any] = {
        "training_collector": collector,
        "test_collector": None,
        "max_epochs": 2,
        "epoch_num_steps": 64,
        "batch_size": 16,
        "verbose": False,
        "show_progress": False,
    }
    if family == "dqn":
        OffPolicyTrainer(algorithm, OffPolicyTrainerParams(collection_step_num_env_steps=16, **common)).run()
    else:
        OnPolicyTrainer(algorithm, OnPolicyTrainerParams(collection_step_num_env_steps=128, **common)).run()
    return [p.detach().clone() for p in policy.parameters()]


@pytest.mark.parametrize("path", ["numpy", "tensor"])
@pytest.mark.parametrize("family", ["dqn", "ppo"])
def test_on_both_data_paths_zero_scale_equals_the_plain_run_and_a_bonus_changes_it(
    family: str, path: str
) -> None:
    plain = _trainer_run(family, path, None)
    _assert_same(_trainer_run(family, path, 0.0), plain)
    shaped = _trainer_run(family, path, 1.0)
    assert any(not torch.equal(a, b) for a, b in zip(shaped, plain, strict=True))


class _Names:
    """Outer hooks that record the losses and optimizers they are called with."""

    def __init__(self) -> None:
        self.losses: list[str] = []
        self.optimizers: list[str] = []

    def on_sampled_batch(self, batch: Any, /) -> Any:
        return batch

    def on_loss(self, losses: Any, /) -> None:
        self.losses.extend(losses)

    def on_optimizer_step(self, name: str, optimizer: Any, /) -> None:
        self.optimizers.append(name)


def test_the_trainers_hooks_see_the_inner_and_the_icm_steps_by_component_name() -> None:
    wrapped = _dqn_icm(0)
    hooks = _Names()
    wrapped.update(_cartpole_buffer(0), 16, hooks=hooks)
    assert hooks.losses[-1] == "icm loss" and len(hooks.losses) == 2
    assert hooks.optimizers[-1] == "icm_optim" and hooks.optimizers[0] in wrapped.components()
    assert wrapped.components()["icm_optim"] is wrapped.learner.optim


def test_zero_lr_scale_freezes_the_module() -> None:
    icm = ICMOnPolicy(_RecordingOnPolicy(), _linear_module(), ICMParams(lr_scale=0.0, lr=0.1))
    before = [p.detach().clone() for p in icm.learner.module.parameters()]
    stats = icm.update(_rollout(), batch_size=None, num_repetitions=1)
    _assert_same([p.detach().clone() for p in icm.learner.module.parameters()], before)
    assert stats.icm_loss == 0.0 and stats.icm_forward_loss == pytest.approx(4 / 3)


# ---------------------------------------------------------------------------------- every discrete family


def _inner(name: str) -> Any:
    torch.manual_seed(0)
    eps = EpsilonSchedule(num_env_steps=100)
    if name == "c51":
        return C51(
            policy=QValuePolicy(categorical_mlp(4, 2, (16,), num_atoms=11), DISCRETE2, eps_schedule=eps)
        )
    if name == "qrdqn":
        return QRDQN(
            policy=QValuePolicy(quantile_mlp(4, 2, (16,), num_quantiles=8), DISCRETE2, eps_schedule=eps)
        )
    if name == "iqn":
        net = iqn_mlp(4, 2, (16,), num_cosines=8, num_policy_quantiles=4)
        return IQN(policy=QValuePolicy(net, DISCRETE2, eps_schedule=eps), seed=0)
    if name == "rainbow":
        net = categorical_mlp(4, 2, (16,), num_atoms=11, dueling=True, noisy_sigma0=0.5)
        q_policy = QValuePolicy(net, DISCRETE2, eps_schedule=EpsilonSchedule(start=0.0, end=0.0), seed=0)
        return Rainbow(policy=NoisyQPolicy(q_policy, seed=0), params=C51Params(n_step=1), seed=0)
    if name == "discrete_sac":
        policy = CategoricalPolicy(mlp(4, 2, (16,)), DISCRETE2, seed=0)
        return DiscreteSAC(policy=policy, critic=DiscreteQEnsemble(4, 2, (16,)))
    policy = CategoricalPolicy(mlp(4, 2, (16,)), DISCRETE2, seed=0)
    if name == "reinforce":
        return Reinforce(policy=policy, seed=0)
    on_policy = {"a2c": A2C, "npg": NPG, "trpo": TRPO}
    return on_policy[name](policy=policy, critic=mlp(4, 1, (16,)), seed=0)


OFF_POLICY = ["c51", "qrdqn", "iqn", "rainbow", "discrete_sac"]
ON_POLICY = ["reinforce", "a2c", "npg", "trpo"]


@pytest.mark.parametrize("name", OFF_POLICY + ON_POLICY)
def test_every_discrete_algorithm_can_be_wrapped_and_updated(name: str) -> None:
    inner = _inner(name)
    module = ICMModule.from_mlp(4, DISCRETE2, (16,))
    params = ICMParams(reward_scale=0.5)
    before = [p.detach().clone() for p in inner.policy.parameters()]
    if name in OFF_POLICY:
        wrapped: Any = ICMOffPolicy(inner, module, params)
        stats = wrapped.update(_cartpole_buffer(0), 16)
    else:
        wrapped = ICMOnPolicy(inner, module, params)
        envs = make_vector_env("CartPole-v1", 2)
        buffer = VectorReplayBuffer(64, 2)
        Collector(inner.policy, envs, buffer, seed=0).collect(n_step=64)
        envs.close()
        stats = wrapped.update(buffer.rollout(), batch_size=16, num_repetitions=1)
    assert stats.intrinsic_reward > 0 and math.isfinite(stats.icm_loss)
    assert type(stats.inner) not in (TrainingStats, ICMTrainingStats)  # the inner algorithm's own stats
    assert any(not torch.equal(a, b) for a, b in zip(before, inner.policy.parameters(), strict=True))


class _NoGradSampling(_RecordingOffPolicy):
    """An inner algorithm that samples inside ``torch.no_grad()``."""

    def update(
        self, buffer: AnyReplayBuffer, batch_size: int, *, hooks: UpdateHooks = NO_UPDATE_HOOKS
    ) -> TrainingStats:
        with torch.no_grad():
            return super().update(buffer, batch_size, hooks=hooks)


def test_an_inner_update_that_samples_under_no_grad_still_trains_the_module() -> None:
    icm = ICMOffPolicy(_NoGradSampling(), _linear_module(), ICMParams(lr=0.1))
    icm.update(_two_transition_buffer(), 8)
    assert not torch.equal(
        icm.learner.module.forward_model[0].weight, _linear_module().forward_model[0].weight
    )
