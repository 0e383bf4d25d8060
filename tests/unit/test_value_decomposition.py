"""Value decomposition (VDN, QMIX): the loss and one Adam step against hand-computed numbers, joint
sampling from agent columns, a few training steps through the off-policy trainer on a tiny cooperative
env, save/load round trip and same seed -> same result."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import QValuePolicy
from tshtrain.algorithm.blocks.agent_nets import SelectKeys
from tshtrain.algorithm.blocks.mixers import QMixer
from tshtrain.algorithm.blocks.policies import EpsilonSchedule
from tshtrain.algorithm.value_decomposition import (
    ValueDecomposition,
    ValueDecompositionParams,
    joint_indices,
)
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.env import AgentColumns, AgentStep, MultiAgentVectorEnv
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams


class CoopMatch(MultiAgentVectorEnv):
    """Two agents act together for 3 steps; both get reward 1 when both pick action ``t % 2``, else 0
    (a shared reward); both terminate after the third step. Observation: (t, agent index)."""

    def __init__(self, num_envs: int):
        self.columns = AgentColumns(("a", "b"), num_envs)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.turn_based = False
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | None = None, env_ids: np.ndarray | None = None) -> None:
        del seed
        ids = np.arange(self.num_envs) if env_ids is None else env_ids
        self.t[ids] = 0

    @property
    def obs(self) -> np.ndarray:
        e = self.num_envs
        return np.array([[self.t[c % e], c // e] for c in range(self.num_columns)], dtype=np.float32)

    @property
    def acting_C(self) -> np.ndarray:
        return np.ones(self.num_columns, dtype=bool)

    def step(self, act: np.ndarray, columns: np.ndarray) -> AgentStep:
        e, c = self.num_envs, self.num_columns
        assert len(columns) == c
        hit = (act[:e] == self.t % 2) & (act[e:] == self.t % 2)
        rew = np.tile(hit.astype(np.float32), 2)
        self.t += 1
        done = self.t == 3
        term = np.tile(done, 2)
        final = self.obs
        self.t[done] = 0
        return AgentStep(rew, term, np.zeros(c, dtype=bool), final, done)

    def close(self) -> None:
        pass


def _linear_policy(weight: list[list[float]]) -> QValuePolicy:
    net = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor(weight))
    return QValuePolicy(net, gym.spaces.Discrete(2), seed=0)


def _weight(policy: QValuePolicy) -> torch.Tensor:
    return dict(policy.q_net.named_parameters())["weight"].detach()


def _golden_buffer(*, terminated: bool) -> VectorReplayBuffer:
    """One joint transition of 2 agents in 1 env: columns 0 (agent a) and 1 (agent b)."""
    buffer = VectorReplayBuffer(4, buffer_num=2, seed=0)
    buffer.add(
        obs=np.array([[1.0, 2.0], [3.0, 1.0]], dtype=np.float32),
        act=np.array([1, 0]),
        rew=np.array([1.0, 1.0]),
        terminated=np.array([terminated, terminated]),
        truncated=np.array([False, False]),
        obs_next=np.array([[2.0, 0.0], [0.0, 1.0]], dtype=np.float32),
    )
    return buffer


def _golden_vdn(team_reward: str = "mean") -> ValueDecomposition:
    return ValueDecomposition(
        ("a", "b"),
        {"a": _linear_policy([[1.0, 0.0], [0.0, 1.0]]), "b": _linear_policy([[0.5, 0.0], [0.0, 2.0]])},
        params=ValueDecompositionParams(lr=0.1, gamma=0.5, max_grad_norm=None, team_reward=team_reward),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("team_reward", "terminated", "loss", "row_a1", "row_b0"),
    [
        # Q_a(o_a) = [1, 2], u_a = 1 -> 2; Q_b(o_b) = [1.5, 2], u_b = 0 -> 1.5; Q_tot = 3.5
        # next: max Q_a(o'_a) = max [2, 0] = 2, max Q_b(o'_b) = max [0, 2] = 2; y = R + 0.5 * 4
        # mean: y = 1 + 2 = 3, loss 0.25, dL/dQ_tot = +1: Adam moves the chosen rows by -lr * sign(grad)
        ("mean", False, 0.25, [-0.1, 0.9], [0.4, -0.1]),
        # sum: y = 2 + 2 = 4, loss 0.25, dL/dQ_tot = -1: the chosen rows move up by lr
        ("sum", False, 0.25, [0.1, 1.1], [0.6, 0.1]),
        # terminal: y = R = 1, loss (3.5 - 1)^2 = 6.25, dL/dQ_tot = 5 > 0
        ("mean", True, 6.25, [-0.1, 0.9], [0.4, -0.1]),
    ],
)
def test_vdn_loss_and_one_adam_step_match_hand_computed_numbers(
    team_reward: str, terminated: bool, loss: float, row_a1: list[float], row_b0: list[float]
) -> None:
    vdn = _golden_vdn(team_reward)
    stats = vdn.update(_golden_buffer(terminated=terminated), batch_size=3)
    assert stats.loss == pytest.approx(loss)
    assert stats.q_tot_mean == pytest.approx(3.5)
    assert stats.num_gradient_steps == 1
    # weight rows are actions: agent a chose action 1 (input [1, 2]), agent b action 0 (input [3, 1]);
    # Adam's first step moves each entry by lr * g / (|g| + eps), i.e. lr * sign(g); other rows stay
    w_a, w_b = (_weight(policy) for policy in vdn.q_policies)
    torch.testing.assert_close(w_a, torch.tensor([[1.0, 0.0], row_a1]), atol=1e-6, rtol=0)
    torch.testing.assert_close(w_b, torch.tensor([row_b0, [0.0, 2.0]]), atol=1e-6, rtol=0)


def test_shared_parameters_sum_both_agents_gradients_into_one_network() -> None:
    # one network Q(o) = W o for both agents; the gradient of row 1 gets o_a = [1, 2] (agent a chose 1)
    # and row 0 gets o_b = [3, 1] (agent b chose 0): both rows move by -lr * sign
    shared = _linear_policy([[1.0, 0.0], [0.0, 1.0]])
    vdn = ValueDecomposition(
        ("a", "b"), shared, params=ValueDecompositionParams(lr=0.1, gamma=0.5, max_grad_norm=None)
    )
    # Q(o_a) = [1, 2] -> 2; Q(o_b) = [3, 1] -> 3; Q_tot = 5; y = 1 + 0.5 * (2 + 1) = 2.5; loss 6.25
    stats = vdn.update(_golden_buffer(terminated=False), batch_size=2)
    assert stats.loss == pytest.approx(6.25)
    torch.testing.assert_close(_weight(shared), torch.tensor([[0.9, -0.1], [-0.1, 0.9]]), atol=1e-6, rtol=0)


def test_joint_indices_pick_the_same_row_and_env_for_every_agent() -> None:
    buffer = VectorReplayBuffer(30, buffer_num=6, seed=3)  # 2 agents x 3 envs
    env = CoopMatch(3)
    for _ in range(4):
        obs = env.obs
        buffer.add(
            obs=obs,
            act=np.zeros(6, dtype=np.int64),
            rew=np.zeros(6),
            terminated=np.zeros(6, dtype=bool),
            truncated=np.zeros(6, dtype=bool),
            obs_next=obs,
        )
    idx_AN = joint_indices(buffer, 50, 2)
    rows_a, cols_a = np.divmod(idx_AN[0], 6)
    rows_b, cols_b = np.divmod(idx_AN[1], 6)
    np.testing.assert_array_equal(rows_a, rows_b)
    np.testing.assert_array_equal(cols_b, cols_a + 3)
    assert cols_a.max() < 3 and rows_a.max() < 4


def test_joint_sampling_refuses_columns_of_different_lengths() -> None:
    buffer = VectorReplayBuffer(8, buffer_num=2, seed=0)
    buffer.add(
        obs=np.zeros((1, 2), dtype=np.float32),
        act=np.zeros(1, dtype=np.int64),
        rew=np.zeros(1),
        terminated=np.zeros(1, dtype=bool),
        truncated=np.zeros(1, dtype=bool),
        obs_next=np.zeros((1, 2), dtype=np.float32),
        env_ids=np.array([0]),
    )
    with pytest.raises(ConfigurationError, match="different numbers of transitions"):
        joint_indices(buffer, 4, 2)


def test_params_name_the_field_value_and_allowed_values() -> None:
    with pytest.raises(ConfigurationError, match=r"team_reward must be one of \['mean', 'sum'\], got 'max'"):
        ValueDecompositionParams(team_reward="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="lr"):
        ValueDecompositionParams(lr=-1.0)


def test_q_policies_must_name_every_agent() -> None:
    with pytest.raises(ConfigurationError, match=r"q_policies names agents \['a'\]"):
        ValueDecomposition(("a", "b"), {"a": _linear_policy([[1.0, 0.0], [0.0, 1.0]])})


# ---------------------------------------------------------------------- QMIX
def _golden_qmixer() -> QMixer:
    mixer = QMixer(num_agents=2, state_dim=1, embed_dim=1)
    values = {
        "hyper_w1.weight": [[1.0], [-2.0]],
        "hyper_w1.bias": [0.0, 0.0],
        "hyper_b1.weight": [[0.0]],
        "hyper_b1.bias": [0.5],
        "hyper_w2.weight": [[3.0]],
        "hyper_w2.bias": [0.0],
        "value.0.weight": [[1.0]],
        "value.0.bias": [0.0],
        "value.2.weight": [[1.0]],
        "value.2.bias": [0.25],
    }
    mixer.load_state_dict({name: torch.tensor(value) for name, value in values.items()})
    return mixer


def test_qmixer_matches_hand_computed_values() -> None:
    mixer = _golden_qmixer()
    q_NA = torch.tensor([[2.0, 1.5], [-2.0, -1.0], [2.0, 1.5]])
    state = torch.tensor([[1.0], [1.0], [-1.0]])
    # s = 1: W1 = |[1, -2]| = [1, 2], b1 = 0.5, w2 = 3, V = relu(1) + 0.25 = 1.25
    #   q = [2, 1.5]: elu(2 + 3 + 0.5) * 3 + 1.25 = 17.75; q = [-2, -1]: (e^-3.5 - 1) * 3 + 1.25
    # s = -1: W1 = |[-1, 2]| = [1, 2], w2 = |-3| = 3, V = relu(-1) + 0.25 = 0.25: 16.5 + 0.25
    expected = torch.tensor([17.75, (np.exp(-3.5) - 1.0) * 3.0 + 1.25, 16.75], dtype=torch.float32)
    torch.testing.assert_close(mixer(q_NA, state), expected)


def test_qmixer_is_monotonic_in_every_agent_value() -> None:
    torch.manual_seed(0)
    mixer = QMixer(num_agents=3, state_dim=4, embed_dim=8, hypernet_hidden_dim=16)
    q_NA = torch.randn(64, 3, requires_grad=True)
    mixer(q_NA, torch.randn(64, 4)).sum().backward()
    assert q_NA.grad is not None and (q_NA.grad >= 0).all()


def test_qmix_loss_matches_hand_computed_numbers() -> None:
    def agent(weight: list[list[float]]) -> QValuePolicy:
        net = nn.Linear(2, 2, bias=False)
        with torch.no_grad():
            net.weight.copy_(torch.tensor(weight))
        return QValuePolicy(SelectKeys(net, ["obs"]), gym.spaces.Discrete(2), seed=0)

    qmix = ValueDecomposition(
        ("a", "b"),
        {"a": agent([[1.0, 0.0], [0.0, 1.0]]), "b": agent([[0.5, 0.0], [0.0, 2.0]])},
        mixer=_golden_qmixer(),
        params=ValueDecompositionParams(lr=0.1, gamma=0.5, max_grad_norm=None),
    )
    buffer = VectorReplayBuffer(4, buffer_num=2, seed=0)
    buffer.add(
        obs={
            "obs": np.array([[1.0, 2.0], [3.0, 1.0]], dtype=np.float32),
            "state": np.ones((2, 1), np.float32),
        },
        act=np.array([1, 0]),
        rew=np.array([1.0, 1.0]),
        terminated=np.array([False, False]),
        truncated=np.array([False, False]),
        obs_next={
            "obs": np.array([[2.0, 0.0], [0.0, 1.0]], dtype=np.float32),
            "state": -np.ones((2, 1), np.float32),
        },
    )
    # chosen Q = [2, 1.5] in s = 1: Q_tot = 17.75; next greedy Q = [2, 2] in s = -1:
    # elu(2 + 4 + 0.5) * 3 + 0.25 = 19.75; y = 1 + 0.5 * 19.75 = 10.875; loss = 6.875^2
    stats = qmix.update(buffer, batch_size=2)
    assert stats.q_tot_mean == pytest.approx(17.75)
    assert stats.target_mean == pytest.approx(10.875)
    assert stats.loss == pytest.approx(6.875**2)
    # one Adam step moves every parameter with a nonzero gradient by lr: the mixer's value bias too
    value_bias = dict(qmix.mixer.named_parameters())["value.2.bias"]
    assert value_bias.item() == pytest.approx(0.25 - 0.1, abs=1e-6)


def test_qmix_without_a_state_key_is_refused_naming_the_key() -> None:
    qmix = ValueDecomposition(
        ("a", "b"),
        {"a": _linear_policy([[1.0, 0.0], [0.0, 1.0]]), "b": _linear_policy([[1.0, 0.0], [0.0, 1.0]])},
        mixer=_golden_qmixer(),
    )
    with pytest.raises(
        ConfigurationError, match="reads the 'state' key of the observations, which have no keys"
    ):
        qmix.update(_golden_buffer(terminated=False), batch_size=2)


# ---------------------------------------------------------------------- through the trainer
def _vdn_trainer(seed: int, *, shared: bool = False) -> OffPolicyTrainer:
    torch.manual_seed(seed)
    env, test_env = CoopMatch(num_envs=2), CoopMatch(num_envs=2)

    def policy(k: int) -> QValuePolicy:
        net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
        return QValuePolicy(
            net, env.single_action_space, eps_schedule=EpsilonSchedule(num_env_steps=60), seed=seed + k
        )

    q_policies: QValuePolicy | dict[str, QValuePolicy] = (
        policy(0) if shared else {"a": policy(0), "b": policy(1)}
    )
    algorithm = ValueDecomposition(
        env.columns,
        q_policies,
        params=ValueDecompositionParams(lr=1e-2, gamma=0.9, target_update_freq=10, n_step=2),
    )
    params = OffPolicyTrainerParams(
        training_collector=MultiAgentCollector(
            algorithm.policy,
            env,
            VectorReplayBuffer(200, buffer_num=env.num_columns, seed=seed),
            exploration_noise=True,
            seed=seed,
        ),
        test_collector=MultiAgentCollector(algorithm.policy, test_env, seed=seed + 1),
        max_epochs=2,
        epoch_num_steps=24,
        collection_step_num_env_steps=6,
        batch_size=8,
        test_step_num_episodes=2,
        verbose=False,
        show_progress=False,
    )
    return OffPolicyTrainer(algorithm, params)


def _state_tensors(algorithm: ValueDecomposition) -> list[torch.Tensor]:
    return [p.detach().clone() for p in algorithm.nets.parameters()] + [
        p.detach().clone() for p in algorithm.learner.target.net.parameters()
    ]


@pytest.mark.parametrize("shared", [False, True])
def test_vdn_trains_through_the_off_policy_trainer_with_a_multi_agent_collector(shared: bool) -> None:
    trainer = _vdn_trainer(0, shared=shared)
    algorithm = trainer.algorithm
    assert isinstance(algorithm, ValueDecomposition)
    before = _state_tensors(algorithm)
    info = trainer.run()
    assert info.gradient_step > 0 and info.gradient_step == algorithm.learner.num_gradient_steps
    after = _state_tensors(algorithm)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(torch.isfinite(t).all() for t in after)


def test_same_seed_same_result_and_another_seed_differs() -> None:
    runs = []
    for seed in (5, 5, 6):
        trainer = _vdn_trainer(seed)
        trainer.run()
        assert isinstance(trainer.algorithm, ValueDecomposition)
        runs.append(_state_tensors(trainer.algorithm))
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(runs[0], runs[2], strict=True))


def test_save_load_round_trip_restores_weights_targets_optimizer_and_counter() -> None:
    trained = _vdn_trainer(1)
    trained.run()
    source = trained.algorithm
    assert isinstance(source, ValueDecomposition)
    fresh = _vdn_trainer(2).algorithm
    assert isinstance(fresh, ValueDecomposition)
    fresh.load_state_dict(copy.deepcopy(source.state_dict()))
    assert all(torch.equal(a, b) for a, b in zip(_state_tensors(source), _state_tensors(fresh), strict=True))
    assert fresh.learner.num_gradient_steps == source.learner.num_gradient_steps
    # the next update from the same buffer state draws the same sample and takes the same step
    buffer = trained.params.training_collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    twin = copy.deepcopy(buffer)
    a, b = source.update(buffer, 8), fresh.update(twin, 8)
    assert a.loss == b.loss
    assert all(torch.equal(x, y) for x, y in zip(_state_tensors(source), _state_tensors(fresh), strict=True))
