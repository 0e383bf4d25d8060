"""Each algorithm's example script uses the hyperparameters of that algorithm's default experiment
(tshtrain/config/defaults.py, ``tshtrain config ALGO``), so the two cannot drift apart.

The script is run up to the construction of its trainer, which is replaced by a recorder: the test reads
the algorithm's params object, the trainer params, the env counts and the training buffer it was given.
Budgets are the scripts' arguments (``max_epochs`` / ``max_env_steps`` / ``num_epochs``) and are not
compared; the stop threshold is compared through ``stop_fn``.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tshtrain.algorithm import EpsilonSchedule
from tshtrain.algorithm.blocks.schedules import Schedule
from tshtrain.config import SPECS, default_experiment, get_spec
from tshtrain.config.resolve import STOP_SCORE, build_params
from tshtrain.data import ReplayBuffer, VectorReplayBuffer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BUDGETS = frozenset({"max_epochs"})
"""trainer keys that the scripts take as arguments"""


class _TrainerBuiltError(Exception):
    """Raised by the recording trainer: the script has built everything it trains with."""

    def __init__(self, algorithm: Any, params: Any) -> None:
        super().__init__("built")
        self.algorithm = algorithm
        self.params = params


def _recorder(algorithm: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
    raise _TrainerBuiltError(algorithm, params)


@pytest.fixture
def examples() -> Iterator[Callable[[str], ModuleType]]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(EXAMPLES))


def _small_buffer(size: int, num_envs: int) -> VectorReplayBuffer:
    """A dataset standing in for the ones the offline scripts make by training an online agent."""
    from tshtrain.algorithm import CategoricalPolicy, DeterministicActorPolicy, mlp
    from tshtrain.data import Collector
    from tshtrain.env import make_vector_env

    env_id = "CartPole-v1" if size % 2 else "Pendulum-v1"
    envs = make_vector_env(env_id, num_envs)
    space = envs.single_action_space
    policy: Any = (
        CategoricalPolicy(mlp(4, 2, (8,)), space, seed=0)
        if env_id == "CartPole-v1"
        else DeterministicActorPolicy(mlp(3, 1, (8,)), space, seed=0)
    )
    buffer = VectorReplayBuffer(size, num_envs, seed=0)
    Collector(policy, envs, buffer, seed=0).collect(n_step=size - size % num_envs, random=True)
    envs.close()
    return buffer


def _build(name: str, module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> _TrainerBuiltError:
    for cls in ("OnPolicyTrainer", "OffPolicyTrainer", "OfflineTrainer"):
        if hasattr(module, cls):
            monkeypatch.setattr(module, cls, _recorder)
    if name == "bc":
        dqn = sys.modules["dqn_cartpole"]
        monkeypatch.setattr(module, "train_dqn", lambda seed, **_: (dqn.build(seed)[0], None))
        run: Callable[[], Any] = lambda: module.run(dataset_size=800, verbose=False)  # noqa: E731
    elif name in ("cql", "td3_bc"):
        data = sys.modules["cql_pendulum"].PendulumDataset(
            buffer=_small_buffer(600, 1), expert_return=-150.0, random_return=-1200.0
        )
        monkeypatch.setattr(module, "pendulum_dataset", lambda *_, **__: data)
        run = lambda: module.run(verbose=False)  # noqa: E731
    elif name == "discrete_cql":
        monkeypatch.setattr(module, "cartpole_dataset", lambda *_, **__: (_small_buffer(801, 1), 500.0))
        run = lambda: module.run(verbose=False)  # noqa: E731
    else:
        run = lambda: module.train(verbose=False)  # noqa: E731
    with pytest.raises(_TrainerBuiltError) as info:
        run()
    return info.value


def _compare_params(built: Any, expected: Any) -> None:
    assert type(built) is type(expected)
    for field in dataclasses.fields(expected):
        got, want = getattr(built, field.name), getattr(expected, field.name)
        if isinstance(want, Schedule) or isinstance(got, Schedule):
            # the number of update steps a schedule decays over follows the script's budget argument
            assert type(got) is type(want), field.name
        else:
            assert got == want, field.name


@pytest.mark.parametrize("name", [name for name, spec in SPECS.items() if spec.example is not None])
def test_example_script_uses_the_default_experiment(
    name: str, examples: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = get_spec(name)
    experiment = default_experiment(name)
    assert spec.example is not None
    module = examples(Path(spec.example).stem)
    built = _build(name, module, monkeypatch)

    _compare_params(built.algorithm.params, build_params(spec, experiment.algorithm.params))

    params = built.params
    tuned = spec.defaults["trainer"]  # the trainer values the default experiment states
    for key, value in tuned.items():
        if key == STOP_SCORE:
            assert params.stop_fn(value) and not params.stop_fn(value - 1e-6)
        elif key == "test_step_num_episodes" and params.test_collector is None:
            continue  # the offline scripts evaluate the final policy instead of testing every epoch
        elif key not in BUDGETS:
            assert getattr(params, key) == value, key
    if params.test_collector is not None:
        assert params.test_collector.num_envs == experiment.env.num_test_envs
    if hasattr(params, "training_collector"):
        collector = params.training_collector
        assert collector.num_envs == experiment.env.num_training_envs
        buffer = collector.buffer
        if name in ("ppo", "a2c"):  # on-policy: the buffer holds one collection step
            assert buffer.capacity == experiment.trainer["collection_step_num_env_steps"]
        else:
            assert buffer.capacity == experiment.buffer.size
            assert len(buffer) == experiment.buffer.prefill_env_steps
            assert isinstance(buffer, ReplayBuffer | VectorReplayBuffer)
    _compare_networks(built.algorithm, experiment, params)
    _compare_exploration(built.algorithm.policy, experiment.algorithm.exploration)


def _compare_exploration(policy: Any, exploration: dict[str, Any]) -> None:
    if "eps_start" in exploration:
        policy = getattr(policy, "q_policy", policy)  # Rainbow's NoisyQPolicy wraps the QValuePolicy
        assert policy.eps_schedule == EpsilonSchedule(
            start=exploration["eps_start"],
            end=exploration["eps_end"],
            num_env_steps=exploration["eps_decay_env_steps"],
        )
    if "noise_std" in exploration:
        assert policy.noise_std == exploration["noise_std"]


def _compare_networks(algorithm: Any, experiment: Any, params: Any) -> None:
    """The script's networks have the layer shapes of the networks the command line builds."""
    from tshtrain.config import build_algorithm

    collector = params.test_collector or getattr(params, "training_collector", None)
    if collector is None:
        from tshtrain.env import make_vector_env

        envs = make_vector_env(experiment.env.id, 1)
        spaces = envs.single_observation_space, envs.single_action_space
        envs.close()
    else:
        spaces = collector.env.single_observation_space, collector.env.single_action_space
    reference = build_algorithm(experiment, *spaces)
    assert _shapes(algorithm) == _shapes(reference)


def _shapes(algorithm: Any) -> dict[str, list[tuple[int, ...]]]:
    """The parameter shapes of each network of the algorithm (activations are not compared)."""
    return {
        name: [tuple(p.shape) for p in component.parameters()]
        for name, component in algorithm.components().items()
        if isinstance(component, torch.nn.Module)
    }
