"""MADDPG (and what MASAC shares with it): the critic loss, the actor loss and one Adam step against
hand-computed numbers on tiny linear nets, the centralised critic's inputs (global state or joint
observations, agent id of a shared critic), and both algorithms through the off-policy trainer with a
multi-agent collector on a tiny cooperative env with continuous actions: same seed -> same weights,
save/load round trip then the same next update."""

from __future__ import annotations

import copy
import math
from typing import Literal

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tests.multi_agent_envs import CoopReach
from tshtrain.algorithm import (
    MADDPG,
    MASAC,
    DeterministicActorPolicy,
    MADDPGParams,
    MASACParams,
    MultiAgentActorCriticParams,
    OffPolicyActorCriticParams,
    QEnsemble,
    TanhGaussianPolicy,
    centralised_critic,
    mlp,
)
from tshtrain.algorithm.blocks.agent_nets import SelectKeys
from tshtrain.algorithm.blocks.continuous import EnsembleLinear
from tshtrain.algorithm.joint_actor_critic import own_action_joint
from tshtrain.constraints import field_checks
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer
from tshtrain.errors import ConfigurationError
from tshtrain.trainer import OffPolicyTrainer, OffPolicyTrainerParams

BOX = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def linear_actor(weight: float) -> DeterministicActorPolicy:
    """mu(o) = tanh(weight * o[obs]) on a one-number observation."""
    net = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        net.weight.fill_(weight)
    return DeterministicActorPolicy(SelectKeys(net, ["obs"]), BOX, seed=0)


def linear_critic(members: list[list[float]]) -> QEnsemble:
    """Q_i(x, u) = w_i . [x, u_1, u_2] + b_i: ``members`` are [w_x, w_u1, w_u2, b] per member."""
    critic = QEnsemble(1, 2, hidden_sizes=(), num_critics=len(members))
    layer = critic.net[0]
    assert isinstance(layer, EnsembleLinear)
    with torch.no_grad():
        values = torch.tensor(members)
        layer.weight.copy_(values[:, :3, None])
        layer.bias.copy_(values[:, 3, None, None])
    return critic


def critic_rows(critic: nn.Module) -> torch.Tensor:
    """The members' [w_x, w_u1, w_u2, b], shape (M, 4), of a QEnsemble without hidden layers."""
    assert isinstance(critic, QEnsemble)
    layer = critic.net[0]
    assert isinstance(layer, EnsembleLinear)
    return torch.cat([layer.weight.detach()[:, :, 0], layer.bias.detach()[:, 0]], dim=1)


def first_weight(module: nn.Module) -> float:
    """The first entry of the module's first parameter."""
    return float(next(module.parameters()).detach().flatten()[0])


def golden_buffer(*, terminated: bool = False) -> VectorReplayBuffer:
    """One joint transition of agents a, b in one env (columns 0 and 1): o = (1, 2), s = 0.5,
    u = (0.5, -0.5), r = (1, 0); o' = (-1, 0.5), s' = 1."""
    buffer = VectorReplayBuffer(4, buffer_num=2, seed=0)
    buffer.add(
        obs={"obs": np.array([[1.0], [2.0]], np.float32), "state": np.full((2, 1), 0.5, np.float32)},
        act=np.array([[0.5], [-0.5]], np.float32),
        rew=np.array([1.0, 0.0]),
        terminated=np.array([terminated, terminated]),
        truncated=np.array([False, False]),
        obs_next={"obs": np.array([[-1.0], [0.5]], np.float32), "state": np.ones((2, 1), np.float32)},
    )
    return buffer


def golden_maddpg() -> MADDPG:
    return MADDPG(
        ("a", "b"),
        {"a": linear_actor(0.5), "b": linear_actor(-1.0)},
        {"a": linear_critic([[1.0, 2.0, 0.0, 0.0]]), "b": linear_critic([[0.0, 1.0, -1.0, 0.5]])},
        params=MADDPGParams(actor_lr=0.1, critic_lr=0.1, gamma=0.5, tau=0.5),
    )


def test_maddpg_losses_and_one_adam_step_match_hand_computed_numbers() -> None:
    maddpg = golden_maddpg()
    stats = maddpg.update(golden_buffer(), batch_size=1)
    # next actions of the target actors: tanh(0.5 * -1) = tanh(-1 * 0.5) = -0.462117
    # Q_targ_a(s' = 1, u') = 1 + 2 * -0.462117 = 0.075766 -> y_a = 1 + 0.5 * 0.075766 = 1.037883
    # Q_targ_b(s' = 1, u') = -0.462117 + 0.462117 + 0.5 = 0.5 -> y_b = 0 + 0.5 * 0.5 = 0.25
    # Q_a(s = 0.5, u = (0.5, -0.5)) = 0.5 + 1 = 1.5; Q_b = 0.5 + 0.5 + 0.5 = 1.5
    assert stats.q_mean == pytest.approx(1.5)
    assert stats.critic_loss == pytest.approx(((1.5 - 1.037883) ** 2 + 1.25**2) / 2, abs=1e-5)
    # both TD errors are > 0: Adam's first step moves every weight by -lr * sign(input), inputs
    # (x, u_1, u_2, 1) = (0.5, 0.5, -0.5, 1)
    critic_a, critic_b = maddpg.joint.critics
    assert isinstance(critic_a, QEnsemble) and isinstance(critic_b, QEnsemble)
    torch.testing.assert_close(critic_rows(critic_a), torch.tensor([[0.9, 1.9, 0.1, -0.1]]))
    torch.testing.assert_close(critic_rows(critic_b), torch.tensor([[-0.1, 0.9, -0.9, 0.4]]))
    # actor step on the stepped critics, each agent's own action from its actor, the other's sampled:
    # mu_a(1) = tanh(0.5) = 0.462117, mu_b(2) = tanh(-2) = -0.964028
    # Q_a(0.5, (0.462117, -0.5)) = 0.45 + 1.9 * 0.462117 + 0.1 * -0.5 - 0.1 = 1.178022
    # Q_b(0.5, (0.5, -0.964028)) = -0.05 + 0.45 + 0.9 * 0.964028 + 0.4 = 1.667625
    assert stats.actor_loss == pytest.approx(-(1.178022 + 1.667625) / 2, abs=1e-5)
    # dL/dw_a = -0.5 * 1.9 * (1 - tanh(0.5)^2) * 1 < 0 -> w_a up by lr;
    # dL/dw_b = -0.5 * -0.9 * (1 - tanh(-2)^2) * 2 > 0 -> w_b down by lr
    w_a, w_b = (first_weight(net) for net in maddpg.joint.actors)
    assert (w_a, w_b) == pytest.approx((0.6, -1.1))
    # Polyak tau = 0.5: targets halfway between the old and the new weights
    target_actors, target_critics = maddpg.nets.actor_target.net, maddpg.nets.target_critic.net
    assert isinstance(target_actors, nn.ModuleList) and isinstance(target_critics, nn.ModuleList)
    assert first_weight(target_actors[0]) == pytest.approx(0.55)
    torch.testing.assert_close(critic_rows(target_critics[1]), torch.tensor([[-0.05, 0.95, -0.95, 0.45]]))


def test_a_terminal_joint_transition_does_not_bootstrap() -> None:
    # y = R: ((1.5 - 1)^2 + (1.5 - 0)^2) / 2
    stats = golden_maddpg().update(golden_buffer(terminated=True), batch_size=1)
    assert stats.critic_loss == pytest.approx((0.25 + 2.25) / 2)


def test_a_shared_critic_reads_the_agent_id_and_joint_obs_side_by_side() -> None:
    seen: list[torch.Tensor] = []

    class Recording(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.unused = nn.Parameter(torch.zeros(1))  # something for Adam to hold

        def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
            seen.append(torch.cat([x, u], dim=1))
            return (x.sum(1) + u.sum(1))[None]

    maddpg = MADDPG(
        ("a", "b"),
        linear_actor(0.5),
        Recording(),
        params=MADDPGParams(critic_input="joint_obs"),
    )
    sample_obs = {"obs": torch.tensor([[1.0], [2.0]]), "state": torch.full((2, 1), 0.5)}
    joint = torch.tensor([[0.5, -0.5]]).expand(2, -1, -1)
    q = maddpg.joint.q_values(maddpg.joint.critics, sample_obs, joint)
    # rows: agent a then agent b: (o_a, o_b, id, u_a, u_b)
    torch.testing.assert_close(
        seen[-1], torch.tensor([[1.0, 2.0, 1.0, 0.0, 0.5, -0.5], [1.0, 2.0, 0.0, 1.0, 0.5, -0.5]])
    )
    torch.testing.assert_close(q, torch.tensor([[[4.0], [4.0]]]))


def test_a_critic_shared_by_agents_that_are_not_neighbours_values_each_in_agent_order() -> None:
    # agents a and c share critic 1 (it reads their ids), b has critic 2 (no id): Q = w . input
    class Weighted(nn.Module):
        def __init__(self, weight: list[float]) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.tensor(weight))

        def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
            return (torch.cat([x, u], dim=1) @ self.weight)[None]

    shared, own = Weighted([1.0, 10.0, 20.0, 30.0, 0.0, 0.0, 0.0]), Weighted([1.0, 0.0, 0.0, 100.0])
    maddpg = MADDPG(("a", "b", "c"), linear_actor(0.5), {"a": shared, "b": own, "c": shared})
    assert maddpg.joint.critic_agents == [[0, 2], [1]]
    obs = {"obs": torch.zeros(3, 1), "state": torch.full((3, 1), 2.0)}  # one joint transition, s = 2
    joint = torch.tensor([[[0.0, 0.0, 0.0]], [[0.0, 0.0, 1.0]], [[0.0, 0.0, 0.0]]])  # agent b's: u_c = 1
    # a: 2 + 10 (id a) = 12; b: 2 + 100 * 1 = 102; c: 2 + 30 (id c) = 32
    torch.testing.assert_close(
        maddpg.joint.q_values(maddpg.joint.critics, obs, joint), torch.tensor([[[12.0], [102.0], [32.0]]])
    )


def test_own_action_joint_replaces_only_each_agents_own_action() -> None:
    act_AND = torch.tensor([[[1.0]], [[2.0]], [[3.0]]])
    own_AND = torch.tensor([[[10.0]], [[20.0]], [[30.0]]], requires_grad=True)
    joint = own_action_joint(act_AND, own_AND)
    torch.testing.assert_close(
        joint.detach(), torch.tensor([[[10.0, 2.0, 3.0]], [[1.0, 20.0, 3.0]], [[1.0, 2.0, 30.0]]])
    )
    # agent k's row of the loss reaches only own_AND[k]
    torch.autograd.backward(joint[1].sum())
    assert own_AND.grad is not None
    torch.testing.assert_close(own_AND.grad, torch.tensor([[[0.0]], [[1.0]], [[0.0]]]))


def test_state_critic_input_without_a_state_key_is_refused() -> None:
    actor = DeterministicActorPolicy(nn.Linear(1, 1), BOX)  # takes the array observations
    maddpg = MADDPG(("a", "b"), actor, linear_critic([[1.0, 1.0, 1.0, 0.0]]))
    buffer = VectorReplayBuffer(4, buffer_num=2, seed=0)
    buffer.add(
        obs=np.ones((2, 1), np.float32),
        act=np.zeros((2, 1), np.float32),
        rew=np.zeros(2),
        terminated=np.zeros(2, dtype=bool),
        truncated=np.zeros(2, dtype=bool),
        obs_next=np.ones((2, 1), np.float32),
    )
    with pytest.raises(ConfigurationError, match="critic_input='state' reads the 'state' key"):
        maddpg.update(buffer, 1)


def test_params_and_constructor_errors_name_field_value_and_allowed() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"MADDPGParams.critic_input must be one of \['state', 'joint_obs'\], got 'obs'",
    ):
        MADDPGParams(critic_input="obs")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"MASACParams\.tau"):
        MASACParams(tau=0.0)
    with pytest.raises(ConfigurationError, match=r"critics names agents \['a'\]"):
        MADDPG(("a", "b"), linear_actor(0.5), {"a": linear_critic([[1.0, 1.0, 1.0, 0.0]])})
    gaussian = TanhGaussianPolicy(nn.Linear(1, 2), BOX)
    with pytest.raises(ConfigurationError, match="MADDPG needs DeterministicActorPolicy"):
        MADDPG(("a", "b"), gaussian, linear_critic([[1.0, 1.0, 1.0, 0.0]]))  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", [MADDPGParams, MASACParams])
def test_params_check_every_number_field_and_share_the_off_policy_base(cls: type) -> None:
    assert isinstance(cls(), OffPolicyActorCriticParams) and isinstance(cls(), MultiAgentActorCriticParams)
    floats = [check.name for check in field_checks(cls) if check.kind is float]
    assert "tau" in floats and "actor_lr" in floats
    for name in floats:
        for bad in (math.nan, math.inf):
            with pytest.raises(
                ConfigurationError, match=rf"^{cls.__name__}\.{name} must be .*, got {bad}\.$"
            ):
                cls(**{name: bad})
    for check in field_checks(cls):
        if check.kind is not bool:
            with pytest.raises(ConfigurationError, match=rf"^{cls.__name__}\.{check.name} must be "):
                cls(**{check.name: True})
    with pytest.raises(TypeError, match="abstract"):
        MultiAgentActorCriticParams()  # type: ignore[abstract]


# ---------------------------------------------------------------------- through the trainer
Kind = Literal["maddpg", "masac"]


def _algorithm(kind: Kind, env: CoopReach, seed: int, shared: bool) -> MADDPG | MASAC:
    space, num_agents = env.single_observation_space, env.columns.num_agents

    def actor_net(out: int) -> nn.Module:
        return SelectKeys(mlp(2, out, (16,)), ["obs"])

    def critic() -> QEnsemble:
        return centralised_critic(
            space,
            BOX,
            num_agents,
            shared=shared,
            num_critics=1 if kind == "maddpg" else 2,
            hidden_sizes=(16,),
        )

    critics: nn.Module | dict[str, nn.Module] = critic() if shared else {"a": critic(), "b": critic()}
    if kind == "maddpg":
        maddpg_policies: dict[str, DeterministicActorPolicy] = {
            name: DeterministicActorPolicy(actor_net(1), BOX, noise_std=0.3, seed=seed + k)
            for k, name in enumerate(("a", "b"))
        }
        shared_policy = maddpg_policies["a"]
        return MADDPG(
            env.columns,
            shared_policy if shared else maddpg_policies,
            critics,
            params=MADDPGParams(actor_lr=1e-2, critic_lr=1e-2, gamma=0.9, tau=0.1, n_step=2),
        )
    sac_policies = {
        name: TanhGaussianPolicy(actor_net(2), BOX, seed=seed + k) for k, name in enumerate(("a", "b"))
    }
    return MASAC(
        env.columns,
        sac_policies["a"] if shared else sac_policies,
        critics,
        params=MASACParams(actor_lr=1e-2, critic_lr=1e-2, gamma=0.9, tau=0.1, alpha=0.2),
    )


def _trainer(kind: Kind, seed: int, *, shared: bool = False) -> OffPolicyTrainer:
    torch.manual_seed(seed)
    env, test_env = CoopReach(num_envs=2), CoopReach(num_envs=2)
    algorithm = _algorithm(kind, env, seed, shared)
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


def _state_tensors(algorithm: MADDPG | MASAC) -> list[torch.Tensor]:
    modules = [algorithm.joint.actors, algorithm.joint.critics, algorithm.nets.target_critic.net]
    if isinstance(algorithm, MADDPG):
        modules.append(algorithm.nets.actor_target.net)
    tensors = [p.detach().clone() for module in modules for p in module.parameters()]
    if isinstance(algorithm, MASAC):
        tensors.append(algorithm.temperature.state())
    return tensors


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("kind", ["maddpg", "masac"])
def test_trains_through_the_off_policy_trainer_with_a_multi_agent_collector(kind: Kind, shared: bool) -> None:
    trainer = _trainer(kind, 0, shared=shared)
    algorithm = trainer.algorithm
    assert isinstance(algorithm, MADDPG | MASAC)
    assert len(algorithm.joint.actors) == (1 if shared else 2)
    assert len(algorithm.joint.critics) == (1 if shared else 2)
    before = _state_tensors(algorithm)
    info = trainer.run()
    assert info.gradient_step == 48  # 2 epochs x 24 env steps, one gradient step per env step
    after = _state_tensors(algorithm)
    changed = [not torch.equal(a, b) for a, b in zip(before, after, strict=True)]
    assert all(changed[: 2 if shared else 4])  # every actor's and critic's first weight moved
    assert all(torch.isfinite(t).all() for t in after)


@pytest.mark.parametrize("kind", ["maddpg", "masac"])
def test_same_seed_same_result_and_another_seed_differs(kind: Kind) -> None:
    runs = []
    for seed in (5, 5, 6):
        trainer = _trainer(kind, seed)
        trainer.run()
        assert isinstance(trainer.algorithm, MADDPG | MASAC)
        runs.append(_state_tensors(trainer.algorithm))
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(runs[0], runs[2], strict=True))


@pytest.mark.parametrize("kind", ["maddpg", "masac"])
def test_save_load_round_trip_then_the_same_next_update(kind: Kind) -> None:
    trained = _trainer(kind, 1)
    trained.run()
    source = trained.algorithm
    fresh = _trainer(kind, 2).algorithm
    assert isinstance(source, MADDPG | MASAC) and isinstance(fresh, type(source))
    fresh.load_state_dict(copy.deepcopy(source.state_dict()))
    assert all(torch.equal(a, b) for a, b in zip(_state_tensors(source), _state_tensors(fresh), strict=True))
    buffer = trained.params.training_collector.buffer
    assert isinstance(buffer, VectorReplayBuffer)
    twin = copy.deepcopy(buffer)
    a, b = source.update(buffer, 8), fresh.update(twin, 8)
    assert a.critic_loss == b.critic_loss and a.actor_loss == b.actor_loss
    assert all(torch.equal(x, y) for x, y in zip(_state_tensors(source), _state_tensors(fresh), strict=True))
    # and the update did something
    assert math.isfinite(a.critic_loss)
