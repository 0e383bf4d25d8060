"""``PPO.stacked_update`` (issue 35): K PPO runs updated in one pass over stacked networks give each
member the update it would get on its own (to float rounding), no number crosses members (bit for bit),
the members keep ordinary parameters and Adam state afterwards, and what cannot be stacked is refused."""

from __future__ import annotations

import copy
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import PPO, CategoricalPolicy, GaussianPolicy, PPOParams, mlp
from tshtrain.algorithm.blocks.schedules import LinearSchedule
from tshtrain.data import RolloutBatch
from tshtrain.errors import ConfigurationError

OBS = 3


def make_ppo(seed: int, box: bool, **overrides: object) -> PPO:
    torch.manual_seed(seed)
    actor = mlp(OBS, 2, (16, 16), nn.Tanh)
    critic = mlp(OBS, 1, (16, 16), nn.Tanh)
    policy: CategoricalPolicy | GaussianPolicy
    if box:
        policy = GaussianPolicy(actor, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), seed=seed)
    else:
        policy = CategoricalPolicy(actor, gym.spaces.Discrete(2), seed=seed)
    settings: dict[str, object] = {
        "lr": 1e-3,
        "ent_coef": 0.01,
        "max_grad_norm": 0.5,
        "clip_schedule": LinearSchedule(num_update_steps=5),
        **overrides,
    }
    params = PPOParams(**settings)  # type: ignore[arg-type]
    return PPO(policy=policy, critic=critic, params=params, seed=seed)


def rollout(seed: int, box: bool, num_t: int = 8, num_e: int = 6, reward_shift: float = 0.0) -> RolloutBatch:
    rng = np.random.default_rng(seed)
    shape = (num_t, num_e)
    act = rng.uniform(-1, 1, (*shape, 2)).astype(np.float32) if box else rng.integers(0, 2, shape)
    terminated = rng.random(shape) < 0.1
    truncated = (rng.random(shape) < 0.05) & ~terminated
    boundary = terminated | truncated
    boundary[-1] = True
    return RolloutBatch(
        obs=rng.normal(size=(*shape, OBS)).astype(np.float32),
        act=act,
        rew=(rng.normal(size=shape) + reward_shift).astype(np.float32),
        terminated=terminated,
        truncated=truncated,
        obs_next=rng.normal(size=(*shape, OBS)).astype(np.float32),
        boundary=boundary,
        valid=np.ones(shape, dtype=bool),
    )


def weights(ppo: PPO) -> list[torch.Tensor]:
    return [p.detach().clone() for p in ppo.ac.parameters]


def adam_moments(ppo: PPO) -> list[torch.Tensor]:
    return [
        t.clone()
        for p in ppo.ac.parameters
        for t in (ppo.ac.optim.state[p]["exp_avg"], ppo.ac.optim.state[p]["exp_avg_sq"])
    ]


@pytest.mark.parametrize("box", [False, True], ids=["categorical", "gaussian"])
def test_each_member_gets_its_own_update(box: bool) -> None:
    k = 3
    solo = [make_ppo(seed, box) for seed in range(k)]
    stacked = [make_ppo(seed, box) for seed in range(k)]
    for update in range(3):  # the second and third updates start from Adam state written back
        data = [rollout(10 * update + seed, box) for seed in range(k)]
        expected = [m.update(d, batch_size=20, num_repetitions=2) for m, d in zip(solo, data, strict=True)]
        got = PPO.stacked_update(stacked, data, batch_size=20, num_repetitions=2)  # 48 rows: 20 + 20 + 8
        for e, g in zip(expected, got, strict=True):
            for field in dataclasses.fields(e):
                assert getattr(g, field.name) == pytest.approx(getattr(e, field.name), rel=1e-4, abs=1e-5), (
                    field.name
                )
    for s, m in zip(solo, stacked, strict=True):
        for a, b in zip(weights(s), weights(m), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        for a, b in zip(adam_moments(s), adam_moments(m), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-9)
        assert m.ac.num_update_steps == s.ac.num_update_steps == 3
        assert m.ac.rng.get_state().equal(s.ac.rng.get_state())  # the same mini-batch orders were drawn
        step = next(iter(m.ac.optim.state.values()))["step"]
        assert float(step) == 3 * 6


def test_no_number_crosses_members() -> None:
    """Member 1's data changes; members 0 and 2 end bit for bit where they end without the change."""
    runs = []
    for shift in (0.0, 5.0):
        members = [make_ppo(seed, box=False) for seed in range(3)]
        data = [rollout(seed, False, reward_shift=shift if seed == 1 else 0.0) for seed in range(3)]
        for _ in range(2):
            PPO.stacked_update(members, data, batch_size=16, num_repetitions=2)
        runs.append([weights(m) for m in members])
    plain, changed = runs
    for k in (0, 2):
        for a, b in zip(plain[k], changed[k], strict=True):
            assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(plain[1], changed[1], strict=True))


def test_members_stay_ordinary_algorithms() -> None:
    """After a stacked update a member updates on its own as usual (its Adam state is a plain one)."""
    members = [make_ppo(seed, box=False) for seed in range(2)]
    twin = copy.deepcopy(members[0])
    data = rollout(0, False)
    PPO.stacked_update(members, [data, rollout(1, False)], batch_size=None, num_repetitions=1)
    twin.update(data, batch_size=None, num_repetitions=1)
    members[0].update(data, batch_size=None, num_repetitions=1)
    twin.update(data, batch_size=None, num_repetitions=1)
    for a, b in zip(weights(twin), weights(members[0]), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"recompute_advantage": True}, "does not take recompute_advantage"),
        ({"return_scaling": True}, "does not take return_scaling"),
        ({"desired_kl": 0.01}, "does not take desired_kl"),
        ({"max_grad_norm": 0.5, "grad_clip_scope": "per_network"}, "grad_clip_scope=per_network"),
    ],
)
def test_options_that_cannot_be_stacked_are_refused(overrides: dict[str, object], message: str) -> None:
    from tshtrain.algorithm.algos.ppo import GradClipScope

    if overrides.get("grad_clip_scope") == "per_network":
        overrides = {**overrides, "grad_clip_scope": GradClipScope.PER_NETWORK}
    members = [make_ppo(seed, False, **overrides) for seed in range(2)]
    with pytest.raises(ConfigurationError, match=message):
        PPO.stacked_update(
            members, [rollout(0, False), rollout(1, False)], batch_size=None, num_repetitions=1
        )


def test_members_that_differ_are_refused() -> None:
    a, b = make_ppo(0, False), make_ppo(1, False, clip_range=0.3)
    with pytest.raises(ConfigurationError, match="member 1's PPOParams differ"):
        PPO.stacked_update([a, b], [rollout(0, False)] * 2, batch_size=None, num_repetitions=1)
    torch.manual_seed(0)
    c = make_ppo(0, False)
    c.ac.critic[0] = nn.Linear(OBS, 32)  # another architecture
    with pytest.raises(ConfigurationError, match="differ from member 0's"):
        PPO.stacked_update([a, c], [rollout(0, False)] * 2, batch_size=None, num_repetitions=1)
    d = make_ppo(1, False)
    d.update(rollout(0, False), batch_size=None, num_repetitions=1)  # one update ahead
    with pytest.raises(ConfigurationError, match="lockstep"):
        PPO.stacked_update(
            [make_ppo(0, False), d], [rollout(0, False)] * 2, batch_size=None, num_repetitions=1
        )
    with pytest.raises(ConfigurationError, match="different numbers of steps"):
        PPO.stacked_update(
            [make_ppo(0, False), make_ppo(1, False)],
            [rollout(0, False), rollout(1, False, num_t=4)],
            batch_size=None,
            num_repetitions=1,
        )


def test_members_with_a_trunk_shared_by_actor_and_critic() -> None:
    """A layer in both the actor and the critic is one tensor per member: stacked once, tied in both."""

    def make(seed: int) -> PPO:
        torch.manual_seed(seed)
        trunk = nn.Sequential(nn.Linear(OBS, 16), nn.Tanh())
        actor, critic = nn.Sequential(trunk, nn.Linear(16, 2)), nn.Sequential(trunk, nn.Linear(16, 1))
        policy = CategoricalPolicy(actor, gym.spaces.Discrete(2), seed=seed)
        return PPO(policy=policy, critic=critic, params=PPOParams(lr=1e-3), seed=seed)

    solo, stacked = [make(s) for s in range(2)], [make(s) for s in range(2)]
    data = [rollout(s, False) for s in range(2)]
    for m, d in zip(solo, data, strict=True):
        m.update(d, batch_size=16, num_repetitions=2)
    PPO.stacked_update(stacked, data, batch_size=16, num_repetitions=2)
    for s, m in zip(solo, stacked, strict=True):
        assert len(weights(m)) == 6  # the trunk counted once
        for a, b in zip(weights(s), weights(m), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_a_parameter_without_gradients_keeps_no_adam_state() -> None:
    """A parameter no loss reaches has no Adam state in any member (as in a solo run), and later stacked
    updates still take the members."""
    members = [make_ppo(s, False) for s in range(2)]
    for m in members:
        m.ac.critic.register_parameter("unused", nn.Parameter(torch.zeros(3)))
        m.ac.optim.param_groups[0]["params"].append(m.ac.critic.unused)
        m.ac.parameters.append(m.ac.critic.unused)
    data = [rollout(0, False), rollout(1, False)]
    for _ in range(2):
        PPO.stacked_update(members, data, batch_size=None, num_repetitions=1)
    for m in members:
        assert m.ac.critic.unused not in m.ac.optim.state
        assert float(next(iter(m.ac.optim.state.values()))["step"]) == 2


@pytest.mark.parametrize("box", [False, True], ids=["categorical", "gaussian"])
def test_categorical_mlp_members_skip_vmap(box: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A categorical policy with MLP actor and critic: the loss runs on the stacked tensors (one baddbmm
    per layer, per-member means); a Gaussian policy (its log_std is no MLP layer) goes through vmap."""
    from tshtrain.algorithm.blocks.stacked_update import StackedMembers

    calls: list[int] = []
    original = StackedMembers.vmap

    def counted(self: StackedMembers, *args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(StackedMembers, "vmap", counted)
    members = [make_ppo(seed, box) for seed in range(2)]
    PPO.stacked_update(members, [rollout(seed, box) for seed in range(2)], batch_size=20, num_repetitions=1)
    assert (len(calls) > 0) is box
    assert all(type(m.policy.actor) is nn.Sequential for m in members)  # the networks are put back
