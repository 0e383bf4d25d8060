"""``tshtrain plot``: learning curves drawn from the logs of real short runs (REINFORCE on CartPole),
checked against the logs they came from and in the rendered PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tshtrain.cli import main
from tshtrain.logger import (
    CsvLogger,
    LogIntervals,
    LogScope,
    TensorboardLogger,
    read_csv_log,
    read_tensorboard_log,
)
from tshtrain.logger.plot import learning_curves

pytest.importorskip("matplotlib", reason="plots need matplotlib (pip install 'tshtrain[plot]')")

C0 = (0x1F, 0x77, 0xB4)  # matplotlib's first and second default colours
C1 = (0xFF, 0x7F, 0x0E)


def _train(seed: int, logger: Any) -> None:
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


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    intervals = LogIntervals(training_interval=1, update_interval=1)
    for seed in (0, 1):
        _train(seed, CsvLogger(root / "reinforce-csv" / f"seed{seed}", intervals=intervals))
    _train(2, TensorboardLogger(root / "reinforce-tb", intervals=intervals))
    return root


def test_learning_curves_match_the_logs(runs: Path) -> None:
    csv_group, tb_group = learning_curves([runs / "reinforce-csv", runs / "reinforce-tb"])
    seeds = [read_csv_log(runs / "reinforce-csv" / f"seed{s}")[LogScope.TEST] for s in (0, 1)]
    returns = np.array([[data["returns/mean"] for _, data in records] for records in seeds])
    assert csv_group.label == "reinforce-csv" and len(csv_group.runs) == 2
    assert csv_group.steps.tolist() == [step for step, _ in seeds[0]] == [0, 100, 200, 300, 400]
    np.testing.assert_allclose(csv_group.mean, returns.mean(axis=0))
    np.testing.assert_allclose(csv_group.std, returns.std(axis=0))

    tb = read_tensorboard_log(runs / "reinforce-tb")[LogScope.TEST]
    assert tb_group.label == "reinforce-tb" and len(tb_group.runs) == 1
    assert tb_group.steps.tolist() == [step for step, _ in tb] == [0, 100, 200, 300, 400]
    np.testing.assert_allclose(tb_group.mean, [data["returns/mean"] for _, data in tb])
    assert not tb_group.std.any()


def test_other_scopes_and_keys(runs: Path) -> None:
    (group,) = learning_curves([runs / "reinforce-tb"], scope=LogScope.UPDATE, key="loss")
    assert group.steps.tolist() == [1, 2, 3, 4]  # one gradient step per update (batch_size=None)


def test_tshtrain_plot_renders_the_curves(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matplotlib.image import imread

    output = tmp_path / "plots" / "curves.png"
    code = main(
        ["plot", str(runs / "reinforce-csv"), str(runs / "reinforce-tb"), "-o", str(output), "--title", "t"]
    )
    assert code == 0
    assert "wrote" in capsys.readouterr().out
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
