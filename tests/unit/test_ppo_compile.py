"""``PPOParams(compile_loss=True)``: the mini-batch loss through ``torch.compile`` gives the losses of
the eager loss to float tolerance, for a categorical and a Gaussian policy, with a clip schedule (the
clip range reaches the compiled loss as a tensor) and a short last mini-batch.

Slow: the first compilation takes 5-20 s per policy kind on a CPU (Inductor generates C++)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from tshtrain.algorithm import PPO, CategoricalPolicy, GaussianPolicy, PPOParams
from tshtrain.algorithm.blocks.schedules import LinearSchedule
from tshtrain.data import RolloutBatch

pytestmark = pytest.mark.slow


def make_ppo(box: bool, compile_loss: bool) -> PPO:
    torch.manual_seed(0)  # the same initial weights for the eager and the compiled run
    actor = nn.Sequential(nn.Linear(3, 16), nn.ELU(), nn.Linear(16, 2))
    critic = nn.Sequential(nn.Linear(3, 16), nn.ELU(), nn.Linear(16, 1))
    policy: CategoricalPolicy | GaussianPolicy
    if box:
        policy = GaussianPolicy(actor, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), seed=1)
    else:
        policy = CategoricalPolicy(actor, gym.spaces.Discrete(2), seed=1)
    params = PPOParams(
        lr=1e-3, compile_loss=compile_loss, clip_schedule=LinearSchedule(num_update_steps=4), ent_coef=0.01
    )
    return PPO(policy=policy, critic=critic, params=params, seed=1)


def rollout(box: bool, num_t: int = 8, num_e: int = 6) -> RolloutBatch:
    rng = np.random.default_rng(0)
    shape = (num_t, num_e)
    act = rng.uniform(-1, 1, (*shape, 2)).astype(np.float32) if box else rng.integers(0, 2, shape)
    terminated = rng.random(shape) < 0.1
    boundary = terminated.copy()
    boundary[-1] = True
    return RolloutBatch(
        obs=rng.normal(size=(*shape, 3)).astype(np.float32),
        act=act,
        rew=rng.normal(size=shape).astype(np.float32),
        terminated=terminated,
        truncated=np.zeros(shape, dtype=bool),
        obs_next=rng.normal(size=(*shape, 3)).astype(np.float32),
        boundary=boundary,
        valid=np.ones(shape, dtype=bool),
    )


@pytest.mark.parametrize("box", [False, True], ids=["categorical", "gaussian"])
def test_compiled_loss_equals_eager(box: bool) -> None:
    data = rollout(box)
    runs = []
    for compile_loss in (False, True):
        algorithm = make_ppo(box, compile_loss)
        stats = [algorithm.update(data, batch_size=20, num_repetitions=2) for _ in range(3)]  # 48 = 20+20+8
        runs.append((stats, [p.detach().clone() for p in algorithm.ac.parameters]))
    (eager, eager_params), (compiled, compiled_params) = runs
    for e, c in zip(eager, compiled, strict=True):
        for name in (
            "loss",
            "policy_loss",
            "value_loss",
            "entropy",
            "approx_kl",
            "clip_fraction",
            "grad_norm",
        ):
            assert getattr(c, name) == pytest.approx(getattr(e, name), rel=1e-4, abs=1e-5), name
        assert c.clip_range == e.clip_range
    for e_param, c_param in zip(eager_params, compiled_params, strict=True):
        torch.testing.assert_close(c_param, e_param, rtol=1e-4, atol=1e-5)
