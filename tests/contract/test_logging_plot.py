"""``tshtrain plot``: learning curves drawn from the logs of real short runs (``tshtrain train`` runs with
config.yaml, and REINFORCE runs logged from Python) and of synthetic logs, checked against the logs
they came from, in the matplotlib figure's artists and in the rendered PNG.

What is pinned: a run logged by CSV and TensorBoard is one run; runs are grouped by experiment and a
curve never mixes algorithms or envs unless asked; every seed is shown to its end, with the number of
runs at each step (dashed mean, count strip); a mean cut to the common range (on request) says so (note
and legend); smoothing, labelled per-seed lines and the bands (std, bootstrap CI, min-max: named in the
legend, never outside the runs' range) draw what they claim."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from tests.extras import need
from tshtrain.cli import main
from tshtrain.logger import (
    CsvLogger,
    LogIntervals,
    LogScope,
    TensorboardLogger,
    read_csv_log,
    read_tensorboard_log,
)
from tshtrain.logger.plot import (
    Band,
    CurveParams,
    band_limits,
    bootstrap_mean_ci,
    learning_curves,
    legend_label,
    make_figure,
    trailing_mean,
)
from tshtrain.rundir import RUN_MARKER

pytestmark = pytest.mark.integration
need("matplotlib", "plot")

C0 = (0x1F, 0x77, 0xB4)  # matplotlib's first and second default colours
C1 = (0xFF, 0x7F, 0x0E)

TINY = [
    "--set", "trainer.max_epochs=2",
    "--set", "trainer.epoch_num_steps=256",
    "--set", "trainer.test_step_num_episodes=2",
    "--set", "env.num_test_envs=2",
    "--set", "trainer.show_progress=false",
    "--set", "trainer.verbose=false",
    "--set", "checkpoint.enabled=false",
]  # fmt: skip


def _train_python(seed: int, logger: Any) -> None:
    from tshtrain.algorithm import CategoricalPolicy, Reinforce, ReinforceParams, mlp
    from tshtrain.data import Collector, VectorReplayBuffer
    from tshtrain.env import make_vector_env
    from tshtrain.trainer import OnPolicyTrainer, OnPolicyTrainerParams

    torch.manual_seed(seed)
    train_envs, test_envs = make_vector_env("CartPole-v1", 2), make_vector_env("CartPole-v1", 2)
    policy = CategoricalPolicy(mlp(4, 2, (16,)), train_envs.single_action_space, seed=seed)
    algorithm = Reinforce(policy=policy, params=ReinforceParams(lr=1e-2), seed=seed)
    params = OnPolicyTrainerParams(
        training_collector=Collector(policy, train_envs, VectorReplayBuffer(400, 2), seed=seed),
        test_collector=Collector(policy, test_envs, seed=seed + 1000),
        max_epochs=4,
        epoch_num_steps=100,
        collection_step_num_env_steps=100,
        batch_size=None,
        test_step_num_episodes=2,
        logger=logger,
        verbose=False,
        show_progress=False,
    )
    OnPolicyTrainer(algorithm, params).run()


def _train_cli(run_dir: Path, *overrides: str, loggers: str) -> None:
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert main(["train", *TINY, *sets, "--set", f"loggers={loggers}", "-o", str(run_dir)]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Logs written from Python (no config.yaml): two CSV seeds, one TensorBoard run, and one run
    logged by both writers into one directory (as docs/logging.md does)."""
    root = tmp_path_factory.mktemp("runs")
    intervals = LogIntervals(training_interval=1, update_interval=1)
    for seed in (0, 1):
        _train_python(seed, CsvLogger(root / "reinforce-csv" / f"seed{seed}", intervals=intervals))
    _train_python(2, TensorboardLogger(root / "reinforce-tb", intervals=intervals))
    from tshtrain.logger import CompositeLogger

    both = root / "reinforce-both" / "seed3"
    _train_python(
        3,
        CompositeLogger([CsvLogger(both, intervals=intervals), TensorboardLogger(both, intervals=intervals)]),
    )
    return root


@pytest.fixture(scope="module")
def experiments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tshtrain train`` runs: PPO on CartPole with two seeds logged by CSV and TensorBoard, A2C on
    CartPole (CSV), PPO on Pendulum (TensorBoard only)."""
    root = tmp_path_factory.mktemp("experiments")
    for seed in (0, 1):
        _train_cli(
            root / f"ppo-cartpole-{seed}", f"seed={seed}", loggers="[{kind: csv}, {kind: tensorboard}]"
        )
    _train_cli(root / "a2c-cartpole", "algorithm.name=a2c", loggers="[{kind: csv}]")
    _train_cli(root / "ppo-pendulum", "env.id=Pendulum-v1", loggers="[{kind: tensorboard}]")
    return root


def _synthetic(
    run_dir: Path,
    steps: Sequence[int],
    values: Sequence[float],
    *,
    algorithm: str = "ppo",
    env: str = "CartPole-v1",
    seed: int = 0,
    kind: str = "csv",
) -> Path:
    """A run directory as ``tshtrain train`` lays it out, with a test curve of ``values`` at ``steps``."""
    run_dir.mkdir(parents=True)
    (run_dir / RUN_MARKER).write_text(json.dumps({"format": "tshtrain-run", "version": 1}))
    config = {"seed": seed, "output_dir": str(run_dir), "env": {"id": env}, "algorithm": {"name": algorithm}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    if kind == "csv":
        logger: Any = CsvLogger(run_dir / "csv")
    else:
        logger = TensorboardLogger(run_dir / "tensorboard")
    for step, value in zip(steps, values, strict=True):
        logger.write(LogScope.TEST, step, {"returns/mean": value})
    logger.close()
    return run_dir


def _gid_artists(figure: Any) -> dict[str, Any]:
    """The figure's artists by id, over the curves' axes and the strip of run counts under them."""
    return {
        artist.get_gid(): artist
        for axes in figure.axes
        for artist in [*axes.get_lines(), *axes.collections]
        if artist.get_gid()
    }


def _legend_title(figure: Any) -> str:
    text: str = figure.axes[0].get_legend().get_title().get_text()
    return text


# --- runs: one per run directory, one log source each -----------------------------------------------


def test_learning_curves_match_the_logs(runs: Path) -> None:
    curves = learning_curves([runs / "reinforce-csv", runs / "reinforce-tb"])
    csv_group, tb_group = curves.groups
    seeds = [read_csv_log(runs / "reinforce-csv" / f"seed{s}")[LogScope.TEST] for s in (0, 1)]
    returns = np.array([[data["returns/mean"] for _, data in records] for records in seeds])
    assert csv_group.label == "reinforce-csv" and len(csv_group.runs) == 2  # no config.yaml: by path
    assert csv_group.steps.tolist() == [step for step, _ in seeds[0]] == [0, 100, 200, 300, 400]
    np.testing.assert_allclose(csv_group.mean, returns.mean(axis=0))
    np.testing.assert_allclose(csv_group.std, returns.std(axis=0))
    assert csv_group.cut is None and curves.notes == ()

    tb = read_tensorboard_log(runs / "reinforce-tb")[LogScope.TEST]
    assert tb_group.label == "reinforce-tb" and len(tb_group.runs) == 1
    assert tb_group.steps.tolist() == [step for step, _ in tb] == [0, 100, 200, 300, 400]
    np.testing.assert_allclose(tb_group.mean, [data["returns/mean"] for _, data in tb])
    assert not tb_group.std.any()


def test_a_directory_with_csv_and_tensorboard_logs_is_one_run(runs: Path) -> None:
    (group,) = learning_curves([runs / "reinforce-both"]).groups
    assert [run.run_dir.name for run in group.runs] == ["seed3"]
    csv = read_csv_log(runs / "reinforce-both" / "seed3")[LogScope.TEST]
    np.testing.assert_array_equal(group.mean, [data["returns/mean"] for _, data in csv])


def test_a_train_run_logged_by_csv_and_tensorboard_is_one_run(experiments: Path) -> None:
    curves = learning_curves([experiments / "ppo-cartpole-0", experiments / "ppo-cartpole-1"])
    (group,) = curves.groups
    assert group.label == "ppo CartPole-v1"
    assert [run.run_dir.name for run in group.runs] == ["ppo-cartpole-0", "ppo-cartpole-1"]
    csv = [read_csv_log(experiments / f"ppo-cartpole-{s}" / "csv")[LogScope.TEST] for s in (0, 1)]
    assert group.steps.tolist() == [step for step, _ in csv[0]] == [0, 256, 512]
    returns = np.array([[data["returns/mean"] for _, data in records] for records in csv])
    np.testing.assert_allclose(group.mean, returns.mean(axis=0))


def test_each_run_counts_once_however_it_is_named(experiments: Path) -> None:
    run = experiments / "ppo-cartpole-0"
    paths = [run, run / "tensorboard", run / "csv", experiments]
    (group,) = learning_curves(paths, CurveParams(group_by=("algorithm.name", "env.id", "path"))).groups[:1]
    assert group.label == "algorithm.name=ppo env.id=CartPole-v1 ppo-cartpole-0"
    assert [r.run_dir for r in group.runs] == [run]


def test_a_run_with_tensorboard_logs_only_is_read_from_them(experiments: Path) -> None:
    (group,) = learning_curves([experiments / "ppo-pendulum"]).groups
    tb = read_tensorboard_log(experiments / "ppo-pendulum" / "tensorboard")[LogScope.TEST]
    assert group.label == "ppo Pendulum-v1" and group.steps.tolist() == [step for step, _ in tb]
    np.testing.assert_array_equal(group.mean, [data["returns/mean"] for _, data in tb])


def test_a_run_without_csv_or_tensorboard_logs_is_skipped_with_a_note(tmp_path: Path) -> None:
    _synthetic(tmp_path / "a", [0, 100], [1.0, 2.0])
    (tmp_path / "mlflow-only").mkdir()
    (tmp_path / "mlflow-only" / RUN_MARKER).write_text("{}")
    curves = learning_curves([tmp_path])
    assert len(curves.groups) == 1
    assert curves.notes == (f"skipped {tmp_path / 'mlflow-only'}: a run without CSV or TensorBoard logs "
                            "(nothing to plot)",)  # fmt: skip


# --- groups: one curve per experiment, never mixed unless asked -----------------------------------------


def test_runs_are_grouped_by_algorithm_and_env(experiments: Path) -> None:
    curves = learning_curves([experiments])
    sizes = {group.label: len(group.runs) for group in curves.groups}
    assert sizes == {"a2c CartPole-v1": 1, "ppo CartPole-v1": 2, "ppo Pendulum-v1": 1}


@pytest.mark.parametrize("group_by", ["env.id", "path", "trainer.max_epochs"])
def test_a_curve_mixing_experiments_is_refused(
    experiments: Path, tmp_path: Path, group_by: str, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "x.png"
    assert main(["plot", str(experiments), "-o", str(output), "--group-by", group_by]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tshtrain plot: error: --group-by {group_by}: the curve ")
    assert "a2c CartPole-v1: 1 run, ppo CartPole-v1: 2 runs" in line
    assert "--average-all" in line
    assert not output.exists()


def test_average_all_averages_everything_and_says_so(
    experiments: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    curves = learning_curves([experiments], CurveParams(average_all=True, min_runs=1))
    (group,) = curves.groups
    assert group.label == "all runs" and len(group.runs) == 4
    assert curves.notes[0] == (
        "all runs: averages runs of different experiments (a2c CartPole-v1: 1 run, "
        "ppo CartPole-v1: 2 runs, ppo Pendulum-v1: 1 run)"
    )
    assert main(["plot", str(experiments), "-o", str(tmp_path / "all.png"), "--average-all"]) == 0
    captured = capsys.readouterr()
    assert "(1 curve(s), 4 run(s))" in captured.out
    assert "note: all runs: averages runs of different experiments" in captured.err


def test_group_by_splits_runs_and_runs_differing_in_other_keys_are_noted(tmp_path: Path) -> None:
    for seed, lr in ((0, 0.1), (1, 0.1), (2, 0.5)):
        run = _synthetic(tmp_path / f"run{seed}", [0, 100], [float(seed), 1.0], seed=seed)
        config = yaml.safe_load((run / "config.yaml").read_text())
        config["algorithm"]["params"] = {"lr": lr}
        (run / "config.yaml").write_text(yaml.safe_dump(config))
    curves = learning_curves([tmp_path])
    assert curves.notes == (
        "ppo CartPole-v1: its 3 runs differ in algorithm.params.lr; to split them, "
        "--group-by algorithm.name,env.id,algorithm.params.lr",
    )  # seed and output_dir differ too, as they should
    split = learning_curves(
        [tmp_path], CurveParams(group_by=("algorithm.name", "env.id", "algorithm.params.lr"))
    )
    assert {g.label: len(g.runs) for g in split.groups} == {
        "algorithm.name=ppo env.id=CartPole-v1 algorithm.params.lr=0.1": 2,
        "algorithm.name=ppo env.id=CartPole-v1 algorithm.params.lr=0.5": 1,
    }
    assert split.notes == ()


def test_an_unknown_group_by_key_is_one_line_naming_it(
    experiments: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", str(experiments), "-o", str(tmp_path / "x.png"), "--group-by", "algo.name"]) == 1
    assert capsys.readouterr().err == (
        "tshtrain plot: error: --group-by 'algo.name': not a key of the runs' config.yaml "
        "(e.g. algorithm.name, env.id, seed, algorithm.params.lr) nor 'path'.\n"
    )


# --- alignment on env steps, cuts --------------------------------------------------------------------


def test_each_seed_is_shown_to_its_end_with_the_number_of_runs_at_each_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _synthetic(tmp_path / "s0", [0, 100, 200, 300, 400], [0.0, 1.0, 2.0, 3.0, 4.0], seed=0)
    _synthetic(tmp_path / "s1", [0, 100, 200, 300, 400, 500, 600], [10.0] * 7, seed=1, kind="tensorboard")
    curves = learning_curves([tmp_path])
    (group,) = curves.groups
    assert group.steps.tolist() == [0, 100, 200, 300, 400, 500, 600] and group.cut is None
    assert curves.notes == ()
    assert group.num_runs is not None and group.num_runs.tolist() == [2, 2, 2, 2, 2, 1, 1]
    np.testing.assert_allclose(group.mean, [5.0, 5.5, 6.0, 6.5, 7.0, 10.0, 10.0])
    assert legend_label(group) == "ppo CartPole-v1 (2 runs, dashed: fewer runs)"

    figure = make_figure(curves, per_seed=True)
    artists = _gid_artists(figure)
    solid = artists["mean:ppo CartPole-v1"].get_ydata()
    np.testing.assert_allclose(solid[:5], [5.0, 5.5, 6.0, 6.5, 7.0])
    assert np.isnan(solid[5:]).all()
    np.testing.assert_allclose(artists["partial:ppo CartPole-v1"].get_ydata(), group.mean)
    # the strip under the curves: how many runs make the mean at each step
    count = artists["count:ppo CartPole-v1"]
    assert count.get_xdata().tolist() == group.steps.tolist()
    assert count.get_ydata().tolist() == [2, 2, 2, 2, 2, 1, 1]
    assert figure.axes[1].get_ylabel() == "runs" and figure.axes[1].get_xlabel() == "env steps"
    # per-seed lines: each run whole, labelled with its seed
    assert artists[f"run:{tmp_path / 's1'}"].get_xdata().tolist() == [0, 100, 200, 300, 400, 500, 600]
    assert artists[f"run:{tmp_path / 's0'}"].get_label() == "seed 0"
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend == ["seed 0", "seed 1", "ppo CartPole-v1 (2 runs, dashed: fewer runs)"]
    assert _legend_title(figure) == "band: mean ± 1 std over runs, within their range"

    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "whole.png")]) == 0
    assert "note" not in capsys.readouterr().err


def test_min_runs_all_cuts_the_mean_to_the_common_range_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _synthetic(tmp_path / "s0", [0, 100, 200, 300, 400], [0.0, 1.0, 2.0, 3.0, 4.0], seed=0)
    _synthetic(tmp_path / "s1", [0, 100, 200, 300, 400, 500, 600], [10.0] * 7, seed=1, kind="tensorboard")
    curves = learning_curves([tmp_path], CurveParams(min_runs=None))
    (group,) = curves.groups
    assert group.steps.tolist() == [0, 100, 200, 300, 400] and group.cut == (0, 400)
    np.testing.assert_allclose(group.mean, [5.0, 5.5, 6.0, 6.5, 7.0])
    assert curves.notes == (
        "ppo CartPole-v1: the mean is cut to env steps 0-400, where both runs have points (they end at "
        "400, 600); each run is drawn whole with --per-seed, and the mean wherever a run has points with "
        "--min-runs 1",
    )
    assert legend_label(group) == "ppo CartPole-v1 (2 runs, cut to 0–400)"

    figure = make_figure(curves, per_seed=True)
    artists = _gid_artists(figure)
    assert artists["mean:ppo CartPole-v1"].get_label() == "ppo CartPole-v1 (2 runs, cut to 0–400)"
    assert artists["mean:ppo CartPole-v1"].get_xdata().tolist() == [0, 100, 200, 300, 400]
    assert artists[f"run:{tmp_path / 's1'}"].get_xdata().tolist() == [0, 100, 200, 300, 400, 500, 600]
    assert "partial:ppo CartPole-v1" not in artists

    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "cut.png"), "--min-runs", "all"]) == 0
    assert (
        "tshtrain plot: note: ppo CartPole-v1: the mean is cut to env steps 0-400" in capsys.readouterr().err
    )


def test_runs_logged_at_other_env_steps_are_interpolated_on_their_own_range(tmp_path: Path) -> None:
    _synthetic(tmp_path / "s0", [0, 100, 200], [0.0, 10.0, 20.0], seed=0)
    _synthetic(tmp_path / "s1", [0, 150, 300], [0.0, 30.0, 60.0], seed=1)
    (group,) = learning_curves([tmp_path]).groups
    assert group.steps.tolist() == [0, 100, 150, 200, 300]
    # s1 at 100 and 200: 20 and 40; s0 at 150: 15; s0 ends at 200 (never extrapolated)
    np.testing.assert_allclose(group.mean, [0.0, 15.0, 22.5, 30.0, 60.0])
    np.testing.assert_allclose(group.std, [0.0, 5.0, 7.5, 10.0, 0.0])
    assert group.num_runs is not None and group.num_runs.tolist() == [2, 2, 2, 2, 1]


def test_runs_that_share_no_steps_are_refused_when_the_mean_needs_both(tmp_path: Path) -> None:
    from tshtrain.errors import ConfigurationError

    _synthetic(tmp_path / "s0", [0, 100], [0.0, 1.0], seed=0)
    _synthetic(tmp_path / "s1", [200, 300], [0.0, 1.0], seed=1)
    with pytest.raises(ConfigurationError, match="share no range of steps"):
        learning_curves([tmp_path], CurveParams(min_runs=2))
    (group,) = learning_curves([tmp_path]).groups  # by default each is shown on its own range
    assert group.num_runs is not None and group.num_runs.tolist() == [1, 1, 1, 1]


# --- smoothing, per-seed lines, bands ------------------------------------------------------------------


def test_smooth_is_a_trailing_mean_over_env_steps(tmp_path: Path) -> None:
    steps = np.array([0, 100, 200, 300, 400])
    np.testing.assert_allclose(trailing_mean(steps, np.array([0.0, 10, 20, 30, 40]), 250), [0, 5, 10, 20, 30])
    np.testing.assert_allclose(
        trailing_mean(steps, np.array([0.0, 10, 20, 30, 40]), 100), [0, 10, 20, 30, 40]
    )
    _synthetic(tmp_path / "s0", steps.tolist(), [0.0, 10, 20, 30, 40], seed=0)
    _synthetic(tmp_path / "s1", steps.tolist(), [40.0, 30, 20, 10, 0], seed=1)
    (group,) = learning_curves([tmp_path], CurveParams(smooth_window=250)).groups
    np.testing.assert_allclose(group.runs[0].values, [0, 10, 20, 30, 40])  # the logged values stay
    np.testing.assert_allclose(group.runs[1].drawn, [40, 35, 30, 20, 10])
    np.testing.assert_allclose(group.mean, [20, 20, 20, 20, 20])
    artists = _gid_artists(make_figure([group], per_seed=True))
    np.testing.assert_allclose(artists[f"run:{tmp_path / 's0'}"].get_ydata(), [0, 5, 10, 20, 30])


@pytest.mark.parametrize(
    ("band", "expected_top", "title"),
    [
        ("std", 20.0 + np.sqrt(200.0 / 3.0), "band: mean ± 1 std over runs, within their range"),
        ("minmax", 30.0, "band: min to max over runs"),
        ("ci", 30.0, "band: 95% bootstrap CI of the mean over runs"),
    ],
)
def test_bands_say_what_they_are(tmp_path: Path, band: Band, expected_top: float, title: str) -> None:
    for seed, values in enumerate(([10.0, 10.0], [30.0, 30.0], [20.0, 20.0])):
        _synthetic(tmp_path / f"s{seed}", [0, 100], values, seed=seed)
    (group,) = learning_curves([tmp_path]).groups
    np.testing.assert_allclose(group.mean, [20.0, 20.0])
    figure = make_figure([group], band=band)
    top = _gid_artists(figure)["band:ppo CartPole-v1"].get_paths()[0].vertices[:, 1].max()
    if band == "ci":  # a resample of 3 runs averages at most 30: the 97.5% quantile is below or at it
        assert 25.0 < top <= expected_top
    else:
        assert top == pytest.approx(expected_top)
    assert _legend_title(figure) == title
    none = make_figure([group], band="none")
    assert "band:ppo CartPole-v1" not in _gid_artists(none) and _legend_title(none) == ""


def test_a_band_stays_inside_the_runs_range(tmp_path: Path) -> None:
    # CartPole-like: three seeds at the maximum 500, one at 200; mean 425, std 129.9: mean + std = 554.9
    for seed, value in enumerate((500.0, 500.0, 500.0, 200.0)):
        _synthetic(tmp_path / f"s{seed}", [0, 100], [value, value], seed=seed)
    (group,) = learning_curves([tmp_path]).groups
    values_RG = group.aligned_values()
    std = np.sqrt(16875.0)
    for band in ("std", "ci", "minmax"):
        limits = band_limits(band, values_RG)
        assert limits is not None
        low, high = limits
        assert (high <= 500.0).all() and (low >= 200.0).all(), band
    low, high = band_limits("std", values_RG) or (None, None)
    assert high is not None and low is not None
    np.testing.assert_allclose(high, [500.0, 500.0])  # clipped from 554.9
    np.testing.assert_allclose(low, [425.0 - std] * 2)  # inside the range: as computed
    drawn = _gid_artists(make_figure([group]))["band:ppo CartPole-v1"].get_paths()[0].vertices[:, 1]
    assert drawn.max() == pytest.approx(500.0)


def test_the_bootstrap_interval_of_the_mean() -> None:
    rng = np.random.default_rng(0)
    # two runs: a resample's mean is a (p 1/4), (a + b) / 2 (p 1/2) or b (p 1/4): the 95% interval is [a, b]
    low, high = bootstrap_mean_ci(np.array([[0.0, 4.0], [10.0, 4.0]]), rng)
    np.testing.assert_allclose(low, [0.0, 4.0])  # equal runs: no spread
    np.testing.assert_allclose(high, [10.0, 4.0])
    # many runs: close to the normal interval mean ± 1.96 s / sqrt(n)
    values = rng.normal(100.0, 10.0, size=(40, 1))
    low, high = bootstrap_mean_ci(values, np.random.default_rng(1))
    half_width = 1.96 * values.std() / np.sqrt(40)
    assert float(high[0] - low[0]) == pytest.approx(2 * half_width, rel=0.15)
    assert low[0] < values.mean() < high[0]
    # steps where fewer runs have points are resampled from those runs only; one run: its value
    values_RG = np.array([[0.0, 1.0, np.nan], [2.0, 3.0, 7.0]])
    low, high = bootstrap_mean_ci(values_RG, np.random.default_rng(2))
    np.testing.assert_allclose(low, [0.0, 1.0, 7.0])
    np.testing.assert_allclose(high, [2.0, 3.0, 7.0])
    # the same generator state gives the same interval
    again = bootstrap_mean_ci(values, np.random.default_rng(1))
    np.testing.assert_array_equal(again[0], bootstrap_mean_ci(values, np.random.default_rng(1))[0])


def test_cli_options_are_checked_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for option, value in (
        ("--smooth", "0"),
        ("--smooth", "abc"),
        ("--min-runs", "0"),
        ("--group-by", "a,,b"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["plot", str(tmp_path), "-o", str(tmp_path / "x.png"), option, value])
        assert exit_info.value.code == 2
        last = capsys.readouterr().err.splitlines()[-1]
        assert last.startswith(f"tshtrain plot: error: argument {option}: '{value}' ")


def test_the_cli_offers_the_bands_of_the_library() -> None:
    from tshtrain.cli.plot import _BANDS
    from tshtrain.logger.plot import BANDS

    assert _BANDS == BANDS


# --- other scopes, x axes, the rendered image, errors ----------------------------------------------------


def test_other_scopes_and_keys(runs: Path) -> None:
    (group,) = learning_curves([runs / "reinforce-tb"], CurveParams(scope=LogScope.UPDATE, key="loss")).groups
    assert group.steps.tolist() == [1, 2, 3, 4]  # one gradient step per update (batch_size=None)


def test_x_can_be_another_scalar_of_the_records(tmp_path: Path) -> None:
    run = _synthetic(tmp_path / "s0", [0], [0.0])
    logger = CsvLogger(run / "csv")
    for gradient_step, env_step in ((1, 256), (2, 512), (3, 768)):
        logger.write(
            LogScope.UPDATE, gradient_step, {"loss": float(gradient_step), "env_step": float(env_step)}
        )
    logger.close()
    params = CurveParams(scope=LogScope.UPDATE, key="loss", x="env_step")
    (group,) = learning_curves([tmp_path], params).groups
    assert group.steps.tolist() == [256, 512, 768] and group.mean.tolist() == [1.0, 2.0, 3.0]
    from tshtrain.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="has no 'loss' with 'time'"):
        learning_curves([tmp_path], CurveParams(scope=LogScope.UPDATE, key="loss", x="time"))


def test_tshtrain_plot_renders_the_curves(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matplotlib.image import imread

    output = tmp_path / "plots" / "curves.png"
    code = main(
        ["plot", str(runs / "reinforce-csv"), str(runs / "reinforce-tb"), "-o", str(output), "--title", "t"]
    )
    assert code == 0
    assert "(2 curve(s), 3 run(s))" in capsys.readouterr().out
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert output.stat().st_size > 10_000
    image = (imread(output)[..., :3] * 255).round().astype(int)
    assert image.shape == (500, 800, 3)

    def pixels_near(colour: tuple[int, int, int]) -> int:
        return int((np.abs(image - np.array(colour)).max(axis=-1) <= 10).sum())

    band = tuple(round(0.2 * c + 0.8 * 255) for c in C0)  # C0 at alpha 0.2 over white
    assert pixels_near(C0) > 200  # the mean of the two CSV seeds
    assert pixels_near(band) > 200  # their std band
    assert pixels_near(C1) > 200  # the TensorBoard run


def test_tshtrain_plot_reports_missing_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / "empty"), "-o", str(tmp_path / "x.png")]) == 1
    assert "holds no logs" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_tshtrain_needs_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err
