"""Experiment files: reading, overrides, resolving against the registry, and the errors users see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tshtrain.algorithm import PPOParams
from tshtrain.algorithm.blocks.schedules import LinearSchedule
from tshtrain.config import (
    SPECS,
    ExperimentError,
    apply_overrides,
    default_experiment,
    default_experiment_data,
    dumps,
    experiment_data,
    get_spec,
    load_experiment,
    read_file,
    resolve_experiment,
    write_atomic,
)
from tshtrain.config.defaults import TASK_EXAMPLES
from tshtrain.config.example_files import example_files
from tshtrain.config.files import merge_data
from tshtrain.config.resolve import build_params

EXAMPLE_CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"


@pytest.mark.parametrize("name", list(SPECS))
def test_default_experiment_resolves_to_a_fixed_point(name: str) -> None:
    experiment = resolve_experiment(default_experiment_data(name))
    again = resolve_experiment(experiment_data(experiment))
    assert again == experiment
    assert experiment.algorithm.name == name


@pytest.mark.parametrize("kind", ["yaml", "toml", "json"])
@pytest.mark.parametrize("name", ["ppo", "dqn", "sac", "cql"])
def test_dump_and_read_back_in_every_format(tmp_path: Path, kind: str, name: str) -> None:
    experiment = resolve_experiment(default_experiment_data(name))
    path = tmp_path / f"experiment.{kind}"
    path.write_text(dumps(experiment_data(experiment), kind))
    assert load_experiment(str(path)) == experiment


def _without_none(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value if v is not None]
    return value


@pytest.mark.parametrize("name", [*SPECS, *TASK_EXAMPLES])
def test_toml_output_reads_back_to_the_same_data(name: str) -> None:
    """tomli-w writes the TOML (it replaced a hand-written writer, whose layout differed: lists on one
    line, [[loggers]]); what it writes parses back to the experiment data less its None values."""
    import tomllib

    if name in TASK_EXAMPLES:
        experiment = resolve_experiment(dict(TASK_EXAMPLES[name][1]))
    else:
        experiment = resolve_experiment(default_experiment_data(name))
    data = experiment_data(experiment)
    assert tomllib.loads(dumps(data, "toml")) == _without_none(data)


def test_toml_quotes_the_keys_that_the_spec_does_not_allow_bare() -> None:
    """Env kwargs and agent names are the user's: the hand-written writer left a non-ASCII key bare
    (``é = 1``, which no TOML reader accepts)."""
    import tomllib

    data = {"env": {"kwargs": {"é": 1, "a.b": "x", "": [1.5, float("inf")], "with space": {"k": True}}}}
    assert tomllib.loads(dumps(data, "toml")) == data


def test_a_value_toml_cannot_hold_is_one_error() -> None:
    with pytest.raises(ExperimentError, match="cannot write the experiment as TOML"):
        dumps({"seed": object()}, "toml")


def test_user_values_are_laid_over_the_algorithm_defaults(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("algorithm:\n  name: ppo\n  params: {lr: 3.0e-4}\ntrainer: {max_epochs: 3}\n")
    experiment = load_experiment(str(path))
    assert experiment.algorithm.params["lr"] == 3e-4
    assert experiment.algorithm.params["gamma"] == 0.98  # the PPO default experiment's value
    assert experiment.algorithm.params["vf_coef"] == 0.5  # PPOParams' own default
    assert experiment.trainer["max_epochs"] == 3
    assert experiment.trainer["batch_size"] == 256


def test_overrides_are_parsed_as_yaml_and_create_sections() -> None:
    data = apply_overrides(
        {"trainer": {"max_epochs": 1}},
        ["trainer.max_epochs=5", "algorithm.network.hidden_sizes=[8,8]", "seed=3", "trainer.stop_score=null"],
    )
    assert data == {
        "trainer": {"max_epochs": 5, "stop_score": None},
        "algorithm": {"network": {"hidden_sizes": [8, 8]}},
        "seed": 3,
    }


def test_overrides_leave_the_input_unchanged() -> None:
    data = {"trainer": {"max_epochs": 1}}
    apply_overrides(data, ["trainer.max_epochs=5"])
    assert data == {"trainer": {"max_epochs": 1}}


def test_no_file_gives_the_default_ppo_cartpole_experiment() -> None:
    experiment = load_experiment(None, ["trainer.max_epochs=2"])
    assert experiment.algorithm.name == "ppo"
    assert experiment.env.id == "CartPole-v1"
    assert experiment.trainer["stop_score"] == 475.0
    assert experiment.trainer["max_epochs"] == 2


def test_linear_schedules_become_linear_schedule_objects() -> None:
    params = build_params(
        get_spec("ppo"),
        {"lr": 1e-3, "lr_schedule": "linear", "clip_schedule": "constant"},
        num_update_steps=40,
    )
    assert isinstance(params, PPOParams)
    assert params.lr_schedule == LinearSchedule(num_update_steps=40)
    assert params.clip_schedule is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "algorithm: {name: ppo, params: {lrr: 1}}",
            r"e\.yaml: algorithm\.params\.lrr: unknown key \(did you mean 'lr'\?\)",
        ),
        (
            "algorithm: {name: ppo, params: {gamma: 2}}",
            r"e\.yaml: algorithm\.params\.gamma: 2 is not allowed .*; expected a number in \[0, 1\]\.",
        ),
        (
            "algorithm: {name: ppo, params: {lr: fast}}",
            r"algorithm\.params\.lr: 'fast' is not allowed .*expected a finite number > 0",
        ),
        ("algorithm: {name: ppo, params: {lr_schedule: cosine}}", r"lr_schedule: 'cosine' is not allowed"),
        (
            "algorithm: {name: ppx}",
            r"e\.yaml: algorithm\.name: unknown algorithm 'ppx' \(did you mean 'ppo'\?\); allowed: ppo,",
        ),
        (
            "algorithm: {name: ppo}\nenv: {num_trainig_envs: 2}",
            r"env\.num_trainig_envs: unknown key \(did you mean 'num_training_envs'\?\)",
        ),
        (
            "algorithm: {name: ppo}\nenv: {num_test_envs: 0}",
            r"e\.yaml: env\.num_test_envs: Input should be greater than 0 \(got 0\)",
        ),
        ("algorithm: {name: ppo}\nsed: 1", r"e\.yaml: sed: unknown key \(did you mean 'seed'\?\)"),
        (
            "algorithm: {name: ppo}\nloggers: [{kind: wandb, projekt: x}]",
            r"loggers\[0\]\.projekt: unknown key \(did you mean 'project'\?\)",
        ),
        (
            "algorithm: {name: ppo}\nloggers: [{kind: neptune}]",
            r"loggers\.0: Input tag 'neptune' found using 'kind' does not match",
        ),
        (
            "algorithm: {name: ppo, network: {hidden: [8]}}",
            r"algorithm\.network\.hidden: unknown key \(did you mean 'hidden_sizes'\?\)",
        ),
        (
            "algorithm: {name: ppo, exploration: {eps_start: 1}}",
            r"algorithm\.exploration\.eps_start: unknown key; allowed in algorithm\.exploration \(ppo\): none",
        ),
        (
            "algorithm: {name: dqn, network: {activation: sigmoid}}",
            r"algorithm\.network\.activation: Input should be 'tanh', 'fast_tanh', 'relu'",
        ),
        (
            "algorithm: {name: ppo}\ntrainer: {update_step_num_gradient_steps_per_sample: 1}",
            r"trainer\.update_step_num_gradient_steps_per_sample: a field of the off-policy trainer, but ppo runs on "
            r"the on-policy trainer \(OnPolicyTrainerParams\)",
        ),
        (
            "algorithm: {name: sac}\ntrainer: {update_step_num_repetitions: 2}",
            r"a field of the on-policy trainer, but sac",
        ),
        (
            "algorithm: {name: ppo}\ntrainer: {max_epoch: 2}",
            r"trainer\.max_epoch: unknown key \(did you mean 'max_epochs'\?\)",
        ),
        (
            "algorithm: {name: ppo}\ntrainer: {batch_size: many}",
            r"trainer\.batch_size: 'many' is not allowed",
        ),
        (
            "algorithm: {name: cql}\nbuffer: {size: 10}",
            r"buffer: cql is an offline algorithm; it learns from `dataset`",
        ),
        (
            "algorithm: {name: ppo}\ndataset: {path: x}",
            r"dataset: ppo is an on-policy algorithm that collects its own data",
        ),
        (
            "algorithm: {name: cql}\ndataset: {}",
            r"dataset: Value error, give exactly one of path and minari_id",
        ),
        ("- just\n- a list", r"e\.yaml: the top level must be a mapping of sections, got list"),
        ("algorithm: {name: ppo", r"e\.yaml: not valid YAML"),
    ],
)
def test_errors_name_the_file_the_key_and_what_is_allowed(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(text)
    with pytest.raises(ExperimentError, match=expected):
        load_experiment(str(path))


def test_a_minari_dataset_replaces_the_default_dataset_path() -> None:
    data = {"algorithm": {"name": "cql"}, "dataset": {"minari_id": "pendulum/expert-v0"}}
    dataset = resolve_experiment(data).dataset
    assert dataset is not None and dataset.path is None and dataset.minari_id == "pendulum/expert-v0"


def test_unknown_suffix_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(
        ExperimentError, match=r"e\.ini: unknown experiment file suffix '\.ini'; use one of \.yaml"
    ):
        read_file(tmp_path / "e.ini")
    with pytest.raises(ExperimentError, match=r"nope\.yaml: cannot read the experiment file"):
        read_file(tmp_path / "nope.yaml")


def test_bad_overrides_are_named() -> None:
    with pytest.raises(ExperimentError, match=r"--set 'trainer\.max_epochs': expected KEY\.PATH=VALUE"):
        apply_overrides({}, ["trainer.max_epochs"])
    with pytest.raises(ExperimentError, match=r"--set 'seed\.x=1': seed is 0, not a section with keys"):
        apply_overrides({"seed": 0}, ["seed.x=1"])


def test_toml_and_json_files_are_read(tmp_path: Path) -> None:
    (tmp_path / "e.toml").write_text('[algorithm]\nname = "dqn"\n[trainer]\nmax_epochs = 2\n')
    (tmp_path / "e.json").write_text(json.dumps({"algorithm": {"name": "dqn"}, "trainer": {"max_epochs": 2}}))
    assert load_experiment(str(tmp_path / "e.toml")) == load_experiment(str(tmp_path / "e.json"))


def test_write_atomic_replaces_whole_files_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "config.yaml"
    write_atomic(target, "a: 1\n")
    write_atomic(target, "a: 2\n")
    assert target.read_text() == "a: 2\n"
    assert [p.name for p in target.parent.iterdir()] == ["config.yaml"]


ALGORITHM_EXAMPLES = sorted(p for p in EXAMPLE_CONFIGS.glob("*.yaml") if p.stem not in TASK_EXAMPLES)


@pytest.mark.parametrize("path", ALGORITHM_EXAMPLES, ids=lambda p: p.stem)
def test_example_configs_match_the_algorithm_defaults(path: Path) -> None:
    """An example experiment states the algorithm's default experiment, except that the two whose replay
    buffers are the offline examples' datasets set output_dir and buffer.save_on_exit (docs/cli.md)."""
    experiment = load_experiment(str(path))
    spec = get_spec(experiment.algorithm.name)
    default = resolve_experiment(default_experiment_data(spec.name))
    assert experiment.model_copy(update={"output_dir": None, "buffer": default.buffer}) == default
    assert set(spec.example_extras) <= {"output_dir", "buffer"}
    assert set(spec.example_extras.get("buffer", {})) <= {"save_on_exit"}
    if spec.example_extras:
        assert spec.name in ("dqn", "sac")
        assert experiment.output_dir == spec.example_extras["output_dir"] and experiment.buffer.save_on_exit
    else:
        assert experiment == default


def test_example_configs_are_generated_from_the_registry() -> None:
    """examples/configs/*.yaml are what scripts/generate_example_configs.py writes from the registry."""
    expected = example_files()
    root = EXAMPLE_CONFIGS.parents[1]
    assert {str(p.relative_to(root)) for p in EXAMPLE_CONFIGS.glob("*")} == set(expected)
    for relative, text in expected.items():
        assert (root / relative).read_text(encoding="utf-8") == text, f"{relative} is stale"


def test_default_experiment_is_the_resolved_default_data() -> None:
    assert default_experiment("a2c") == resolve_experiment(default_experiment_data("a2c"))
    assert default_experiment("a2c").algorithm.params["gae_lambda"] == 1.0


def test_every_algorithm_has_an_example_config_and_script() -> None:
    root = EXAMPLE_CONFIGS.parents[1]
    named = {load_experiment(str(p)).algorithm.name for p in EXAMPLE_CONFIGS.glob("*.yaml")}
    assert named == set(SPECS)
    for spec in SPECS.values():
        assert spec.example is None or (root / spec.example).is_file(), spec.example


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "algorithm: {name: ppo, params: {lr: .nan}}",
            r"e\.yaml: algorithm\.params\.lr: nan is not allowed \(Input should be a finite number\); "
            r"expected a finite number > 0\.",
        ),
        ("algorithm: {name: ppo, params: {gamma: .inf}}", r"algorithm\.params\.gamma: inf is not allowed"),
        ("algorithm: {name: ppo, params: {max_grad_norm: -.inf}}", r"max_grad_norm: -inf is not allowed"),
        ("algorithm: {name: ppo, params: {lr: true}}", r"algorithm\.params\.lr: True is not allowed"),
        (
            "algorithm: {name: dqn}\ntrainer: {update_step_num_gradient_steps_per_sample: .nan}",
            r"e\.yaml: trainer\.update_step_num_gradient_steps_per_sample: nan is not allowed \(Input should "
            r"be a finite number\); expected a finite number > 0\.",
        ),
        (
            "algorithm: {name: dqn}\ntrainer: {update_step_num_gradient_steps_per_sample: 0}",
            r"trainer\.update_step_num_gradient_steps_per_sample: 0 is not allowed \(Input should be greater "
            r"than 0\); expected a finite number > 0\.",
        ),
        (
            "algorithm: {name: ppo}\ntrainer: {stop_score: .nan}",
            r"e\.yaml: trainer\.stop_score: nan is not allowed \(Input should be a finite number\); expected "
            r"a finite number or None\.",
        ),
        (
            "algorithm: {name: ppo}\ntrainer: {max_epochs: 0}",
            r"e\.yaml: trainer\.max_epochs: 0 is not allowed \(Input should be greater than or equal to 1\); "
            r"expected an int >= 1\.",
        ),
        ("algorithm: {name: ppo}\ntrainer: {max_epochs: true}", r"trainer\.max_epochs: True is not allowed"),
        ("algorithm: {name: ppo}\ntrainer: {max_epochs: 2.5}", r"trainer\.max_epochs: 2\.5 is not allowed"),
        (
            "algorithm: {name: ppo}\ntrainer: {batch_size: -1}",
            r"trainer\.batch_size: -1 is not allowed .*expected an int >= 1 or None\.",
        ),
        (
            "algorithm: {name: ppo, network: {init_log_std: .inf}}",
            r"e\.yaml: algorithm\.network\.init_log_std: Input should be a finite number \(got inf\)",
        ),
        (
            "algorithm: {name: dqn, exploration: {eps_end: .nan}}",
            r"algorithm\.exploration\.eps_end: Input should be a finite number",
        ),
        (
            "algorithm: {name: dqn}\nbuffer: {alpha: .inf}",
            r"e\.yaml: buffer\.alpha: Input should be a finite number",
        ),
    ],
)
def test_nan_infinity_and_out_of_range_numbers_are_refused(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(text)
    with pytest.raises(ExperimentError, match=expected):
        load_experiment(str(path))


def test_long_values_are_cut_in_messages() -> None:
    with pytest.raises(ExperimentError) as info:
        resolve_experiment({"algorithm": {"name": "ppo"}, "trainer": {"max_epochs": "x" * 1000}}, "e.yaml")
    assert len(str(info.value)) < 250


def test_the_schema_comes_from_the_resolved_type_hints() -> None:
    from tshtrain.config.schema import SCHEDULE_TYPE, value_fields
    from tshtrain.constraints import PositiveFloat, PositiveInt
    from tshtrain.trainer import OffPolicyTrainerParams

    fields = value_fields(OffPolicyTrainerParams)
    assert fields["max_epochs"] == (PositiveInt, 100)
    assert fields["batch_size"] == (PositiveInt, 64)
    assert fields["collection_step_num_env_steps"] == (PositiveInt | None, 2048)
    assert fields["update_step_num_gradient_steps_per_sample"] == (PositiveFloat, 1.0)
    assert "test_collector" not in fields and "resume_from_log" not in fields and "logger" not in fields
    assert value_fields(PPOParams)["lr_schedule"] == (SCHEDULE_TYPE, None)
    assert value_fields(PPOParams)["lr"] == (PositiveFloat, 3e-4)


def test_off_policy_lr_schedules_in_files_decay_over_the_runs_gradient_steps() -> None:
    """``lr_schedule: linear`` of an off-policy algorithm decays over the run's gradient steps:
    max_epochs * ceil(epoch_num_steps / c) training steps of round(u * c) gradient steps, c the env steps
    of a collection step; without env-step collection it is refused."""
    import gymnasium as gym

    from tshtrain.algorithm.blocks.schedules import LinearSchedule
    from tshtrain.config.build import build_algorithm

    space = gym.spaces.Box(-1.0, 1.0, (4,))
    actions = gym.spaces.Discrete(2)
    constant = resolve_experiment({"algorithm": {"name": "dqn", "params": {"lr_schedule": "constant"}}})
    assert build_algorithm(constant, space, actions).params.lr_schedule is None  # type: ignore[attr-defined]
    trainer = {
        "max_epochs": 15,
        "epoch_num_steps": 10_000,
        "collection_step_num_env_steps": 60,  # 8 envs: 64 env steps a collection step
        "update_step_num_gradient_steps_per_sample": 0.25,
    }
    linear = resolve_experiment(
        {
            "algorithm": {"name": "dqn", "params": {"lr_schedule": "linear"}},
            "env": {"num_training_envs": 8},
            "trainer": trainer,
        }
    )
    schedule = build_algorithm(linear, space, actions).params.lr_schedule  # type: ignore[attr-defined]
    assert isinstance(schedule, LinearSchedule)
    assert schedule.num_update_steps == 15 * 157 * 16  # 157 training steps of 64 env steps, 16 gradient steps
    episodes = resolve_experiment(
        {
            "algorithm": {"name": "dqn", "params": {"lr_schedule": "linear"}},
            "trainer": {"collection_step_num_episodes": 2, "collection_step_num_env_steps": None},
        }
    )
    with pytest.raises(ExperimentError, match=r"a 'linear' schedule of dqn decays over the run's gradient"):
        build_algorithm(episodes, space, actions)


def test_td3_bc_normalises_observations_by_its_network_section() -> None:
    import gymnasium as gym

    from tshtrain.config.build import build_algorithm

    obs, act = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Box(-2.0, 2.0, (1,))
    default = build_algorithm(resolve_experiment({"algorithm": {"name": "td3_bc"}}), obs, act)
    assert default.obs_normalization.normalizer is not None  # type: ignore[attr-defined]
    raw = resolve_experiment({"algorithm": {"name": "td3_bc", "network": {"normalize_obs": False}}})
    assert build_algorithm(raw, obs, act).obs_normalization.normalizer is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("stem", sorted(TASK_EXAMPLES))
def test_task_examples_resolve_and_state_their_data(stem: str) -> None:
    """The task examples (beyond each algorithm's default run) load, and say what TASK_EXAMPLES says."""
    experiment = load_experiment(str(EXAMPLE_CONFIGS / f"{stem}.yaml"))
    _, data = TASK_EXAMPLES[stem]
    assert experiment == resolve_experiment(dict(data))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "algorithm: {name: ppo}\nenv: {type: isaac}",
            r"env\.type: .*'gymnasium', 'envpool', 'vmas', 'torch_cartpole' or 'pettingzoo'",
        ),
        (
            "algorithm: {name: ppo}\nenv: {type: vmas, id: navigation, wrappers: [{name: gymnasium.wrappers.ClipAction}]}",
            r"env: Value error, env\.wrappers apply to Gymnasium envs only, not to type 'vmas'",
        ),
        (
            "algorithm: {name: ppo}\nenv: {type: torch_cartpole, vector: async}",
            r"env\.vector applies to Gymnasium envs only",
        ),
        ("algorithm: {name: ppo}\nenv: {device: cpu}", r"env\.device applies to torch-native envs"),
        ("algorithm: {name: ppo}\nenv: {type: vmas, device: gpu}", r"env\.device: allowed: auto, cpu"),
    ],
)
def test_env_type_errors_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(text)
    with pytest.raises(ExperimentError, match=expected):
        load_experiment(str(path))


def test_linear_schedules_of_a_data_parallel_run_count_every_ranks_update_steps() -> None:
    """N ranks that each collect the per-rank collection step take one update step per training step
    together, so the run has 1/N as many update steps as one process would with the same settings."""
    from tshtrain.config.algorithms import num_update_steps

    experiment = resolve_experiment(
        {
            "algorithm": {"name": "ppo", "params": {"lr_schedule": "linear"}},
            "env": {"num_training_envs": 4},
            "trainer": {"max_epochs": 5, "epoch_num_steps": 4096, "collection_step_num_env_steps": 1024},
        },
        "e.yaml",
    )
    one = num_update_steps(experiment, experiment.algorithm)
    assert one == 5 * 4  # 4 collection steps of 1024 env steps per epoch
    assert num_update_steps(experiment, experiment.algorithm, world_size=2) == 5 * 2  # 2048 per step
    assert num_update_steps(experiment, experiment.algorithm, world_size=4) == 5 * 1


def test_editing_a_default_experiments_data_leaves_the_registered_defaults_alone() -> None:
    """``default_experiment_data`` (and ``merge_data``) return data that shares nothing mutable with the
    algorithm's registered defaults: a caller's edit once leaked into every later default experiment."""
    from tshtrain.config.files import merge_data
    from tshtrain.config.resolve import default_experiment_data

    data = default_experiment_data("ppo")
    data["algorithm"]["params"]["desired_kl"] = 0.01
    data["trainer"]["max_epochs"] = 1
    fresh = default_experiment_data("ppo")
    assert "desired_kl" not in fresh["algorithm"]["params"] and fresh["trainer"]["max_epochs"] != 1
    base = {"a": {"b": [1, {"c": 2}]}}
    merged = merge_data(base, {"d": {"e": [3]}})
    merged["a"]["b"][1]["c"] = 9
    merged["d"]["e"].append(4)
    assert base == {"a": {"b": [1, {"c": 2}]}}
