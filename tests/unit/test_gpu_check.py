"""benchmarks/gpu_check.py cannot rot: its CPU smoke run (``--device cpu --quick``) runs every
contestant it can here and prints the table; and its bug flags say what benchmarks/README.md says."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.extras import need

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_gpu_check() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("gpu_check", BENCHMARKS / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration  # needs the optional vmas package
def test_cpu_quick_run_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    need("vmas", "vmas")
    gpu_check = load_gpu_check()
    assert gpu_check.main(["--device", "cpu", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "CUDA test tier: skipped (--device cpu)" in out
    for env in ("vmas", "cartpole"):
        for num_envs in (32, 64):
            for contestant in ("hand loop", "tshtrain"):
                assert any(
                    line.split()[:3] == [env, str(num_envs), contestant.split()[0]]
                    for line in out.splitlines()
                ), (env, num_envs, contestant)
    assert "FAILED" not in out
    if importlib.util.find_spec("rsl_rl") is None:
        assert "rsl_rl, vmas, 32 envs: skipped (rsl_rl is not installed" in out


def test_flags_name_what_would_be_a_bug() -> None:
    gpu_check = load_gpu_check()
    row = gpu_check.Row("vmas", 4096, "tshtrain", 0.0, 1e6, 100.0, 0.1, ratio=1.0)
    assert gpu_check.flags([row]) == []
    slow = gpu_check.Row("vmas", 4096, "tshtrain", 0.0, 1e6, 100.0, 3.0, ratio=0.5)
    assert [line.split(":")[1].strip().split()[1] for line in gpu_check.flags([slow])] == [
        "host<->device",
        "the",
    ]
    hand = gpu_check.Row("vmas", 4096, "hand loop", 0.0, 1e6, 100.0, 3.0, ratio=1.0)
    assert gpu_check.flags([hand]) == []
    greedy = gpu_check.Row("vmas", 4096, "tshtrain", 0.0, 1e6, 400.0, 0.1, ratio=1.0)
    assert gpu_check.flags([hand, greedy]) == [
        "BUG? tshtrain, vmas, 4096 envs: peak GPU memory 400 MiB, > 3x the hand loop's"
    ]
