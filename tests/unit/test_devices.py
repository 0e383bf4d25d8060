"""Devices: resolve_device, Algorithm.to, generators on their tensors' device, device-free tensor
creation (a runtime check under ``torch.set_default_device("meta")`` and a static ``ast`` lint), and
checkpoints loaded into freshly built algorithms with foreign (CUDA-like) generator states."""

from __future__ import annotations

import ast
import copy
import io
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.cuda._algorithms import (
    CASES,
    IDS,
    AlgorithmCase,
    collect_data,
    exercise,
    misplaced_state,
    probe_obs,
)
from tshtrain import devices
from tshtrain.devices import move_generator, resolve_device, restore_generator_state, seed_from_state
from tshtrain.errors import ConfigurationError

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "tshtrain"

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda.is_available() is False"),
        ],
    ),
]
"""the devices the runtime checks run on; the CUDA tier (``pytest -m cuda``) selects the second"""


# ---------------------------------------------------------------------------------------- resolve_device
def test_resolve_device_accepts_cpu_and_auto_here() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    expected = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    assert resolve_device("auto") == (expected or torch.device("cpu"))


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("gpu", r"device 'gpu' is not allowed; allowed: auto, cpu, cuda, cuda:N"),
        ("cuda:x", r"device 'cuda:x' is not allowed"),
        ("cpu:1", r"the CPU has no index 1"),
        ("", r"device '' is not allowed"),
    ],
)
def test_resolve_device_names_the_value_and_the_allowed_forms(spec: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        resolve_device(spec)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_resolve_device_says_cuda_is_not_available() -> None:
    with pytest.raises(ConfigurationError, match=r"cuda requested but torch.cuda.is_available\(\) is False"):
        resolve_device("cuda:0")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="needs a machine without MPS")
def test_resolve_device_says_mps_is_not_available() -> None:
    with pytest.raises(ConfigurationError, match=r"mps requested but torch.backends.mps.is_available"):
        resolve_device("mps")


# ---------------------------------------------------------------------------------------- generators
def test_move_generator_keeps_a_generator_already_on_the_device() -> None:
    generator = torch.Generator().manual_seed(3)
    assert move_generator(generator, torch.device("cpu")) is generator


def test_restore_generator_state_continues_the_stream() -> None:
    a = torch.Generator().manual_seed(5)
    b = torch.Generator().manual_seed(6)
    torch.rand(3, generator=a)
    assert restore_generator_state(b, a.get_state(), owner="test")
    assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))


def test_a_foreign_generator_state_reseeds_deterministically_and_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(devices, "_warned_state_sizes", set())  # warned once per process: forget it
    cuda_like_state = torch.arange(16, dtype=torch.uint8)  # a CUDA generator's state: seed and offset
    first, second = torch.Generator(), torch.Generator().manual_seed(99)
    with pytest.warns(RuntimeWarning, match="RNG state of a CUDA generator is not portable"):
        restored = restore_generator_state(first, cuda_like_state, owner="test.first")
    assert not restored
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second mismatch of the same kind does not warn again
        assert not restore_generator_state(second, cuda_like_state, owner="test.second")
    assert torch.equal(torch.rand(4, generator=first), torch.rand(4, generator=second))
    assert first.initial_seed() == seed_from_state(cuda_like_state)


# ---------------------------------------------------------------------------------------- Algorithm.to
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_to_the_current_device_changes_nothing(case: AlgorithmCase) -> None:
    algorithm = case.build(0)
    exercise(algorithm, collect_data(case, algorithm), num_updates=1)
    before = {path: value for path, value in _state_objects(algorithm)}
    assert algorithm.to("cpu") is algorithm
    after = {path: value for path, value in _state_objects(algorithm)}
    assert before.keys() == after.keys()
    assert all(after[path] is value for path, value in before.items())
    assert algorithm.device == torch.device("cpu")


def _state_objects(algorithm: Any) -> list[tuple[str, object]]:
    from tests.cuda._algorithms import _is_ours

    found: list[tuple[str, object]] = []
    for name, value in vars(algorithm).items():
        if isinstance(value, torch.Tensor | torch.Generator):
            found.append((name, value))
        elif _is_ours(value) and hasattr(value, "__dict__"):
            found.extend(
                (f"{name}.{k}", v)
                for k, v in vars(value).items()
                if isinstance(v, torch.Tensor | torch.Generator)
            )
    found.extend((f"param{i}", p) for i, p in enumerate(algorithm.policy.parameters()))
    found.append(("policy.generator", algorithm.policy.generator))
    for name, component in algorithm.components().items():
        if isinstance(component, torch.optim.Optimizer):
            for i, state in enumerate(component.state.values()):
                found.extend((f"{name}.{i}.{k}", v) for k, v in state.items())
    return found


# ---------------------------------------------------------------------------------------- runtime check
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_actions_and_updates_make_no_tensor_without_a_device(case: AlgorithmCase, device: str) -> None:
    """Built on ``device``; actions and updates run with torch's default device set to ``meta``, where
    any tensor made without an explicit device lands (and then fails on mixing or ``.numpy()``); after
    them every tensor and generator the algorithm holds is on its device."""
    algorithm = case.build(0, device)
    data = collect_data(case, algorithm)
    torch.set_default_device("meta")
    try:
        exercise(algorithm, data)
    finally:
        torch.set_default_device(None)
    assert algorithm.device == resolve_device(device)
    assert misplaced_state(algorithm, algorithm.device) == []


# ---------------------------------------------------------------------------------------- static lint
TENSOR_FACTORIES = frozenset(
    {"zeros", "ones", "full", "empty", "arange", "tensor", "as_tensor", "randn", "rand", "randint",
     "randperm", "linspace", "eye", "Generator"}
)  # fmt: skip
"""``torch.<name>(...)`` calls that must pass ``device=`` (``*_like`` factories take their input's)"""

ALLOWED_WITHOUT_DEVICE: dict[tuple[str, str, str], str] = {
    ("callbacks/builtin.py", "__post_init__", "Generator"): "the sub-sampler draws host-side "
    "indices into numpy arrays (never the network's device)",
    ("callbacks/builtin.py", "after_collect", "randperm"): "host-side indices, used as numpy",
    ("callbacks/builtin.py", "on_sampled_batch", "randperm"): "host-side indices, used as numpy",
}
"""(file under tshtrain/, enclosing function, factory) -> why it may use the default device"""


def _calls_without_device(path: Path) -> list[tuple[str, str, int]]:
    """(enclosing function, factory, line) of every ``torch.<factory>(...)`` call in ``path`` that
    passes no ``device=`` keyword."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            func = getattr(child, "func", None)
            if (
                isinstance(child, ast.Call)
                and isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "torch"
                and func.attr in TENSOR_FACTORIES
                and not any(k.arg == "device" for k in child.keywords)
            ):
                found.append((function, func.attr, child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_every_tensor_factory_and_generator_names_its_device() -> None:
    offenders, used = [], set()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR).as_posix()
        for function, factory, line in _calls_without_device(path):
            if (rel, function, factory) in ALLOWED_WITHOUT_DEVICE:
                used.add((rel, function, factory))
            else:
                offenders.append(f"tshtrain/{rel}:{line} torch.{factory}(...) in {function}() has no device=")
    assert offenders == [], "pass device= (the owner's params, batch or policy.device):\n" + "\n".join(
        offenders
    )
    assert used == set(ALLOWED_WITHOUT_DEVICE), (
        f"stale allow-list entries: {set(ALLOWED_WITHOUT_DEVICE) - used}"
    )


def test_the_lint_finds_a_factory_without_device(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import torch\n"
        "def f(x):\n"
        "    a = torch.zeros(3, device=x.device)\n"
        "    return torch.zeros(()) + a, torch.Generator()\n"
    )
    assert _calls_without_device(source) == [("f", "zeros", 4), ("f", "Generator", 4)]


# ---------------------------------------------------------------------------------------- checkpoints
def _foreign_generator_states(state: Any) -> Any:
    """``state`` with every torch generator state replaced by a 16-byte CUDA-like one (what a CPU
    machine reads from a checkpoint written on a GPU)."""
    if isinstance(state, dict):
        return {k: _foreign_generator_states(v) for k, v in state.items()}
    if isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.numel() == 5056:
        return torch.arange(16, dtype=torch.uint8) + state[:16]
    return state


def _same_data(case: AlgorithmCase) -> Any:
    """The same data on every call: a buffer samples from its own generator, so each use needs its own."""
    return collect_data(case, case.build(3), seed=3)


def _round_trip(case: AlgorithmCase, foreign_generators: bool) -> tuple[Any, Any, Any]:
    trained = case.build(0)
    exercise(trained, collect_data(case, trained), num_updates=2)
    blob = io.BytesIO()
    torch.save(trained.state_dict(), blob)
    blob.seek(0)
    state = torch.load(blob, weights_only=True, map_location="cpu")
    if foreign_generators:
        state = _foreign_generator_states(state)
    fresh = case.build(7)  # other weights and seeds: everything must come from the checkpoint
    fresh.load_state_dict(copy.deepcopy(state))  # an optimizer adopts the loaded tensors on their device
    return trained, fresh, state


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_checkpoint_loads_into_a_freshly_built_algorithm(case: AlgorithmCase) -> None:
    trained, fresh, _ = _round_trip(case, foreign_generators=False)
    obs = probe_obs(case)
    with torch.inference_mode():
        expected = trained.policy.actions(obs, deterministic=True)
        torch.testing.assert_close(fresh.policy.actions(obs, deterministic=True), expected, rtol=0, atol=0)
    assert exercise(fresh, _same_data(case), num_updates=2) == exercise(
        trained, _same_data(case), num_updates=2
    )
    assert misplaced_state(fresh, fresh.device) == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_generator_states_from_another_device_type_reseed_deterministically(case: AlgorithmCase) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        trained, first, state = _round_trip(case, foreign_generators=True)
        second = case.build(11)
        second.load_state_dict(copy.deepcopy(state))
    obs = probe_obs(case)
    with torch.inference_mode():
        expected = trained.policy.actions(obs, deterministic=True)
        torch.testing.assert_close(first.policy.actions(obs, deterministic=True), expected, rtol=0, atol=0)
    assert exercise(first, _same_data(case), num_updates=2) == exercise(
        second, _same_data(case), num_updates=2
    )


# ---------------------------------------------------------------------------------------- the run's device
def test_trainer_options_device_is_checked_when_the_options_are_made() -> None:
    from tshtrain.trainer import TrainerOptions

    assert TrainerOptions(device="cpu").device == "cpu"
    with pytest.raises(
        ConfigurationError, match=r"TrainerOptions.device: device 'gpu' is not allowed; allowed"
    ):
        TrainerOptions(device="gpu")


@pytest.mark.parametrize(("device", "calls"), [(None, []), ("cpu", [torch.device("cpu")])])
def test_the_trainer_moves_the_algorithm_to_the_options_device(
    device: str | None, calls: list[torch.device], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams, TrainerOptions

    case = next(c for c in CASES if c.name == "Reinforce")
    algorithm = case.build(0)
    seen: list[torch.device] = []
    original = algorithm.to
    monkeypatch.setattr(algorithm, "to", lambda d: (seen.append(d), original(d))[1])
    params = OnPolicyTrainerParams(
        training_collector=Collector(
            algorithm.policy, make_vector_env(case.env_id, 1), VectorReplayBuffer(8, 1), seed=0
        ),
        test_collector=Collector(algorithm.policy, make_vector_env(case.env_id, 1), seed=1),
        max_epochs=1,
        epoch_num_steps=8,
        collection_step_num_env_steps=8,
        test_step_num_episodes=1,
        show_progress=False,
    )
    OnPolicyTrainer(algorithm, params, options=TrainerOptions(device=device)).close()
    assert seen == calls


def test_the_experiment_device_key() -> None:
    from tshtrain.config import load_experiment
    from tshtrain.errors import ExperimentError

    assert load_experiment(None).device == "auto"
    assert load_experiment(None, ["device=cpu"]).device == "cpu"
    assert load_experiment(None, ["device=CUDA:1"]).device == "cuda:1"  # checked against the machine later
    with pytest.raises(
        ExperimentError, match=r"--set: device: allowed: auto, cpu, cuda, cuda:N .*\(got 'gpu'\)"
    ):
        load_experiment(None, ["device=gpu"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_run_on_a_missing_device_fails_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tshtrain.cli import main

    assert main(["train", "--set", "device=cuda", "-o", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "device 'cuda': cuda requested but torch.cuda.is_available() is False" in err
    assert not (tmp_path / "run").exists()
    assert main(["train", "--set", "device=tpu", "-o", str(tmp_path / "run")]) == 1
    assert "device: allowed: auto, cpu, cuda, cuda:N" in capsys.readouterr().err
