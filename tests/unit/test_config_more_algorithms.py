"""NPG, TRPO, REDQ, IQL, BCQ and discrete CRR in the config layer: ``algorithm.name: npg`` (``trpo``,
``redq``, ``iql``, ``bcq``, ``discrete_crr``) in an experiment file builds the algorithm with its
network section, the params round-trip through the resolved experiment, bad values are refused with the
field named, and ``tshtrain train`` runs each with a tiny budget (the offline ones on a saved dataset)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from tshtrain.algorithm import (
    BCQ,
    IQL,
    NPG,
    REDQ,
    TRPO,
    BCQParams,
    CategoricalPolicy,
    DeterministicActorPolicy,
    DiscreteCRR,
    DiscreteCRRParams,
    GaussianPolicy,
    IQLParams,
    NPGParams,
    PolicyImprovement,
    REDQParams,
    REDQTarget,
    TRPOParams,
    mlp,
)
from tshtrain.cli import main
from tshtrain.config import SPECS, default_experiment, get_spec, resolve_experiment
from tshtrain.config.build import build_algorithm
from tshtrain.config.registry import Family
from tshtrain.config.resolve import build_params, experiment_data
from tshtrain.data import Collector, ReplayBuffer, save_buffer
from tshtrain.env import make_vector_env
from tshtrain.errors import ExperimentError

CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
TWO_ACTIONS = gym.spaces.Discrete(2)
PENDULUM_OBS = gym.spaces.Box(-8.0, 8.0, (3,), np.float32)
TORQUE = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
NAMES = ("npg", "trpo", "redq", "iql", "bcq", "discrete_crr")
FAMILIES = {
    "npg": Family.ON_POLICY,
    "trpo": Family.ON_POLICY,
    "redq": Family.OFF_POLICY,
    "iql": Family.OFFLINE,
    "bcq": Family.OFFLINE,
    "discrete_crr": Family.OFFLINE,
}


def _build(name: str, obs: gym.Space[Any], act: gym.Space[Any], **sections: Any) -> Any:
    experiment = resolve_experiment({"algorithm": {"name": name, **sections}})
    return build_algorithm(experiment, obs, act)


@pytest.mark.parametrize("name", NAMES)
def test_registered_with_its_family_and_example_file(name: str) -> None:
    spec = get_spec(name)
    assert spec.family is FAMILIES[name]
    assert Path(__file__).resolve().parents[2].joinpath(spec.example_config).is_file()
    experiment = default_experiment(name)
    assert (experiment.dataset is not None) == (spec.family is Family.OFFLINE)


def test_npg_and_trpo_build_with_the_tianshou_test_setup() -> None:
    npg = _build("npg", CARTPOLE_OBS, TWO_ACTIONS)
    assert isinstance(npg, NPG) and isinstance(npg.policy, CategoricalPolicy)
    assert npg.params == NPGParams(gamma=0.99)
    trpo = _build("trpo", PENDULUM_OBS, TORQUE, params={"max_kl": 0.02, "max_backtracks": 3})
    assert isinstance(trpo, TRPO) and isinstance(trpo.policy, GaussianPolicy)
    assert trpo.params == TRPOParams(gamma=0.99, max_kl=0.02, max_backtracks=3)
    widths = [m.out_features for m in trpo.critic.modules() if hasattr(m, "out_features")]
    assert widths == [64, 64, 1]


def test_redq_builds_an_ensemble_of_num_critics() -> None:
    algorithm = _build(
        "redq", PENDULUM_OBS, TORQUE, params={"target_mode": "mean"}, network={"num_critics": 6}
    )
    assert isinstance(algorithm, REDQ)
    assert algorithm.ensemble_size == 6
    assert algorithm.params == REDQParams(
        actor_lr=1e-4, alpha=0.2, subset_size=2, actor_delay=3, target_mode=REDQTarget.MEAN
    )


def test_iql_builds_a_value_network_of_its_own_width() -> None:
    algorithm = _build("iql", PENDULUM_OBS, TORQUE, network={"hidden_sizes": [8], "value_hidden_sizes": [5]})
    assert isinstance(algorithm, IQL)
    assert algorithm.params == IQLParams(beta=0.3)
    widths = [m.out_features for m in algorithm.value.modules() if hasattr(m, "out_features")]
    assert widths == [5, 1]


def test_bcq_builds_perturbation_vae_and_twin_critics() -> None:
    network = {"phi": 0.1, "latent_dim": 3, "vae_hidden_sizes": [7], "num_forward_sampled_actions": 4}
    algorithm = _build("bcq", PENDULUM_OBS, TORQUE, network=network, params={"lmbda": 1.0})
    assert isinstance(algorithm, BCQ)
    assert algorithm.params == BCQParams(lmbda=1.0)
    policy = algorithm.policy
    assert policy.perturbation.phi == 0.1
    assert policy.vae.latent_dim == 3
    assert policy.num_forward_sampled_actions == 4


def test_discrete_crr_builds_actor_and_critic() -> None:
    algorithm = _build(
        "discrete_crr",
        CARTPOLE_OBS,
        TWO_ACTIONS,
        params={"policy_improvement": "binary"},
        network={"critic_hidden_sizes": [9]},
    )
    assert isinstance(algorithm, DiscreteCRR)
    assert algorithm.params == DiscreteCRRParams(
        lr=7e-4, policy_improvement=PolicyImprovement.BINARY, target_update_freq=320
    )
    widths = [m.out_features for m in algorithm.critic.modules() if hasattr(m, "out_features")]
    assert widths == [9, 2]


@pytest.mark.parametrize("name", NAMES)
def test_params_round_trip_through_the_resolved_experiment(name: str) -> None:
    """The resolved params, dumped (as OUTPUT_DIR/config.yaml is) and read again, build equal params."""
    spec = SPECS[name]
    experiment = default_experiment(name)
    text = yaml.safe_dump(experiment_data(experiment))
    again = resolve_experiment(yaml.safe_load(text))
    assert again == experiment
    params = build_params(spec, again.algorithm.params)
    assert isinstance(params, spec.params_cls)
    assert params == build_params(spec, experiment.algorithm.params)


@pytest.mark.parametrize(
    ("name", "section", "match"),
    [
        ("npg", {"params": {"trust_region_size": 0}}, r"algorithm\.params\.trust_region_size: 0"),
        ("trpo", {"params": {"backtrack_coeff": 1.5}}, r"algorithm\.params.*backtrack_coeff.*1\.5"),
        ("redq", {"params": {"target_mode": "median"}}, r"algorithm\.params\.target_mode: 'median'.*'min'"),
        ("redq", {"network": {"num_critics": 0}}, r"algorithm\.network.*num_critics"),
        ("iql", {"params": {"expectile": 1.5}}, r"algorithm\.params\.expectile: 1\.5"),
        ("bcq", {"network": {"phi": 3.0}}, r"algorithm\.network.*phi"),
        ("bcq", {"network": {"num_critics": 3}}, r"algorithm\.network.*num_critics"),
        ("discrete_crr", {"params": {"policy_improvement": "max"}}, r"policy_improvement: 'max'.*'exp'"),
        ("discrete_crr", {"network": {"dueling": True}}, r"algorithm\.network.*dueling"),
    ],
)
def test_bad_values_name_the_field(name: str, section: dict[str, Any], match: str) -> None:
    with pytest.raises(ExperimentError, match=match):
        resolve_experiment({"algorithm": {"name": name, **section}})


def test_redq_subset_larger_than_the_ensemble_is_refused_when_built() -> None:
    with pytest.raises(ExperimentError, match="subset_size"):
        _build("redq", PENDULUM_OBS, TORQUE, params={"subset_size": 5}, network={"num_critics": 4})


@pytest.mark.parametrize("name", ["redq", "iql", "bcq"])
def test_box_action_algorithms_refuse_discrete_actions(name: str) -> None:
    with pytest.raises(ExperimentError, match="Box"):
        _build(name, CARTPOLE_OBS, TWO_ACTIONS)


def test_discrete_crr_refuses_box_actions() -> None:
    with pytest.raises(ExperimentError, match="discrete_crr needs a Discrete action space"):
        _build("discrete_crr", PENDULUM_OBS, TORQUE)


def test_a_dataset_for_an_online_algorithm_lists_the_offline_ones() -> None:
    with pytest.raises(ExperimentError, match=r"dataset: redq .*\(bc, cql, td3_bc, discrete_cql, iql, bcq"):
        resolve_experiment({"algorithm": {"name": "redq"}, "dataset": {"path": "x"}})


def test_tshtrain_list_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert f"\n{name} " in out, name
    assert "example: examples/configs/bcq_pendulum.yaml" in out


def _dataset(tmp_path: Path, env_id: str) -> Path:
    envs = make_vector_env(env_id, 1)
    space = envs.single_action_space
    policy: Any = (
        CategoricalPolicy(mlp(4, 2, (8,)), space, seed=0)
        if isinstance(space, gym.spaces.Discrete)
        else DeterministicActorPolicy(mlp(3, 1, (8,)), space, seed=0)
    )
    buffer = ReplayBuffer(300, seed=0)
    Collector(policy, envs, buffer, seed=0).collect(n_step=300, random=True)
    envs.close()
    path = tmp_path / "dataset"
    save_buffer(buffer, path)
    return path


_TRAINERS = {
    Family.ON_POLICY: "{max_epochs: 1, epoch_num_steps: 64, collection_step_num_env_steps: 32,"
    " batch_size: null, update_step_num_repetitions: 1",
    Family.OFF_POLICY: "{max_epochs: 1, epoch_num_steps: 40, collection_step_num_env_steps: 8,"
    " update_step_num_gradient_steps_per_sample: 0.5, batch_size: 16",
    Family.OFFLINE: "{max_epochs: 1, epoch_num_steps: 10, batch_size: 16",
}


@pytest.mark.parametrize("name", NAMES)
def test_tshtrain_train_runs_it(name: str, tmp_path: Path) -> None:
    spec = SPECS[name]
    env_id = default_experiment(name).env.id
    lines = [
        f"algorithm: {{name: {name}, network: {{hidden_sizes: [16]}}}}",
        f"env: {{id: {env_id}, num_training_envs: 2, num_test_envs: 1}}",
        f"trainer: {_TRAINERS[spec.family]}, test_step_num_episodes: 1, stop_score: null,"
        " show_progress: false, verbose: false}",
        "loggers: [{kind: csv}]",
    ]
    if spec.family is Family.OFFLINE:
        lines.append(f"dataset: {{path: {_dataset(tmp_path, env_id)}}}")
    elif spec.family is Family.OFF_POLICY:
        lines.append("buffer: {size: 200, prefill_env_steps: 32}")
    path = tmp_path / "e.yaml"
    path.write_text("\n".join(lines) + "\n")
    run_dir = tmp_path / "run"
    assert main(["train", str(path), "-o", str(run_dir)]) == 0
    info = json.loads(next(run_dir.rglob("info_stats.json")).read_text())
    assert info["stop_reason"] == "max_epochs"
    assert info["gradient_step"] > 0
    written = resolve_experiment(yaml.safe_load((run_dir / "config.yaml").read_text()))
    assert written.algorithm.name == name


def test_the_docs_list_every_registered_algorithm() -> None:
    """docs/cli.md names the registered algorithms by family; a new registration must be added there."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("The registered algorithms (`algorithm.name`):")
    paragraph = " ".join(text[start : text.index("\n\n", start)].split())
    for family, label in ((Family.ON_POLICY, "on-policy"), (Family.OFF_POLICY, "off-policy")):
        names = [name for name, spec in SPECS.items() if spec.family is family]
        listed = paragraph.split(f" {label} ")[1].split(";")[0]
        assert sorted(listed.split(", ")) == sorted(names), family
    offline = paragraph.split(" offline ")[1].split(".")[0]
    assert sorted(offline.split(", ")) == sorted(n for n, s in SPECS.items() if s.family is Family.OFFLINE)


def _linear_weights(module: torch.nn.Module) -> list[torch.Tensor]:
    return [m.weight.detach() for m in module.modules() if isinstance(m, torch.nn.Linear)]


def test_trust_region_networks_are_orthogonal_unless_turned_off() -> None:
    algorithm = _build("npg", CARTPOLE_OBS, TWO_ACTIONS)
    for weight in _linear_weights(algorithm.policy) + _linear_weights(algorithm.critic):
        rows, cols = weight.shape
        gram = weight @ weight.T if rows <= cols else weight.T @ weight
        assert torch.allclose(gram, torch.eye(min(rows, cols)), atol=1e-5)
    plain = _build("trpo", CARTPOLE_OBS, TWO_ACTIONS, network={"orthogonal_init": False})
    first = _linear_weights(plain.policy)[0]
    assert not torch.allclose(first @ first.T, torch.eye(64), atol=1e-2)  # torch's default init


@pytest.mark.learning
@pytest.mark.parametrize("name", ["npg", "trpo"])
def test_default_experiment_solves_cartpole_on_2_of_seeds_0_to_2(name: str, tmp_path: Path) -> None:
    """``tshtrain train examples/configs/{npg,trpo}_cartpole.yaml`` (seconds on a CPU per seed). One
    seed's pass or fail flips with last-bit changes of the arithmetic (measured over seeds 0-9 of
    tests/learning/test_learning_npg_trpo.py: TRPO 9/10 with torch's tanh, 7/10 with FastTanh;
    NPG 8/10 and 10/10), so CI asks for 2 of 3 seeds. With orthogonal_init: false NPG's best on seed 0 was 470.3
    in 92,160 env steps."""
    config = Path(__file__).resolve().parents[2] / SPECS[name].example_config
    results = {}
    for seed in range(3):
        run_dir = tmp_path / f"run{seed}"
        args = [
            "--set",
            "trainer.show_progress=false",
            "--set",
            "loggers=[{kind: csv}]",
            "--set",
            f"seed={seed}",
        ]
        assert main(["train", str(config), *args, "-o", str(run_dir)]) == 0
        info = json.loads((run_dir / "info_stats.json").read_text())
        results[seed] = (info["stop_reason"], info["best_reward"], info["train_step"])
    solved = [seed for seed, (stop, best, _) in results.items() if stop == "stop_fn" and best >= 475.0]
    assert len(solved) >= 2, results
