"""Seed batches on CUDA (issue 35): ``PPO.stacked_update``, ``DQN.stacked_update`` and ``SAC.stacked_update``
on GPU members equal their members' own updates to float tolerance (the stacked Adam is torch's fused CUDA kernel), and
``tshtrain train --seeds`` of the torch CartPole on ``cuda`` trains every seed. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.unit import test_stacked_sac
from tests.unit.test_stacked_dqn import filled, make_dqn
from tests.unit.test_stacked_update import make_ppo, rollout
from tshtrain.algorithm import DQN, PPO, SAC
from tshtrain.cli import main

CUDA = torch.device("cuda")


@pytest.mark.parametrize("box", [False, True], ids=["categorical", "gaussian"])
def test_stacked_ppo_on_cuda(box: bool) -> None:
    solo = [make_ppo(s, box).to(CUDA) for s in range(3)]
    stacked = [make_ppo(s, box).to(CUDA) for s in range(3)]
    data = [rollout(s, box) for s in range(3)]
    for m, d in zip(solo, data, strict=True):
        m.update(d, batch_size=20, num_repetitions=2)
    PPO.stacked_update(stacked, data, batch_size=20, num_repetitions=2)
    for s, m in zip(solo, stacked, strict=True):
        for a, b in zip(s.ac.parameters, m.ac.parameters, strict=True):
            assert b.device.type == "cuda"
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_stacked_dqn_on_cuda() -> None:
    solo, stacked = [make_dqn(s).to(CUDA) for s in range(3)], [make_dqn(s).to(CUDA) for s in range(3)]
    solo_buffers, stacked_buffers = [filled(s) for s in range(3)], [filled(s) for s in range(3)]
    for m, b in zip(solo, solo_buffers, strict=True):
        for _ in range(4):
            m.update(b, 16)
    DQN.stacked_update(stacked, stacked_buffers, 16, 4)
    for s, m in zip(solo, stacked, strict=True):
        for a, b in zip(s.policy.q_net.parameters(), m.policy.q_net.parameters(), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("plain", [True, False], ids=["baddbmm", "vmap"])
def test_stacked_sac_on_cuda(plain: bool) -> None:
    """The members' noise is drawn from their CUDA generators; the stacked target critics are averaged on
    the GPU."""
    make = test_stacked_sac.make_sac
    solo = [make(s, plain=plain).to(CUDA) for s in range(3)]
    stacked = [make(s, plain=plain).to(CUDA) for s in range(3)]
    solo_buffers = [test_stacked_sac.filled(s) for s in range(3)]
    stacked_buffers = [test_stacked_sac.filled(s) for s in range(3)]
    for m, b in zip(solo, solo_buffers, strict=True):
        for _ in range(3):
            m.update(b, 16)
    SAC.stacked_update(stacked, stacked_buffers, 16, 3)
    for s, m in zip(solo, stacked, strict=True):
        for a, b in zip(test_stacked_sac.state(s), test_stacked_sac.state(m), strict=True):
            assert b.device.type == "cuda"
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_cli_seeds_on_cuda(tmp_path: Path) -> None:
    args = [
        "train", "--set", "device=cuda", "--set", "env.type=torch_cartpole", "--set", "loggers=[]",
        "--set", "trainer.max_epochs=1", "--set", "trainer.epoch_num_steps=512",
        "--seeds", "0-2", "-o", str(tmp_path),
    ]  # fmt: skip
    assert main(args) == 0
    for seed in range(3):
        assert (tmp_path / f"seed-{seed}" / "info_stats.json").is_file()


def test_lockstep_collection_on_cuda(tmp_path: Path) -> None:
    """PPO seeds on gymnasium CartPole (numpy envs) with their networks on CUDA: the collection runs in
    lockstep, the stacked pass on the GPU, and each seed learns what its own run learns."""
    from tests.contract.test_seed_batch_lockstep import built_run, weights
    from tshtrain.seeds import SeedBatch

    solo = [
        built_run("ppo", s, tmp_path / f"solo-{s}", "checkpoint.enabled=false", "device=cuda")
        for s in range(2)
    ]
    for run in solo:
        run.trainer.run()
    batched = [
        built_run("ppo", s, tmp_path / f"seed-{s}", "checkpoint.enabled=false", "device=cuda")
        for s in range(2)
    ]
    batch = SeedBatch([run.trainer for run in batched])
    batch.run()
    assert batch.num_lockstep_collections > 0
    for own, mine in zip(solo, batched, strict=True):
        for a, b in zip(weights(own.trainer), weights(mine.trainer), strict=True):
            assert b.device.type == "cuda"
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    for run in [*solo, *batched]:
        run.close()
