"""The multi-agent examples (examples/multi_agent/, shown in docs/multi_agent.md) run with a tiny budget
through their command line (``main(argv)``), and build the learner layout they describe."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tests.extras import need
from tshtrain.algorithm import DQN, PPO, MultiAgentOffPolicy, MultiAgentOnPolicy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "multi_agent"
SCRIPTS = (
    "agent_scopes",
    "groups_speaker_listener",
    "independent_dqn_vs_random",
    "mappo_vmas",
    "masac_spread",
    "qmix_spread",
    "shared_ippo_spread",
)


def _load(stem: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"multi_agent_example_{stem}", EXAMPLES / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_learning(stem: str) -> ModuleType:
    """The learning test tests/learning/``stem``.py, whose settings records the results tables cite."""
    path = ROOT / "tests" / "learning" / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"{stem}_settings", path)
    assert spec is not None and spec.loader is not None
    learning = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = learning  # (its dataclasses look their module up)
    spec.loader.exec_module(learning)
    return learning


def test_every_multi_agent_example_is_covered() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.py")} == set(SCRIPTS)
    for stem in SCRIPTS:
        text = (EXAMPLES / f"{stem}.py").read_text(encoding="utf-8")
        assert '"--env-steps"' in text and 'if __name__ == "__main__":' in text, stem


@pytest.mark.integration
def test_independent_dqn_against_a_random_player(capsys: pytest.CaptureFixture[str]) -> None:
    need("pettingzoo", "pettingzoo")
    module = _load("independent_dqn_vs_random")
    wins, losses = module.main(["--env-steps", "200", "--test-episodes", "4", "--eval-games", "6", "--quiet"])
    assert 0.0 <= wins <= 1.0 and 0.0 <= losses <= 1.0 and wins + losses <= 1.0
    assert np.isclose(wins * 6, round(wins * 6))  # rates over the 6 games asked for
    assert "greedy player_2 over 6 games" in capsys.readouterr().out
    algorithm, info = module.train(env_steps=128, test_episodes=2, verbose=False)
    assert isinstance(algorithm, MultiAgentOffPolicy)
    assert [(lr.name, lr.trainable) for lr in algorithm.learners] == [("player_1", False), ("player_2", True)]
    assert isinstance(algorithm.learners[1].algorithm, DQN)
    assert info.train_step == 128 and info.gradient_step > 0  # two collection steps of 64


@pytest.mark.integration
def test_shared_ippo_on_simple_spread() -> None:
    need("mpe2", "pettingzoo")
    module = _load("shared_ippo_spread")
    info = module.main(["--env-steps", "160", "--test-episodes", "1", "--quiet"])
    assert info.train_step == 160  # env steps (of one env each), not the 3 * 160 agent transitions
    assert info.gradient_step > 0


@pytest.mark.integration
@pytest.mark.parametrize("silent", [False, True])
def test_mappo_per_agent_group_on_speaker_listener(silent: bool) -> None:
    need("mpe2", "pettingzoo")
    module = _load("groups_speaker_listener")
    args = ["--env-steps", "160", "--test-episodes", "1", "--quiet"] + (
        ["--silent-speaker"] if silent else []
    )
    info = module.main(args)
    assert info.train_step == 160 and info.gradient_step > 0
    algorithm, _ = module.train(env_steps=160, test_episodes=1, silent_speaker=silent, verbose=False)
    assert [learner.name for learner in algorithm.learners] == ["speaker", "listener"]
    assert algorithm.learners[0].trainable is not silent


@pytest.mark.integration
@pytest.mark.parametrize("mixer", ["qmix", "vdn"])
def test_value_decomposition_on_simple_spread(mixer: str) -> None:
    need("mpe2", "pettingzoo")
    from tshtrain.algorithm import QMixer, SumMixer, ValueDecomposition

    module = _load("qmix_spread")
    assert (
        module.main(["--mixer", mixer, "--env-steps", "160", "--test-episodes", "1", "--quiet"]).train_step
        == 160
    )
    algorithm, info = module.train(mixer=mixer, env_steps=160, test_episodes=1, verbose=False)
    assert isinstance(algorithm, ValueDecomposition) and algorithm.num_agents == 3
    assert isinstance(algorithm.mixer, QMixer if mixer == "qmix" else SumMixer)
    assert len(algorithm.q_policies) == 1  # one network shared by the 3 agents
    assert info.train_step == 160 and info.gradient_step == 20  # 2 training steps of 80 env steps


@pytest.mark.integration
def test_the_value_decomposition_example_file_and_learning_test_share_their_settings() -> None:
    """The script, ``examples/configs/{vdn,qmix}_simple_spread.yaml`` (the specs' default experiments)
    and the learning test (whose results docs/multi_agent.md reports) train with the same settings."""
    need("mpe2", "pettingzoo")
    from tshtrain.config import default_experiment

    path = Path(__file__).resolve().parents[1] / "learning" / "test_value_decomposition_spread_learning.py"
    spec = importlib.util.spec_from_file_location("vd_spread_learning_settings", path)
    assert spec is not None and spec.loader is not None
    learning = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = learning  # (its dataclasses look their module up)
    spec.loader.exec_module(learning)
    setup = learning.SETUP
    example = _load("qmix_spread")
    p = example.PARAMS
    assert (p.lr, p.gamma, p.n_step, p.target_update_freq, p.team_reward) == (
        setup.lr,
        setup.gamma,
        setup.n_step,
        setup.target_update_freq,
        setup.team_reward,
    )
    assert (
        setup.num_env_steps,
        setup.epoch_num_env_steps,
        setup.batch_size,
    ) == (example.ENV_STEPS, example.EPOCH_NUM_STEPS, example.BATCH_SIZE)
    assert setup.collection_step_num_env_steps == example.COLLECTION_STEP_NUM_ENV_STEPS
    assert setup.gradient_steps_per_env_step == example.GRADIENT_STEPS_PER_ENV_STEP
    assert setup.eps_decay_env_steps == example.EPS_DECAY_ENV_STEPS
    assert setup.num_envs == example.NUM_TRAINING_ENVS
    for name in ("vdn", "qmix"):
        experiment = default_experiment(name)
        params = experiment.algorithm.params
        assert {k: params[k] for k in ("lr", "gamma", "n_step", "target_update_freq", "team_reward")} == {
            "lr": setup.lr,
            "gamma": setup.gamma,
            "n_step": setup.n_step,
            "target_update_freq": setup.target_update_freq,
            "team_reward": setup.team_reward.value,
        }
        assert params["is_double"] is p.is_double and params["max_grad_norm"] == p.max_grad_norm
        exploration = experiment.algorithm.exploration
        assert (exploration["eps_start"], exploration["eps_end"], exploration["eps_decay_env_steps"]) == (
            setup.eps_start,
            setup.eps_end,
            setup.eps_decay_env_steps,
        )
        network = experiment.algorithm.network
        assert network["hidden_sizes"] == list(setup.hidden_sizes) and network["activation"] == "relu"
        if name == "qmix":
            assert network["mixer_embed_dim"] == setup.qmix_embed_dim
            assert network["mixer_hypernet_hidden_dim"] == setup.qmix_hypernet_hidden_dim
        t = experiment.trainer
        assert t["max_epochs"] * t["epoch_num_steps"] == setup.num_env_steps
        assert t["epoch_num_steps"] == setup.epoch_num_env_steps
        assert t["collection_step_num_env_steps"] == setup.collection_step_num_env_steps
        assert t["update_step_num_gradient_steps_per_sample"] == setup.gradient_steps_per_env_step
        assert (t["batch_size"], t["test_step_num_episodes"]) == (setup.batch_size, setup.num_test_episodes)
        assert experiment.env.num_training_envs == setup.num_envs
        assert (
            experiment.buffer.size == setup.buffer_env_steps * 3 and experiment.buffer.prefill_env_steps == 0
        )


@pytest.mark.integration
def test_mappo_on_vmas_balance() -> None:
    need("vmas", "vmas")
    module = _load("mappo_vmas")
    algorithm, info = module.train(env_steps=32, num_envs=4, test_episodes=1, verbose=False)
    assert isinstance(algorithm, MultiAgentOnPolicy) and len(algorithm.learners) == 1
    assert algorithm.learners[0].units == slice(0, 4)  # one learner shared by the 4 agents
    assert isinstance(algorithm.learners[0].algorithm, PPO)
    assert info.train_step == 32 and info.gradient_step > 0
    # test episodes start at step 0 (full episodes, full returns); training envs desynchronise their clocks
    assert module.make_env(2, 0, test=True)._desync is False
    assert module.make_env(2, 0)._desync is True


@pytest.mark.parametrize("update_mode", ["sequential"])
def test_two_ppo_agents_in_scopes_of_one_cartpole_env(update_mode: str) -> None:
    module = _load("agent_scopes")
    torch.manual_seed(0)
    untrained = [module.ppo_agent(k) for k in range(2)]
    algorithm, info = module.train(env_steps=128, update_mode=update_mode, verbose=False)
    assert [(lr.name, lr.units) for lr in algorithm.learners] == [
        ("agent_0", slice(0, 4)),
        ("agent_1", slice(4, 8)),
    ]
    assert set(algorithm.state_dict()) == {"agent_0", "agent_1"}
    for fresh, learner in zip(untrained, algorithm.learners, strict=True):  # both agents were updated
        trained = learner.algorithm.policy.parameters()
        assert any(not torch.equal(a, b) for a, b in zip(fresh.policy.parameters(), trained, strict=True))
    assert info.train_step == 128
    assert module.main(["--env-steps", "64", "--quiet"]).train_step == 64


@pytest.mark.integration
def test_the_tictactoe_example_and_file_have_the_results_tables_settings() -> None:
    """The shipped example and ``dqn_tictactoe.yaml`` train with the settings whose results
    docs/multi_agent.md reports (tests/learning/test_tictactoe_learning.py's ``FULL``)."""
    need("pettingzoo", "pettingzoo")
    from tshtrain.algorithm.blocks.schedules import LinearSchedule
    from tshtrain.config import load_experiment
    from tshtrain.config.algorithms import off_policy_gradient_steps

    full = _load_learning("test_tictactoe_learning").FULL
    example = _load("independent_dqn_vs_random")
    assert full.num_env_steps == example.ENV_STEPS
    assert full.gradient_steps_per_env_step == example.GRADIENT_STEPS_PER_ENV_STEP
    assert example.eps_decay_moves(full.num_env_steps) == full.eps_decay_env_steps
    params = example.dqn_params(full.num_env_steps)
    assert (params.lr, params.gamma, params.n_step, params.target_update_freq, params.is_double) == (
        full.lr,
        full.gamma,
        full.n_step,
        full.target_update_freq,
        True,
    )
    num_gradient_steps = round(full.num_env_steps * full.gradient_steps_per_env_step)
    assert params.lr_schedule == LinearSchedule(
        num_update_steps=num_gradient_steps, end_factor=full.lr_end_factor
    )
    assert params.max_grad_norm is None and params.huber_loss

    experiment = load_experiment(str(ROOT / "examples/configs/dqn_tictactoe.yaml"))
    file_params = experiment.algorithm.params
    assert {k: file_params[k] for k in ("lr", "gamma", "n_step", "target_update_freq", "is_double")} == {
        "lr": full.lr,
        "gamma": full.gamma,
        "n_step": full.n_step,
        "target_update_freq": full.target_update_freq,
        "is_double": True,
    }
    assert file_params["lr_schedule"] == "linear" and file_params["max_grad_norm"] is None
    assert file_params["huber_loss"] is True
    assert experiment.algorithm.exploration["eps_decay_env_steps"] == full.eps_decay_env_steps
    assert experiment.algorithm.exploration["eps_end"] == full.eps_end
    assert experiment.algorithm.network["hidden_sizes"] == list(full.hidden_sizes)
    t = experiment.trainer
    assert (t["collection_step_num_env_steps"], t["batch_size"]) == (
        full.collection_step_num_env_steps,
        full.batch_size,
    )
    assert t["update_step_num_gradient_steps_per_sample"] == full.gradient_steps_per_env_step
    assert t["max_epochs"] * t["epoch_num_steps"] == full.num_env_steps
    assert (
        experiment.buffer.size == full.buffer_size
        and experiment.buffer.prefill_env_steps == full.prefill_env_steps
    )
    # the file's lr decays over its run's gradient steps: 15 epochs of 157 collection steps of 64 moves
    assert off_policy_gradient_steps(experiment, "dqn") == 15 * 157 * 16


@pytest.mark.integration
def test_the_vmas_example_and_file_have_the_results_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped example (its defaults) and ``mappo_vmas_balance.yaml`` (through the command line's
    build) train with the settings whose results docs/multi_agent.md reports
    (tests/learning/test_vmas_multi_agent_learning.py's ``SAMPLE_EFFICIENT``), and their test envs run
    full episodes. Both are built, not trained: the example's trainer is replaced by a recorder."""
    need("vmas", "vmas")
    from tshtrain.config import build_run, load_experiment

    learning = _load_learning("test_vmas_multi_agent_learning")
    setup = learning.SAMPLE_EFFICIENT
    assert setup.num_env_steps <= learning.BAR_ENV_STEPS

    example = _load("mappo_vmas")
    built: list[tuple[Any, Any]] = []

    class Recorder:
        def __init__(self, algorithm: Any, params: Any) -> None:
            built.append((algorithm, params))

        def run(self) -> None:
            return None

    monkeypatch.setattr(example, "OnPolicyTrainer", Recorder)
    example.train(verbose=False)  # the defaults of main() (its argument defaults are these constants)
    assert setup.num_env_steps == example.ENV_STEPS
    assert (setup.num_worlds, setup.test_episodes) == (example.NUM_WORLDS, example.TEST_EPISODES)
    ((algorithm, params),) = built
    _check_mappo_settings(learning, algorithm, params)

    experiment = load_experiment(str(ROOT / "examples/configs/mappo_vmas_balance.yaml"), ["loggers=[]"])
    run = build_run(experiment, tmp_path / "run")
    try:
        _check_mappo_settings(learning, run.algorithm, run.trainer.params)
    finally:
        run.close()


def _check_mappo_settings(learning: ModuleType, algorithm: Any, params: Any) -> None:
    """``algorithm`` and the trainer ``params`` are MAPPO on balance with ``learning.SAMPLE_EFFICIENT``."""
    setup = learning.SAMPLE_EFFICIENT
    assert isinstance(algorithm, MultiAgentOnPolicy) and len(algorithm.learners) == 1
    (learner,) = algorithm.learners
    ppo = learner.algorithm
    assert isinstance(ppo, PPO) and learner.units == slice(0, learning.NUM_AGENTS)
    assert ppo.params == setup.ppo_params()  # constant lr and clip range, Adam eps, ...
    assert all(group["eps"] == setup.adam_eps for group in ppo.ac.optim.param_groups)
    for net in (ppo.policy, ppo.critic):
        linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
        assert [m.out_features for m in linears[:-1]] == list(setup.hidden_sizes)
        assert sum(isinstance(m, nn.Tanh) for m in net.modules()) == len(setup.hidden_sizes)
    assert torch.all(ppo.policy.log_std == setup.init_log_std)
    envs, test_envs = params.training_collector.env, params.test_collector.env
    state_size = envs.single_observation_space["state"].shape[0]  # the centralised critic reads it
    critic_inputs = next(m for m in ppo.critic.modules() if isinstance(m, nn.Linear)).in_features
    assert critic_inputs == state_size + learning.NUM_AGENTS  # state + agent id
    assert (envs.num_worlds, test_envs.num_worlds) == (setup.num_worlds, setup.test_worlds)
    assert envs.num_agents == test_envs.num_agents == learning.NUM_AGENTS
    assert envs._max_episode_steps == test_envs._max_episode_steps == learning.EPISODE_STEPS
    assert envs._desync and not test_envs._desync  # test episodes run their full 100 steps
    assert params.training_collector.buffer.capacity == setup.collection_transitions
    assert (
        params.max_epochs,
        params.epoch_num_steps,
        params.collection_step_num_env_steps,
        params.batch_size,
        params.update_step_num_repetitions,
        params.test_step_num_episodes,
    ) == (
        setup.max_epochs,
        setup.epoch_env_steps,
        setup.collection_env_steps,
        setup.batch_size,
        setup.num_passes,
        setup.test_episodes,
    )
    assert params.stop_fn is None  # the whole budget runs (the results report the whole curve)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["masac", "maddpg"])
def test_masac_and_maddpg_on_continuous_simple_spread(algorithm: str) -> None:
    need("mpe2", "pettingzoo")
    from tshtrain.algorithm import MADDPG, MASAC

    module = _load("masac_spread")
    argv = [
        "--algorithm",
        algorithm,
        "--env-steps",
        "160",
        "--test-episodes",
        "1",
        "--prefill",
        "64",
        "--quiet",
    ]
    info = module.main(argv)
    assert info.train_step == 160 and info.gradient_step == 40  # 0.25 gradient steps per env step
    learner, _ = module.train(algorithm=algorithm, env_steps=80, test_episodes=1, prefill=64, verbose=False)
    assert isinstance(learner, MASAC if algorithm == "masac" else MADDPG)
    assert len(learner.joint.actors) == 1 and len(learner.joint.critics) == 1  # shared by the 3 agents


@pytest.mark.integration
def test_the_masac_example_has_the_results_tables_settings() -> None:
    """The example trains with the settings whose results docs/multi_agent.md reports
    (tests/learning/test_maddpg_masac_spread_learning.py's ``SETTINGS``)."""
    need("mpe2", "pettingzoo")
    path = Path(__file__).resolve().parents[1] / "learning" / "test_maddpg_masac_spread_learning.py"
    spec = importlib.util.spec_from_file_location("maddpg_masac_learning_settings", path)
    assert spec is not None and spec.loader is not None
    learning = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = learning  # (its dataclasses look their module up)
    spec.loader.exec_module(learning)
    s, example = learning.SETTINGS, _load("masac_spread")
    assert (
        s.num_envs,
        s.collection_step_num_env_steps,
        s.batch_size,
    ) == (example.NUM_TRAINING_ENVS, example.COLLECTION_STEP_NUM_ENV_STEPS, example.BATCH_SIZE)
    assert s.gradient_steps_per_env_step == example.GRADIENT_STEPS_PER_ENV_STEP
    assert (
        s.buffer_num_env_steps,
        s.prefill_num_env_steps,
    ) == (example.BUFFER_NUM_ENV_STEPS, example.PREFILL_NUM_ENV_STEPS)
    assert (s.actor_lr, s.critic_lr, s.gamma, s.tau) == (example.LR, example.LR, example.GAMMA, example.TAU)
    assert (
        s.hidden_sizes,
        s.noise_std,
        s.epoch_num_env_steps,
    ) == (example.HIDDEN_SIZES, example.NOISE_STD, example.EPOCH_NUM_STEPS)
    assert example.ENV_KWARGS == learning.ENV_KWARGS
