"""C51, QR-DQN, IQN and Rainbow in the config layer: ``algorithm.name: c51`` (``qrdqn``, ``iqn``,
``rainbow``) in an experiment file builds the algorithm with its network section, rejects what the
networks cannot take with the field named, and ``tshtrain train`` runs it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from tshtrain.algorithm import (
    C51,
    IQN,
    QRDQN,
    C51Params,
    CategoricalQNet,
    ImplicitQuantileNet,
    NoisyLinear,
    NoisyQPolicy,
    QuantileParams,
    QuantileQNet,
    QValuePolicy,
    Rainbow,
)
from tshtrain.cli import main
from tshtrain.config import SPECS, default_experiment, resolve_experiment
from tshtrain.config.build import build_algorithm
from tshtrain.errors import ExperimentError

CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
TWO_ACTIONS = gym.spaces.Discrete(2)
NAMES = ("c51", "qrdqn", "iqn", "rainbow")


def _build(name: str, **sections: Any) -> Any:
    experiment = resolve_experiment({"algorithm": {"name": name, **sections}})
    return build_algorithm(experiment, CARTPOLE_OBS, TWO_ACTIONS)


@pytest.mark.parametrize("name", NAMES)
def test_registered_with_tianshous_test_setup(name: str) -> None:
    assert name in SPECS
    experiment = default_experiment(name)
    assert experiment.env.id == "CartPole-v1"
    params = experiment.algorithm.params
    assert (params["gamma"], params["n_step"], params["target_update_freq"]) == (0.9, 3, 320)
    assert experiment.algorithm.network["hidden_sizes"] == [128, 128, 128, 128]
    assert experiment.trainer["stop_score"] == 195.0


def test_c51_builds_its_categorical_network() -> None:
    algorithm = _build("c51", params={"gamma": 0.9}, network={"num_atoms": 11, "v_min": -5, "v_max": 5})
    assert isinstance(algorithm, C51)
    assert algorithm.params == C51Params(gamma=0.9, n_step=3, target_update_freq=320)  # the defaults' rest
    net = algorithm.policy.q_net
    assert isinstance(net, CategoricalQNet) and net.num_atoms == 11
    assert net.support[0].item() == -5.0 and net.support[-1].item() == 5.0
    assert isinstance(algorithm.policy, QValuePolicy)


def test_qrdqn_builds_its_quantile_network() -> None:
    algorithm = _build("qrdqn", params={"kappa": 2.0}, network={"num_quantiles": 17, "hidden_sizes": [8]})
    assert isinstance(algorithm, QRDQN)
    assert algorithm.params == QuantileParams(kappa=2.0, gamma=0.9, n_step=3, target_update_freq=320)
    net = algorithm.policy.q_net
    assert isinstance(net, QuantileQNet) and net.num_quantiles == 17


def test_iqn_builds_its_network_and_sampling() -> None:
    network = {"hidden_sizes": [16], "num_cosines": 5, "num_online_taus": 3, "num_target_taus": 4}
    algorithm = _build("iqn", network=network)
    assert isinstance(algorithm, IQN)
    net = algorithm.policy.q_net
    assert isinstance(net, ImplicitQuantileNet) and net.cos_freqs.shape == (5,)
    assert (algorithm.sampling.num_online_taus, algorithm.sampling.num_target_taus) == (3, 4)


def test_rainbow_builds_a_noisy_dueling_policy() -> None:
    algorithm = _build("rainbow", network={"noisy_sigma0": 0.3, "hidden_sizes": [8]})
    assert isinstance(algorithm, Rainbow)
    assert isinstance(algorithm.policy, NoisyQPolicy)
    net = algorithm.policy.q_net
    assert isinstance(net, CategoricalQNet) and net.value_head is not None  # dueling by default
    noisy = [m for m in net.modules() if isinstance(m, NoisyLinear)]
    assert noisy
    for layer in noisy:  # sigma starts at sigma0 / sqrt(in_features)
        expected = torch.full_like(layer.sigma_bias, 0.3 / math.sqrt(layer.in_features))
        assert torch.allclose(layer.sigma_bias, expected)


@pytest.mark.parametrize("name", NAMES)
def test_epsilon_schedule_comes_from_the_exploration_section(name: str) -> None:
    algorithm = _build(name, exploration={"eps_start": 0.5, "eps_end": 0.2, "eps_decay_env_steps": 100})
    policy = getattr(algorithm.policy, "q_policy", algorithm.policy)
    schedule = policy.eps_schedule
    assert (schedule.start, schedule.end, schedule.num_env_steps) == (0.5, 0.2, 100)


@pytest.mark.parametrize(
    ("name", "network", "match"),
    [
        ("c51", {"v_min": 1.0, "v_max": 1.0}, r"algorithm\.network.*v_max must be > v_min"),
        ("rainbow", {"num_atoms": 1}, r"algorithm\.network.*num_atoms"),
        ("qrdqn", {"num_quantiles": 1}, r"algorithm\.network.*num_quantiles"),
        ("iqn", {"activation": "tanh"}, r"algorithm\.network.*activation"),
        ("rainbow", {"noisy_sigma0": 0.0}, r"algorithm\.network.*noisy_sigma0"),
    ],
)
def test_bad_network_sections_name_the_field(name: str, network: dict[str, Any], match: str) -> None:
    with pytest.raises(ExperimentError, match=match):
        resolve_experiment({"algorithm": {"name": name, "network": network}})


@pytest.mark.parametrize("name", NAMES)
def test_box_actions_and_image_observations_are_rejected(name: str) -> None:
    experiment = resolve_experiment({"algorithm": {"name": name}})
    with pytest.raises(ExperimentError, match=f"{name} needs a Discrete action space, got Box"):
        build_algorithm(experiment, CARTPOLE_OBS, gym.spaces.Box(-1.0, 1.0, (1,), np.float32))
    image = gym.spaces.Box(0, 255, (3, 40, 40), np.uint8)
    with pytest.raises(ExperimentError, match=f"{name}'s network takes flat Box observations"):
        build_algorithm(experiment, image, TWO_ACTIONS)


@pytest.mark.parametrize("name", NAMES)
def test_tshtrain_train_runs_it(name: str, tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(
        f"algorithm: {{name: {name}, network: {{hidden_sizes: [16]}}}}\n"
        "env: {id: CartPole-v1, num_training_envs: 2, num_test_envs: 1}\n"
        "trainer: {max_epochs: 1, epoch_num_steps: 40, collection_step_num_env_steps: 8,"
        " update_step_num_gradient_steps_per_sample: 0.5, batch_size: 16, test_step_num_episodes: 1,"
        " show_progress: false, verbose: false}\n"
        "buffer: {size: 200, prefill_env_steps: 32}\n"
        "loggers: [{kind: csv}]\n"
    )
    run_dir = tmp_path / "run"
    assert main(["train", str(path), "-o", str(run_dir)]) == 0
    info = json.loads(next(run_dir.rglob("info_stats.json")).read_text())
    assert info["stop_reason"] == "max_epochs"
    assert info["gradient_step"] > 0
