"""A user's own torchrun script (no ``os._exit``) exits cleanly after a 2-rank run.

Before the fix, about half of such launches aborted with SIGABRT at interpreter exit: the process group
outlived ``DistributedContext.close()`` (``torch.distributed.nn.functional``, imported by the first
optimizer, held it as a default argument), so gloo's worker threads were still alive when the
interpreter finalized (docs/scaling.md, "Leaving the process group"). The abort is a race, so each
rank also checks the deterministic precondition: after the context is closed, no gloo worker thread is
left (Linux: ``/proc/self/task``), and ``close()`` did not warn that the group is still referenced.

Loopback only; each launch is a tiny PPO CartPole run (2 ranks x 2 envs, one epoch).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_GUARD_SECONDS = 900  # a hang guard, far above a launch on a loaded machine
"""how long a launch may take before the test calls it hung (not a speed assertion)"""

USER_SCRIPT = """
import atexit, os, sys, warnings
import torch
from tshtrain.algorithm import PPO, CategoricalPolicy, PPOParams, mlp
from tshtrain.data import Collector, VectorReplayBuffer
from tshtrain.distributed import DistributedContext
from tshtrain.parallel import DataParallel
from tshtrain.env import make_vector_env
from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams, TrainerOptions

ENDING = sys.argv[1]  # close | with | atexit | held


def gloo_threads():
    if not os.path.isdir("/proc/self/task"):
        return []
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return [name for name in names if "gloo" in name]


def check_clean(rank):
    left = gloo_threads()
    if left:
        print(f"rank {rank}: gloo threads alive after close: {left}", flush=True)
        os._exit(3)
    print(f"rank {rank}: exit clean", flush=True)


def train(context):
    torch.set_num_threads(1)
    envs, test_envs = make_vector_env("CartPole-v1", 2), make_vector_env("CartPole-v1", 2)
    torch.manual_seed(0)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), envs.single_action_space, seed=0)
    algorithm = PPO(policy=policy, critic=mlp(4, 1, (16,)), params=PPOParams(lr=1e-3), seed=0)
    buffer = VectorReplayBuffer(64, 2)
    trainer = OnPolicyTrainer(
        algorithm,
        OnPolicyTrainerParams(
            training_collector=Collector(policy, envs, buffer, seed=context.env_seed(0, 2)),
            test_collector=Collector(policy, test_envs, seed=1000),
            max_epochs=1, epoch_num_steps=128, collection_step_num_env_steps=64, batch_size=32,
            update_step_num_repetitions=1, test_step_num_episodes=1, verbose=False, show_progress=False,
        ),
        TrainerOptions(distributed=DataParallel(context), close_envs=True),
    )
    info = trainer.run()
    # the last collective right before leaving: the ending most likely to abort before the fix
    context.all_gather_object({"rank": context.rank, "env_steps": info.train_step})


warnings.simplefilter("error", RuntimeWarning)  # close() warning that the group is still held fails
if ENDING == "atexit":
    rank = int(os.environ["RANK"])
    atexit.register(check_clean, rank)  # registered first, so it runs after the context's own hook
    train(DistributedContext.from_env(backend="gloo", timeout_seconds=60))
elif ENDING == "with":
    with DistributedContext.from_env(backend="gloo", timeout_seconds=60) as context:
        train(context)
    check_clean(context.rank)
elif ENDING == "close":
    context = DistributedContext.from_env(backend="gloo", timeout_seconds=60)
    train(context)
    context.close()
    check_clean(context.rank)
else:  # held: the script keeps the group alive itself; close() warns
    import torch.distributed as dist
    context = DistributedContext.from_env(backend="gloo", timeout_seconds=60)
    held = dist.group.WORLD
    try:
        context.close()
    except RuntimeWarning as warning:
        print(f"rank {context.rank}: warned: {warning}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # the documented way out when something holds the group
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _launch(script: Path, ending: str, *, nproc: int = 2) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "OMP_NUM_THREADS": "1",
    }
    command = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--max-restarts=0",
        "--master_addr=127.0.0.1", f"--master_port={_free_port()}", str(script), ending,
    ]  # fmt: skip
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=LAUNCH_GUARD_SECONDS, check=False
    )


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "user_script.py"
    path.write_text(USER_SCRIPT)
    return path


@pytest.mark.skipif(sys.platform != "linux", reason="checks gloo's threads through /proc/self/task")
@pytest.mark.parametrize("ending", ["close", "with", "atexit"])
def test_a_user_script_exits_cleanly_after_a_2_rank_run(script: Path, ending: str) -> None:
    """Three launches in all (one per way of leaving): every rank exits 0 with no gloo thread left."""
    done = _launch(script, ending)
    output = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, output
    assert "terminate called" not in done.stderr, output
    for rank in (0, 1):
        assert f"rank {rank}: exit clean" in done.stdout, output


def test_close_warns_when_the_process_group_is_still_referenced(script: Path) -> None:
    done = _launch(script, "held", nproc=1)
    output = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, output
    assert "rank 0: warned: DistributedContext.close (rank 0): the process group is still referenced" in (
        done.stdout
    ), output
