"""Multi-agent experiment files: the env and agents sections, building every layout, ``tshtrain train``
(with resume) and ``tshtrain eval`` on a multi-agent run, and frozen policies read from checkpoints."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.extras import need
from tests.multi_agent_envs import LeavingParallel, TurnGame
from tshtrain.algorithm import ActionMasked, MultiAgentOffPolicy, MultiAgentOnPolicy, RandomPolicy
from tshtrain.cli import main
from tshtrain.config import ExperimentError, resolve_experiment
from tshtrain.config.agents import build_multi_agent_algorithm, return_reduction
from tshtrain.config.defaults import TASK_EXAMPLES
from tshtrain.config.resolve import experiment_data
from tshtrain.data import MultiAgentCollector, VectorReplayBuffer

ROOT = Path(__file__).resolve().parents[2]
_TINY_TRAINER = {
    "max_epochs": 2,
    "epoch_num_steps": 64,
    "collection_step_num_env_steps": 32,
    "test_step_num_episodes": 4,
    "batch_size": 16,
}


def _pz(agents: dict[str, Any], **algorithm: Any) -> dict[str, Any]:
    """An experiment on a PettingZoo env id (the stand-in envs take its place when built by hand)."""
    return {
        "algorithm": {"name": "dqn", **algorithm},
        "env": {"kind": "pettingzoo", "id": "pettingzoo.classic.tictactoe_v3", "num_training_envs": 2},
        "agents": agents,
    }


# ---------------------------------------------------------------------- loading
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            _pz({"layout": "ring"}),
            r"agents\.layout: Input should be 'independent', 'shared', 'scopes' or 'groups'",
        ),
        (
            _pz({"layout": "shared", "share_within_groups": False}),
            r"share_within_groups applies to layout groups only, not to layout 'shared'",
        ),
        (
            {"algorithm": {"name": "ppo"}, "env": {"groups": "auto"}},
            r"env\.groups: 'auto' needs a multi-agent env",
        ),
        (
            {**_pz({}), "env": {"kind": "pettingzoo", "id": "mpe2.simple_tag_v3", "groups": "by_name"}},
            r"env\.groups",
        ),
        (
            {**_pz({}), "env": {"type": "vmas", "kind": "pettingzoo"}},
            r"env\.type 'vmas' and env\.kind 'pettingzoo' differ; kind is an alias of type",
        ),
        (
            {"algorithm": {"name": "ppo"}, "agents": {"layout": "scopes", "agents_scope": [4, 3]}},
            r"agents\.agents_scope \[4, 3\] sums to 7, but env\.num_training_envs is 8",
        ),
        (
            {
                "algorithm": {"name": "ppo"},
                "agents": {
                    "layout": "scopes",
                    "agents_scope": [4, 4],
                    "members": {"agent_2": {"policy": "random"}},
                },
            },
            r"members \['agent_2'\]: unknown; the scopes' learners are \['agent_0', 'agent_1'\]",
        ),
        (
            _pz({"members": {"player_1": {"algorithm": {"name": "ppo"}}}}),
            r"agents\.members\.player_1\.algorithm\.name: ppo is an on-policy algorithm, but the top-level "
            r"algorithm dqn is off-policy.*mixing on- and off-policy learners",
        ),
        (
            _pz({"members": {"player_1": {"algorithm": {"params": {"lrr": 1.0}}}}}),
            r"agents\.members\.player_1\.algorithm\.params\.lrr: unknown key \(did you mean 'lr'\?\)",
        ),
        (
            _pz({"members": {"player_1": {"polcy": "random"}}}),
            r"agents\.members\.player_1\.polcy: unknown key \(did you mean 'policy'\?\)",
        ),
        (
            _pz({"members": {"player_1": {"policy": "frozen"}}}),
            r"policy: frozen needs checkpoint: PATH",
        ),
        (
            _pz({"return_reduction": "median"}),
            r"agents\.return_reduction: allowed: mean, sum, min, max, agent:NAME",
        ),
        (
            {**_pz({"layout": "shared"}, name="ppo", network={"centralised_critic": True})},
            r"algorithm\.network\.centralised_critic: true \(MAPPO\) needs .* env\.global_state: true",
        ),
        (
            {"algorithm": {"name": "dqn"}, "env": {"type": "pettingzoo", "id": "mpe2.simple_spread_v3"}},
            r"env\.type pettingzoo: a multi-agent env needs an agents section",
        ),
        (
            {"algorithm": {"name": "ppo"}, "agents": {"layout": "shared"}},
            r"agents\.layout: 'shared' needs a multi-agent env .* got env\.type 'gymnasium'",
        ),
        (
            {
                "algorithm": {"name": "ppo"},
                "env": {"kind": "pettingzoo", "id": "gymnasium.envs"},
                "agents": {},
            },
            r"env\.id: 'gymnasium\.envs' is not a PettingZoo env module; .* \['pettingzoo', 'mpe2'\]",
        ),
        (
            {"algorithm": {"name": "ppo"}, "env": {"kind": "pettingzoo"}, "agents": {}},
            r"env\.id: 'CartPole-v1' is not a PettingZoo env module",
        ),
        (
            _pz({"update_mode": "parallel"}),
            r"agents\.update_mode: 'parallel' runs on-policy learners only .* Allowed for dqn: sequential",
        ),
        (
            {"algorithm": {"name": "ppo"}, "env": {"agent_id": True}},
            r"env\.agent_id: true needs a multi-agent env",
        ),
        (
            {"algorithm": {"name": "ppo", "network": {"critic_per_world": True}}},
            r"algorithm\.network\.critic_per_world: true needs centralised_critic: true",
        ),
        (
            {
                "algorithm": {"name": "ppo"},
                "env": {"type": "vmas", "id": "balance"},
                "agents": {"layout": "shared"},
            },
            r"needs a multi-agent env .* got env\.type 'vmas' with agent_layout 'joint'",
        ),
        (
            {
                "algorithm": {"name": "bc"},
                "env": {"kind": "pettingzoo", "id": "mpe2.simple_spread_v3"},
                "agents": {},
                "dataset": {"path": "x"},
            },
            r"agents: bc is an offline algorithm",
        ),
    ],
)
def test_bad_multi_agent_sections_name_the_field_and_what_is_allowed(
    data: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ExperimentError, match=expected):
        resolve_experiment(data, "e.yaml")


def test_kind_is_an_alias_of_type_and_is_not_written_back() -> None:
    experiment = resolve_experiment(_pz({}))
    assert experiment.env.type == "pettingzoo"
    data = experiment_data(experiment)
    assert data["env"]["type"] == "pettingzoo" and "kind" not in data["env"]
    assert resolve_experiment(data) == experiment  # config.yaml round trip
    assert "agents" not in experiment_data(resolve_experiment({"algorithm": {"name": "ppo"}}))


def test_a_member_algorithm_is_laid_over_the_top_level_one() -> None:
    experiment = resolve_experiment(
        _pz({"members": {"player_1": {"algorithm": {"params": {"lr": 0.5}}}}}, params={"gamma": 0.5})
    )
    assert experiment.agents is not None
    member = experiment.agents.members["player_1"].algorithm
    assert member is not None
    assert member["name"] == "dqn" and member["params"]["lr"] == 0.5 and member["params"]["gamma"] == 0.5
    assert member["exploration"] == experiment.algorithm.exploration


# ---------------------------------------------------------------------- building on stand-in envs
def test_independent_learners_on_a_turn_based_stand_in_mask_illegal_actions() -> None:
    env = TurnGame(num_envs=2)
    experiment = resolve_experiment(
        _pz(
            {"members": {"p0": {"policy": "random"}}, "return_reduction": "agent:p1"},
            network={"hidden_sizes": [8]},
        )
    )
    algorithm = build_multi_agent_algorithm(
        experiment, env.single_observation_space, env.single_action_space, env.agents
    )
    assert isinstance(algorithm, MultiAgentOffPolicy)
    assert [(learner.name, learner.trainable) for learner in algorithm.learners] == [
        ("p0", False),
        ("p1", True),
    ]
    assert isinstance(algorithm.learners[0].policy, RandomPolicy)
    assert isinstance(algorithm.learners[1].policy.q_net, ActionMasked)  # type: ignore[attr-defined]
    collector = MultiAgentCollector(algorithm.policy, env, VectorReplayBuffer(128, buffer_num=4), seed=0)
    collector.collect(n_step=40, deterministic=True)
    assert env.log and all(action != 3 for _, _, action in env.log)  # 3 is illegal in TurnGame
    reduce = return_reduction(experiment.agents, env.agents)
    np.testing.assert_array_equal(reduce(np.array([[1.0, 2.0], [3.0, 4.0]])), [2.0, 4.0])


def test_unknown_member_and_reduction_agents_are_found_when_the_env_is_built() -> None:
    env = TurnGame(num_envs=1)
    for agents, expected in [
        (
            {"members": {"player_9": {"policy": "random"}}},
            r"agents\.members\.player_9: no agent 'player_9' .* \['p0', 'p1'\]",
        ),
        (
            {"return_reduction": "agent:p7"},
            r"agents\.return_reduction: 'agent:p7' names no agent .* agent:p0, agent:p1",
        ),
    ]:
        experiment = resolve_experiment(_pz(agents))
        with pytest.raises(ExperimentError, match=expected):
            build_multi_agent_algorithm(
                experiment, env.single_observation_space, env.single_action_space, env.agents
            )


def test_a_shared_on_policy_learner_on_a_parallel_stand_in() -> None:
    env = LeavingParallel(num_envs=2)
    experiment = resolve_experiment(_pz({"layout": "shared"}, name="ppo"))
    algorithm = build_multi_agent_algorithm(
        experiment, env.single_observation_space, env.single_action_space, env.agents
    )
    assert isinstance(algorithm, MultiAgentOnPolicy)
    assert [learner.name for learner in algorithm.learners] == ["shared"]
    assert algorithm.learners[0].units == slice(0, 2)


# ---------------------------------------------------------------------- real envs, end to end
def _example(stem: str, **extra: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(TASK_EXAMPLES[stem][1]))
    data["trainer"] = {**data.get("trainer", {}), **_TINY_TRAINER}
    data["loggers"] = []
    data["device"] = "cpu"
    for key, value in extra.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return data


@pytest.mark.integration
@pytest.mark.parametrize(
    ("stem", "env"),
    [
        ("dqn_tictactoe", {"num_training_envs": 2, "num_test_envs": 2}),
        ("ippo_simple_spread", {"num_training_envs": 2, "num_test_envs": 2}),
        ("mappo_simple_spread", {"num_training_envs": 2, "num_test_envs": 2}),
        ("mappo_speaker_listener_groups", {"num_training_envs": 2, "num_test_envs": 2}),
        ("mappo_vmas_balance", {"num_training_envs": 2, "num_test_envs": 2}),
        ("ppo_cartpole_scopes", None),
    ],
)
def test_every_multi_agent_example_builds_and_trains_a_little(tmp_path: Path, stem: str, env: Any) -> None:
    from tshtrain.config import build_run

    if "vmas" in stem:
        need("vmas", "vmas")
    elif "cartpole" not in stem:
        need("pettingzoo", "pettingzoo")
    if "simple_spread" in stem or "speaker_listener" in stem:
        need("mpe2", "pettingzoo")
    extra: dict[str, Any] = {"buffer": {"prefill_env_steps": 16}} if stem == "dqn_tictactoe" else {}
    if env is not None:
        extra["env"] = env
    experiment = resolve_experiment(_example(stem, checkpoint={"enabled": False}, **extra))
    run = build_run(experiment, tmp_path / stem)
    try:
        before = [p.detach().clone() for p in run.algorithm.policy.parameters()]
        info = run.trainer.run()
    finally:
        run.close()
    assert info.gradient_step > 0
    after = list(run.algorithm.policy.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert isinstance(run.algorithm, MultiAgentOnPolicy | MultiAgentOffPolicy)


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path


def _tictactoe_run(tmp_path: Path, name: str = "run", **extra: Any) -> Path:
    need("pettingzoo", "pettingzoo")
    data = _example(
        "dqn_tictactoe",
        env={"num_training_envs": 2, "num_test_envs": 2},
        buffer={"prefill_env_steps": 16},
        **extra,
    )
    out = tmp_path / name
    assert main(["train", str(_write(tmp_path / f"{name}.json", data)), "-o", str(out)]) == 0
    return out


@pytest.mark.integration
def test_train_resume_and_eval_a_multi_agent_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = _tictactoe_run(tmp_path)
    checkpoints = out / "checkpoints"
    assert (checkpoints / "final" / "envs" / "training.pkl").is_file()  # PettingZoo envs: pickles
    # stop the run after epoch 1: drop what epoch 2 wrote, then resume: our own run, no --trust needed
    for late in [checkpoints / "final", checkpoints / "best", *checkpoints.glob("periodic-000002-*")]:
        shutil.rmtree(late, ignore_errors=True)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert main(["train", "--resume", str(out)]) == 0
    assert "were not restored" not in caplog.text  # signed with our key: the envs' pickles load too
    assert "resumed from periodic-000001" in capsys.readouterr().out
    info = json.loads((out / "info_stats.json").read_text())
    assert info["train_step"] == 2 * 64

    report = tmp_path / "eval.json"
    assert main(["eval", str(out), "-n", "6", "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "score (agent:player_2 of the agents' returns)" in printed
    assert "  player_1: return" in printed and "  player_2: return" in printed
    results = json.loads(report.read_text())
    assert results["episodes"] == 6 and set(results["agents"]) == {"player_1", "player_2"}
    assert results["return"]["mean"] == pytest.approx(results["agents"]["player_2"]["mean"])
    assert results["agents"]["player_1"]["mean"] == pytest.approx(-results["agents"]["player_2"]["mean"])


def _state(checkpoint: Path) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(checkpoint / "state.pt", weights_only=True)
    return state


def _assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Equal nested plain data and tensors (tensors bit for bit), wall-clock times aside."""
    if where.startswith(("state.run.timing", "state.run.elapsed")):
        return
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{index}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _info(run_dir: Path) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((run_dir / "info_stats.json").read_text())
    info.pop("timing")
    return info


@pytest.mark.integration
@pytest.mark.parametrize(
    ("stem", "extra"),
    [
        ("dqn_tictactoe", {"buffer": {"prefill_env_steps": 16}}),  # turn-based (AEC), off-policy
        ("ippo_simple_spread", {}),  # parallel, on-policy
        ("mappo_speaker_listener_groups", {}),  # agent groups: one PPO per group
    ],
)
def test_a_stopped_multi_agent_run_resumes_bit_exactly(tmp_path: Path, stem: str, extra: Any) -> None:
    """A run stopped after epoch 1 and resumed with ``--resume`` ends like the whole run: the same
    weights, optimiser, buffers, counters and per-agent stats."""
    need("pettingzoo", "pettingzoo")
    if "simple_spread" in stem or "speaker_listener" in stem:
        need("mpe2", "pettingzoo")
    data = _example(stem, env={"num_training_envs": 2, "num_test_envs": 2}, **extra)
    data["trainer"]["max_epochs"] = 3
    data["checkpoint"] = {"include_buffers": True}
    config = _write(tmp_path / f"{stem}.json", data)
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert main(["train", str(config), "-o", str(whole)]) == 0
    assert main(["train", str(config), "-o", str(stopped)]) == 0
    checkpoints = stopped / "checkpoints"
    for late in [
        checkpoints / "final",
        checkpoints / "best",
        *checkpoints.glob("periodic-000002-*"),
        *checkpoints.glob("periodic-000003-*"),
        stopped / "info_stats.json",
    ]:
        if late.is_dir():
            shutil.rmtree(late)
        else:
            late.unlink()
    assert sorted(p.name[:15] for p in checkpoints.iterdir()) == ["periodic-000001"]
    assert main(["train", "--resume", str(stopped)]) == 0  # our own run, signed: its envs too
    assert _info(stopped) == _info(whole)
    assert _info(whole)["train_step"] == 3 * 64
    _assert_same(_state(stopped / "checkpoints" / "final"), _state(whole / "checkpoints" / "final"))


def test_config_and_list_show_the_multi_agent_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "mappo_simple_spread"]) == 0
    printed = capsys.readouterr().out
    for text in (
        "global_state: true",
        "agent_id: true",
        "pettingzoo_api: null",
        "centralised_critic: true",
        "layout: shared",
        "return_reduction: mean",
    ):
        assert text in printed
    assert main(["list"]) == 0
    printed = capsys.readouterr().out
    assert "env.type (alias env.kind): gymnasium, envpool, vmas, torch_cartpole, pettingzoo" in printed
    assert "dqn_tictactoe" in printed and "layout independent | shared | scopes" in printed


# ---------------------------------------------------------------------- frozen policies
def _frozen(checkpoint: Path, learner: str | None = "player_2") -> dict[str, Any]:
    member: dict[str, Any] = {"policy": "frozen", "checkpoint": str(checkpoint)}
    if learner is not None:
        member["learner"] = learner
    return _pz({"members": {"player_1": member}}, network={"hidden_sizes": [128, 128]})


def _build(data: dict[str, Any]) -> Any:
    from tshtrain.env.pettingzoo import make_pettingzoo_vector_env

    env = make_pettingzoo_vector_env("pettingzoo.classic.tictactoe_v3", 1)
    try:
        return build_multi_agent_algorithm(
            resolve_experiment(data), env.single_observation_space, env.single_action_space, env.agents
        )
    finally:
        env.close()


class _Planted:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


@pytest.mark.integration
def test_a_frozen_policy_takes_the_learners_weights_and_refuses_pickles(tmp_path: Path) -> None:
    out = _tictactoe_run(tmp_path, "source")
    checkpoint = out / "checkpoints" / "final"
    saved = torch.load(checkpoint / "state.pt", weights_only=True)["algorithm"]["player_2"]["policy"]
    algorithm = _build(_frozen(checkpoint))
    frozen = algorithm.learners[0]
    assert frozen.name == "player_1" and not frozen.trainable
    for key, value in frozen.policy.state_dict().items():
        if key in saved and isinstance(value, torch.Tensor):
            assert torch.equal(value, saved[key]), key
    assert not any(p.requires_grad for p in frozen.policy.parameters())
    assert _build(_frozen(out)).learners[0].name == "player_1"  # a run directory: its best checkpoint

    # self-play against the frozen player: it plays, is saved with the run and is never trained
    member = {"policy": "frozen", "checkpoint": str(checkpoint), "learner": "player_2"}
    against = _tictactoe_run(tmp_path, "against", agents={"members": {"player_1": member}})
    after = _state(against / "checkpoints" / "final")["algorithm"]
    weights = {k: v for k, v in saved.items() if isinstance(v, torch.Tensor) and v.is_floating_point()}
    _assert_same({k: after["player_1"]["policy"][k] for k in weights}, weights, "player_1.policy")
    assert not all(
        torch.equal(value, saved[key]) for key, value in after["player_2"]["policy"].items() if key in saved
    )
    assert main(["eval", str(against), "-n", "2"]) == 0

    with pytest.raises(
        ExperimentError,
        match=r"agents\.members\.player_1\.learner: no learner 'player_9'.*\['player_1', 'player_2'\]",
    ):
        _build(_frozen(checkpoint, "player_9"))
    with pytest.raises(ExperimentError, match=r"'player_1' had a fixed policy \(random\)"):
        _build(_frozen(checkpoint, "player_1"))

    planted = tmp_path / "planted"
    shutil.copytree(checkpoint, planted)
    (planted / "extra.pkl").write_bytes(pickle.dumps(_Planted(tmp_path / "ran")))
    shutil.copy(out / "config.yaml", tmp_path / "config.yaml")  # the run's experiment, one level up
    with pytest.raises(ExperimentError, match=r"extra\.pkl: not listed in the checkpoint's manifest"):
        _build(_frozen(planted))
    (planted / "extra.pkl").unlink()
    state = planted / "state.pt"  # a pickle in place of the state, with a manifest that matches it
    state.write_bytes(pickle.dumps(_Planted(tmp_path / "ran")))
    manifest = json.loads((planted / "manifest.json").read_text())
    manifest["files"]["state.pt"] = {
        "size": state.stat().st_size,
        "sha256": hashlib.sha256(state.read_bytes()).hexdigest(),
    }
    (planted / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ExperimentError, match=r"state\.pt: cannot be loaded"):
        _build(_frozen(planted))
    assert not (tmp_path / "ran").exists()  # nothing was unpickled


@pytest.mark.integration
def test_a_per_world_critic_from_the_experiment_file(tmp_path: Path) -> None:
    from tshtrain.algorithm.blocks.world_critic import PerWorldCritic
    from tshtrain.config import build_run

    need("vmas", "vmas")
    network = {**_example("mappo_vmas_balance")["algorithm"]["network"], "critic_per_world": True}
    experiment = resolve_experiment(
        _example(
            "mappo_vmas_balance",
            checkpoint={"enabled": False},
            env={"num_training_envs": 2, "num_test_envs": 2},
            algorithm={**_example("mappo_vmas_balance")["algorithm"], "network": network},
        )
    )
    run = build_run(experiment, tmp_path / "run")
    try:
        assert isinstance(run.algorithm, MultiAgentOnPolicy)
        (learner,) = run.algorithm.learners
        components = learner.algorithm.components().values()  # type: ignore[union-attr]
        modules = [m for c in components if isinstance(c, torch.nn.Module) for m in c.modules()]
        critics = [m for m in modules if isinstance(m, PerWorldCritic)]
        assert len(critics) == 1 and critics[0].num_agents == 4
        info = run.trainer.run()
    finally:
        run.close()
    assert info.gradient_step > 0


@pytest.mark.integration
def test_fixed_players_are_evaluated_not_trained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33 part 4: a layout in which every player is fixed is refused by ``train`` (nothing to
    train; the message names the way to evaluate it) and played by ``tshtrain eval FILE`` and, in Python,
    by ``MultiAgentPolicy`` + ``MultiAgentCollector``: a random first player beats a random second."""
    need("pettingzoo", "pettingzoo")
    from tshtrain.algorithm import MultiAgentPolicy, independent_learners
    from tshtrain.env import make_pettingzoo_vector_env

    data = {
        "algorithm": {"name": "dqn"},
        "env": {"type": "pettingzoo", "id": "pettingzoo.classic.tictactoe_v3", "num_test_envs": 4},
        "agents": {
            "layout": "independent",
            "members": {p: {"policy": "random"} for p in ("player_1", "player_2")},
        },
    }
    path = tmp_path / "random_vs_random.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "results.json"
    assert main(["eval", str(path), "-n", "400", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["episodes"] == 400 and set(results["agents"]) == {"player_1", "player_2"}
    first, second = results["agents"]["player_1"]["mean"], results["agents"]["player_2"]["mean"]
    assert first == pytest.approx(-second) and first > 0.1  # the first mover wins more often
    assert "random_vs_random.json: 400 episodes" in capsys.readouterr().out

    data["agents"]["members"]["player_2"] = {"algorithm": {"name": "dqn"}}  # type: ignore[index]
    path.write_text(json.dumps(data))
    assert main(["eval", str(path), "-n", "4"]) == 2
    assert "agents.members: ['player_2'] would be trained" in capsys.readouterr().err

    env = make_pettingzoo_vector_env("pettingzoo.classic.tictactoe_v3", 4)
    space = env.single_action_space
    learners = independent_learners(
        env.columns, {p: RandomPolicy(space, seed=i) for i, p in enumerate(env.agents)}
    )
    with pytest.raises(ValueError, match=r"nothing would be trained\. To evaluate fixed players"):
        MultiAgentOffPolicy(learners)
    stats = MultiAgentCollector(MultiAgentPolicy(learners), env, seed=0).collect(n_episode=40)
    assert stats.n_collected_episodes == 40 and stats.per_agent_returns is not None


@pytest.mark.integration
def test_agent_groups_from_a_file_build_learners_on_each_groups_spaces() -> None:
    """``env.groups: auto`` + ``agents.layout: groups``: one learner per group on its own spaces (or
    one per agent with ``share_within_groups: false``); a mismatch of the two is refused by name."""
    need("pettingzoo", "pettingzoo")
    need("mpe2", "pettingzoo")
    from tshtrain.config.build import build_policy_algorithm, make_any_envs

    def build(agents: dict[str, Any], groups: Any = "auto") -> Any:
        data = _example("mappo_speaker_listener_groups", env={"num_training_envs": 2, "groups": groups})
        data["agents"] = agents
        experiment = resolve_experiment(data)
        envs = make_any_envs(experiment, 2, seed=0)
        try:
            return build_policy_algorithm(experiment, envs)
        finally:
            envs.close()

    algorithm = build({"layout": "groups", "members": {"speaker": {"algorithm": {"params": {"lr": 1e-3}}}}})
    speaker, listener = algorithm.learners
    assert (speaker.name, listener.name) == ("speaker", "listener")
    assert speaker.policy.action_space.n == 3 and listener.policy.action_space.n == 5
    assert speaker.algorithm.params.lr == 1e-3 and listener.algorithm.params.lr == 3e-4
    per_agent = build({"layout": "groups", "share_within_groups": False})
    assert [learner.name for learner in per_agent.learners] == ["speaker_0", "listener_0"]
    with pytest.raises(
        ExperimentError, match=r"agents\.members\.talker: no group 'talker'.*\['speaker', 'listener'\]"
    ):
        build({"layout": "groups", "members": {"talker": {"policy": "random"}}})
    with pytest.raises(ExperimentError, match=r"different observation spaces .* in different groups"):
        build({"layout": "independent"}, groups=None)
    with pytest.raises(ExperimentError, match=r"agents\.layout: groups needs env\.groups: auto"):
        build({"layout": "groups"}, groups=None)
    with pytest.raises(
        ExperimentError, match=r"env\.groups: 'auto' goes with agents\.layout: groups.*'shared'"
    ):
        build({"layout": "shared"})
    with pytest.raises(ExperimentError, match=r"every group needs a list of one or more agents"):
        build({"layout": "groups"}, groups={"speaker": [], "listener": ["speaker_0", "listener_0"]})


def test_stacked_scoped_learners_train_from_the_command_line(tmp_path: Path) -> None:
    """``agents.update_mode: stacked`` from an experiment file: two PPO scopes on CartPole, updated in one
    stacked pass (issue 35)."""
    from tshtrain.algorithm import PPO

    calls: list[int] = []
    original = PPO.stacked_update

    def counted(members: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(members))
        return original(members, *args, **kwargs)

    overrides = [
        "agents.layout=scopes",
        "agents.agents_scope=[4,4]",
        "agents.update_mode=stacked",
        "trainer.max_epochs=1",
        "trainer.stop_score=null",
        "loggers=[]",
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PPO, "stacked_update", staticmethod(counted))
        args = ["train", *[x for o in overrides for x in ("--set", o)], "-o", str(tmp_path / "run")]
        assert main(args) == 0
    assert calls and set(calls) == {2}
    with pytest.raises(ExperimentError, match="update_mode"):
        resolve_experiment({"agents": {"layout": "scopes", "update_mode": "stack"}}, "e.yaml")
